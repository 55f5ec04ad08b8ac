"""Data-driven defaults for the kernel bandwidth and the regulariser (``bandwidth="auto"``,
``reg="auto"``).

Every estimator solves min_f (nu/2) ||f||_H^2 + (1/n) sum_i loss(f(x_i), y_i); ``select`` picks
sigma and alpha = n nu by one rule:

* a seeded subsample of at most ``n_fit + n_val`` training rows is split in two; exact kernel ridge
  regression (on one-hot / {-1, +1} targets for classification) is fitted on the first part for
  every (sigma, alpha) of the grid and scored on the second (classification error; regression MSE);
* sigma = median * ``SIGMA_FACTORS`` (the median heuristic of Dai, Xie, He, Liang, Raj, Balcan,
  Song, Scalable Kernel Methods via Doubly Stochastic Gradients, NIPS 2014), alpha in ``ALPHAS``;
  the full fit then uses nu = alpha / n;
* ties within the score's resolution (one validation row; 1 % of the MSE) go to the larger sigma,
  then the larger alpha;
* below ``MIN_ROWS`` rows, or with one class in the fit part: the median and ``FALLBACK_ALPHA``.
"""

from __future__ import annotations

import numpy as np

from ..backend import is_sparse, to_numpy
from ..budget import release_freed_memory
from ..stream import check_finite_rows, iter_row_chunks, take_rows
from .bandwidth import median_bandwidth, resolve_bandwidth
from .shift_invariant import make_kernel

SIGMA_FACTORS = (1.0, 2**-0.5, 0.5, 2**-1.5)
ALPHAS = (10.0, 1.0, 0.1, 0.01)
MIN_ROWS = 100
FALLBACK_ALPHA = 1.0


def _classes(Y: np.ndarray) -> np.ndarray:
    """Class index per row: ``Y`` 1-D integers are the class indices themselves; else encoded
    targets, one {-1, +1} column (two classes) or one column per class ({-1, +1} one-vs-all or
    0/1 one-hot)."""
    Y = np.asarray(Y)
    if Y.ndim == 1 and np.issubdtype(Y.dtype, np.integer):
        return Y.astype(np.int64)
    Y = Y.reshape(len(Y), -1)
    return (Y[:, 0] > 0).astype(np.int64) if Y.shape[1] == 1 else Y.argmax(axis=1)


def _targets(Y, classify: bool) -> np.ndarray:
    """Targets of the ridge proxy: centred values (regression), +-1 one-vs-all (classes)."""
    if not classify:
        Y = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1)
        return Y - Y.mean(axis=0)
    idx = _classes(Y)
    T = -np.ones((len(idx), max(2, int(idx.max()) + 1)))
    T[np.arange(len(idx)), idx] = 1.0
    return T


def select(X, Y, kernel: str, classify: bool, seed: int = 0, bandwidth="auto", alpha=None,
           n_fit: int = 1000, n_val: int = 1000) -> tuple[float, float]:
    """(sigma, alpha) by the rule of the module docstring. ``bandwidth`` other than "auto" (a
    number, "median", "median*f") is resolved and kept, ``alpha`` (= n nu) other than None kept.
    ``Y``: regression targets, or classes (1-D integer indices or encoded targets, ``_classes``).
    ``X``: any row-indexable array (numpy, cupy, zarr, dask, scipy.sparse); only the sample's
    rows of X and Y are read (sparse rows stay sparse)."""
    n = int(X.shape[0])
    metric = make_kernel(kernel, 1.0).metric
    fixed_sigma = None if bandwidth == "auto" else resolve_bandwidth(bandwidth, X, metric, seed=seed)
    fixed_alpha = None if alpha is None else float(alpha)
    if fixed_sigma is not None and fixed_alpha is not None:
        return fixed_sigma, fixed_alpha
    rng = np.random.default_rng([int(seed) % 2**63, 0x5E1EC7])
    m = min(n, n_fit + n_val)
    idx = np.sort(rng.choice(n, size=m, replace=False))
    Xs = take_rows(X, idx)
    Xs = Xs.astype(np.float64) if is_sparse(Xs) else np.asarray(to_numpy(Xs), dtype=np.float64)
    if not np.isfinite(Xs.data if is_sparse(Xs) else Xs).all():  # name the first bad row of X
        for lo, block in iter_row_chunks(X, 65536):
            check_finite_rows(to_numpy(block), lo, "X")  # as the solvers' reads do
    T = _targets(np.asarray(Y)[idx], classify)
    median = median_bandwidth(Xs, metric=metric, seed=seed) if fixed_sigma is None else None
    n_tr = m - min(n_val, m // 2)
    perm = rng.permutation(m)
    tr, va = perm[:n_tr], perm[n_tr:]
    if m < MIN_ROWS or (classify and len(np.unique(T[tr].argmax(axis=1))) < 2):
        return (fixed_sigma or median), (fixed_alpha or FALLBACK_ALPHA)
    sigmas = [fixed_sigma] if fixed_sigma is not None else [median * f for f in SIGMA_FACTORS]
    alphas = [fixed_alpha] if fixed_alpha is not None else list(ALPHAS)
    # alpha = n nu holds for the proxy's n_tr rows as for the full fit; each matrix is dropped
    # before the next is made
    Xtr, Xva = Xs[tr], Xs[va]
    del Xs
    Ttr, Tva = T[tr], T[va]
    release_freed_memory()  # the sample's decoded chunks and the median's distances
    results = []
    for si, sigma in enumerate(sigmas):
        k = make_kernel(kernel, sigma)
        w, V = np.linalg.eigh(np.asarray(to_numpy(k(Xtr)), dtype=np.float64))
        np.maximum(w, 0.0, out=w)
        KvV = np.asarray(to_numpy(k(Xva, Xtr)), dtype=np.float64) @ V
        VtY = V.T @ Ttr
        del V
        for ai, alpha in enumerate(alphas):
            F = KvV @ (VtY / (w + alpha)[:, None])
            err = F.argmax(axis=1) != Tva.argmax(axis=1) if classify else (F - Tva) ** 2
            results.append((float(np.mean(err)), si, ai))
        del KvV
    release_freed_memory()
    best = min(r[0] for r in results)
    # resolution of the validation score: one misclassified row, or 1 % of the MSE
    tol = (1.0 / len(va)) if classify else 0.01 * best
    ok = [r for r in results if r[0] <= best + tol]
    _, si, ai = min(ok, key=lambda r: (r[1], r[2]))  # earliest = widest sigma, largest alpha
    return float(sigmas[si]), float(alphas[ai])


def transient_bytes(n_features: int, n_fit: int = 1000, n_val: int = 1000) -> int:
    """Peak memory ``select`` adds while it runs, freed when it returns: five ``n_fit`` x ``n_fit``
    float64 matrices (the kernel matrix, numpy's eigh's copy of it, its eigenvectors and its
    workspace of two more) and the float64 sample with its train / validation copies."""
    return 8 * (5 * int(n_fit) ** 2 + 2 * (int(n_fit) + int(n_val)) * int(n_features))


__all__ = ["ALPHAS", "SIGMA_FACTORS", "select", "transient_bytes"]
