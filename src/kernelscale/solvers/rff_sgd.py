"""Random Fourier features with a fixed feature count, trained by mini-batch SGD or SVRG.

Model u(x) = W^T phi(x), phi from one ``FourierBlocks`` block of D features (Rahimi, Recht, "Random
Features for Large-Scale Kernel Machines", NIPS 2007; the "RF + SGD" baseline of Dai, Xie, He,
Liang, Raj, Balcan, Song, "Scalable Kernel Methods via Doubly Stochastic Gradients", NIPS 2014, and
of Ma, Belkin, "Diving into the Shallows: a Computational Perspective on Large-Scale Shallow
Learning", NIPS 2017). Objective

    F(W) = (1/n) sum_i loss(W^T phi(x_i), y_i) + (reg/2) ||W||_F^2.

* SGD: W -= eta_t (Phi_B^T loss'(Phi_B W, Y_B) / m + reg W), eta_t = eta0 / (1 + reg eta0 t)
  (Bottou, "Stochastic Gradient Descent Tricks", Neural Networks: Tricks of the Trade, 2012: the
  schedule for a strongly convex objective; constant when reg = 0).
* SVRG (Johnson, Zhang, "Accelerating Stochastic Gradient Descent using Predictive Variance
  Reduction", NIPS 2013, Alg. 1 with option I): every ``inner`` steps a snapshot W~ and
  its full gradient mu = grad F(W~) (one chunked pass over X); in between
  W -= eta (g_B(W) - g_B(W~) + mu), constant eta. The snapshot falls at fixed iteration numbers,
  so warm-started segments reproduce one long run.
eta0 = "auto": the largest stable mini-batch step of EigenPro's analysis (Ma & Belkin 2017, §4;
(S1) in ``solvers.preconditioners``) for curvature L:
eta = m / (L (beta + (m - 1) lambda_1) + m reg), beta = max ||phi(x)||^2 and lambda_1 the top
eigenvalue of the feature covariance, both on a subsample, L the curvature bound of the loss
(``CURVATURE``; 1 for a loss not named there, e.g. hinge). A given eta0 is capped at 1 / (2 reg).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from ..backend import asarray
from ..budget import batch_bytes
from ..stream import check_finite_rows, iter_row_chunks
from ._common import DeviceState, FourierModel, take_rows
from .preconditioners import step_size, subsample_indices

CURVATURE = {"square": 1.0, "logistic": 0.25, "softmax": 0.5, "squared_hinge": 2.0}
HOST_BATCH = 64  # m for batch_size="auto" on the host
# on a GPU: the (m, D) feature-matrix bytes that cover a step's fixed cost (docs/design.md)
DEVICE_STEP_BYTES = 512 * 2**20


def auto_batch_size(xp: ModuleType, n_components: int, n_features_in: int, dtype,
                    budget_mb: float | None = None) -> int:
    """m for ``batch_size="auto"``: ``HOST_BATCH`` on numpy; on a GPU the smallest power of two
    >= ``HOST_BATCH`` whose (m, D) feature matrix holds ``DEVICE_STEP_BYTES``, halved (not below
    ``HOST_BATCH``) while the batch's working set (``budget.batch_bytes``) exceeds half of
    ``budget_mb``. With eta0="auto" the step follows m (the module docstring)."""
    if xp.__name__ == "numpy":
        return HOST_BATCH
    item = np.dtype(dtype).itemsize
    m = HOST_BATCH
    while m * int(n_components) * item < DEVICE_STEP_BYTES:
        m *= 2
    if budget_mb is not None:
        while m > HOST_BATCH and batch_bytes(m, n_features_in, n_components, dtype) > \
                budget_mb * 2**20 / 2:
            m //= 2
    return m


class RFFSGD(FourierModel, DeviceState):
    """Linear model W (D x C) on one block of D random Fourier features, trained by SGD or SVRG
    (module docstring); ``data`` holds (X, Y) during a fit for SVRG's full gradient.
    ``average`` (True, False or "auto": True for the square loss): SGD's model is
    ``TailAverage``'s mean of the last half to three quarters of the iterates (Bach & Moulines,
    "Non-strongly-convex smooth stochastic approximation with convergence rate O(1/n)", NIPS 2013:
    for the square loss the average of constant-step SGD converges to the minimiser)."""

    _arrays = ("w", "w_snap", "mu", "sum_before", "sum_since")

    def __init__(self, blocks, loss, n_outputs: int, *, reg: float, solver: str, eta0,
                 inner: int, X_sample, xp: ModuleType, batch_size: int = 1,
                 average="auto"):
        self.xp = xp
        self.blocks = blocks
        self.loss = loss
        self.reg = float(reg)
        self.solver = solver
        self.inner = int(inner)
        phi = blocks.features(asarray(X_sample, xp, blocks.dtype), 0)
        self.beta = float((phi * phi).sum(axis=1).max())
        s_top = float(xp.linalg.eigvalsh(phi @ phi.T)[-1])  # = n lambda_1 of phi^T phi / n
        self.lambda_1 = s_top / phi.shape[0]
        if eta0 == "auto":  # eta0 reg < 1 by construction: the shrink 1 - eta reg stays > 0
            self.eta0 = step_size(self.beta, self.lambda_1, max(1, int(batch_size)), self.reg,
                                  CURVATURE.get(loss.name, 1.0))
        else:  # the shrink stays in [1/2, 1]
            self.eta0 = min(float(eta0), 0.5 / self.reg) if self.reg > 0 else float(eta0)
        self.w = xp.zeros((blocks.F, int(n_outputs)), dtype=blocks.dtype)
        self.w_snap = None
        self.mu = None
        self.t = 0
        if average == "auto":
            average = loss.name == "square"
        zeros = (xp.zeros_like(self.w), xp.zeros_like(self.w))
        self.sum_before, self.sum_since = zeros if average and solver == "sgd" else (None, None)
        self.data = None  # (X, Y) while training; needed by SVRG's full gradient, never pickled

    def __getstate__(self):
        state = super().__getstate__()
        state["data"] = None
        return state

    def prepare(self, X, Y, window_rows: int, n_iter: int) -> None:
        self.data = (X, Y)

    def release(self) -> None:
        self.data = None

    @staticmethod
    def sample_rows(X, seed: int, size: int = 512):
        """``size`` rows of X drawn with ``seed``: the subsample on which beta and lambda_1 of
        eta0="auto" are estimated."""
        return take_rows(X, subsample_indices(int(X.shape[0]), size, seed))

    def _chunks(self, chunk_rows: int, check: bool = False, data=None):
        """(Phi, Y) of the training rows (or of ``data``), chunk by chunk (``check``: on-disk rows
        checked)."""
        X, Y = data or self.data
        for lo, block in iter_row_chunks(X, chunk_rows):
            if check:
                check_finite_rows(block, lo, "X")
            yield (self.blocks.features(asarray(block, self.xp, self.blocks.dtype), 0),
                   self.xp.asarray(Y[lo:lo + block.shape[0]], dtype=self.blocks.dtype))

    def full_gradient(self, w, rows=None, chunk_rows: int = 8192):
        """grad F(w) by one pass over the training rows, chunk by chunk (the full pass may reach
        rows no batch read yet), or from the workers' sum (``rows.full_gradient``)."""
        if rows is not None:
            total, n = rows.full_gradient(w)
            total = self.xp.asarray(total)
        else:
            n, total = int(self.data[0].shape[0]), self.xp.zeros_like(w)
            for Phi, Yc in self._chunks(chunk_rows, check=True):
                total += Phi.T @ self.loss.deriv(Phi @ w, Yc)
        return total / n + self.reg * w

    def objective(self, data, chunk_rows: int = 8192) -> float:
        """F(W) of the model's weights (``w_model``) on ``data`` = (X, Y) (chunked)."""
        total, w = 0.0, self.w_model
        for Phi, Yc in self._chunks(chunk_rows, data=data):
            total += float(self.loss.value(Phi @ w, Yc).sum())
        return total / int(data[0].shape[0]) + 0.5 * self.reg * float((w * w).sum())

    def _grad(self, G, m, w):
        """The mini-batch gradient of F at w from G = Phi_B^T loss'(Phi_B w, Y_B)."""
        g = G / m
        return g + self.reg * w if self.reg else g

    def step(self, Xb, Yb=None):
        """One SGD step (eta_t = eta0 / (1 + reg eta0 t)) or SVRG step (a new snapshot every
        ``inner`` steps) on batch (Xb, Yb); returns the record: batch objective before the step and
        the step size. ``Xb`` alone: the batch's rows are spread over dask workers
        (``kernelscale.spread.rff.SpreadRFFRows``), whose row sums (``rows.gradient``: G at w and
        at the snapshot, the summed loss, m) give the same step summed in another order."""
        svrg, spread = self.solver == "svrg", Yb is None
        if svrg and self.t % self.inner == 0:  # new snapshot at fixed iteration numbers
            self.w_snap = self.w.copy()
            self.mu = self.full_gradient(self.w_snap, Xb if spread else None)
        if spread:
            G, loss_sum, m, G_snap = Xb.gradient(self.w, self.w_snap if svrg else None)
            G, G_snap = self.xp.asarray(G), self.xp.asarray(G_snap) if svrg else None
            batch_loss = float(loss_sum / m)
        else:
            Phi = self.blocks.features(Xb, 0)
            u, m = Phi @ self.w, Phi.shape[0]
            G = Phi.T @ self.loss.deriv(u, Yb)
            G_snap = Phi.T @ self.loss.deriv(Phi @ self.w_snap, Yb) if svrg else None
            batch_loss = float(self.loss.value(u, Yb).mean())
        g = self._grad(G, m, self.w)
        if svrg:
            g = g - self._grad(G_snap, m, self.w_snap) + self.mu
        eta = self.eta0 if svrg else self.eta0 / (1.0 + self.reg * self.eta0 * self.t)
        self.w -= eta * g
        self._average_in(self.w)
        return {"objective": batch_loss, "step": eta}


__all__ = ["RFFSGD"]
