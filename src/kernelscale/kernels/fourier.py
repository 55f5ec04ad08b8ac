"""Random Fourier feature blocks regenerated from (seed, block index).

A block j is F frequencies W_j (d x F) and phases b_j (F,) drawn by ``rng.block_generator(seed, j, rng.FOURIER)``;
its features are phi_j(x) = sqrt(2/F) cos(W_j^T x + b_j), so phi_j(x).phi_j(x') estimates k(x, x')
with F samples (Rahimi, Recht, Random Features for Large-Scale Kernel Machines, NIPS 2007).
Rows X may be sparse (CSR): scipy.sparse on the host, cupyx.scipy.sparse on the GPU
(``shift_invariant.sparse_times``).
"""

from __future__ import annotations

import math
import threading
from types import ModuleType

import numpy as np

from ..backend import array_namespace, is_sparse
from ..parallel import rowwise
from ..rng import FOURIER, block_generator
from . import _fused
from .shift_invariant import Kernel, sparse_times

HOST_CACHE_BYTES = 512 * 2**20  # parameters cached per FourierBlocks (never changes a model)
DEVICE_CACHE_SHARE = 0.125  # on a GPU: at least this share of its memory


def fourier_features(X, W, b, n_per_block: int, scaled: bool = True, out=None):
    """sqrt(2/F) cos(X W + b) with F = ``n_per_block`` (the per-block Monte Carlo size);
    ``scaled=False``: without the factor. ``out``: a C-contiguous (rows, F) array to write into
    instead of a new one. ``X`` may be sparse (scipy on the host, cupyx on the GPU)."""
    if is_sparse(X):
        Z = sparse_times(X, W)
        if out is not None:
            out[...] = Z
            Z = out
    else:
        Z = X @ W if out is None else array_namespace(out).matmul(X, W, out=out)
    xp = array_namespace(Z)
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
    return W, rng.uniform(0.0, 2.0 * math.pi, n_features)


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
    are kept on the device, W transposed (one (F, d) row block per block), so that the W of any
    range of blocks is one contiguous (column-major) slice; blocks beyond are regenerated on every
    use. Sparse rows on the host get a second cache of the same values with W row-major, built
    only when they are seen (``params(..., rows=True)``). Pickling and ``to`` drop the caches.
    """

    def __init__(self, kernel: Kernel, n_features_in: int, block_size: int, seed: int,
                 xp: ModuleType = np, dtype=np.float64, cache_bytes: int | None = None):
        self.kernel = kernel
        self.d, self.F, self.seed = int(n_features_in), int(block_size), int(seed)
        self.dtype = np.dtype(dtype)
        self.cache_bytes = None if cache_bytes is None else int(cache_bytes)
        # one model may predict from several threads at once (dask workers of one process)
        self._lock = threading.Lock()
        self.to(xp)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_W=None, _b=None, _Wr=None, _br=None, xp=None)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self.to(np)

    def to(self, xp: ModuleType) -> FourierBlocks:
        """Move to another array namespace (drops the caches)."""
        with self._lock:
            self.xp = xp
            self._W = self._b = self._Wr = self._br = None  # _Wr, _br: the sparse rows' cache
            self._size_cache()
        return self

    def _size_cache(self) -> None:
        per_block = (self.d + 1) * self.F * self.dtype.itemsize
        budget = default_cache_bytes(self.xp) if self.cache_bytes is None else self.cache_bytes
        self.max_cached = max(1, int(budget // per_block))

    def params(self, lo: int, hi: int, rows: bool = False):
        """Stacked (W, b) of blocks lo..hi-1 on the device: shapes (d, (hi-lo) F) and ((hi-lo) F,);
        W is contiguous (column-major when it comes from the cache), never a strided view.
        ``rows=True`` (sparse rows): on the host W's rows are contiguous runs of its (hi-lo) F
        features (a column slice of the row-major cache, or C-ordered); on a GPU as without."""
        rows = rows and self.xp is np
        if hi <= self.max_cached:
            W, b = self._cached(hi, rows)
            return W[lo * self.F : hi * self.F].T, b[lo * self.F : hi * self.F]
        Ws, bs = zip(*(draw_block(self.kernel, self.d, self.F, self.seed, j) for j in range(lo, hi)),
                     strict=True)
        return (self.xp.asarray(np.concatenate(Ws, axis=1), dtype=self.dtype),
                self.xp.asarray(np.concatenate(bs), dtype=self.dtype))

    def _cached(self, hi: int, rows: bool = False):
        """The cache (W transposed, (blocks F, d), C-ordered; ``rows``: F-ordered, and b) of at
        least blocks 0..hi-1 (hi <= ``max_cached``), grown at least twofold when it is short: the
        old blocks copied into new arrays, each new block drawn and cast into its slice."""
        names, order = (("_Wr", "_br"), "F") if rows else (("_W", "_b"), "C")
        with self._lock:
            n = 0 if getattr(self, names[1]) is None else len(getattr(self, names[1])) // self.F
            if hi > n:
                xp, F, hi = self.xp, self.F, min(self.max_cached, max(hi, 2 * n))
                Wt = xp.empty((hi * F, self.d), dtype=self.dtype, order=order)
                b = xp.empty(hi * F, dtype=self.dtype)
                if n:
                    Wt[: n * F], b[: n * F] = getattr(self, names[0]), getattr(self, names[1])
                vars(self).update(dict.fromkeys(names))  # the old cache goes before the draws
                for j in range(n, hi):
                    Wj, bj = draw_block(self.kernel, self.d, F, self.seed, j)
                    Wt[j * F : (j + 1) * F] = xp.asarray(np.asarray(Wj.T, order=order),
                                                         dtype=self.dtype)
                    b[j * F : (j + 1) * F] = xp.asarray(bj, dtype=self.dtype)
                vars(self).update(zip(names, (Wt, b), strict=True))
            return getattr(self, names[0]), getattr(self, names[1])

    def weighted_sum(self, X, ks, coefs, limits, out) -> bool:
        """out[i] += sum_e [i < limits[e]] cos(x_i W_k + b_k) coefs[e], k = ks[e] (block k's
        features without their factor sqrt(2/F); coefs: (E, F, C) or E arrays (F, C)), on a GPU
        in one kernel (``_fused.fourier_sum``). False, having done nothing, where that does not
        apply (numpy, sparse X, d > 64, C > 16, a block beyond the parameter cache)."""
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
        """Blocks g per product for an (n_rows, g F) feature matrix within ``budget_bytes``."""
        return max(1, int(budget_bytes // max(1, n_rows * self.F * self.dtype.itemsize)))
