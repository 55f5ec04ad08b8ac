"""Random Fourier feature blocks regenerated from (seed, block index).

A block j is F frequencies W_j (d x F) and phases b_j (F,) drawn by ``rng.block_generator(seed, j, rng.FOURIER)``;
its features are phi_j(x) = sqrt(2/F) cos(W_j^T x + b_j), so phi_j(x).phi_j(x') estimates k(x, x')
with F samples (Rahimi, Recht, Random Features for Large-Scale Kernel Machines, NIPS 2007).
Consecutive blocks are stacked so that many blocks cost one large matrix product. Rows X may be
a scipy.sparse matrix (CSR) on the host: X W is then a sparse product that reads only the rows of
W its non-zeros name (``shift_invariant.sparse_times``).
"""

from __future__ import annotations

import math
import threading
from types import ModuleType

import numpy as np

from ..backend import is_sparse
from ..parallel import rowwise
from ..rng import FOURIER, block_generator
from . import _fused
from .shift_invariant import Kernel, sparse_times


def fourier_features(X, W, b, n_per_block: int, scaled: bool = True, out=None):
    """sqrt(2/F) cos(X W + b) with F = ``n_per_block`` (the per-block Monte Carlo size).

    ``scaled=False`` skips the constant factor (one pass less over the matrix) for callers that
    apply it to a smaller product instead. ``out``: a C-contiguous (rows, F) array to write into
    (a caller's reused buffer) instead of a new one. ``X`` may be scipy.sparse (on the host).
    """
    if is_sparse(X):
        Z = sparse_times(X, W)
        if out is not None:
            out[...] = Z
            Z = out
    elif out is None:
        Z = X @ W
    else:
        Z = (np if isinstance(out, np.ndarray) else __import__("cupy")).matmul(X, W, out=out)
    xp = np if isinstance(Z, np.ndarray) else __import__("cupy")
    c = math.sqrt(2.0 / n_per_block) if scaled else None

    if _fused.cos_features(Z, b, 1.0 if c is None else c, xp):  # one pass on a GPU
        return Z

    def finish(T, lo, hi):  # + b, cos, scale: one pass per tile (``parallel.rowwise``)
        T += b
        xp.cos(T, out=T)
        if c is not None:
            T *= c

    return rowwise(finish, Z)


def draw_block(kernel: Kernel, d: int, n_features: int, seed: int, index: int):
    """Host (W, b) of block ``index``: a pure function of (kernel, d, F, seed, index)."""
    rng = block_generator(seed, index, FOURIER)
    W = kernel.sample_frequencies(d, n_features, rng)
    b = rng.uniform(0.0, 2.0 * math.pi, n_features)
    return W, b


# Parameters kept per FourierBlocks: a fixed amount in host memory, a share of the card's memory
# on a GPU. The draws are the same whatever is cached: the cache's size never changes a model.
HOST_CACHE_BYTES = 512 * 2**20
DEVICE_CACHE_SHARE = 0.125


def default_cache_bytes(xp: ModuleType) -> int:
    """``HOST_CACHE_BYTES`` for numpy; on a GPU at least that and ``DEVICE_CACHE_SHARE`` of the
    device's memory."""
    if xp is np:
        return HOST_CACHE_BYTES
    try:
        total = int(xp.cuda.Device().mem_info[1])
    except (AttributeError, RuntimeError):
        return HOST_CACHE_BYTES
    return max(HOST_CACHE_BYTES, int(DEVICE_CACHE_SHARE * total))


class FourierBlocks:
    """Seeded blocks of random Fourier features on one device.

    Parameters of the first ``cache_bytes`` worth of blocks (default ``default_cache_bytes``)
    are kept on the device (stacked, so a range of blocks is one slice); blocks beyond are
    regenerated on every use. The model itself never stores them: pickling drops the cache.

    The cache holds W transposed, one (F, d) row block per block, so that the W of any range of
    blocks is a contiguous (column-major) view. Sparse rows read W by input coordinate instead (a
    sparse product touches the rows of W its non-zeros name): for them a second cache of the same
    size holds W row-major, (d, blocks x F), built only when sparse rows are seen
    (``params(..., rows=True)``); both hold the same values.
    """

    def __init__(self, kernel: Kernel, n_features_in: int, block_size: int, seed: int,
                 xp: ModuleType = np, dtype=np.float64, cache_bytes: int | None = None):
        self.kernel = kernel
        self.d = int(n_features_in)
        self.F = int(block_size)
        self.seed = int(seed)
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self.cache_bytes = None if cache_bytes is None else int(cache_bytes)
        self._size_cache()
        self._W = None
        self._b = None
        self._n_cached = 0
        self._Wr = None  # the row-major cache (sparse rows)
        self._br = None
        self._n_row_cached = 0
        # one model may predict from several threads at once (dask workers of one process): the
        # cache is swapped while it grows, so readers and the grower take turns
        self._lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_W=None, _b=None, _n_cached=0, _Wr=None, _br=None, _n_row_cached=0,
                     xp=None)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.xp = np
        self._lock = threading.Lock()
        self._size_cache()

    def to(self, xp: ModuleType) -> FourierBlocks:
        """Move to another array namespace (drops the cache)."""
        with self._lock:
            self.xp = xp
            self._W, self._b, self._n_cached = None, None, 0
            self._Wr, self._br, self._n_row_cached = None, None, 0
            self._size_cache()
        return self

    def _size_cache(self) -> None:
        per_block = (self.d + 1) * self.F * self.dtype.itemsize
        budget = default_cache_bytes(self.xp) if self.cache_bytes is None else self.cache_bytes
        self.max_cached = max(1, int(budget // per_block))

    def _host_blocks(self, lo: int, hi: int):
        Ws, bs = zip(*(draw_block(self.kernel, self.d, self.F, self.seed, j) for j in range(lo, hi)),
                     strict=True)
        return np.concatenate(Ws, axis=1), np.concatenate(bs)

    def _extend_cache(self, hi: int):
        """Grow the cache to blocks 0..hi-1: one new array, the old blocks copied in and each
        new block drawn and cast straight into its slice (the same values as drawing them all in
        float64 and concatenating, without those two temporaries)."""
        xp, F, lo = self.xp, self.F, self._n_cached
        Wt = xp.empty((hi * F, self.d), dtype=self.dtype)  # W transposed: a block is F rows
        b = xp.empty(hi * F, dtype=self.dtype)
        if self._W is not None:
            Wt[: lo * F], b[: lo * F] = self._W, self._b
        self._W = self._b = None  # the old cache goes before the new blocks are drawn
        for j in range(lo, hi):
            Wj, bj = draw_block(self.kernel, self.d, F, self.seed, j)
            Wt[j * F : (j + 1) * F] = xp.asarray(np.ascontiguousarray(Wj.T), dtype=self.dtype)
            b[j * F : (j + 1) * F] = xp.asarray(bj, dtype=self.dtype)
        self._W, self._b = Wt, b
        self._n_cached = hi

    def _extend_row_cache(self, hi: int):
        """Grow the row-major cache to blocks 0..hi-1 (as ``_extend_cache``, W untransposed)."""
        xp, F, lo = self.xp, self.F, self._n_row_cached
        W = xp.empty((self.d, hi * F), dtype=self.dtype)
        b = xp.empty(hi * F, dtype=self.dtype)
        if self._Wr is not None:
            W[:, : lo * F], b[: lo * F] = self._Wr, self._br
        self._Wr = self._br = None
        for j in range(lo, hi):
            Wj, bj = draw_block(self.kernel, self.d, F, self.seed, j)
            W[:, j * F : (j + 1) * F] = xp.asarray(Wj, dtype=self.dtype)
            b[j * F : (j + 1) * F] = xp.asarray(bj, dtype=self.dtype)
        self._Wr, self._br = W, b
        self._n_row_cached = hi

    def params(self, lo: int, hi: int, rows: bool = False):
        """Stacked (W, b) of blocks lo..hi-1 on the device: shapes (d, (hi-lo) F) and ((hi-lo) F,);
        W is contiguous (column-major when it comes from the cache), never a strided view.
        ``rows=True`` (sparse rows): W's rows are contiguous runs of its (hi-lo) F features
        (a column slice of the row-major cache, or C-ordered)."""
        if rows and hi <= self.max_cached:
            with self._lock:
                if hi > self._n_row_cached:
                    self._extend_row_cache(min(self.max_cached, max(hi, 2 * self._n_row_cached)))
                W, b = self._Wr, self._br
            return W[:, lo * self.F : hi * self.F], b[lo * self.F : hi * self.F]
        if hi <= self.max_cached:
            W, b = self._cached(hi)
            return W[lo * self.F : hi * self.F].T, b[lo * self.F : hi * self.F]
        W, b = self._host_blocks(lo, hi)
        return self.xp.asarray(W, dtype=self.dtype), self.xp.asarray(b, dtype=self.dtype)

    def _cached(self, hi: int):
        """The cache (W transposed, b) holding at least blocks 0..hi-1 (hi <= ``max_cached``)."""
        with self._lock:
            if hi > self._n_cached:
                # grow geometrically so that DSG's one-block-per-iteration growth is amortised
                self._extend_cache(min(self.max_cached, max(hi, 2 * self._n_cached)))
            return self._W, self._b

    def weighted_sum(self, X, ks, coefs, limits, out) -> bool:
        """out[i] += sum_e [i < limits[e]] cos(x_i W_k + b_k) coefs[e], k = ks[e] (block k's
        features without their factor sqrt(2/F); coefs: (E, F, C) or E arrays (F, C)), on a GPU in one kernel
        that never forms the feature matrix (``_fused.fourier_sum``). Returns False, having done
        nothing, where that kernel does not apply (numpy, sparse X, d > 64, C > 16, a block
        beyond the parameter cache): the caller then forms the features."""
        if self.xp is np or is_sparse(X) or len(ks) == 0:
            return False
        hi = int(max(ks)) + 1
        if hi > self.max_cached or not _fused.fourier_sum_applies(X, out, self.xp):
            return False
        W, b = self._cached(hi)
        if isinstance(coefs, (list, tuple)):
            coefs = self.xp.stack(coefs)
        return _fused.fourier_sum(X, W, b, self.F, ks, coefs, limits, out, self.xp)

    @property
    def scale(self) -> float:
        """The factor sqrt(2/F) that ``features(..., scaled=False)`` leaves out."""
        return math.sqrt(2.0 / self.F)

    def features(self, X, lo: int, hi: int | None = None, scaled: bool = True):
        """Features of blocks lo..hi-1 (default: block lo alone) for rows X: (n, (hi-lo) F)."""
        hi = lo + 1 if hi is None else hi
        W, b = self.params(lo, hi, rows=is_sparse(X))
        return fourier_features(X, W, b, self.F, scaled=scaled)

    def group_size(self, n_rows: int, budget_bytes: int = 64 * 2**20) -> int:
        """How many blocks to stack per product so the (n_rows, g F) feature matrix fits the budget."""
        return max(1, int(budget_bytes // max(1, n_rows * self.F * self.dtype.itemsize)))
