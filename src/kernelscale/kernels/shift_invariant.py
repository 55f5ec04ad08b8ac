"""Shift-invariant kernels with exact evaluation and their spectral (Bochner) samplers.

k(x, x') = E_w[ 2 cos(w.x + b) cos(w.x' + b) ], w ~ p(w), b ~ U[0, 2 pi)  (Rahimi, Recht, Random
Features for Large-Scale Kernel Machines, NIPS 2007; Dai, Xie, He, Liang, Raj, Balcan, Song,
Scalable Kernel Methods via Doubly Stochastic Gradients, NIPS 2014, Table 1). Every kernel is
normalised so that k(x, x) = 1.

Either argument may be a scipy.sparse matrix (CSR) on the host, or a cupyx.scipy.sparse one on
the GPU: squared Euclidean distances are ||x||^2 + ||y||^2 - 2 x.y from one sparse product (the
Gaussian and Matérn kernels never densify the rows); the per-coordinate kernels (Laplacian,
Cauchy) densify one row chunk at a time.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse

from ..backend import array_namespace, is_sparse
from ..parallel import rowwise
from . import _fused

_BROADCAST_BYTES = 64 * 2**20  # bound on the temporaries of one row chunk's products


def sparse_times(X, W) -> np.ndarray:
    """X W, C-ordered, for scipy.sparse X and a dense host W of any memory layout: W as it is
    when C-ordered, else only the rows of W that X's stored columns name, gathered (W copied whole
    once where they are most of a column-major W); for cupyx.scipy.sparse X and a cupy W, one
    cuSPARSE product on the device."""
    X = X.tocsr()
    if not scipy.sparse.issparse(X):
        return array_namespace(W).ascontiguousarray(X @ W)
    if W.flags.c_contiguous:
        return np.ascontiguousarray(X @ W)
    cols, inv = np.unique(X.indices, return_inverse=True)
    if W.strides[1] != W.itemsize and 2 * len(cols) > W.shape[0]:
        return np.ascontiguousarray(X @ np.ascontiguousarray(W))
    Xc = scipy.sparse.csr_matrix((X.data, inv.reshape(-1), X.indptr), shape=(X.shape[0], len(cols)))
    return np.ascontiguousarray(Xc @ np.ascontiguousarray(W[cols]))


def _row_norms(A):
    """||a||^2 of every row of A (numpy / cupy, or sparse: from its stored values)."""
    if is_sparse(A):
        return array_namespace(A).asarray(A.multiply(A).sum(axis=1), dtype=A.dtype).reshape(-1)
    return (A * A).sum(axis=1)


def _sparse_gram(X, Y):
    """X Y^T as a dense C-ordered array (host, or device for cupyx) where X or Y is sparse
    (CSR); for two sparse arguments, by row blocks of the larger one (about ``_BROADCAST_BYTES``
    of values each)."""
    n, m, xp = X.shape[0], Y.shape[0], array_namespace(X, Y)
    if not (is_sparse(X) and is_sparse(Y)):
        if is_sparse(X):
            return sparse_times(X, Y.T)
        return xp.ascontiguousarray(sparse_times(Y, X.T).T)
    G = xp.empty((n, m), dtype=np.result_type(X.dtype, Y.dtype))
    big, small, by_rows = (X, Y, True) if n >= m else (Y, X, False)
    small_t = small.T.tocsr()
    step = max(1, _BROADCAST_BYTES // max(1, 16 * small.shape[0]))
    for lo in range(0, big.shape[0], step):
        part = (big[lo:lo + step] @ small_t).toarray()
        if by_rows:
            G[lo:lo + step] = part
        else:
            G[:, lo:lo + step] = part.T
    return G


def _sq_euclidean(X, Y, xp, exp_scale=None):
    """||x - y||^2 for all pairs (clipped at 0 against cancellation) from one product X Y^T and
    one pass over its tiles (``parallel.rowwise``; on a GPU ``_fused``); with ``exp_scale``,
    exp(exp_scale ||x - y||^2). X or Y may be sparse (``_sparse_gram``)."""
    xx, yy = _row_norms(X), _row_norms(Y)[None, :]
    G = _sparse_gram(X, Y) if is_sparse(X) or is_sparse(Y) else X @ Y.T
    if _fused.sq_distances(G, xx, yy, xp, exp_scale):
        return G

    def finish(D, lo, hi):
        D *= -2.0
        D += xx[lo:hi, None]
        D += yy
        xp.maximum(D, 0.0, out=D)
        if exp_scale is not None:
            D *= exp_scale
            xp.exp(D, out=D)

    return rowwise(finish, G)


def _broadcast_rows(X, Y, xp, fn):
    """Apply fn(X_chunk[:, None, :] - Y[None]) -> (chunk, m) over row chunks of X (sparse Y
    densified, sparse X one chunk at a time, on X's device)."""
    n, m, d = X.shape[0], Y.shape[0], X.shape[1]
    if is_sparse(Y):
        Y = Y.toarray()
    dtype = np.result_type(X.dtype, Y.dtype) if is_sparse(X) else X.dtype
    step = max(1, _BROADCAST_BYTES // max(1, m * d * np.dtype(dtype).itemsize))
    out = xp.empty((n, m), dtype=dtype)
    for s in range(0, n, step):
        rows = X[s : s + step].toarray() if is_sparse(X) else X[s : s + step]
        out[s : s + step] = fn(rows[:, None, :] - Y[None, :, :])
    return out


def check_bandwidth(bandwidth) -> float:
    """``float(bandwidth)``; a one-line ValueError unless it is positive and finite."""
    bandwidth = float(bandwidth)
    if not math.isfinite(bandwidth) or bandwidth <= 0:
        raise ValueError(f"bandwidth={bandwidth!r} must be a positive finite number")
    return bandwidth


class Kernel:
    """Base class. ``bandwidth`` is sigma in the formulas below (a positive finite number)."""

    name = "kernel"
    metric = "euclidean"  # distance the median trick uses for this kernel

    def __init__(self, bandwidth: float):
        self.bandwidth = check_bandwidth(bandwidth)

    def __repr__(self):
        return f"{type(self).__name__}(bandwidth={self.bandwidth:g})"

    def __call__(self, X, Y=None):
        """Exact kernel matrix K[i, j] = k(X[i], Y[j]) (Y None: X) in the namespace of X."""
        return self._matrix(X, X if Y is None else Y, array_namespace(X))

    def _matrix(self, X, Y, xp):  # pragma: no cover - abstract
        raise NotImplementedError

    def tile_rows(self, A):
        """Dense host rows A in the form ``tile`` takes (here: A itself)."""
        return A

    def tile(self, A_rows, C):
        """K(A, C) for ``A_rows = tile_rows(A)`` and a small dense host block C, on this
        thread (a cache-sized tile of ``solvers._common.kernel_apply``)."""
        return self._matrix(A_rows, C, np)

    def sample_frequencies(self, d: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` frequencies w ~ p(w) as a (d, n) float64 host array."""
        raise NotImplementedError  # pragma: no cover - abstract


class Gaussian(Kernel):
    """k = exp(-||x-x'||^2 / (2 sigma^2));  p(w) = N(0, sigma^-2 I)."""

    name = "gaussian"

    def _matrix(self, X, Y, xp):
        return _sq_euclidean(X, Y, xp, exp_scale=-0.5 / self.bandwidth**2)

    def tile_rows(self, A):
        """[-2s A, s ||a||^2, 1] with s = -1 / (2 sigma^2)."""
        s = -0.5 / self.bandwidth**2
        return np.hstack([(-2.0 * s) * A, s * (A * A).sum(axis=1, keepdims=True),
                          np.ones((A.shape[0], 1), dtype=A.dtype)])

    def tile(self, A_rows, C):
        """exp(min(s ||a - c||^2, 0)): for tiles of many rows, one product of ``A_rows`` with
        [C, 1, s ||c||^2] (a copy of C); for few rows (d + 2 >= 2 rows), (-2s A) C^T and the
        two norm terms added."""
        s, d = -0.5 / self.bandwidth**2, C.shape[1]
        if d + 2 < 2 * A_rows.shape[0]:
            K = A_rows @ np.hstack([C, np.ones((C.shape[0], 1), dtype=C.dtype),
                                    s * (C * C).sum(axis=1, keepdims=True)]).T
        else:
            K = A_rows[:, :d] @ C.T
            K += A_rows[:, d:d + 1]
            K += s * (C * C).sum(axis=1)
        np.minimum(K, 0.0, out=K)  # ||a - c||^2 >= 0 against cancellation
        return np.exp(K, out=K)

    def sample_frequencies(self, d, n, rng):
        return rng.standard_normal((d, n)) / self.bandwidth


class Laplacian(Kernel):
    """k = exp(-||x-x'||_1 / sigma);  p(w) = prod_j Cauchy(0, 1/sigma)."""

    name = "laplacian"
    metric = "cityblock"

    def _matrix(self, X, Y, xp):
        d1 = _broadcast_rows(X, Y, xp, lambda D: xp.abs(D).sum(axis=2))
        return xp.exp(-d1 / self.bandwidth)

    def sample_frequencies(self, d, n, rng):
        return rng.standard_cauchy((d, n)) / self.bandwidth


class Cauchy(Kernel):
    """k = prod_j 1 / (1 + (x_j - x'_j)^2 / sigma^2);  p(w) = prod_j Laplace(0, 1/sigma)."""

    name = "cauchy"

    def _matrix(self, X, Y, xp):
        s2 = self.bandwidth**2
        logk = _broadcast_rows(X, Y, xp, lambda D: xp.log1p(D * D / s2).sum(axis=2))
        return xp.exp(-logk)

    def sample_frequencies(self, d, n, rng):
        return rng.laplace(0.0, 1.0, (d, n)) / self.bandwidth


class Matern(Kernel):
    """Matérn kernel with smoothness nu in {1/2, 3/2, 5/2} and length scale sigma.

    Spectral density in angular frequency is proportional to (2 nu / sigma^2 + ||w||^2)^-(nu + d/2):
    a multivariate Student-t with 2 nu degrees of freedom and scale 1/sigma, sampled as
    w = z / sigma * sqrt(2 nu / u), z ~ N(0, I), u ~ chi^2(2 nu).
    """

    def __init__(self, bandwidth: float, nu: float = 1.5):
        super().__init__(bandwidth)
        if nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"Matern nu={nu!r} must be 0.5, 1.5 or 2.5")
        self.nu = nu
        self.name = {0.5: "matern12", 1.5: "matern32", 2.5: "matern52"}[nu]

    def __repr__(self):
        return f"Matern(bandwidth={self.bandwidth:g}, nu={self.nu})"

    def _matrix(self, X, Y, xp):
        r = xp.sqrt(_sq_euclidean(X, Y, xp)) / self.bandwidth
        if self.nu == 0.5:
            return xp.exp(-r)
        if self.nu == 1.5:
            s = math.sqrt(3.0) * r
            return (1.0 + s) * xp.exp(-s)
        s = math.sqrt(5.0) * r
        return (1.0 + s + s * s / 3.0) * xp.exp(-s)

    def sample_frequencies(self, d, n, rng):
        z = rng.standard_normal((d, n))
        u = rng.chisquare(2.0 * self.nu, size=n)
        return z * np.sqrt(2.0 * self.nu / u)[None, :] / self.bandwidth


KERNELS = {"gaussian": Gaussian, "rbf": Gaussian, "laplacian": Laplacian, "laplace": Laplacian,
           "cauchy": Cauchy, "matern12": lambda bw: Matern(bw, 0.5),
           "matern32": lambda bw: Matern(bw, 1.5), "matern52": lambda bw: Matern(bw, 2.5)}


def make_kernel(name: str, bandwidth: float) -> Kernel:
    """Kernel instance by name; one-line error for an unknown name or a bad bandwidth."""
    if not isinstance(name, str) or name.lower() not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; choose one of {sorted(KERNELS)}")
    return KERNELS[name.lower()](bandwidth)
