"""NORMA (Kivinen, Smola & Williamson, IEEE TSP 2004): kernel SGD with a truncated expansion.

    f_{t+1} = (1 - eta_t reg) f_t - (eta_t / m) sum_{i in batch} loss'(f_t(x_i), y_i) k(x_i, .)

Only the newest ``max_terms`` terms are kept (the paper's truncation, §III), in a ring buffer
of centres and coefficients with the common shrink factor as one scalar: f = scale * sum_j c_j
k(x_j, .); a step costs O(m max_terms d). eta_t = eta0 / sqrt(t) ("invsqrt") or eta0
("constant"), at most 1 / (2 reg). The centres are dense (max_terms x d) whatever X is.
Only points with a non-zero loss derivative become terms. Classification losses store
g_j - (mean_B g - mean_{<=t} g): the batch's mean derivative over its new terms is replaced by its
running average over all steps so far (a control variate; docs/design.md).
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np

from ..backend import is_sparse
from ._common import DeviceState, kernel_apply


class NORMA(DeviceState):
    """NORMA state: a ring buffer of at most ``max_terms`` centres and coefficients and a common
    scale, f = scale * sum_j c_j k(x_j, .) (module docstring); ``step`` is one mini-batch update."""

    _arrays = ("centers", "coef", "g_mean")

    def __init__(self, kernel, loss, n_features: int, n_outputs: int, *, reg: float, eta0: float,
                 schedule: str, max_terms: int, xp: ModuleType, dtype):
        self.xp = xp
        self.kernel = kernel
        self.loss = loss
        self.reg = float(reg)
        self.eta0 = float(eta0)
        self.schedule = schedule
        self.max_terms = int(max_terms)
        self.centers = xp.zeros((self.max_terms, int(n_features)), dtype=dtype)
        self.coef = xp.zeros((self.max_terms, int(n_outputs)), dtype=dtype)
        # the control variate's running mean of the batch-mean loss derivative (classification)
        self.center = loss.task == "classification"
        self.g_mean = None
        self.n_mean = 0
        self.scale = 1.0
        self.count = 0  # filled slots
        self.pos = 0  # next slot to overwrite (the oldest term once full)
        self.t = 0
        # sum of log(1 - eta reg) so far, its value when each slot's term was added, and the
        # largest weight (relative to a new term) of a term the ring has dropped: the
        # truncation's cost, NORMA's (1 - eta reg)^tau (§III)
        self.log_shrink = 0.0
        self.born = np.zeros(self.max_terms)
        self.dropped_weight = 0.0

    def decision(self, A):
        """f(A) over the stored terms (zeros before the first term)."""
        c = self.count
        return self.scale * kernel_apply(self.kernel, A, self.centers[:c], self.coef[:c], self.xp)

    def step(self, Xb, Yb):
        """One mini-batch NORMA step on (Xb, Yb): shrink by 1 - eta reg, store the batch's
        non-zero-derivative points as new terms (oldest overwritten). Returns the record: batch
        objective before the step, the step, and ``after`` (the batch's loss after it, for
        ``run_loop``'s overshoot check)."""
        xp = self.xp
        u = self.decision(Xb)
        batch_loss = float(self.loss.value(u, Yb).mean())
        g = self.loss.deriv(u, Yb)
        active = xp.any(g != 0, axis=1)
        if self.center and bool(active.any()):  # the control variate (module docstring)
            mu = g[active].mean(axis=0)
            self.n_mean += 1
            self.g_mean = (mu.copy() if self.g_mean is None
                           else self.g_mean + (mu - self.g_mean) / self.n_mean)
            g = xp.where(active[:, None], g - (mu - self.g_mean)[None, :], 0.0)
        eta = self.eta0 / math.sqrt(self.t + 1) if self.schedule == "invsqrt" else self.eta0
        eta = min(eta, 0.5 / self.reg) if self.reg > 0 else eta
        shrink = 1.0 - eta * self.reg
        self.scale *= shrink
        self.log_shrink += math.log(shrink)
        if self.scale < 1e-150:  # fold the scale back into the coefficients before underflow
            self.coef *= self.scale
            self.scale = 1.0
        m = Xb.shape[0]
        new = -(eta / m) * g / self.scale
        X_all = Xb
        if not bool(active.all()):  # only the terms with a non-zero derivative are stored
            Xb, new = Xb[active], new[active]
            m = int(Xb.shape[0])
            if m == 0:
                return {"objective": batch_loss, "step": eta}
        if m > self.max_terms:  # only the newest ``max_terms`` terms survive anyway
            Xb, new, m = Xb[-self.max_terms:], new[-self.max_terms:], self.max_terms
        # the batch's loss after this step: the shrunk outputs plus the new terms' (the terms the
        # ring drops, the oldest, left out)
        u_after = shrink * u + self.kernel(X_all, Xb) @ (new * self.scale)
        after = float(self.loss.value(u_after, Yb).mean())
        idx = [(self.pos + j) % self.max_terms for j in range(m)]
        dropped = max(0, self.count + m - self.max_terms)  # the last ``dropped`` slots held terms
        if dropped:
            old = self.born[idx[m - dropped:]]
            self.dropped_weight = max(self.dropped_weight, float(np.exp(self.log_shrink - old.min())))
        self.born[idx] = self.log_shrink
        slots = xp.asarray(idx)
        self.centers[slots] = Xb.toarray() if is_sparse(Xb) else Xb
        self.coef[slots] = new
        self.pos = (self.pos + m) % self.max_terms
        self.count = min(self.max_terms, self.count + m)
        return {"objective": batch_loss, "step": eta, "after": after}
