"""`kernelscale train` (train_run): run folder contents, chunked evaluation, resume after a kill.

The estimators here are small stand-ins registered for the test only (the real ones are tested
with their own modules); they follow the registry protocol: warm_start + n_iter, history_.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from kernelscale.pipeline import registry

HERE = Path(__file__).resolve().parent


# ----------------------------------------------------------------------------- stand-ins
class _StandIn(BaseEstimator):
    """Least squares by gradient descent over row chunks; one 'iteration' = one pass."""

    iterative = True

    def __init__(self, n_iter=5, lr=0.5, warm_start=False, random_state=None, engine=None,
                 sleep=0.0):
        self.n_iter = n_iter
        self.lr = lr
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.sleep = sleep

    def _targets(self, y):
        return np.asarray(y, dtype=np.float64).reshape(len(y), -1)

    def fit(self, X, y):
        n, d = X.shape
        y = np.asarray(y[:])
        Y = self._targets(y)
        if not (self.warm_start and hasattr(self, "W_")):
            rng = np.random.default_rng(self.random_state)
            self.W_ = rng.normal(scale=0.01, size=(d + 1, Y.shape[1]))
            self.history_ = {"iter": [], "time": [], "objective": []}
            self.fit_calls_ = 0
        t0 = time.perf_counter()
        step = 997
        for _ in range(self.n_iter):
            grad = np.zeros_like(self.W_)
            loss = 0.0
            for lo in range(0, n, step):
                Xb = np.asarray(X[lo:lo + step], dtype=np.float64)
                Xb = np.hstack([Xb, np.ones((len(Xb), 1))])
                r = Xb @ self.W_ - Y[lo:lo + step]
                grad += Xb.T @ r
                loss += float((r * r).sum())
            self.W_ -= self.lr * grad / n
            it = (self.history_["iter"][-1] if self.history_["iter"] else 0) + 1
            self.history_["iter"].append(it)
            self.history_["time"].append(time.perf_counter() - t0)
            self.history_["objective"].append(loss / n)
            if self.sleep:
                time.sleep(self.sleep)
        self.fit_calls_ += 1
        return self

    def _raw(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, np.ones((len(X), 1))]) @ self.W_


class StandInClassifier(ClassifierMixin, _StandIn):
    def _targets(self, y):
        self.classes_ = np.arange(int(np.max(y)) + 1)
        return np.eye(len(self.classes_))[np.asarray(y, dtype=int)] * 2 - 1

    def predict(self, X):
        return self.classes_[np.argmax(self._raw(X), axis=1)]


class StandInRegressor(RegressorMixin, _StandIn):
    def predict(self, X):
        return self._raw(X)[:, 0]


class OneShotRegressor(RegressorMixin, BaseEstimator):
    """A non-iterative estimator (fits once)."""

    def __init__(self, alpha=1e-3):
        self.alpha = alpha

    def fit(self, X, y):
        X = np.asarray(X[:], dtype=np.float64)
        A = np.hstack([X, np.ones((len(X), 1))])
        self.w_ = np.linalg.solve(A.T @ A + self.alpha * np.eye(A.shape[1]), A.T @ np.asarray(y[:]))
        return self

    def predict(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, np.ones((len(X), 1))]) @ self.w_


STANDINS = ("standin", "oneshot")


def register_standins() -> None:
    """Register the stand-ins (also called by the sitecustomize of the workflow tests)."""
    mod = "test_cli_train"
    registry.register("standin", classification=f"{mod}:StandInClassifier",
                      regression=f"{mod}:StandInRegressor")
    registry.register("oneshot", regression=f"{mod}:OneShotRegressor")


# The class paths above name this module as "test_cli_train": make that importable.
sys.modules.setdefault("test_cli_train", sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def standins():
    """The stand-ins are registered only while this module's (or an importer's) tests run, so
    tests that enumerate the registry elsewhere never see them."""
    register_standins()
    yield
    for name in STANDINS:
        registry.ALGORITHMS.pop(name, None)
        registry.PRESETS.pop(name, None)


def make_prepared(root: Path, name: str, task: str, n_train=3000, n_test=1000, d=5,
                  chunk_rows=500, seed=0) -> Path:
    """A prepared dataset folder in the data stage's layout (meta.json + data.zarr)."""
    import zarr

    rng = np.random.default_rng(seed)
    n = n_train + n_test
    X = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=d)
    if task == "regression":
        y = (X @ w + 0.1 * rng.normal(size=n)).astype(np.float32)
        classes = None
    else:
        k = 2 if task == "binary" else 3
        scores = np.stack([X @ rng.normal(size=d) for _ in range(k)], axis=1)
        y = np.argmax(scores, axis=1).astype(np.int64)
        classes = list(range(k))
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    g = zarr.open_group(str(out / "data.zarr"), mode="w")
    for key, arr in (("X_train", X[:n_train]), ("y_train", y[:n_train]),
                     ("X_test", X[n_train:]), ("y_test", y[n_train:])):
        chunks = (chunk_rows,) + arr.shape[1:]
        a = g.create_array(key, shape=arr.shape, dtype=arr.dtype, chunks=chunks)
        a[...] = arr
    from kernelscale.pipeline.data.store import chunk_checksums

    meta = {"name": name, "task": task, "n_train": n_train, "n_test": n_test, "d": d,
            "classes": classes, "chunk_rows": chunk_rows,
            "checksums": chunk_checksums(out / "data.zarr")}  # what prepare records
    (out / "meta.json").write_text(json.dumps(meta))
    return out


SPEC = {"estimator": "standin", "params": {"n_iter": 3}, "device": "cpu", "segments": 4}


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_train_writes_run_folder(tmp_path, task):
    from kernelscale.pipeline.train_run import train

    data = make_prepared(tmp_path / "data", "toy", task)
    out = tmp_path / "run"
    final = train(data, out, "standin", SPEC, seed=3)
    for f in ("params.json", "metrics.csv", "final.json", "model.pkl", "history.csv"):
        assert (out / f).is_file(), f
    assert not (out / "checkpoint.pkl").exists()
    saved = json.loads((out / "final.json").read_text())
    assert saved == json.loads(json.dumps(final))
    import pandas as pd

    m = pd.read_csv(out / "metrics.csv")
    assert list(m["step"]) == [1, 2, 3, 4]
    assert list(m["iter"]) == [3, 6, 9, 12]
    assert m["time_s"].is_monotonic_increasing
    assert m["objective"].notna().all()
    if task == "regression":
        assert final["metric"] == "test_rmse" and {"test_rmse", "test_r2"} <= set(m.columns)
        assert final["test_r2"] > 0.5
    else:
        assert final["metric"] == "test_error" and {"test_error", "test_accuracy"} <= set(m.columns)
        assert final["test_accuracy"] > 0.6
    assert final["value"] == final[final["metric"]]
    assert final["train_time_s"] > 0 and final["peak_rss_mb"] > 10
    assert final["device"] == "cpu" and final["n_train"] == 3000 and final["seed"] == 3
    params = json.loads((out / "params.json").read_text())
    assert params["params"]["random_state"] == 3 and params["params"]["warm_start"] is True
    model = pickle.loads((out / "model.pkl").read_bytes())
    assert model.fit_calls_ == 4


def test_resume_continues_from_checkpoint(tmp_path):
    from kernelscale.pipeline.train_run import train

    data = make_prepared(tmp_path / "data", "toy", "multiclass")
    out = tmp_path / "run"
    assert train(data, out, "standin", SPEC, seed=0, stop_after=2) is None
    ckpt = out / "checkpoint.pkl"
    assert ckpt.is_file() and not (out / "final.json").exists()
    assert pickle.loads(ckpt.read_bytes())["segment"] == 2
    final = train(data, out, "standin", SPEC, seed=0)
    model = pickle.loads((out / "model.pkl").read_bytes())
    # 2 segments before the "kill" + 2 after; one continuous model, not a restart
    assert model.fit_calls_ == 4 and model.history_["iter"][-1] == 12
    assert final["resumed"] == 1 and final["n_iter"] == 12
    import pandas as pd

    assert list(pd.read_csv(out / "metrics.csv")["step"]) == [1, 2, 3, 4]
    # same result as an uninterrupted run
    ref = train(data, tmp_path / "ref", "standin", SPEC, seed=0)
    assert ref["value"] == pytest.approx(final["value"])


def test_checkpoint_of_other_run_is_ignored(tmp_path):
    from kernelscale.pipeline.train_run import train

    data = make_prepared(tmp_path / "data", "toy", "regression")
    out = tmp_path / "run"
    train(data, out, "standin", SPEC, seed=0, stop_after=1)
    final = train(data, out, "standin", {**SPEC, "params": {"n_iter": 2}}, seed=0)
    assert final["resumed"] == 0 and final["n_iter"] == 8


def test_non_iterative_fits_once(tmp_path):
    from kernelscale.pipeline.train_run import train

    data = make_prepared(tmp_path / "data", "toy", "regression")
    final = train(data, tmp_path / "run", "oneshot",
                  {"estimator": "oneshot", "params": {}, "device": "cpu", "segments": 7}, seed=0)
    assert final["segments"] == 1 and final["test_r2"] > 0.9


def test_evaluate_in_chunks_matches_whole(tmp_path):
    from kernelscale.pipeline.evaluate import evaluate
    from kernelscale.pipeline.train_run import open_prepared, train

    data = make_prepared(tmp_path / "data", "toy", "regression")
    train(data, tmp_path / "run", "standin", SPEC, seed=0)
    model = pickle.loads((tmp_path / "run" / "model.pkl").read_bytes())
    _, arrays = open_prepared(data)
    Xt, yt = np.asarray(arrays["X_test"][:]), np.asarray(arrays["y_test"][:])

    class Counting:
        calls = []

        def predict(self, X):
            self.calls.append(len(X))
            return model.predict(X)

    c = Counting()
    chunked = evaluate(c, arrays["X_test"], arrays["y_test"], "regression", chunk_rows=128)
    assert max(c.calls) == 128 and sum(c.calls) == 1000
    whole = evaluate(model, Xt, yt, "regression", chunk_rows=10**6)
    assert chunked["test_rmse"] == pytest.approx(whole["test_rmse"])
    from sklearn.metrics import r2_score

    assert whole["test_r2"] == pytest.approx(r2_score(yt, model.predict(Xt)), rel=1e-6)


def test_cli_errors_are_one_line(tmp_path, capsys):
    from kernelscale.pipeline.cli import main

    rc = main(["train", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "r"),
               "--algorithm", "a", "--spec", json.dumps(SPEC)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and "meta.json not found" in err
    data = make_prepared(tmp_path / "data", "toy", "regression")
    rc = main(["train", "--data", str(data), "--out", str(tmp_path / "r"), "--algorithm", "a",
               "--spec", json.dumps({**SPEC, "estimator": "no-such"})])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and "unknown estimator 'no-such'" in err


def test_resume_after_real_kill(tmp_path):
    """SIGKILL a training process after its second checkpoint; the rerun continues."""
    data = make_prepared(tmp_path / "data", "toy", "binary")
    out = tmp_path / "run"
    spec = {**SPEC, "params": {"n_iter": 1, "sleep": 0.3}, "segments": 8}
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_cli_train; test_cli_train.register_standins(); "
            "from kernelscale.pipeline.cli import main; sys.exit(main(sys.argv[1:]))")
    args = [sys.executable, "-c", code, "train", "--data", str(data), "--out", str(out),
            "--algorithm", "standin", "--spec", json.dumps(spec)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ckpt = out / "checkpoint.pkl"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            if ckpt.is_file():
                try:
                    if pickle.loads(ckpt.read_bytes())["segment"] >= 2:
                        break
                except Exception:
                    pass
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert not (out / "final.json").exists()
    done = pickle.loads(ckpt.read_bytes())["segment"]
    assert 2 <= done < 8
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stdout
    model = pickle.loads((out / "model.pkl").read_bytes())
    assert model.fit_calls_ == 8 and json.loads((out / "final.json").read_text())["resumed"] == 1


def test_intermediate_evaluations_use_step_test_rows(tmp_path):
    import pandas as pd

    from kernelscale.pipeline.train_run import train

    data = make_prepared(tmp_path / "data", "toy", "binary")
    final = train(data, tmp_path / "run", "standin", {**SPEC, "step_test_rows": 100}, seed=0)
    m = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert list(m["test_rows"]) == [100, 100, 100, 1000]
    assert final["test_error"] == m["test_error"].iloc[-1]


@pytest.mark.parametrize("algorithm", ["dsg", "rff_sgd"])
def test_resume_with_a_registered_estimator(tmp_path, algorithm):
    """A real iterative estimator killed after a segment and resumed ends where an uninterrupted
    run ends (the registry protocol: segments of warm-started fits = one long run)."""
    from kernelscale.pipeline.train_run import train

    try:
        registry.estimator_class(algorithm, "multiclass")
    except (ValueError, ImportError) as e:
        pytest.skip(f"{algorithm} not available: {e}")
    data = make_prepared(tmp_path / "data", "toy", "multiclass", n_train=600, n_test=200)
    spec = {"estimator": algorithm, "params": {"n_iter": 3}, "device": "cpu", "segments": 3}
    assert train(data, tmp_path / "a", algorithm, spec, seed=0, stop_after=1) is None
    resumed = train(data, tmp_path / "a", algorithm, spec, seed=0)
    whole = train(data, tmp_path / "b", algorithm, spec, seed=0)
    assert resumed["resumed"] == 1
    assert resumed["value"] == pytest.approx(whole["value"])
    assert resumed["objective"] == pytest.approx(whole["objective"], rel=1e-6)
