"""DSG / UDSG / CDSG with each batch spread over dask worker processes (kernelscale.spread.dsg):
the same model as the in-process fit up to the order of additions, the same model from run to
run, the traffic the cost model counts, a worker lost mid-fit, and what cannot be spread."""

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

from kernelscale.estimators import DSGClassifier, DSGOneClass, DSGRegressor  # noqa: E402
from kernelscale.spread import client_for, use_client  # noqa: E402

N, D = 6000, 8
KW = dict(n_iter=24, batch_size=512, block_size=64, random_state=0,
          engine={"dtype": "float64"})


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
    Xz = root.create_array("X", shape=X.shape, chunks=(1000, D), dtype="f8")
    Xz[:] = X
    return Xz, X, y_clf, y_reg


def _out(est, X):
    return est.decision_function(X) if hasattr(est, "decision_function") else est.predict(X)


@pytest.mark.parametrize("variant", ["dsg", "udsg", "cdsg"])
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_spread_fit_matches_in_process(client, data, variant, task):
    Xz, X, y_clf, y_reg = data
    Est, y = (DSGClassifier, y_clf) if task == "classification" else (DSGRegressor, y_reg)
    local = Est(solver=variant, **KW).fit(Xz, y)
    with use_client(client):
        spread = Est(solver=variant, **KW).fit(Xz, y)
    assert spread.spread_["workers"] == 2 and not hasattr(local, "spread_")
    # the same choices (blocks drawn, reused, checked) and, float64, outputs equal to rounding
    assert spread.history_["n_blocks"] == local.history_["n_blocks"]
    a, b = _out(local, X[:500]), _out(spread, X[:500])
    assert np.max(np.abs(a - b)) <= 1e-9 * (1 + np.max(np.abs(a)))


def test_spread_fit_is_deterministic_and_warm_starts_like_one_fit(client, data):
    Xz, X, y, _ = data
    with use_client(client):
        one = DSGClassifier(solver="cdsg", **KW).fit(Xz, y)
        again = DSGClassifier(solver="cdsg", **KW).fit(Xz, y)
        seg = DSGClassifier(solver="cdsg", warm_start=True, **{**KW, "n_iter": 12})
        seg.fit(Xz, y).fit(Xz, y)
    np.testing.assert_array_equal(_out(one, X), _out(again, X))
    np.testing.assert_array_equal(_out(one, X), _out(seg, X))


def test_spread_traffic_is_what_the_cost_model_counts(client, data):
    """Per step: a forward call (the last block update out; C float64 sums back) and a block
    call (phi_k^T g, and phi_k^T phi_k for the block Newton step of classification)."""
    Xz, _, y, _ = data
    with use_client(client):
        est = DSGClassifier(**KW).fit(Xz, y)
    s, T, W, F, C = est.spread_, est.n_iter_, 2, 64, 3
    assert s["round_trips"] == 2 * T
    assert s["bytes_received"] == T * W * (C * 8 + (F * C + F * F) * 8)
    assert s["bytes_sent"] == (T - 1) * W * F * C * 8  # every step's update but the last


def test_spread_fit_survives_a_lost_worker(data):
    Xz, X, y, _ = data
    kw = {**KW, "n_iter": 120}
    local = DSGClassifier(**kw).fit(Xz, y)
    c = client_for(None, n_workers=3, processes=True)
    est, caught, errors = DSGClassifier(**kw), [], []

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
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)  # the worker process dies mid-fit
        thread.join(timeout=900)  # generous: a loaded 2-core machine runs 4 processes here
    finally:
        c.close()
        c.cluster.close()
    assert not thread.is_alive(), "the spread fit did not finish after its worker was lost"
    assert not errors, errors
    msgs = [str(w.message) for w in caught if "lost dask worker" in str(w.message)]
    assert len(msgs) == 1 and "\n" not in msgs[0] and victim in msgs[0], msgs
    assert est.spread_["workers"] == 2 and est.n_iter_ == 120
    a, b = _out(local, X[:500]), _out(est, X[:500])
    assert np.max(np.abs(a - b)) <= 1e-9 * (1 + np.max(np.abs(a)))


def test_one_class_is_not_spread(client, data):
    Xz = data[0]
    with use_client(client), pytest.raises(ValueError, match="one-class loss cannot spread"):
        DSGOneClass(**KW).fit(Xz)


def test_in_memory_data_trains_in_process(client, data):
    _, X, y, _ = data
    with use_client(client):
        est = DSGClassifier(**KW).fit(X, y)
    assert not hasattr(est, "spread_")


def test_a_worker_that_cannot_read_the_data_is_a_one_line_error(client, tmp_path, monkeypatch):
    """The workers open the store by its path. Workers that see another file system (here: a
    relative path, the workers in another directory, where zarr would silently read its fill
    value) fail the fit at the start, in one line naming the path and the cause."""
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
            DSGClassifier(**KW).fit(Xz, y)
    finally:
        for addr, cwd in before.items():
            client.run(os.chdir, cwd, workers=[addr])
    msg = str(e.value)
    assert "\n" not in msg and "cannot read the training data (d.zarr)" in msg, msg
    assert "first rows differ" in msg and "client's file system" in msg, msg


def test_closing_a_spread_fit_does_not_wait_for_a_worker_lost_after_the_last_step(data,
                                                                                   monkeypatch):
    """A worker job can end between a fit's last step and its close (Slurm's scancel under
    load). The close then stops the workers left and returns: a stop task pinned to the lost
    worker would wait for it forever."""
    from kernelscale.spread import SpreadDSG

    Xz, X, y, _ = data
    c = client_for(None, n_workers=2, processes=True)
    close = SpreadDSG.close

    def close_after_a_loss(self):
        victim = self.workers[1]
        pid = self.client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        close(self)

    monkeypatch.setattr(SpreadDSG, "close", close_after_a_loss)
    est, errors = DSGClassifier(**KW), []

    def fit():
        try:
            with use_client(c):
                est.fit(Xz, y)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    try:
        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        thread.join(timeout=300)
    finally:
        c.close()
        c.cluster.close()
    assert not thread.is_alive(), "the close waited for the lost worker"
    assert not errors, errors
    assert est.n_iter_ == KW["n_iter"] and est.spread_["workers"] == 2
