"""Kernelized mini-batch Pegasos (Shalev-Shwartz, Singer, Srebro & Cotter, Math. Prog. 2011,
Fig. 3 with the mini-batch of §2.3), one-vs-all for several classes.

Primal: min_w (reg/2)||w||^2 + (1/n) sum_i max(0, 1 - y_i <w, phi(x_i)>). With eta_t = 1/(reg t),
w_{t+1} = (1 - eta_t reg) w_t + (eta_t / m) sum_{i in A_t^+} y_i phi(x_i), A_t^+ the batch points
with margin < 1 under w_t. Unrolling, w_{t+1} = (1/(reg t)) sum_j a_j y_j phi(x_j) where a_j counts
(in units of 1/m) how often x_j violated the margin, so the state is the count vector a (n x C) and

    f_t(x) = (1 / (reg (t - 1))) sum_j a_j y_j k(x_j, x)   (f_1 = 0).

Kernel evaluations only touch the current support (a_j != 0): O(m |SV| d) per iteration.

The model predicts with the mean of the last iterates (``TailAverage``: a half to three quarters
of them): the tail mean of a_s / s (f_{s+1} has the coefficients a_s / (reg s)), kept in O(m) per
step (``_count_in``).
"""

from __future__ import annotations

from types import ModuleType

from ._common import DeviceState, TailAverage, kernel_apply


class KernelPegasos(TailAverage, DeviceState):
    """Kernel Pegasos state over the training rows X (held on the device): the violation counts
    ``a`` (n x C) and the tail sums of ``_count_in``; f is evaluated as in the module docstring."""

    _arrays = ("X", "Y", "a", "sum_before", "sum_since")
    watch_growth = False  # run_loop watches finiteness only (docs/design.md)

    def __init__(self, kernel, X, Y, reg: float, xp: ModuleType):
        self.xp = xp
        self.kernel = kernel
        self.X, self.Y = X, Y
        self.reg = float(reg)
        self.a = xp.zeros(Y.shape, dtype=X.dtype)
        self.t = 0
        self.sum_before, self.sum_since = xp.zeros_like(self.a), xp.zeros_like(self.a)
        self.h_since = 0.0

    def _f(self, A, t_done: int, a=None):
        """f after ``t_done`` iterations at rows A; with ``a``: the f of coefficients a / reg."""
        xp = self.xp
        if t_done == 0:
            return xp.zeros((A.shape[0], self.Y.shape[1]), dtype=A.dtype)
        sv = xp.nonzero((self.a != 0).any(axis=1))[0]
        if sv.shape[0] == 0:
            return xp.zeros((A.shape[0], self.Y.shape[1]), dtype=A.dtype)
        coef = (self.a if a is None else a)[sv] * self.Y[sv]
        scale = self.reg * t_done if a is None else self.reg
        return kernel_apply(self.kernel, A, self.X[sv], coef, xp) / scale

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
        delta = viol.astype(self.a.dtype) / Xb.shape[0]
        self._count_in(idx, delta)
        self.a[idx] += delta
        return {"objective": hinge, "violations": float(viol.mean())}

    def _count_in(self, idx, delta) -> None:
        """Count the iterate of step s = t + 1, coefficients a_s / s with a_s = a + delta at rows
        idx, into the tail sums in O(m): with h_q the sum of 1/r over the window's steps r <= q,
        the window's sum of a_s / s is h_s a_s minus the sum of delta_q h_(q-1) over its steps
        q, which ``sum_since`` holds; ``sum_before`` is that of the window before."""
        if self._tail_turns():
            self.sum_before = self.h_since * self.a - self.sum_since
            self.sum_since *= 0
            self.h_since = 0.0
        self.sum_since[idx] += self.h_since * delta
        self.h_since += 1.0 / (self.t + 1)

    def decision(self, A):
        """f(A) of the tail mean of the iterates so far."""
        if self.n_averaged == 0:
            return self._f(A, self.t)
        mean = (self.sum_before + self.h_since * self.a - self.sum_since) / self.n_averaged
        return self._f(A, self.t, mean)
