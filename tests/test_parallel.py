"""Threaded, tiled element-wise passes (kernelscale.parallel): same bits as one thread."""

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
