"""Top-k eigensystems and the EigenPro preconditioners (Ma, Belkin, Diving into the Shallows: a
Computational Perspective on Large-Scale Shallow Learning, NIPS 2017).

Notation of the paper (§2-§4): H is the (non-centred) covariance of the feature vectors,
H = (1/n) sum_i phi(x_i) phi(x_i)^T, with eigenpairs (lambda_i, e_i) in decreasing order. The
EigenPro preconditioner (§3, eq. 7 with the damping tau of Algorithm EigenPro) is

    P = I - sum_{i <= k} (1 - tau lambda_{k+1} / lambda_i) e_i e_i^T,

which flattens the top k eigenvalues of P H to tau lambda_{k+1}; the top eigenvalue of P H is
then lambda_{k+1} (for tau <= 1). Both versions estimate (lambda_i, e_i) from a subsample of
M points, as the paper does.

Step size and batch size (§4): eta = 1 / ||P H_m||, H_m the covariance of a mini-batch of m
points, with the expectation form ||P H_m|| ~ lambda_{k+1} + (beta - lambda_{k+1}) / m of the
paper's bound (Theorem 3), beta = max_x ||P^{1/2} phi(x)||^2. Hence

    eta(m) = m / (beta + (m - 1) lambda_{k+1}),                                   (S1)
    m*     = beta / lambda_{k+1}   (the critical batch size).                     (S2)

With k = 0 (P = I, lambda_1 in place of lambda_{k+1}) they give the step of plain SGD. k is capped
so that lambda_{k+1} >= beta_0 / M (``resolvable_k``), and beta is also evaluated on held-out probe
rows (``set_beta``).
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import scipy.linalg

from ..rng import PRECONDITIONER_SKETCH, PRECONDITIONER_SUBSAMPLE, block_generator
from ._common import DeviceState


def step_size(beta: float, lam: float, m: int, reg: float = 0.0, curvature: float = 1.0) -> float:
    """eta(m) = m / (beta + (m - 1) lambda_{k+1}), eq. (S1) of the module docstring; in general
    m / (L (beta + (m - 1) lambda) + m nu) for a loss of curvature bound L (``curvature``) and
    the ridge term nu (``reg``) of a step that also shrinks f by 1 - eta nu."""
    return float(m) / (curvature * (float(beta) + (m - 1) * float(lam)) + m * reg)


def subsample_indices(n: int, size: int, seed: int, draw: int = 0) -> np.ndarray:
    """Sorted indices of ``size`` distinct rows out of ``n``, a pure function of the seed;
    ``draw=1``: the probe rows on which beta is evaluated (independent of the subsample)."""
    rng = block_generator(seed, draw, PRECONDITIONER_SUBSAMPLE)
    return np.sort(rng.choice(n, size=min(int(size), int(n)), replace=False))


def top_eigh(A, q: int, xp: ModuleType, *, method: str = "auto", seed: int = 0,
             n_oversample: int = 10, n_power_iter: int = 3):
    """Top-``q`` eigenpairs of a symmetric PSD matrix ``A`` (N x N): (values desc., vectors).

    ``method``: "eigh" (dense LAPACK; scipy computes only the top q on numpy), "randomized"
    (Halko, Martinsson & Tropp 2011, Alg. 4.4 + 5.3: range finder with power iterations, then an
    exact eigh of the small projected matrix) or "auto" (eigh up to N = 3000). Negative round-off
    eigenvalues are clipped to 0.
    """
    N = int(A.shape[0])
    q = max(1, min(int(q), N))
    if method not in ("auto", "eigh", "randomized"):
        raise ValueError(f"eig_method={method!r} must be 'auto', 'eigh' or 'randomized'")
    if method == "auto":
        method = "eigh" if (N <= 3000 or q + n_oversample >= N // 2) else "randomized"
    if method == "eigh" or q + n_oversample >= N:
        if xp is np:
            vals, vecs = scipy.linalg.eigh(A, subset_by_index=(N - q, N - 1))
        else:
            vals, vecs = xp.linalg.eigh(A)
            vals, vecs = vals[N - q:], vecs[:, N - q:]
    else:
        p = min(N, q + max(n_oversample, q // 4))  # generous oversampling: lambda_{k+1} matters
        omega = block_generator(seed, 0, PRECONDITIONER_SKETCH).standard_normal((N, p))
        Q, _ = xp.linalg.qr(A @ xp.asarray(omega, dtype=A.dtype))
        for _ in range(n_power_iter):  # power iterations sharpen a slowly decaying spectrum
            Q, _ = xp.linalg.qr(A @ Q)
        B = Q.T @ (A @ Q)
        vals, V = xp.linalg.eigh(0.5 * (B + B.T))
        vals, vecs = vals[p - q:], Q @ V[:, p - q:]
    vals = xp.maximum(vals[::-1], 0.0)
    return vals, xp.ascontiguousarray(vecs[:, ::-1])


def resolvable_k(lam, k: int, beta0: float, M: int) -> int:
    """Largest k' <= k with lambda_{k'+1} >= beta0 / M (lambda: subsample eigenvalues, desc.):
    the critical batch m* = beta0 / lambda_{k+1} stays <= M."""
    floor = beta0 / M
    ok = [i for i in range(int(k) + 1) if float(lam[i]) >= floor]
    return max(ok) if ok else 0


class _Flattening(DeviceState):
    """What both preconditioners keep: ``k`` directions flattened with damping ``tau``,
    ``lam_top`` (lambda_1), ``lam_next`` (lambda_{k+1}, the top eigenvalue of P H) and ``beta``
    (max ||P^{1/2} phi(x)||^2, ``preconditioned_norms``)."""

    def __init__(self, tau: float, xp: ModuleType):
        self.tau, self.xp = float(tau), xp
        if not math.isfinite(self.tau) or not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau={self.tau!r} must be in (0, 1]")

    def _flatten(self, lam, k: int):
        """Set k, lam_top and lam_next from the eigenvalues ``lam`` (desc.); returns the shrinks
        1 - tau lambda_{k+1} / lambda_i of the top k directions (None for k = 0)."""
        tau = self.tau
        self.k, self.lam_top, self.lam_next = k, float(lam[0]), float(lam[k])
        if k == 0:
            return None
        xp, keep = self.xp, lam[:k] > 0
        return xp.where(keep, 1.0 - tau * self.lam_next / xp.where(keep, lam[:k], 1.0), 0.0)

    def set_beta(self, *rows) -> float:
        """Raise beta to the max of ``preconditioned_norms(*rows)`` over held-out probe rows;
        returns beta."""
        self.beta = max(self.beta, float(self.preconditioned_norms(*rows).max()))
        return self.beta


class KernelPreconditioner(_Flattening):
    """EigenPro preconditioner in the RKHS, acting on the coefficients of M subsample centres.

    The covariance operator of the subsample, (1/M) sum_s k(x_s, .) (x) k(x_s, .), has eigenvalues
    lambda_i = sigma_i / M and unit-norm eigenfunctions psi_i = sigma_i^{-1/2} sum_s u_i[s] k(x_s, .),
    where K_S u_i = sigma_i u_i is the eigensystem of the subsample kernel matrix (the Nyström
    extension). For a gradient g = (1/m) sum_{j in batch} r_j k(x_j, .),

        P g = g - sum_i (1 - tau lambda_{k+1} / lambda_i) <psi_i, g> psi_i,
        <psi_i, g> = (1/m) sigma_i^{-1/2} u_i^T K_{S,B} r,

    so the correction lives on the subsample coefficients:
    ``alpha_S += (eta / m) U diag(d) U^T K_{S,B} r`` with d_i = (1 - tau lambda_{k+1}/lambda_i)/sigma_i
    (Ma & Belkin 2017, §3, "Kernel EigenPro"; O(k M) per iteration beyond K_{S,B} r).
    """

    _arrays = ("U", "d")

    def __init__(self, K_S, k: int, tau: float, xp: ModuleType, *, method="auto", seed: int = 0):
        super().__init__(tau, xp)
        M = int(K_S.shape[0])
        k = max(0, min(int(k), M - 1))
        sigma, U = top_eigh(K_S, k + 1, xp, method=method, seed=seed)
        lam = sigma / M
        kxx = xp.diagonal(K_S)
        shrink = self._flatten(lam, resolvable_k(lam, k, float(kxx.max()), M))
        self.U = self.d = None
        self.beta = float(kxx.max())
        if shrink is None:  # plain SGD: P = I
            return
        k, sigma_k = self.k, sigma[:self.k]
        self.U = U = U[:, :k]
        self.d = shrink / xp.where(lam[:k] > 0, sigma_k, 1.0)
        # in-sample beta_P; ``set_beta`` refines it on held-out probe rows
        kP = kxx - ((U * U) * (shrink * sigma_k)[None, :]).sum(axis=1)
        self.beta = max(float(kP.max()), self.lam_next)

    def preconditioned_norms(self, kxx, K_xS):
        """k_P(x, x) = k(x,x) - sum_i (1 - tau lambda_{k+1}/lambda_i) psi_i(x)^2 for rows x, given
        k(x, x) and K(x, S); psi_i(x) = sigma_i^{-1/2} u_i^T k(S, x) (the Nyström extension)."""
        if self.U is None:
            return kxx
        proj = K_xS @ self.U
        return kxx - ((proj * proj) * self.d[None, :]).sum(axis=1)

    def correction(self, K_SB_r):
        """U diag(d) U^T (K_{S,B} r): the subsample-coefficient correction (None when k = 0)."""
        if self.U is None:
            return None
        return self.U @ (self.d[:, None] * (self.U.T @ K_SB_r))


class PrimalPreconditioner(_Flattening):
    """EigenPro preconditioner for a linear model on explicit features (Algorithm EigenPro, §3).

    From a subsample Phi_S (M x D) of feature rows: the eigensystem of H_S = Phi_S^T Phi_S / M (via
    the smaller of the D x D covariance and the M x M Gram matrix), then
    P g = g - E diag(1 - tau lambda_{k+1}/lambda_i) E^T g.
    """

    _arrays = ("E", "shrink")

    def __init__(self, Phi_S, k: int, tau: float, xp: ModuleType, *, method="auto", seed: int = 0,
                 batch_size: int | None = None, min_eigenvalue: float = 0.0):
        super().__init__(tau, xp)
        M, D = int(Phi_S.shape[0]), int(Phi_S.shape[1])
        k = max(0, min(int(k), min(M, D) - 1))
        if D <= M:
            lam, E = top_eigh(Phi_S.T @ Phi_S / M, k + 1, xp, method=method, seed=seed)
        else:
            lam, V = top_eigh(Phi_S @ Phi_S.T / M, k + 1, xp, method=method, seed=seed)
            # right singular vectors from left ones: e_i = Phi^T v_i / sqrt(M lambda_i)
            E = Phi_S.T @ V / xp.sqrt(xp.maximum(M * lam, 1e-300))[None, :]
        norms = (Phi_S * Phi_S).sum(axis=1)
        # with a known batch size m, eigenvalues below beta0 / m are not flattened either
        k = resolvable_k(lam, k, float(norms.max()), M if batch_size is None
                         else min(M, int(batch_size)))
        while k > 0 and float(lam[k]) < min_eigenvalue:  # lambda_{k+1} >= the caller's floor
            k -= 1
        self.shrink = self._flatten(lam, k)
        self.E = None if k == 0 else E[:, :k]
        self.beta = (float(norms.max()) if k == 0
                     else max(float(self.preconditioned_norms(Phi_S).max()), self.lam_next))

    def preconditioned_norms(self, Phi):
        """||P^{1/2} phi(x)||^2 = ||phi||^2 - sum_i shrink_i <e_i, phi>^2 for rows of Phi."""
        norms = (Phi * Phi).sum(axis=1)
        if self.E is None:
            return norms
        proj = Phi @ self.E
        return norms - ((proj * proj) * self.shrink[None, :]).sum(axis=1)

    def apply(self, g):
        """P g for a gradient g of shape (D, C)."""
        if self.E is None:
            return g
        return g - self.E @ (self.shrink[:, None] * (self.E.T @ g))

    def apply_sqrt(self, g):
        """P^{1/2} g: the same eigenvectors, each shrink s_i replaced by 1 - sqrt(1 - s_i)."""
        if self.E is None:
            return g
        half = 1.0 - self.xp.sqrt(self.xp.clip(1.0 - self.shrink, 0.0, None))
        return g - self.E @ (half[:, None] * (self.E.T @ g))

    def top_eigenvalue(self, Phi, n_iter: int = 32, seed: int = 0) -> float:
        """lambda_max(P^{1/2} H P^{1/2}) for H = Phi^T Phi / m on other rows than the subsample's,
        by power iteration (Rayleigh quotient; 2 m D per iteration, no D x D matrix)."""
        xp, m = self.xp, int(Phi.shape[0])
        v = xp.asarray(np.random.default_rng(seed).standard_normal((Phi.shape[1], 1)),
                       dtype=Phi.dtype)
        lam = 0.0
        for _ in range(int(n_iter)):
            v /= xp.linalg.norm(v)
            u = self.apply_sqrt(v)
            w = self.apply_sqrt(Phi.T @ (Phi @ u)) / m
            lam = float((v * w).sum())
            v = w
        return lam
