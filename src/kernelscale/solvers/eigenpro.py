"""EigenPro iteration (Ma, Belkin, "Diving into the Shallows: a Computational Perspective on
Large-Scale Shallow Learning", NIPS 2017): preconditioned mini-batch SGD for the square loss, in
the RKHS over the training points (``KernelEigenPro``) and on random Fourier features
(``RFFEigenPro``).

Both minimise L = (1/2n) sum_i ||f(x_i) - y_i||^2 without explicit regularisation (the paper's
setting: early stopping is the regulariser). Batch size and step size follow §4; the formulas are
(S1)-(S2) in ``kernelscale.solvers.preconditioners``. With ``n_eigenvectors=0`` the same loop runs
without a preconditioner (plain SGD with the same step-size rule) - the comparison baseline.
"""

from __future__ import annotations

from types import ModuleType

from ..backend import asarray
from ..parallel import one_blas_thread
from ._common import DeviceState, FourierModel, kernel_apply, take_rows
from .preconditioners import (
    KernelPreconditioner,
    PrimalPreconditioner,
    step_size,
    subsample_indices,
)

PROBE_ROWS = 2000  # rows (besides the subsample) on which beta is estimated
BATCH_BLOCK_BYTES = 256 * 2**20  # caps a kernel-EigenPro batch m: m n kernel values, at most
# the paper's mini-batch for every iterative method (Ma & Belkin 2017, §6): the "auto" floor
MIN_AUTO_BATCH = 256


def choose_batch_and_step(beta: float, lam: float, n: int, batch_size, eta, max_batch: int):
    """(m, eta) for the nominal batch size m.

    ``batch_size="auto"``: m = min(max(m*, 256), n, max_batch) with m* = beta / lambda_{k+1} (S2),
    then evened out over the epoch, m = ceil(n / ceil(n / m)), so that no batch is a short
    remainder. ``eta="auto"``: eta from (S1) for m; batches of another size use ``batch_step``.
    """
    if batch_size == "auto":
        m_star = float(beta) / max(float(lam), 1e-300)  # (S2)
        m = max(1, int(min(max(float(MIN_AUTO_BATCH), m_star), n, max_batch)))
        m = -(-n // -(-n // m))  # same number of batches, sizes as even as possible
    else:
        m = min(int(batch_size), n)
    e = step_size(beta, lam, m) if eta == "auto" else float(eta)
    return m, e


def batch_step(eta: float, beta: float, lam: float, m_nominal: int, m: int) -> float:
    """Step for a batch of m rows when ``eta`` was chosen for m_nominal rows: eta scaled by
    eta(m) / eta(m_nominal) of (S1) (the exact (S1) step for m when eta is "auto")."""
    if m == m_nominal:
        return eta
    return eta * step_size(beta, lam, m) / step_size(beta, lam, m_nominal)


class KernelEigenPro(DeviceState):
    """Kernel EigenPro: f = sum_i alpha_i k(x_i, .) over the n training points.

    One iteration on a batch B of m points (Ma & Belkin 2017, §3 "Kernel EigenPro", Algorithm
    EigenPro):
        r = K_{B,X} alpha - Y_B                                 O(m n d)
        alpha_B -= (eta / m) r                                  (the SGD step)
        alpha_S += (eta / m) U diag(d) U^T K_{S,B} r            O(m M + k M), K_{S,B} is a
                                                                column slice of K_{B,X}
    where S is the fixed subsample of M points (see ``KernelPreconditioner``).
    """

    _arrays = ("X", "Y", "alpha", "sub_idx")
    _children = ("precond",)

    def __init__(self, kernel, X, Y, *, n_eigenvectors: int, tau: float, subsample_size: int,
                 batch_size, eta, seed: int, xp: ModuleType, eig_method: str = "auto"):
        self.xp = xp
        self.kernel = kernel
        self.X, self.Y = X, Y
        n = int(X.shape[0])
        self.sub_idx = xp.asarray(subsample_indices(n, subsample_size, seed))
        K_S = kernel(X[self.sub_idx])
        self.precond = KernelPreconditioner(K_S, n_eigenvectors, tau, xp, method=eig_method,
                                            seed=seed)
        X_P = X[xp.asarray(subsample_indices(n, PROBE_ROWS, seed, draw=1))]
        kxx = xp.ones(X_P.shape[0], dtype=X.dtype)  # k(x, x) = 1 for every kernel here
        self.precond.set_beta(kxx, kernel(X_P, X[self.sub_idx]))
        max_batch = max(1, BATCH_BLOCK_BYTES // (n * X.dtype.itemsize))
        self.batch_size, self.eta = choose_batch_and_step(
            self.precond.beta, self.precond.lam_next, n, batch_size, eta, max_batch)
        self.alpha = xp.zeros((n, Y.shape[1]), dtype=X.dtype)
        self.t = 0

    def step(self, Xb, idx):
        """One EigenPro iteration on batch rows Xb with training indices idx (the update in the
        class docstring); returns the record {"objective": mean squared residual before the
        step}."""
        xp = self.xp
        idx = xp.asarray(idx)
        with one_blas_thread():  # the host's products run on the parallel threads
            if self.precond.U is None:  # no preconditioner (k = 0): plain SGD
                f_B, K_BS = kernel_apply(self.kernel, Xb, self.X, self.alpha, xp), None
            else:
                f_B, K_BS = kernel_apply(self.kernel, Xb, self.X, self.alpha, xp,
                                         keep=self.sub_idx)
            r = f_B - self.Y[idx]
            m = r.shape[0]
            eta = batch_step(self.eta, self.precond.beta, self.precond.lam_next, self.batch_size, m)
            self.alpha[idx] -= (eta / m) * r
            if K_BS is not None:
                self.alpha[self.sub_idx] += (eta / m) * self.precond.correction(K_BS.T @ r)
        return {"objective": float((r * r).mean())}

    def decision(self, A):
        """f(A) = K(A, X) alpha, in bounded kernel blocks (``kernel_apply``)."""
        return kernel_apply(self.kernel, A, self.X, self.alpha, self.xp)


class RFFEigenPro(FourierModel, DeviceState):
    """EigenPro on random Fourier features (Ma & Belkin 2017, Algorithm EigenPro with phi = RFF):
    a linear model w (D x C) on phi(x) from ``FourierBlocks`` (one block of D features), updated by
        g = Phi_B^T (Phi_B w - Y_B) / m,   w -= eta P g,
    P from ``PrimalPreconditioner`` on a subsample of M rows. O(m D d + k D) per iteration; only the
    batch and the subsample are ever read, so X may stay on disk.

    ``average``: the model is ``TailAverage``'s mean of the last half to three quarters of the
    iterates (tail-averaged constant-step SGD for least squares: Bach & Moulines, "Non-strongly-
    convex smooth stochastic approximation with convergence rate O(1/n)", NIPS 2013; Jain et al.,
    "Parallelizing Stochastic Gradient Descent for Least Squares Regression", JMLR 2018).
    """

    _arrays = ("w", "sum_before", "sum_since")
    _children = ("precond",)

    def __init__(self, blocks, X, n_outputs: int, *, n_eigenvectors: int, tau: float,
                 subsample_size: int, batch_size, eta, seed: int, xp: ModuleType,
                 eig_method: str = "auto", average: bool = False):
        self.xp = xp
        self.blocks = blocks
        n = int(X.shape[0])
        X_S = asarray(take_rows(X, subsample_indices(n, subsample_size, seed)), xp, blocks.dtype)
        Phi_S = blocks.features(X_S, 0)
        self.precond = PrimalPreconditioner(Phi_S, n_eigenvectors, tau, xp, method=eig_method,
                                            seed=seed)
        X_P = asarray(take_rows(X, subsample_indices(n, PROBE_ROWS, seed, draw=1)), xp,
                      blocks.dtype)
        self.precond.set_beta(blocks.features(X_P, 0))
        self.batch_size, self.eta = choose_batch_and_step(
            self.precond.beta, self.precond.lam_next, n, batch_size, eta, 8192)
        self.w = xp.zeros((blocks.F, int(n_outputs)), dtype=blocks.dtype)
        self.t = 0
        self.sum_before, self.sum_since = ((xp.zeros_like(self.w), xp.zeros_like(self.w))
                                           if average else (None, None))

    def step(self, Xb, Yb=None):
        """One preconditioned step w -= eta P g on batch (Xb, Yb); returns the record
        {"objective": mean squared residual before the step}. ``Xb`` alone: the batch's rows are
        spread over dask workers (``kernelscale.spread.rff.SpreadRFFRows``), whose row sums
        (``rows.gradient``: Phi_B^T r, the summed r^2, m) give the same step summed in another
        order."""
        if Yb is None:
            G, sq_sum, m, _ = Xb.gradient(self.w, None)
            g = self.xp.asarray(G) / m
            objective = float(sq_sum / (m * int(self.w.shape[1])))
        else:
            Phi = self.blocks.features(Xb, 0)
            r = Phi @ self.w - Yb
            m = r.shape[0]
            g = Phi.T @ r / m
            objective = float((r * r).mean())
        p = self.precond
        self.w -= batch_step(self.eta, p.beta, p.lam_next, self.batch_size, int(m)) * p.apply(g)
        self._average_in(self.w)
        return {"objective": objective}


__all__ = ["KernelEigenPro", "RFFEigenPro", "batch_step", "choose_batch_and_step"]
