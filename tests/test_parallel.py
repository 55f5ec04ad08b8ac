"""Threaded, tiled passes (kernelscale.parallel) and tiled kernel products: same bits as one
thread."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelscale import parallel
from kernelscale.kernels import FourierBlocks, make_kernel


@pytest.fixture
def threads():
    yield parallel.set_threads
    parallel.set_threads(None)


def test_rowwise_covers_every_row_once_with_its_offsets(threads):
    Z0 = np.random.default_rng(0).standard_normal((5003, 300))  # 12 MB: above the parallel cutoff
    assert Z0.nbytes >= parallel.MIN_PARALLEL_BYTES
    seen = np.zeros(Z0.shape[0], dtype=int)

    def fn(T, lo, hi):
        assert T.shape[0] == hi - lo
        seen[lo:hi] += 1
        T *= 0.5
        T += np.arange(lo, hi)[:, None]  # a tile handed the wrong offsets would show

    for k in (1, 2, 3):
        threads(k)
        seen[:] = 0
        Z = parallel.rowwise(fn, Z0.copy())
        assert (seen == 1).all()
        assert np.array_equal(Z, Z0 * 0.5 + np.arange(Z0.shape[0])[:, None])


def test_rowwise_raises_a_worker_thread_error(threads):
    threads(2)
    Z = np.zeros((4096, 512))

    def fn(T, lo, hi):
        if lo >= 2048:
            raise ValueError(f"bad tile at {lo}")

    with pytest.raises(ValueError, match="bad tile at"):
        parallel.rowwise(fn, Z)


def test_features_and_kernel_blocks_do_not_depend_on_threads(threads):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3000, 20)).astype(np.float32)
    Y = rng.standard_normal((900, 20)).astype(np.float32)
    blocks = FourierBlocks(make_kernel("gaussian", 3.0), 20, 256, 0, dtype=np.float32)
    k = make_kernel("gaussian", 3.0)
    threads(1)
    Z1, K1 = blocks.features(X, 0, 4), k(X, Y)
    threads(2)
    Z2, K2 = blocks.features(X, 0, 4), k(X, Y)
    assert np.array_equal(Z1, Z2) and np.array_equal(K1, K2)
    # and they are what the formulas say
    W, b = blocks.params(0, 4)
    assert np.allclose(Z1, math.sqrt(2 / 256) * np.cos(X @ W + b), atol=1e-5)
    d2 = ((X[:, None, :].astype(np.float64) - Y[None]) ** 2).sum(-1)
    assert np.allclose(K1, np.exp(-d2 / 18.0), atol=1e-5)


@pytest.mark.parametrize("name", ["gaussian", "laplacian", "matern32"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_rows", [3, "three blocks"])  # few rows: the Gaussian's other tile
def test_kernel_apply_in_tiles_matches_the_kernel_block(threads, name, dtype, n_rows):
    from kernelscale.solvers._common import ROW_BLOCK, kernel_apply

    rng = np.random.default_rng(2)
    n_rows = 2 * ROW_BLOCK + 37 if n_rows == "three blocks" else n_rows
    A = rng.standard_normal((n_rows, 6)).astype(dtype)
    C = rng.standard_normal((5000, 6)).astype(dtype)  # several column tiles
    coef = rng.standard_normal((5000, 3)).astype(dtype)
    keep = np.sort(rng.choice(5000, 700, replace=False))
    k = make_kernel(name, 2.0)
    K = k(A.astype(np.float64), C.astype(np.float64))
    results = {}
    for t in (1, 2, 3):
        threads(t)
        results[t] = kernel_apply(k, A, C, coef, np, keep=keep)
    out, kept = results[1]
    assert out.dtype == dtype and kept.dtype == dtype and kept.shape == (n_rows, 700)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    assert np.allclose(out, K @ coef.astype(np.float64), rtol=tol, atol=tol * 100)
    assert np.allclose(kept, K[:, keep], rtol=tol, atol=tol)
    for t in (2, 3):  # the same bits at any thread count
        assert np.array_equal(results[t][0], out) and np.array_equal(results[t][1], kept)
    assert np.array_equal(kernel_apply(k, A, C, coef, np), out)


def test_kernel_apply_with_no_rows_or_no_centres():
    from kernelscale.solvers._common import kernel_apply

    k = make_kernel("gaussian", 1.0)
    A, C, coef = np.ones((5, 3)), np.ones((0, 3)), np.ones((0, 2))
    assert np.array_equal(kernel_apply(k, A, C, coef, np), np.zeros((5, 2)))
    out, kept = kernel_apply(k, A[:0], np.ones((4, 3)), np.ones((4, 2)), np, keep=np.array([1]))
    assert out.shape == (0, 2) and kept.shape == (0, 1)


def test_blockwise_runs_every_block_once_and_restores_the_blas_threads(threads):
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    seen = []
    threads(2)
    parallel.blockwise(lambda lo, hi: seen.append((lo, hi)), 1000, 256)
    assert sorted(seen) == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert after == before

    def fail(lo, hi):
        raise ValueError(f"bad block at {lo}")

    with pytest.raises(ValueError, match="bad block at"):
        parallel.blockwise(fail, 1000, 256)
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_kernel_eigenpro_and_nystrom_cg_fit_the_same_model_at_any_thread_count(threads):
    from kernelscale import EigenProRegressor, NystromRidgeRegressor

    rng = np.random.default_rng(4)
    X = rng.standard_normal((5000, 5))  # 5,000 centres: three chunks of kernel_apply
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(5000)
    preds = {}
    for t in (1, 2):
        threads(t)
        ep = EigenProRegressor(n_iter="2 epochs", subsample_size=500, random_state=0).fit(X, y)
        cg = NystromRidgeRegressor(n_components=1200, solver="cg", n_iter=10,
                                   random_state=0).fit(X, y)
        preds[t] = (ep.predict(X[:300]), cg.predict(X[:300]))
    assert np.array_equal(preds[1][0], preds[2][0]) and np.array_equal(preds[1][1], preds[2][1])
