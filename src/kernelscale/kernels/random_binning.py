"""Random Binning (RB) features: Wu, Chen, Yen, Yan, *Revisiting Random Binning Features*, KDD 2016,
Algorithm 1 (originally Rahimi, Recht, Random Features for Large-Scale Kernel Machines, NIPS 2007).

For a kernel k(x, x') = prod_j k_j(|x_j - x'_j|) with k_j'' >= 0, grid r draws per dimension j a
width delta_rj ~ p_j(delta) ∝ delta k_j''(delta) and an offset u_rj ~ U[0, delta_rj); point x falls in
bin b_r(x) = (floor((x_1 - u_r1)/delta_r1), ..., floor((x_d - u_rd)/delta_rd)). The probability that
two points share a bin is k(x, x') (the paper's eq. 7), so with z(x) = the one-hot bin indicators of
R grids, concatenated and scaled by 1/sqrt(R), <z(x), z(x')> is an unbiased estimate of k(x, x').

* Grid r's widths and offsets are a pure function of (seed, r) (``rng.block_generator``, stream
  ``rng.RB_GRIDS``); nothing random is pickled.
* Each grid hashes the bin vector b_r(x) to 64 bits with a seeded chain h <- mix64(h xor b_j)
  (mix64: the splitmix64 finaliser).
* The fitted vocabulary is, per grid, the sorted unique hashes seen in training; grid r owns the
  columns offsets[r] .. offsets[r+1]-1, so every training row has exactly R distinct non-zeros.
* ``rows`` (``fit_transform`` / ``transform``; e.g. ``spread.ClusterRows``): the row blocks are
  hashed by ``rows.map``, in row order, and looked up here; None: hashed in this process.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
import scipy.sparse as sp

from ..backend import is_cupy
from ..rng import RB_GRIDS, block_generator
from ..stream import check_finite_rows, iter_row_chunks
from .shift_invariant import check_bandwidth

DEFAULT_CHUNK_ROWS = 65536
# widths delta ~ p(delta) ∝ delta k''(delta): (rng, d, sigma) -> (d,); Laplacian exp(-t/sigma):
# delta exp(-delta/sigma) / sigma^2 = Gamma(shape 2, scale sigma)
RB_KERNELS = {"laplacian": lambda rng, d, sigma: rng.gamma(2.0, sigma, size=d)}


def check_rb_kernel(kernel) -> str:
    """Lower-cased kernel name if random binning supports it, else a one-line ValueError."""
    if not isinstance(kernel, str) or kernel.lower() not in RB_KERNELS:
        raise ValueError(f"unknown kernel {kernel!r} for random binning; choose one of {sorted(RB_KERNELS)}")
    return kernel.lower()


def draw_grid(kernel: str, d: int, sigma: float, seed: int, r: int):
    """(delta (d,), u (d,), hash seed) of grid ``r``: a pure function of (kernel, d, sigma, seed, r)."""
    rng = block_generator(seed, r, RB_GRIDS)
    delta = RB_KERNELS[check_rb_kernel(kernel)](rng, d, sigma)
    u = rng.uniform(0.0, 1.0, size=d) * delta  # u ~ U[0, delta)
    return delta, u, np.uint64(rng.integers(0, 2**63 - 1, dtype=np.int64))


# -- numba kernels -----------------------------------------------------------------------------------
@numba.njit(inline="always")
def _mix64(z):  # the splitmix64 finaliser
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(parallel=True, cache=True, nogil=True)
def _hash_bins(X, delta, u, hseed):
    """H[i, r] = hash of grid r's bin of row i (X float64 (n, d); delta, u (R, d))."""
    n, d = X.shape
    R = delta.shape[0]
    H = np.empty((n, R), dtype=np.uint64)
    for i in numba.prange(n):
        for r in range(R):
            h = hseed[r]
            for j in range(d):
                b = np.int64(math.floor((X[i, j] - u[r, j]) / delta[r, j]))
                h = _mix64(h ^ np.uint64(b))
            H[i, r] = h
    return H


@numba.njit(parallel=True, cache=True, nogil=True)
def _lookup(H, keys, offsets):
    """Column of each (row, grid) hash in the fitted vocabulary, -1 for a bin unseen in training."""
    n, R = H.shape
    cols = np.empty((n, R), dtype=np.int64)
    for i in numba.prange(n):
        for r in range(R):
            lo = offsets[r]
            hi = offsets[r + 1]
            h = H[i, r]
            while lo < hi:  # lower bound of h in keys[lo:hi]
                mid = (lo + hi) // 2
                if keys[mid] < h:
                    lo = mid + 1
                else:
                    hi = mid
            cols[i, r] = lo if (lo < offsets[r + 1] and keys[lo] == h) else -1
    return cols


# -- the feature map -----------------------------------------------------------------------------------
class RandomBinning:
    """Random Binning feature map (Alg. 1) of ``kernel`` (one of ``RB_KERNELS``) with bandwidth
    sigma > 0 over R = ``n_grids`` grids, grid r drawn from (``seed``, r), with a vocabulary of
    bins fitted on training data. Fitted attributes: ``keys_`` (D,) uint64 sorted per grid,
    ``offsets_`` (R+1,) int64, ``n_features_out_`` = D, ``kappa_`` = D / R (mean non-empty bins
    per grid)."""

    def __init__(self, kernel: str = "laplacian", bandwidth: float = 1.0, n_grids: int = 256,
                 seed: int = 0):
        self.kernel = check_rb_kernel(kernel)
        bandwidth = check_bandwidth(bandwidth)
        if int(n_grids) < 1:
            raise ValueError(f"n_grids={n_grids!r} must be >= 1")
        self.bandwidth = bandwidth
        self.n_grids = int(n_grids)
        self.seed = int(seed)
        self._grids = None

    def __getstate__(self):
        return {**self.__dict__, "_grids": None}

    def grids(self, d: int):
        """Grid parameters (delta (R, d), u (R, d), hash seeds (R,) uint64) for d dimensions,
        drawn once and cached (never pickled)."""
        if self._grids is None or self._grids[0].shape[1] != d:
            deltas, us, hs = zip(*(draw_grid(self.kernel, d, self.bandwidth, self.seed, r)
                                   for r in range(self.n_grids)), strict=True)
            self._grids = np.stack(deltas), np.stack(us), np.array(hs, dtype=np.uint64)
        return self._grids

    def hashes(self, X) -> np.ndarray:
        """(n, R) uint64 bin hashes of in-memory rows X (computed in float64, so that float32
        and float64 copies of the same data bin identically)."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        return _hash_bins(X, *self.grids(X.shape[1]))

    def _iter_hashes(self, X, chunk_rows: int, check_finite: bool, rows=None):
        fn = functools.partial(_block_hashes, *self.grids(int(X.shape[1])), check_finite)
        if rows is not None and not is_cupy(X):
            yield from rows.map(fn, X, chunk_rows=chunk_rows)  # in row order
            return
        for lo, block in iter_row_chunks(X, chunk_rows):
            yield fn(block.get() if is_cupy(block) else block, lo=lo)

    def fit_transform(self, X, chunk_rows: int = DEFAULT_CHUNK_ROWS, check_finite: bool = True,
                      rows=None):
        """Fit the bin vocabulary on X in one pass (``chunk_rows`` rows at a time, the (n, R)
        hashes kept) and return its CSR Z (``rows``: see the module docstring)."""
        H = np.concatenate(list(self._iter_hashes(X, chunk_rows, check_finite, rows)), axis=0)
        self.fit_vocabulary([np.unique(H[:, r]) for r in range(self.n_grids)], int(X.shape[1]))
        cols = _lookup(H, self.keys_, self.offsets_)
        del H
        return columns_csr(cols, self.n_grids, self.n_features_out_)

    def fit_vocabulary(self, uniques: list[np.ndarray], n_features_in: int) -> None:
        """Set the vocabulary: ``uniques[r]`` = grid r's sorted unique training hashes."""
        self.offsets_ = np.zeros(self.n_grids + 1, dtype=np.int64)
        self.offsets_[1:] = np.cumsum([len(k) for k in uniques])
        self.keys_ = np.concatenate(uniques)
        self.n_features_out_ = int(self.offsets_[-1])
        self.kappa_ = self.n_features_out_ / self.n_grids
        self.n_features_in_ = int(n_features_in)

    def transform(self, X, chunk_rows: int = DEFAULT_CHUNK_ROWS, check_finite: bool = True,
                  rows=None):
        """CSR features of X with the fitted vocabulary; bins unseen in training give zeros
        (``rows``: see the module docstring)."""
        if not hasattr(self, "keys_"):
            raise ValueError("RandomBinning is not fitted; call fit_transform first")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, expected {self.n_features_in_}")
        return self.transform_hashes(self._iter_hashes(X, chunk_rows, check_finite, rows))

    def transform_hashes(self, H) -> sp.csr_matrix:
        """CSR features, with the fitted vocabulary, of rows with bin hashes H (n, R)
        (``hashes``), or of the row blocks of an iterable of such H, stacked."""
        if isinstance(H, np.ndarray):
            return columns_csr(_lookup(H, self.keys_, self.offsets_), self.n_grids,
                               self.n_features_out_)
        parts = [self.transform_hashes(h) for h in H]
        return sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]


def columns_csr(cols: np.ndarray, n_grids: int, n_features_out: int) -> sp.csr_matrix:
    """CSR features from (n, R) columns (-1 = unseen bin); columns ascend within a row by
    construction. Each non-zero is 1 / sqrt(R)."""
    n, R = cols.shape
    scale = 1.0 / math.sqrt(n_grids)
    idx_dtype = np.int32 if n_features_out < 2**31 and n * R < 2**31 else np.int64
    seen = cols >= 0
    if seen.all():
        indptr = np.arange(0, n * R + 1, R, dtype=idx_dtype)
        indices = cols.ravel().astype(idx_dtype)
    else:
        indptr = np.zeros(n + 1, dtype=idx_dtype)
        np.cumsum(seen.sum(axis=1), out=indptr[1:])
        indices = cols[seen].astype(idx_dtype)
    data = np.full(indices.shape[0], scale)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n_features_out))


def _block_hashes(delta, u, hseed, check_finite: bool, block, lo: int):
    """Hashes of one host row block whose first row is row ``lo`` of X (``check_finite``: a
    one-line error naming a bad row)."""
    block = np.asarray(block)
    if check_finite:
        check_finite_rows(block, lo, "X")
    return _hash_bins(np.ascontiguousarray(block, dtype=np.float64), delta, u, hseed)


def rb_kernel_estimate(X, Y=None, *, kernel="laplacian", bandwidth=1.0, n_grids=256, seed=0):
    """The RB estimate of the kernel matrix: the fraction of the R grids in which x and y share a
    bin (<z(x), z(y)> for rows of the training set)."""
    rb = RandomBinning(kernel, bandwidth, n_grids, seed)
    HX = rb.hashes(X)
    HY = HX if Y is None else rb.hashes(Y)
    K = np.zeros((HX.shape[0], HY.shape[0]))
    for r in range(n_grids):
        K += HX[:, r, None] == HY[None, :, r]
    return K / n_grids
