"""`make reproduce` compares methods at an equal problem: one kernel and bandwidth, one nu in the
library's convention (per-sample, (nu/2)||f||^2 + (1/N) sum loss; ridge lambda = KernelRidge's
alpha = N nu) and one budget for every method of a comparison. Checked three ways: the checker
refuses two methods given different regularisation; nu converts to each solver's argument as the
closed-form ridge solve says; and every claim, run as configured on a tiny subsample, reads back
equal (sigma, nu) from what each fitted method actually used."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.linear_model import Ridge

from kernelscale.estimators.random_binning import RBRegressor
from kernelscale.kernels import FourierBlocks, make_kernel
from kernelscale.params import reg_and_ridge
from kernelscale.pipeline import reproduce, reproduce_runs
from kernelscale.pipeline.reproduce import Problem

ROOT = Path(__file__).resolve().parents[1]
DEVDATA = Path(__file__).resolve().parents[2] / "shared" / "devdata"


def test_unequal_regularisation_is_refused():
    n = 4326
    rb = Problem("laplacian", 2.0, 0.01 / n, "square", "R = 16")
    assert "nu 2.31e-06 (N nu = 0.01)" in reproduce.same_problem({"RB+CG": rb, "RFF": rb}, n)
    # the case: RB given nu = 0.01 (ridge N 0.01), RFF the ridge 0.01 (nu = 0.01 / N)
    with pytest.raises(ValueError, match="unequal comparison: RB\\+CG has nu=0.01, RFF has nu"):
        reproduce.same_problem({"RB+CG": rb._replace(nu=0.01), "RFF": rb}, n)
    for field, other in (("sigma", 2.5), ("kernel", "gaussian"), ("budget", "R = 32"),
                         ("loss", "logistic")):
        with pytest.raises(ValueError, match=f"has {field}="):
            reproduce.same_problem({"a": rb, "b": rb, "c": rb._replace(**{field: other})}, n)
    # a declared difference is printed per method, never hidden; nu stays checked
    line = reproduce.same_problem({"dsg": rb._replace(loss="softmax"), "nystrom": rb}, n,
                                  differ=("loss",))
    assert "loss: dsg softmax, nystrom square" in line
    with pytest.raises(ValueError, match="has nu="):
        reproduce.same_problem({"dsg": rb, "nystrom": rb._replace(nu=1e-3)}, n, differ=("loss",))


@pytest.mark.parametrize("reg", ["0.5/n", 0.5 / 80, 1e-3])
def test_nu_converts_to_each_solvers_ridge(reg):
    """RB (CG) given ``reg`` and the RFF direct solve given the converted ridge both return the
    closed-form minimiser of (1/N) sum (f - y)^2 + nu ||w||^2: scikit-learn's Ridge with
    alpha = N nu on the same features."""
    rng = np.random.default_rng(0)
    X, Xt = rng.normal(size=(80, 3)), rng.normal(size=(30, 3))
    y = np.sin(X).sum(axis=1)
    y -= y.mean()  # centred: the closed forms below have no intercept
    n = len(X)
    nu = float(reg.split("/")[0]) / n if isinstance(reg, str) else reg
    sigma, R = 1.5, 12

    est = RBRegressor(bandwidth=sigma, n_components=R, reg=reg, tol=1e-12,
                      random_state=0).fit(X, y)
    Z, Zt = est.features_.transform(X), est.features_.transform(Xt)
    ref = Ridge(alpha=n * nu, fit_intercept=False, solver="cholesky").fit(Z.toarray(), y)
    np.testing.assert_allclose(est.predict(Xt), ref.predict(Zt.toarray()),
                               rtol=1e-6, atol=1e-8)

    ridge = reg_and_ridge(reg, n)[1]
    pred, _ = reproduce_runs.fourier_ridge("regression", X, Xt, y, sigma, R, ridge, 0)
    blocks = FourierBlocks(make_kernel("laplacian", sigma), 3, R, 0)
    ref = Ridge(alpha=n * nu, fit_intercept=False, solver="cholesky").fit(blocks.features(X, 0), y)
    np.testing.assert_allclose(pred, ref.predict(blocks.features(Xt, 0)), rtol=1e-8, atol=1e-10)

    # compare() hands both the same problem, and its rows say so
    rows = reproduce_runs.compare("t", "regression", X, Xt, y, y[:30], [4, 8], reg, 1e-10)
    for R_ in (4, 8):
        probs = {r["method"]: Problem("laplacian", r["sigma"], r["nu"], "square", "")
                 for r in rows if r["R"] == R_}
        assert set(probs) == {"RB+CG", "RFF"}
        reproduce.same_problem(probs, n)
        assert probs["RFF"].nu == pytest.approx(nu, rel=1e-12)


def test_the_old_conversion_is_caught(monkeypatch):
    """RFF handed the raw reg as its ridge (the unequal verdict of before) stops the claim."""
    monkeypatch.setattr(reproduce_runs, "reg_and_ridge", lambda reg, n: (reg, reg))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = X[:, 0].copy()
    d = reproduce.Data(task="regression", X=X, y=y, Xt=X[:20], yt=y[:20], n_full=60,
                       name="dev_x")
    monkeypatch.setattr(reproduce, "load", lambda *a, **k: d)
    with pytest.raises(ValueError, match="unequal comparison: RB\\+CG has nu"):
        reproduce.paper002_rb_vs_rff(["dev_x"], 60, "unused", grids=(4,), reg=0.01)


def test_config_gives_paper_002_its_ridge():
    """config/reproduce.yaml: RB and RFF at the paper's lambda = 0.01 of (Z^T Z + lambda I)."""
    cfg = yaml.safe_load((ROOT / "config" / "reproduce.yaml").read_text())
    reg = cfg["claims"]["paper002_rb_vs_rff"]["reg"]
    for n in (4326, 20000):
        nu, ridge = reg_and_ridge(reg, n)
        assert ridge == 0.01 and nu == pytest.approx(0.01 / n)


TINY = {  # every claim as configured, at sizes that run in seconds
    "paper003_dsg_equal_time": dict(segments=2),
    "paper000_ordering": dict(segments=2, epochs=0.5, sample=200),
    "paper002_rb_vs_rff": dict(grids=(4, 8)),
    "paper002_cd_speedup": dict(R=8, epochs=3, repeats=1),
    "paper004_eigenpro_epochs": dict(max_epochs=2, k=10, M=200),
}


@pytest.mark.skipif(not DEVDATA.is_dir(), reason="needs ../shared/devdata")
def test_every_claim_runs_at_an_equal_problem(tmp_path):
    """Each claim with the config's options (sizes shrunk): the CSV rows carry what each fitted
    method used, equal across the compared methods, and the verdict prints its rule and problem."""
    cfg = yaml.safe_load((ROOT / "config" / "reproduce.yaml").read_text())["claims"]
    assert set(TINY) == set(reproduce.CLAIMS) == set(cfg)
    cache = ROOT / "results" / "realdata" / "data"
    for claim, tiny in TINY.items():
        opts = {k: v for k, v in cfg[claim].items()
                if k not in ("datasets", "optional_datasets", "max_train")} | tiny
        out = tmp_path / claim
        [v] = reproduce.CLAIMS[claim](["dev_phoneme"], 300, out, max_test=100, cache=cache,
                                      devdata=DEVDATA, **opts)
        assert v["rule"].startswith("HOLDS when") and "{" not in v["rule"], claim
        assert "nu " in v["problem"] and "sigma " in v["problem"], claim
        with open(out / f"{claim}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        key = {"paper003_dsg_equal_time": ("method", "sigma", "nu"),
               "paper000_ordering": ("variant", "bandwidth", "reg"),
               "paper002_rb_vs_rff": ("method", "sigma", "nu"),
               "paper002_cd_speedup": ("features", "sigma", "nu")}.get(claim)
        if key is None:  # 004: no ridge; sigma read back from both fitted loops
            assert "sigma" in v["problem"] and "nu 0 " in v["problem"]
            continue
        method, sigma, nu = key
        groups = {}
        for r in rows:
            groups.setdefault(r.get("R"), {})[r[method]] = (float(r[sigma]), float(r[nu]))
        for g in groups.values():
            assert len(g) >= 2, claim
            vals = np.array(list(g.values()))
            np.testing.assert_allclose(vals, vals[:1].repeat(len(vals), 0), rtol=1e-9,
                                       err_msg=claim)
            if claim == "paper002_rb_vs_rff":
                assert vals[0, 1] == pytest.approx(0.01 / 300)  # the paper's lambda = N nu
