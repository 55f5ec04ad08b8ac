"""EigenPro-RF with each batch spread over dask worker processes
(kernelscale.spread.rff, residual=True): the same model as the in-process fit up to the order of
additions, the same model from run to run, warm-started segments, and a worker that cannot read
the data."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from kernelscale.estimators.eigenpro import (  # noqa: E402
    EigenProClassifier,
    EigenProRFClassifier,
    EigenProRFRegressor,
)
from kernelscale.spread import client_for, use_client  # noqa: E402

N, D = 3000, 6
KW = dict(n_iter=20, batch_size=200, n_components=150, bandwidth=2.0,
          n_eigenvectors=20, subsample_size=500, random_state=0, engine={"dtype": "float64"})


@pytest.fixture(scope="module")
def client():
    c = client_for(None, n_workers=2, processes=True)
    yield c
    c.close()
    c.cluster.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    f = np.sin(X[:, :3].sum(axis=1))
    y_clf = (f > 0).astype(int) + (X[:, 3] > 1).astype(int)  # three classes
    y_reg = f + 0.1 * rng.standard_normal(N)
    root = zarr.open_group(str(tmp_path_factory.mktemp("spread") / "d.zarr"), mode="w")
    Xz = root.create_array("X", shape=X.shape, chunks=(500, D), dtype="f8")
    Xz[:] = X
    return Xz, X, y_clf, y_reg


def _out(est, X):
    return est.decision_function(X) if hasattr(est, "decision_function") else est.predict(X)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_spread_fit_matches_in_process(client, data, task):
    Xz, X, y_clf, y_reg = data
    Est, y = ((EigenProRFClassifier, y_clf) if task == "classification"
              else (EigenProRFRegressor, y_reg))
    local = Est(**KW).fit(Xz, y)
    with use_client(client):
        spread = Est(**KW).fit(Xz, y)
    assert spread.spread_["workers"] == 2 and not hasattr(local, "spread_")
    assert spread.n_iter_ == local.n_iter_ == 20
    assert spread.eta_ == local.eta_ and spread.n_eigenvectors_ == local.n_eigenvectors_ > 0
    # float64: the same steps up to the order of additions inside the row sums
    np.testing.assert_allclose(spread.history_["objective"], local.history_["objective"],
                               rtol=1e-9)
    a, b = _out(local, X[:500]), _out(spread, X[:500])
    assert np.max(np.abs(a - b)) <= 1e-9 * (1 + np.max(np.abs(a)))
    assert np.max(np.abs(a)) > 1e-3  # the model has learned something


def test_spread_fit_is_deterministic_and_warm_starts_like_one_fit(client, data):
    Xz, X, y, _ = data
    with use_client(client):
        one = EigenProRFClassifier(**KW).fit(Xz, y)
        again = EigenProRFClassifier(**KW).fit(Xz, y)
        seg = EigenProRFClassifier(warm_start=True, **{**KW, "n_iter": 10})
        seg.fit(Xz, y).fit(Xz, y)
    assert seg.n_iter_ == 20
    np.testing.assert_array_equal(_out(one, X), _out(again, X))
    np.testing.assert_array_equal(_out(one, X), _out(seg, X))


def test_spread_traffic(client, data):
    """Per step and worker: w out (D x C words), the partial Phi^T r back (D x C words)."""
    Xz, _, y, _ = data
    with use_client(client):
        est = EigenProRFClassifier(**KW).fit(Xz, y)
    s, T, W, Dc, C = est.spread_, est.n_iter_, 2, 150, 3
    assert s["round_trips"] == T
    assert s["bytes_sent"] == s["bytes_received"] == T * W * Dc * C * 8


def test_spread_fit_survives_a_lost_worker(data):
    """The workers hold no weights: a killed worker costs one warning line and a retry of the
    step's call on the workers left (same batches, another split: the same model to rounding)."""
    Xz, X, y, _ = data
    kw = {**KW, "n_iter": 150}
    local = EigenProRFClassifier(**kw).fit(Xz, y)
    c = client_for(None, n_workers=3, processes=True)
    est, caught, errors = EigenProRFClassifier(**kw), [], []

    def fit():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                with use_client(c):
                    est.fit(Xz, y)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
            caught.extend(x for x in w if issubclass(x.category, RuntimeWarning))

    try:
        victim = sorted(c.scheduler_info()["workers"])[1]
        pid = c.run(os.getpid, workers=[victim])[victim]
        thread = threading.Thread(target=fit)
        thread.start()
        deadline = time.time() + 60
        while len(getattr(est, "history_", {}).get("iter", [])) < 10 and time.time() < deadline:
            time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)  # the worker process dies mid-fit
        thread.join(timeout=300)
    finally:
        c.close()
        c.cluster.close()
    assert not errors, errors
    msgs = [str(w.message) for w in caught if "lost dask worker" in str(w.message)]
    assert len(msgs) == 1 and "\n" not in msgs[0] and victim in msgs[0], msgs
    assert msgs[0].startswith("EigenPro-RF lost dask worker"), msgs
    assert est.spread_["workers"] == 2 and est.n_iter_ == 150
    a, b = _out(local, X[:500]), _out(est, X[:500])
    assert np.max(np.abs(a - b)) <= 1e-9 * (1 + np.max(np.abs(a)))


def test_in_memory_data_and_kernel_method_train_in_process(client, data):
    _, X, y, _ = data
    with use_client(client):
        est = EigenProRFClassifier(**KW).fit(X, y)
        kern = EigenProClassifier(**{k: v for k, v in KW.items() if k != "n_components"}).fit(
            X[:600], y[:600])
    assert not hasattr(est, "spread_") and not hasattr(kern, "spread_")


def test_a_worker_that_cannot_read_the_data_is_a_one_line_error(client, tmp_path, monkeypatch):
    """As for DSG / RFF-SGD: workers in another directory would read a relative zarr path as its
    fill value; the fit fails at its start in one line."""
    rng = np.random.default_rng(1)
    (tmp_path / "mine").mkdir()
    (tmp_path / "theirs").mkdir()
    monkeypatch.chdir(tmp_path / "mine")
    root = zarr.open_group("d.zarr", mode="w")
    Xz = root.create_array("X", shape=(2000, 4), chunks=(500, 4), dtype="f8")
    Xz[:] = rng.standard_normal((2000, 4))
    y = rng.integers(0, 2, 2000)
    before = client.run(os.getcwd)
    client.run(os.chdir, str(tmp_path / "theirs"))
    try:
        with use_client(client), pytest.raises(OSError) as e:
            EigenProRFClassifier(**KW).fit(Xz, y)
    finally:
        for addr, cwd in before.items():
            client.run(os.chdir, cwd, workers=[addr])
    msg = str(e.value)
    assert "\n" not in msg and "cannot read the training data (d.zarr)" in msg, msg
    assert "first rows differ" in msg and "client's file system" in msg, msg
