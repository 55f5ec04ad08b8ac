"""RB-CG with its features on dask worker processes (``kernelscale.spread.rb``): the workers read and bin
their own rows of the zarr store, the client holds only the vocabulary, the model is the
in-process one, and a worker killed mid-fit costs only time."""

import os
import signal
import threading
import warnings

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
pytest.importorskip("distributed")

from kernelscale.estimators.random_binning import RBClassifier, RBRegressor  # noqa: E402
from kernelscale.kernels.random_binning import RandomBinning  # noqa: E402
from kernelscale.spread import SpreadRB, client_for, use_client  # noqa: E402

KW = dict(n_components=16, engine={"pass_rows": 500}, bandwidth=2.0, reg=1.0, tol=1e-12,
          n_iter=500, random_state=0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 5))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4
    Xz = zarr.open_array(tmp_path_factory.mktemp("rb") / "X.zarr", mode="w", shape=X.shape,
                         chunks=(500, 5), dtype="f8")
    Xz[:] = X
    return Xz, X, y


@pytest.fixture(scope="module")
def client():
    c = client_for(None, n_workers=2, processes=True)
    yield c
    c.close()
    c.cluster.close()


def test_features_stay_on_the_workers_and_give_the_local_model(client, data, monkeypatch):
    Xz, X, y = data
    local = RBRegressor(**KW).fit(X, y)
    labels = (y > np.median(y)).astype(int)
    jacobi = {**KW, "precondition": True, "solver": "cg"}
    local_c = RBClassifier(**jacobi).fit(X, labels)

    def no_local_features(*a, **k):
        raise AssertionError("the client built Z")

    monkeypatch.setattr(RandomBinning, "fit_transform", no_local_features)
    with use_client(client):
        remote = RBRegressor(**KW).fit(Xz, y)
    assert np.array_equal(local.features_.keys_, remote.features_.keys_)
    assert remote.kappa_ == local.kappa_ and remote.n_features_out_ == local.n_features_out_
    # per CG product: P (D x 1 float64) out to each of the 2 workers, as much back
    s, D = remote.spread_, remote.n_features_out_
    assert s["workers"] == 2 and s["round_trips"] >= remote.n_iter_
    assert s["bytes_sent"] == s["bytes_received"] == s["round_trips"] * 2 * D * 8
    np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=1e-10, atol=1e-10)
    with use_client(client):
        remote_c = RBClassifier(**jacobi).fit(Xz, labels)
    np.testing.assert_allclose(remote_c.decision_function(X), local_c.decision_function(X),
                               rtol=1e-10, atol=1e-10)


def test_a_bad_row_is_named_and_nothing_stays_on_the_cluster(client, data, tmp_path):
    _, X, y = data
    Xb = X.copy()
    Xb[1234, 3] = np.nan
    bad = zarr.open_array(tmp_path / "bad.zarr", mode="w", shape=X.shape, chunks=(500, 5),
                          dtype="f8")
    bad[:] = Xb
    with use_client(client), pytest.raises(ValueError, match="row 1234") as e:
        RBRegressor(**{**KW, "bandwidth": 2.0}).fit(bad, y)
    assert "\n" not in str(e.value)


def test_fit_survives_a_worker_killed_mid_cg(data, monkeypatch):
    """The victim's part (its row blocks) is read, hashed and binned again on the
    workers left; one warning names it; the model is the in-process one."""
    Xz, X, y = data
    local = RBRegressor(**KW).fit(X, y)
    c = client_for(None, n_workers=3, processes=True)
    calls, errors, caught = [], [], []
    original = SpreadRB.normal
    try:
        victim = sorted(c.scheduler_info()["workers"])[1]
        pid = c.run(os.getpid, workers=[victim])[victim]

        def normal(self, P):
            calls.append(1)
            if len(calls) == 3:  # CG is under way: the worker process dies
                os.kill(pid, signal.SIGKILL)
            return original(self, P)

        monkeypatch.setattr(SpreadRB, "normal", normal)
        est = RBRegressor(**KW)

        def fit():
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                try:
                    with use_client(c):
                        est.fit(Xz, y)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                caught.extend(x for x in w if issubclass(x.category, RuntimeWarning))

        thread = threading.Thread(target=fit)
        thread.start()
        thread.join(timeout=600)
    finally:
        c.close()
        c.cluster.close()
    assert not thread.is_alive(), "the fit did not finish after its worker was lost"
    assert not errors, errors
    assert len(calls) > 3
    msgs = [str(w.message) for w in caught if "lost dask worker" in str(w.message)]
    assert len(msgs) == 1 and "\n" not in msgs[0] and victim in msgs[0], msgs
    np.testing.assert_allclose(est.predict(X), local.predict(X), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("make", [
    lambda: RBRegressor(**KW),
    lambda: __import__("kernelscale.estimators", fromlist=["x"]).NystromRidgeRegressor(
        n_components=50, bandwidth=2.0, reg=1.0, random_state=0),
], ids=["rb_cg", "nystrom"])
def test_workers_without_the_files_are_a_one_line_error(client, tmp_path, monkeypatch, make):
    """A library caller's ``use_client`` whose workers see another file system (here: a relative
    zarr path, the workers in another directory, where zarr reads its fill value): one line
    naming the worker and the store, before any block is computed from zeros."""
    rng = np.random.default_rng(1)
    (tmp_path / "mine").mkdir()
    (tmp_path / "theirs").mkdir()
    monkeypatch.chdir(tmp_path / "mine")
    Xz = zarr.open_group("d.zarr", mode="w").create_array("X", shape=(1000, 4), chunks=(250, 4),
                                                          dtype="f8")
    Xz[:] = rng.standard_normal((1000, 4))
    y = rng.standard_normal(1000)
    before = client.run(os.getcwd)
    client.run(os.chdir, str(tmp_path / "theirs"))
    try:
        with use_client(client), pytest.raises(OSError) as e:
            make().fit(Xz, y)
    finally:
        for addr, cwd in before.items():
            client.run(os.chdir, cwd, workers=[addr])
    msg = str(e.value)
    assert "\n" not in msg and "cannot read X" in msg and "d.zarr" in msg, msg
