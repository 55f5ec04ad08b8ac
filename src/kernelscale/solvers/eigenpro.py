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
from ..budget import batch_bytes
from ._common import DeviceState, TailAverage, kernel_apply, take_rows
from .preconditioners import (
    KernelPreconditioner,
    PrimalPreconditioner,
    critical_batch_size,
    probe_indices,
    step_size,
    subsample_indices,
)

# Rows (besides the subsample) on which beta = max ||P^{1/2} phi(x)||^2 is estimated.
PROBE_ROWS = 2000

# Budget for the (m x n) kernel block of one kernel-EigenPro iteration; caps the auto batch size.
BATCH_BLOCK_BYTES = 256 * 2**20


# The paper's mini-batch size for every iterative method (Ma & Belkin 2017, §6: "For consistent
# comparison, all iterative methods use mini-batch of size m = 256"): the floor of the automatic
# batch (docs/design.md, "Estimators and their defaults").
MIN_AUTO_BATCH = 256


def choose_batch_and_step(beta: float, lam: float, n: int, batch_size, eta, max_batch: int):
    """(m, eta) for the nominal batch size m.

    ``batch_size="auto"``: m = min(max(m*, 256), n, max_batch) with m* = beta / lambda_{k+1} (S2),
    then evened out over the epoch, m = ceil(n / ceil(n / m)), so that no batch is a short
    remainder (n = 1347, m = 1346 would otherwise give batches of 1346 and 1). Beyond m* the step
    (S1) just saturates at 1 / lambda_{k+1} - still stable, so the 256 floor is safe.
    ``eta="auto"``: eta from (S1) for m. Batches of another size m' (the short last batch of an
    epoch when m does not divide n) use ``batch_step`` instead of this eta.
    """
    if batch_size == "auto":
        m = int(min(max(float(MIN_AUTO_BATCH), critical_batch_size(beta, lam)), n, max_batch))
        m = max(1, m)
        m = -(-n // -(-n // m))  # same number of batches, sizes as even as possible
    else:
        m = min(int(batch_size), n)
    e = step_size(beta, lam, m) if eta == "auto" else float(eta)
    return m, e


def batch_step(eta: float, beta: float, lam: float, m_nominal: int, m: int) -> float:
    """Step for a batch of m rows when ``eta`` was chosen for m_nominal rows.

    (S1) grows almost linearly in m for m < m*, so eta(m_nominal) applied to a short batch (the
    remainder of an epoch) overshoots ||P H_m||^{-1} by up to m_nominal / m. The step is
    rescaled by eta(m) / eta(m_nominal): the exact (S1) step for m when eta is "auto", and the
    same relative step for a user-given eta.
    """
    if m == m_nominal:
        return eta
    return eta * step_size(beta, lam, m) / step_size(beta, lam, m_nominal)


class _StepMixin:
    def _batch_eta(self, m: int) -> float:
        """The step for this batch's actual size (``batch_step``)."""
        p = self.precond
        return batch_step(self.eta, p.beta, p.lam_next, self.batch_size, int(m))


class KernelEigenPro(_StepMixin, DeviceState):
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
        idx = subsample_indices(n, subsample_size, seed)
        self.sub_idx = xp.asarray(idx)
        K_S = kernel(X[self.sub_idx])
        self.precond = KernelPreconditioner(K_S, n_eigenvectors, tau, xp, method=eig_method,
                                            seed=seed)
        X_P = X[xp.asarray(probe_indices(n, PROBE_ROWS, seed))]
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
        K_B = self.kernel(Xb, self.X)  # (m, n)
        r = K_B @ self.alpha - self.Y[idx]
        m = r.shape[0]
        eta = self._batch_eta(m)
        self.alpha[idx] -= (eta / m) * r
        corr = self.precond.correction(K_B[:, self.sub_idx].T @ r)
        if corr is not None:
            self.alpha[self.sub_idx] += (eta / m) * corr
        return {"objective": float((r * r).mean())}

    def decision(self, A):
        """f(A) = K(A, X) alpha, in bounded kernel blocks (``kernel_apply``)."""
        return kernel_apply(self.kernel, A, self.X, self.alpha, self.xp)


class RFFEigenPro(_StepMixin, TailAverage, DeviceState):
    """EigenPro on random Fourier features (Ma & Belkin 2017, Algorithm EigenPro with phi = RFF):
    a linear model w (D x C) on phi(x) from ``FourierBlocks`` (one block of D features), updated by
        g = Phi_B^T (Phi_B w - Y_B) / m,   w -= eta P g,
    P from ``PrimalPreconditioner`` on a subsample of M rows. O(m D d + k D) per iteration; only the
    batch and the subsample are ever read, so X may stay on disk.

    ``average``: the model is the mean of the last half to three quarters of the iterates
    rather than the last one - tail-averaged constant-step SGD for least squares (Bach &
    Moulines, NIPS 2013; Jain et al., JMLR 2018, minibatch tail averaging). With D << n
    features the model cannot interpolate, so EigenPro's constant step (chosen for the
    interpolating case) leaves the last iterate in a noise ball around the least-squares fit on
    the features; the mean of the iterates converges to it
    (``docs/library.md``). The tail is ``TailAverage``'s.
    """

    _arrays = ("w", "sum_before", "sum_since")
    _children = ("precond",)

    def __init__(self, blocks, X, n_outputs: int, *, n_eigenvectors: int, tau: float,
                 subsample_size: int, batch_size, eta, seed: int, xp: ModuleType,
                 eig_method: str = "auto", average: bool = False):
        self.xp = xp
        self.blocks = blocks
        n = int(X.shape[0])
        idx = subsample_indices(n, subsample_size, seed)
        X_S = asarray(take_rows(X, idx), xp, blocks.dtype)
        Phi_S = blocks.features(X_S, 0)
        self.precond = PrimalPreconditioner(Phi_S, n_eigenvectors, tau, xp, method=eig_method,
                                            seed=seed)
        X_P = asarray(take_rows(X, probe_indices(n, PROBE_ROWS, seed)), xp, blocks.dtype)
        self.precond.set_beta(blocks.features(X_P, 0))
        self.batch_size, self.eta = choose_batch_and_step(
            self.precond.beta, self.precond.lam_next, n, batch_size, eta, 8192)
        self.w = xp.zeros((blocks.F, int(n_outputs)), dtype=blocks.dtype)
        self.t = 0
        self.sum_before = xp.zeros_like(self.w) if average else None
        self.sum_since = xp.zeros_like(self.w) if average else None
        self.n_before = self.n_since = 0

    @property
    def block_size(self) -> int:
        return self.blocks.F

    def work_bytes(self, batch_size: int, n_rows: int, n_features: int) -> int:
        """One step's working set (``training``): ``budget.batch_bytes``."""
        return batch_bytes(batch_size, n_features, self.blocks.F, self.blocks.dtype)

    def to(self, xp):
        """Move the weights and the feature blocks to namespace ``xp``."""
        if self.blocks.xp is not xp:
            self.blocks.to(xp)
        return super().to(xp)

    def step(self, Xb, Yb=None):
        """One preconditioned step w -= eta P g on batch (Xb, Yb); returns the record
        {"objective": mean squared residual before the step}. ``Xb`` alone: the batch's rows are
        spread over dask workers (``kernelscale.spread.rff.SpreadRFFRows``), which return the
        row sums of the step."""
        if Yb is None:
            return self._step_spread(Xb)
        Phi = self.blocks.features(Xb, 0)
        r = Phi @ self.w - Yb
        m = r.shape[0]
        g = Phi.T @ r / m
        self.w -= self._batch_eta(m) * self.precond.apply(g)
        self._average_in(self.w)
        return {"objective": float((r * r).mean())}

    @property
    def w_model(self):
        """The weights the model predicts with: the tail mean, or the last iterate (no
        averaging, or no step yet)."""
        if self.n_averaged == 0:
            return self.w
        return (self.sum_before + self.sum_since) / self.n_averaged

    def _step_spread(self, rows):
        """``step`` with the row sums from the workers (``rows.gradient``: Phi_B^T r summed over
        the batch, the summed r^2, the row count m): the same g = Phi_B^T r / m and the same
        preconditioned update, summed in another order."""
        G, sq_sum, m, _ = rows.gradient(self.w, None)
        g = self.xp.asarray(G) / m
        self.w -= self._batch_eta(m) * self.precond.apply(g)
        self._average_in(self.w)
        return {"objective": float(sq_sum / (m * int(self.w.shape[1])))}

    def decision(self, A):
        """f(A) = phi(A) w (w: ``w_model``)."""
        return self.blocks.features(A, 0) @ self.w_model


__all__ = ["KernelEigenPro", "RFFEigenPro", "batch_step", "choose_batch_and_step"]
