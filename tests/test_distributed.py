"""dask.distributed option: LocalCluster / remote scheduler clients and chunked evaluation."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from kernelscale.distributed import client_for, predict_chunked, sum_blocks  # noqa: E402
from kernelscale.estimators.baselines import RFFSGDClassifier  # noqa: E402
from kernelscale.estimators.dsg import DSGRegressor  # noqa: E402
from kernelscale.kernels import make_kernel  # noqa: E402


@pytest.fixture(scope="module")
def client():
    c = client_for(None, n_workers=2, processes=False)
    yield c
    c.close()
    c.cluster.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 6))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 4
    path = tmp_path_factory.mktemp("dist") / "X.zarr"
    Z = zarr.open_array(path, mode="w", shape=X.shape, chunks=(700, 6), dtype="f8")
    Z[:] = X
    return X, y, Z


def test_local_cluster_has_single_threaded_workers(client):
    workers = client.scheduler_info()["workers"].values()
    assert len(workers) == 2 and all(w["nthreads"] == 1 for w in workers)


def test_predictions_match_threaded_scheduler_and_in_memory(client, data):
    X, y, Z = data
    reg = DSGRegressor(n_iter=30, batch_size=100, block_size=32, bandwidth=2.0,
                       random_state=0).fit(X, y)
    on_cluster = predict_chunked(reg, Z, client)
    threaded = predict_chunked(reg, Z, None)
    assert np.array_equal(on_cluster, threaded)
    assert np.allclose(threaded, reg.predict(X), rtol=1e-12, atol=1e-12)
    labels = (y > np.median(y)).astype(int)
    clf = RFFSGDClassifier(n_components=50, n_iter=40, bandwidth=2.0, random_state=0).fit(X, labels)
    assert np.array_equal(predict_chunked(clf, Z, client), clf.predict(X))
    proba = predict_chunked(clf, X, client, method="decision_function", chunk_rows=999)
    assert np.array_equal(proba, predict_chunked(clf, X, None, method="decision_function",
                                                 chunk_rows=999))


def test_chunked_kernel_products_match_dense(client, data):
    X, y, Z = data
    centers = X[:50]
    k = make_kernel("gaussian", 2.0)

    def gram(b):  # K_b^T K_b: Nystrom's normal matrix, one block of rows at a time
        K = k(b, centers)
        return K.T @ K

    def rhs(b, yb):
        return k(b, centers).T @ yb

    K = k(X, centers)
    dense_gram, dense_rhs = K.T @ K, K.T @ y
    assert np.allclose(sum_blocks(gram, Z, client=client), dense_gram, rtol=1e-10)
    on_cluster = sum_blocks(rhs, Z, y, client=client)
    assert np.array_equal(on_cluster, sum_blocks(rhs, Z, y))
    assert np.allclose(on_cluster, dense_rhs, rtol=1e-10)


def test_unreachable_scheduler_is_one_line_error_quickly():
    t = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"cannot reach dask scheduler 'tcp://127.0.0.1:9'") as e:
        client_for("tcp://127.0.0.1:9", timeout=1)
    assert time.perf_counter() - t < 10
    assert "\n" not in str(e.value)
    with pytest.raises(ConnectionError, match="invalid address"):
        client_for("not an address:::", timeout=1)
