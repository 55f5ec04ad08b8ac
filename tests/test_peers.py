"""benchmarks/peers.py on a tiny generated set: the scikit-learn part in the project's
environment, the peers (Falkon, EigenPro 2, GPyTorch) only where ``make peers-env`` installed
them (skipped otherwise)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "peers.py"
sys.path.insert(0, str(SCRIPT.parent))
peers = pytest.importorskip("peers")


def _race(tmp_path, data, methods, settings=("own", "ks")):
    # in a process of its own: the script limits BLAS, numba and kernelscale threads for the
    # whole interpreter (numba reads NUMBA_NUM_THREADS once), which would leak into other tests
    subprocess.run([sys.executable, str(SCRIPT), "--data", data, "--methods", *methods,
                    "--settings", *settings, "--toy-rows", "400", "--out", str(tmp_path),
                    "--tag", "t", "--time-cap", "120"], check=True, capture_output=True)
    rows = peers.read_csv(tmp_path / "peers-t.csv")
    assert (tmp_path / "peers-t.md").is_file() and (tmp_path / "peers-t.png").is_file()
    return {(r["method"], r["setting"]): r for r in rows}


def test_sklearn_at_kernelscale_settings_is_kernelscale_model(tmp_path):
    # on 280 training rows ks_nystrom's m is n: Nystrom is exact kernel ridge, so KernelRidge at
    # the translated settings (gamma = 1/(2 sigma^2), alpha = n nu) must give the same RMSE
    rows = _race(tmp_path, "toy-regression", ["ks_nystrom", "sk_krr", "sk_nystroem"])
    assert all(r["status"] == "ok" for r in rows.values()), rows
    ks = rows[("ks_nystrom", "default")]
    assert ks["score"] < 0.6  # y has unit variance: far below the mean predictor
    assert rows[("sk_krr", "ks")]["score"] == pytest.approx(ks["score"], abs=2e-3)
    assert rows[("sk_nystroem", "ks")]["score"] == pytest.approx(ks["score"], abs=2e-2)
    assert all(r["peak_mb"] >= 0 and r["fit_s"] > 0 for r in rows.values())


def test_classification_rows_and_ks_curve(tmp_path):
    rows = _race(tmp_path, "toy-classification", ["ks_nystrom", "ks_dsg", "sk_svc"])
    assert {k: r["status"] for k, r in rows.items()} == {
        ("ks_nystrom", "default"): "ok", ("ks_dsg", "default"): "ok", ("sk_svc", "own"): "ok",
        ("sk_svc", "ks"): "ok"}
    assert all(r["score"] < 0.4 for r in rows.values())  # 3 classes: trivial is >= 0.6
    dsg = rows[("ks_dsg", "default")]
    t, err = zip(*dsg["curve"], strict=True)
    assert list(t) == sorted(t) and err[-1] == pytest.approx(dsg["score"], abs=1e-4)  # same model


def test_bayes_rows_are_the_generators_split_nine_to_one():
    task, (X, y, Xt, yt) = peers.load("bayes-2000", None)
    assert task == "binary" and X.shape == (1800, 20) and Xt.shape == (200, 20)
    assert set(np.unique(np.concatenate([y, yt]))) <= {0, 1}
    again = peers.load("bayes-2000", None)[1]
    assert np.array_equal(again[0], X) and np.array_equal(again[3], yt)  # a pure function of n


@pytest.mark.parametrize("method,module", [("falkon", "falkon"), ("eigenpro2", "eigenpro2"),
                                           ("gpytorch_sgpr", "gpytorch")])
def test_peer(tmp_path, method, module):
    pytest.importorskip(module)
    rows = _race(tmp_path, "toy-regression", ["ks_nystrom", method])
    own, ks = rows[(method, "own")], rows[(method, "ks")]
    assert own["status"] == ks["status"] == "ok", (own.get("error"), ks.get("error"))
    base = rows[("ks_nystrom", "default")]["score"]
    for r in (own, ks):  # Falkon's CG may stop before its first callback on 280 rows
        assert r["score"] < 0.9 and (r["curve"] or method == "falkon")
        t = [p[0] for p in r["curve"]]
        assert t == sorted(t)
    if method == "falkon":  # M = n at kernelscale's sigma and nu: the same kernel ridge model
        assert ks["score"] == pytest.approx(base, abs=1e-2)
