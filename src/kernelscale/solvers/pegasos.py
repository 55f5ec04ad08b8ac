"""Kernelized mini-batch Pegasos (Shalev-Shwartz, Singer, Srebro & Cotter, Math. Prog. 2011,
Fig. 3 with the mini-batch of §2.3), one-vs-all for several classes.

Primal: min_w (reg/2)||w||^2 + (1/n) sum_i max(0, 1 - y_i <w, phi(x_i)>). With eta_t = 1/(reg t),
w_{t+1} = (1 - eta_t reg) w_t + (eta_t / m) sum_{i in A_t^+} y_i phi(x_i), A_t^+ the batch points
with margin < 1 under w_t. Unrolling, w_{t+1} = (1/(reg t)) sum_j a_j y_j phi(x_j) where a_j counts
(in units of 1/m) how often x_j violated the margin, so the state is the count vector a (n x C) and

    f_t(x) = (1 / (reg (t - 1))) sum_j a_j y_j k(x_j, x)   (f_1 = 0).

Kernel evaluations only touch the current support (a_j != 0): O(m |SV| d) per iteration.
"""

from __future__ import annotations

from types import ModuleType

from ._common import DeviceState, kernel_apply


class KernelPegasos(DeviceState):
    """Kernel Pegasos state over the training rows X (held on the device): the violation counts
    ``a`` (n x C); f is evaluated as in the module docstring."""

    _renamed = {"lam": "reg"}  # (pickled before nu had one name)

    _arrays = ("X", "Y", "a")
    # the step 1/(reg t) is the algorithm's own and its iterate is bounded by construction,
    # ||w_t|| <= max ||phi|| / reg (sum_j a_j <= t); with reg = alpha / n the early hinge is
    # legitimately ~1/reg times its start, so run_loop watches finiteness only
    watch_growth = False

    def __init__(self, kernel, X, Y, reg: float, xp: ModuleType):
        self.xp = xp
        self.kernel = kernel
        self.X, self.Y = X, Y
        self.reg = float(reg)
        self.a = xp.zeros(Y.shape, dtype=X.dtype)
        self.t = 0

    def _f(self, A, t_done: int):
        """f after ``t_done`` iterations at rows A."""
        xp = self.xp
        if t_done == 0:
            return xp.zeros((A.shape[0], self.Y.shape[1]), dtype=A.dtype)
        sv = xp.nonzero((self.a != 0).any(axis=1))[0]
        if sv.shape[0] == 0:
            return xp.zeros((A.shape[0], self.Y.shape[1]), dtype=A.dtype)
        coef = self.a[sv] * self.Y[sv]
        return kernel_apply(self.kernel, A, self.X[sv], coef, xp) / (self.reg * t_done)

    def step(self, Xb, idx):
        """One mini-batch Pegasos step on rows Xb with training indices idx: a_j += 1/m for the
        margin violators. Returns the record: mean hinge loss and violation rate before the step."""
        xp = self.xp
        idx = xp.asarray(idx)
        Yb = self.Y[idx]
        margin = Yb * self._f(Xb, self.t)
        viol = margin < 1.0
        hinge = float(xp.maximum(0.0, 1.0 - margin).mean())
        # a_j += 1/m for violators (the 1/(reg t) factor is applied when evaluating f)
        self.a[idx] += viol.astype(self.a.dtype) / Xb.shape[0]
        return {"objective": hinge, "violations": float(viol.mean())}

    def decision(self, A):
        """f(A) after the iterations done so far."""
        return self._f(A, self.t)
