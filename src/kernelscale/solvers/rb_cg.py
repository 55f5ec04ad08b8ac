"""Ridge regression on Random Binning features by conjugate gradients (Wu, Chen, Yen, Yan, Revisiting
Random Binning Features: Fast Convergence and Strong Parallelizability, KDD 2016, §3.1).

Solves (Z^T Z + lambda I) W = Z^T Y for a block of right-hand sides Y (n, C) -- the paper's linear
system under its eq. (1) with the square loss. Relation to the regularised ERM (1),
(lambda_1/2)||w||^2 + (1/N) sum_i 1/2 (w.z_i - y_i)^2: its optimum solves
(Z^T Z + N lambda_1 I) w = Z^T y, so our ``lambda`` is N times lambda_1.

Z is applied as Z^T (Z P) (two sparse products, O(nnz(Z)) = O(N R) each); Z^T Z is never formed
(it is much denser than Z). The C right-hand sides run as C independent CG recurrences vectorised
over columns (one sparse product per iteration for all of them); a column stops moving once its
relative residual is below ``tol`` (its step sizes are set to 0). Works with numpy + scipy.sparse
and with cupy + cupyx.scipy.sparse alike.

Optional Jacobi preconditioning (``jacobi=True``, default off): the diagonal of Z^T Z is the
training count of each bin divided by R. The stopping test is on the unpreconditioned residual
||r|| / ||b|| either way.

``spread``: Z held elsewhere (e.g. ``spread.SpreadRB``, its row blocks on dask workers), which
gives the products Z^T (Z P) and diag(Z^T Z).
"""

from __future__ import annotations

import time

import numpy as np


def ridge_cg(Z, B, ridge: float, *, tol: float = 1e-3, max_iter: int = 1000, W0=None, xp=np,
             jacobi: bool = False, ZT=None, spread=None):
    """Solve (Z^T Z + ridge I) W = B column by column with CG (``conjugate_gradients``).

    ``Z``: the (N, D) CSR features (scipy or cupyx; ``ZT``: its transpose where the caller has
    its own, default a CSC view of Z's arrays), or None with ``spread``: Z held elsewhere, an
    object with ``normal(P)`` = Z^T (Z P) and ``diag()`` = diag(Z^T Z) (``spread.SpreadRB``).
    ``B``: (D, C) right-hand sides (usually Z^T Y) on ``xp``; ``ridge``: n nu > 0
    (``params.reg_and_ridge``); ``tol``: a column stops at ||r|| / ||b|| <= tol (the paper's
    1e-3); ``W0``: a (D, C) starting point; ``jacobi``: precondition with
    (diag(Z^T Z) + ridge)^-1. Returns (W, history, converged), history with ``iter``, ``time``
    and ``residual`` (the largest relative residual over the columns) per iteration.
    """
    if ridge <= 0:
        raise ValueError(f"ridge={ridge!r} must be > 0 for the ridge CG solver")
    ZT = Z.T if ZT is None and Z is not None else ZT
    Minv = 1.0
    if jacobi and spread is not None:
        Minv = (1.0 / (spread.diag() + ridge))[:, None]
    elif jacobi:
        Z2 = ZT.copy()  # squared entries via .data: works for scipy and cupyx matrices alike
        Z2.data **= 2
        Minv = (1.0 / (xp.asarray(Z2.sum(axis=1)).ravel() + ridge))[:, None]
        del Z2
    normal = spread.normal if spread is not None else lambda P: ZT @ (Z @ P)
    return conjugate_gradients(lambda P: normal(P) + ridge * P, B, Minv, tol=tol,
                               max_iter=max_iter, W0=W0, xp=xp)


def conjugate_gradients(apply, B, Minv=1.0, *, tol: float, max_iter: int, W0=None, xp=np):
    """Solve A W = B for a symmetric positive definite A given as ``apply(P)`` = A P, column by
    column (C independent recurrences vectorised over the columns of B); ``Minv``: the
    preconditioner's inverse as a factor (scalar or (D, 1) diagonal). A column stops once
    ||r|| / ||b|| <= ``tol`` (its step sizes are set to 0). Returns (W, history, converged) as
    ``ridge_cg``."""
    W = xp.zeros_like(B) if W0 is None else W0.copy()
    R = B - apply(W) if W0 is not None else B.copy()
    S = Minv * R  # preconditioned residual
    P = S.copy()
    rr = (R * R).sum(axis=0)
    rz = (R * S).sum(axis=0)
    bnorm = xp.sqrt((B * B).sum(axis=0))
    bnorm = xp.where(bnorm > 0, bnorm, 1.0)
    hist = {"iter": [], "time": [], "residual": []}
    t0 = time.perf_counter()
    converged = False
    for it in range(int(max_iter) + 1):
        res = xp.sqrt(rr) / bnorm
        worst = float(res.max())
        hist["iter"].append(it)
        hist["time"].append(time.perf_counter() - t0)
        hist["residual"].append(worst)
        if worst <= tol:
            converged = True
            break
        if it == max_iter:
            break
        active = res > tol
        AP = apply(P)
        pAp = (P * AP).sum(axis=0)
        # converged columns get zero steps (and avoid 0/0 once their residual vanishes)
        alpha = xp.where(active, rz / xp.where(pAp > 0, pAp, 1.0), 0.0)
        W += alpha * P
        R -= alpha * AP
        S = Minv * R
        rz_new = (R * S).sum(axis=0)
        beta = xp.where(active, rz_new / xp.where(rz > 0, rz, 1.0), 0.0)
        P = S + beta * P
        rr, rz = (R * R).sum(axis=0), rz_new
    return W, hist, converged
