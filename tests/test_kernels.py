"""Kernels: exact values, random Fourier estimates within standard errors, seeds, bandwidth."""

import pickle

import numpy as np
import pytest

from kernelscale.kernels import FourierBlocks, make_kernel, median_bandwidth, resolve_bandwidth
from kernelscale.kernels.fourier import draw_block

KERNELS = ["gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52"]


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(3)
    return rng.standard_normal((12, 4)), rng.standard_normal((9, 4))


def test_closed_forms(points):
    X, Y = points
    x, y, s = X[0], Y[0], 1.7
    d2, d1 = ((x - y) ** 2).sum(), np.abs(x - y).sum()
    r = np.sqrt(d2) / s
    expect = {
        "gaussian": np.exp(-d2 / (2 * s * s)),
        "laplacian": np.exp(-d1 / s),
        "cauchy": np.prod(1.0 / (1.0 + (x - y) ** 2 / s**2)),
        "matern12": np.exp(-r),
        "matern32": (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
        "matern52": (1 + np.sqrt(5) * r + 5 * r * r / 3) * np.exp(-np.sqrt(5) * r),
    }
    for name, val in expect.items():
        K = make_kernel(name, s)(X, Y)
        assert K[0, 0] == pytest.approx(val, rel=1e-12), name
        assert np.allclose(np.diag(make_kernel(name, s)(X)), 1.0), name


@pytest.mark.parametrize("name", KERNELS)
def test_fourier_estimate_within_standard_errors(name, points):
    """|K_hat - K| <= 5 standard errors for every pair, and the error shrinks like 1/sqrt(F)."""
    X, Y = points
    kernel = make_kernel(name, 1.3)
    K = kernel(X, Y)
    F = 20000
    fb = FourierBlocks(kernel, X.shape[1], F, seed=11)
    ZX, ZY = fb.features(X, 0), fb.features(Y, 0)
    # per-feature products phi_j(x) phi_j(y) * F have mean k(x, y); their std gives the std error
    prods = ZX[:, None, :] * ZY[None, :, :] * F
    se = prods.std(axis=2) / np.sqrt(F)
    K_hat = prods.mean(axis=2)
    assert np.all(np.abs(K_hat - K) <= 5 * se + 1e-12)
    # error at F=200 vs F=20000: ratio ~ sqrt(100) = 10 on average over pairs
    small = FourierBlocks(kernel, X.shape[1], 200, seed=12)
    errs_small = [np.abs(small.features(X, j) @ small.features(Y, j).T - K).mean() for j in range(20)]
    err_big = np.abs(K_hat - K).mean()
    assert np.mean(errs_small) > 4 * err_big


def test_parameter_cache_takes_a_share_of_a_gpu_and_a_fixed_size_in_host_memory():
    """On a GPU the cache holds DEVICE_CACHE_SHARE of the card (a block beyond it is drawn
    again at every use); in host memory HOST_CACHE_BYTES; an explicit size is kept on a move,
    and a pickled block set sizes its cache for numpy again."""
    from types import SimpleNamespace

    from kernelscale.kernels import fourier

    card = 80 * 2**30
    gpu = SimpleNamespace(cuda=SimpleNamespace(Device=lambda: SimpleNamespace(mem_info=(1, card))))
    assert fourier.default_cache_bytes(np) == fourier.HOST_CACHE_BYTES
    assert fourier.default_cache_bytes(gpu) == int(fourier.DEVICE_CACHE_SHARE * card)
    assert fourier.default_cache_bytes(SimpleNamespace()) == fourier.HOST_CACHE_BYTES
    k = make_kernel("gaussian", 1.0)
    per_block = (784 + 1) * 4096 * 4
    blocks = FourierBlocks(k, 784, 4096, seed=0, dtype=np.float32)
    assert blocks.max_cached == fourier.HOST_CACHE_BYTES // per_block
    blocks.xp = gpu  # as ``to`` does, without a GPU to copy to
    blocks._size_cache()
    assert blocks.max_cached == int(fourier.DEVICE_CACHE_SHARE * card) // per_block
    assert pickle.loads(pickle.dumps(blocks)).max_cached == fourier.HOST_CACHE_BYTES // per_block
    fixed = FourierBlocks(k, 784, 4096, seed=0, dtype=np.float32, cache_bytes=3 * per_block)
    fixed.xp = gpu
    fixed._size_cache()
    assert fixed.max_cached == 3


def test_blocks_are_pure_functions_of_seed_and_index():
    k = make_kernel("gaussian", 1.0)
    a = FourierBlocks(k, 3, 8, seed=5)
    b = FourierBlocks(k, 3, 8, seed=5, cache_bytes=1)  # no cache: regenerated every time
    Wa, ba = a.params(3, 4)
    Wb, bb = b.params(3, 4)
    assert np.array_equal(Wa, Wb) and np.array_equal(ba, bb)
    W3, b3 = draw_block(k, 3, 8, 5, 3)
    assert np.array_equal(W3, Wa) and np.array_equal(b3, ba)
    # different index or seed: different block
    assert not np.array_equal(draw_block(k, 3, 8, 5, 4)[0], W3)
    assert not np.array_equal(draw_block(k, 3, 8, 6, 3)[0], W3)
    # stacking blocks 2..5 equals the blocks one by one
    W, _ = a.params(2, 5)
    assert np.array_equal(W[:, 8:16], draw_block(k, 3, 8, 5, 3)[0])


def test_a_range_of_cached_blocks_is_a_contiguous_operand():
    """Any range of cached blocks is served as a contiguous W (column-major): a strided W makes
    cupy's matmul copy it, d m F numbers for m blocks, one block more at every DSG step (the
    caching allocator kept each copy: +70 GB a pass at d = 784 on an H200, docs/benchmarks.md)."""
    k = make_kernel("gaussian", 1.0)
    blocks = FourierBlocks(k, 5, 8, seed=2)
    blocks.params(0, 6)  # cache 6 blocks
    for lo, hi in [(0, 1), (2, 5), (0, 6), (5, 6)]:
        W, b = blocks.params(lo, hi)
        assert W.shape == (5, (hi - lo) * 8) and (W.flags.c_contiguous or W.flags.f_contiguous)
        assert np.shares_memory(W, blocks._W)  # a view of the cache, not a copy
        assert np.array_equal(W, np.concatenate([draw_block(k, 5, 8, 2, j)[0]
                                                 for j in range(lo, hi)], axis=1))


def test_float32_blocks_match_float64():
    k = make_kernel("laplacian", 2.0)
    X = np.random.default_rng(0).standard_normal((5, 3))
    f64 = FourierBlocks(k, 3, 64, seed=1).features(X, 0, 2)
    f32 = FourierBlocks(k, 3, 64, seed=1, dtype=np.float32).features(X.astype(np.float32), 0, 2)
    assert f32.dtype == np.float32
    assert np.allclose(f32, f64, atol=1e-4)


def test_median_bandwidth():
    X = np.random.default_rng(0).standard_normal((500, 3))
    from scipy.spatial.distance import pdist

    assert median_bandwidth(X) == pytest.approx(np.median(pdist(X)), rel=1e-12)
    assert median_bandwidth(X, metric="cityblock") == pytest.approx(np.median(pdist(X, "cityblock")))
    assert resolve_bandwidth("median*4", X, "euclidean") == pytest.approx(4 * median_bandwidth(X))
    assert resolve_bandwidth(2.5, X, "euclidean") == 2.5


def test_median_bandwidth_reads_only_a_sample_of_a_zarr_array(tmp_path):
    zarr = pytest.importorskip("zarr")
    X = np.random.default_rng(1).standard_normal((3000, 4)).astype(np.float32)
    Z = zarr.open_array(tmp_path / "x.zarr", mode="w", shape=X.shape, chunks=(500, 4), dtype="f4")
    Z[:] = X
    assert median_bandwidth(Z, n_sample=800, seed=2) == pytest.approx(
        median_bandwidth(X, n_sample=800, seed=2), rel=1e-6)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "mean", True])
def test_bad_bandwidth_is_one_line(bad):
    with pytest.raises(ValueError) as e:
        resolve_bandwidth(bad, np.zeros((3, 2)), "euclidean") if not isinstance(bad, (int, float)) \
            or isinstance(bad, bool) else make_kernel("gaussian", bad)
    assert "\n" not in str(e.value) and "bandwidth" in str(e.value)


def test_unknown_kernel_is_one_line():
    with pytest.raises(ValueError, match="unknown kernel 'poly'") as e:
        make_kernel("poly", 1.0)
    assert "\n" not in str(e.value)


def test_estimators_and_engine_options_are_exported_from_the_top_level():
    import kernelscale
    import kernelscale.engine

    for name in kernelscale.__all__[1:]:
        obj = getattr(kernelscale, name)
        assert obj.__name__ == name
        assert hasattr(obj, "fit") or obj is getattr(kernelscale.engine, name)
    with pytest.raises(AttributeError):
        kernelscale.NoSuchEstimator  # noqa: B018


def test_feature_blocks_are_safe_to_share_between_threads():
    """One fitted model predicting from several threads (dask workers in one process) shares its
    FourierBlocks; the frequency cache grows under a lock, so every thread sees whole blocks."""
    from concurrent.futures import ThreadPoolExecutor

    X = np.random.default_rng(0).standard_normal((50, 6))
    ref = FourierBlocks(make_kernel("gaussian", 2.0), 6, 16, seed=3)
    want = {hi: ref.features(X, 0, hi) for hi in range(1, 41)}
    for _ in range(20):
        # growing requests: readers of the small blocks meet the cache while it is swapped
        shared = FourierBlocks(make_kernel("gaussian", 2.0), 6, 16, seed=3)
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda hi, s=shared: (hi, s.features(X, 0, hi)),
                                [h for h in range(1, 41) for _ in range(4)]))
        assert all(np.array_equal(f, want[hi]) for hi, f in got)
    assert pickle.loads(pickle.dumps(shared)).features(X, 0, 3).shape == (50, 48)
