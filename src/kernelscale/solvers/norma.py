"""NORMA (Kivinen, Smola & Williamson, IEEE TSP 2004): kernel SGD with a truncated expansion.

    f_{t+1} = (1 - eta_t lam) f_t - (eta_t / m) sum_{i in batch} loss'(f_t(x_i), y_i) k(x_i, .)

Each step shrinks every old coefficient by (1 - eta_t lam), so a term added tau steps ago weighs at
most prod (1 - eta lam) ~ exp(-lam sum eta): NORMA keeps only the newest ``budget`` terms (their
truncation, §III), with a truncation error that decays geometrically in the budget. We store the
terms in a ring buffer (centres and coefficients) and the common shrink factor as one scalar
``scale`` (f = scale * sum_j c_j k(x_j, .)), so a step costs O(m budget d), independent of t.
eta_t = eta0 / sqrt(t) ("invsqrt", the paper's rate for non-separable problems) or eta0 ("constant").
"""

from __future__ import annotations

import math
from types import ModuleType

from ._common import DeviceState, kernel_apply


class NORMA(DeviceState):
    _arrays = ("centers", "coef")

    def __init__(self, kernel, loss, n_features: int, n_outputs: int, *, lam: float, eta0: float,
                 schedule: str, budget: int, xp: ModuleType, dtype):
        self.xp = xp
        self.kernel = kernel
        self.loss = loss
        self.lam = float(lam)
        self.eta0 = float(eta0)
        self.schedule = schedule
        self.budget = int(budget)
        self.centers = xp.zeros((self.budget, int(n_features)), dtype=dtype)
        self.coef = xp.zeros((self.budget, int(n_outputs)), dtype=dtype)
        self.scale = 1.0
        self.count = 0  # filled slots
        self.pos = 0  # next slot to overwrite (the oldest term once full)
        self.t = 0

    def eta(self, t: int) -> float:
        return self.eta0 / math.sqrt(t + 1) if self.schedule == "invsqrt" else self.eta0

    def decision(self, A):
        if self.count == 0:
            return self.xp.zeros((A.shape[0], self.coef.shape[1]), dtype=A.dtype)
        c = self.count
        return self.scale * kernel_apply(self.kernel, A, self.centers[:c], self.coef[:c], self.xp)

    def step(self, Xb, Yb):
        xp = self.xp
        u = self.decision(Xb)
        batch_loss = float(self.loss.value(u, Yb).mean())
        g = self.loss.deriv(u, Yb)
        eta = self.eta(self.t)
        shrink = 1.0 - eta * self.lam
        if shrink <= 0:
            raise FloatingPointError(f"NORMA step eta*lam = {eta * self.lam:g} >= 1; lower eta0")
        self.scale *= shrink
        if self.scale < 1e-150:  # fold the scale back into the coefficients before underflow
            self.coef *= self.scale
            self.scale = 1.0
        m = Xb.shape[0]
        new = -(eta / m) * g / self.scale
        if m > self.budget:  # only the newest ``budget`` terms survive anyway
            Xb, new, m = Xb[-self.budget:], new[-self.budget:], self.budget
        slots = xp.asarray([(self.pos + j) % self.budget for j in range(m)])
        self.centers[slots] = Xb
        self.coef[slots] = new
        self.pos = (self.pos + m) % self.budget
        self.count = min(self.budget, self.count + m)
        return {"objective": batch_loss, "step": eta}
