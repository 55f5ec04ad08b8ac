"""L1-regularised loss minimisation by parallel randomized coordinate descent (Wu, Chen, Yen, Yan,
Revisiting Random Binning Features: Fast Convergence and Strong Parallelizability, KDD 2016, §4,
Algorithm 2; eqs. 23-27).

Objective (23):  F(w) = lambda ||w||_1 + (1/N) sum_i L(w.z_i, y_i).
For coordinate j, with g_j = (1/N) sum_i L'(yhat_i, y_i) z_ij (eq. 25) and
M_j = beta (1/N) sum_i z_ij^2 (beta bounds L''), the update (eq. 26) is

    d_j = prox_{lambda/M_j}(w_j - g_j/M_j) - w_j,   prox_t(v) = sign(v) max(|v| - t, 0),

and the responses yhat = Z w are kept up to date (eq. 27), so one coordinate costs O(nnz(z_j)).
beta: square loss 1/2 (u-y)^2 -> 1; logistic log(1+e^{-yu}) -> 1/4; squared hinge
max(0, 1-yu)^2 -> 2 (the losses of ``kernelscale.losses``).

Parallelism (the "tau threads" of Alg. 2): each epoch draws a seeded random permutation of the D
coordinates and splits it into tau contiguous slices that tau numba threads update at the same
time without locks (each w_j written only by its owner; the responses yhat shared, and recomputed
as Z w after every epoch when tau > 1). tau = 1 is deterministic; tau > 1 is not bit-reproducible
(thread interleaving) but converges to the same objective.

Stopping: relative decrease of F over an epoch below ``tol``, or ``max_iter`` epochs.
"""

from __future__ import annotations

import time

import numba
import numpy as np
import scipy.sparse as sp

from ..losses import make_loss
from ..rng import RB_CD_ORDER, block_generator

CD_LOSSES = {"square": 0, "logistic": 1, "squared_hinge": 2}
_BETA = {"square": 1.0, "logistic": 0.25, "squared_hinge": 2.0}


@numba.njit(inline="always")
def _dloss(u, y, code):
    if code == 0:
        return u - y
    if code == 1:
        # -y sigmoid(-y u), via tanh for stability
        return -y * 0.5 * (1.0 - np.tanh(0.5 * y * u))
    m = 1.0 - y * u
    return -2.0 * y * m if m > 0.0 else 0.0


@numba.njit(parallel=True, nogil=True, cache=True)
def _cd_epoch(indptr, indices, data, y, yhat, w, M, perm, lam, inv_n, code, n_threads):
    """One pass over the coordinates in ``perm``, split into ``n_threads`` parallel slices.

    Returns the largest |d_j| applied (for diagnostics)."""
    D = perm.shape[0]
    step = (D + n_threads - 1) // n_threads
    biggest = np.zeros(n_threads)
    for t in numba.prange(n_threads):
        lo = t * step
        hi = min(D, lo + step)
        for k in range(lo, hi):
            j = perm[k]
            Mj = M[j]
            if Mj <= 0.0:
                continue
            g = 0.0
            for p in range(indptr[j], indptr[j + 1]):
                i = indices[p]
                g += _dloss(yhat[i], y[i], code) * data[p]
            g *= inv_n
            v = w[j] - g / Mj
            thr = lam / Mj
            if v > thr:
                new = v - thr
            elif v < -thr:
                new = v + thr
            else:
                new = 0.0
            d = new - w[j]
            if d != 0.0:
                w[j] = new
                for p in range(indptr[j], indptr[j + 1]):
                    yhat[indices[p]] += d * data[p]
                if abs(d) > biggest[t]:
                    biggest[t] = abs(d)
    return biggest.max()


@numba.njit(parallel=True, nogil=True, cache=True)
def _csr_matvec(indptr, indices, data, w, out):
    """out = Z w by rows in parallel (no write conflicts: each thread owns its rows)."""
    for i in numba.prange(out.shape[0]):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p] * w[indices[p]]
        out[i] = s


def cd_objective(Z, w, y, lam: float, loss: str, yhat=None) -> float:
    """F(w) of eq. (23) for one output column."""
    yhat = Z @ w if yhat is None else yhat
    val = make_loss(loss).value(yhat[:, None], y[:, None])
    return float(lam * np.abs(w).sum() + val.mean())


def l1_cd(Z, Y, reg: float, *, loss: str = "square", tol: float = 1e-4, max_iter: int = 100,
          n_jobs: int = 1, seed: int = 0):
    """Minimise eq. (23) for each column of Y (n, C) by Algorithm 2; returns (W (D, C), history, converged).

    ``Z`` is any scipy sparse (or dense) (N, D) matrix; it is converted to CSC once for column access
    (dense Fourier features work too: that is the comparison of the paper's Fig. 6).
    ``history``: per epoch ``iter``, ``time`` and ``objective`` (summed over output columns).
    """
    if loss not in CD_LOSSES:
        raise ValueError(f"unknown loss {loss!r} for coordinate descent; choose one of {sorted(CD_LOSSES)}")
    if reg < 0:
        raise ValueError(f"reg={reg!r} must be >= 0")
    Zr = sp.csr_matrix(Z)  # rows, for the parallel re-synchronisation of yhat
    Z = sp.csc_matrix(Z)
    Z.sort_indices()
    Y = np.asarray(Y, dtype=np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    N, D = Z.shape
    C = Y.shape[1]
    n_jobs = numba.config.NUMBA_NUM_THREADS if int(n_jobs) <= 0 else int(n_jobs)  # -1: all cores
    n_threads = max(1, min(n_jobs, numba.config.NUMBA_NUM_THREADS, D))
    indptr = Z.indptr.astype(np.int64)
    indices = Z.indices.astype(np.int64)
    data = Z.data.astype(np.float64)
    r_indptr, r_indices = Zr.indptr.astype(np.int64), Zr.indices.astype(np.int64)
    r_data = Zr.data.astype(np.float64)
    inv_n = 1.0 / N
    M = _BETA[loss] * inv_n * np.asarray(Z.multiply(Z).sum(axis=0)).ravel()
    code = CD_LOSSES[loss]
    W = np.zeros((D, C))
    yhat = np.zeros((N, C))
    hist = {"iter": [], "time": [], "objective": []}
    objs = [cd_objective(Z, W[:, c], Y[:, c], reg, loss, yhat[:, c]) for c in range(C)]
    active = [True] * C
    converged = False
    prev_threads = numba.get_num_threads()
    numba.set_num_threads(n_threads)
    t0 = time.perf_counter()
    try:
        for epoch in range(int(max_iter)):
            for c in range(C):
                if not active[c]:
                    continue
                perm = block_generator(seed, c * 2**32 + epoch, RB_CD_ORDER).permutation(D)
                yc, w = Y[:, c].copy(), W[:, c].copy()
                yh = yhat[:, c].copy()
                _cd_epoch(indptr, indices, data, yc, yh, w, M, perm, float(reg), inv_n, code,
                          n_threads)
                if n_threads > 1:  # undo drift from racing updates of the shared responses
                    _csr_matvec(r_indptr, r_indices, r_data, w, yh)
                W[:, c], yhat[:, c] = w, yh
                new = cd_objective(Z, w, yc, reg, loss, yh)
                if objs[c] - new <= tol * max(abs(new), 1e-12):
                    active[c] = False
                objs[c] = new
            hist["iter"].append(epoch + 1)
            hist["time"].append(time.perf_counter() - t0)
            hist["objective"].append(float(sum(objs)))
            if not any(active):
                converged = True
                break
    finally:
        numba.set_num_threads(prev_threads)
    return W, hist, converged
