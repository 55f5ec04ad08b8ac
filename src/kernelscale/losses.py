"""Losses of Dai, Xie, He, Liang, Raj, Balcan, Song, Scalable Kernel Methods via Doubly Stochastic
Gradients, NIPS 2014, section 4, as value and derivative in u = f(x).

All losses act on u of shape (n, C) and encoded targets Y of shape (n, C):
* regression: Y = y (C outputs);
* margin losses (logistic, hinge, squared hinge) for classification: Y in {-1, +1}
  (binary: C = 1; multi-class: one-vs-all, C columns);
* softmax: Y one-hot over C classes.
``value`` returns the per-sample loss (n,); ``deriv`` returns d loss / d u, shape (n, C)
(a subgradient where the loss has a kink).
"""

from __future__ import annotations

from .backend import array_namespace


class Loss:
    """Base of the losses: per-sample ``value`` and ``deriv`` in u = f(x), as the class docstring
    of each states them. Class attributes: ``task``, ``probabilistic`` (predict_proba exists) and
    ``lipschitz``, the bound M on |loss'| that CDSG's checking rule needs (None: estimated from
    the data; Fast Doubly Stochastic Kernel Machines, eq. (9)), and ``curvature``, loss''(0) (1
    where the loss has no second derivative at 0; ``reg_scale``)."""

    name = "loss"
    task = "regression"  # or "classification", "novelty"
    probabilistic = False
    lipschitz = None
    curvature = 1.0

    def reg_scale(self, n_outputs: int) -> float:
        """Factor on the held-out selection's nu under ``reg="auto"``: loss''(0). The selection
        scores kernel ridge regression (``kernels.selection``), whose loss has curvature 1; with
        nu' = loss''(0) nu the first Newton step of this loss's objective from f = 0,
        (loss''(0) K + nu' I)^-1 K (-loss'(0)), is that kernel ridge fit up to a scale."""
        return self.curvature

    def value(self, u, Y):  # pragma: no cover - abstract
        """Per-sample loss, shape (n,), for outputs u and encoded targets Y, both (n, C)."""
        raise NotImplementedError

    def deriv(self, u, Y):  # pragma: no cover - abstract
        """d loss / d u, shape (n, C) (a subgradient at a kink)."""
        raise NotImplementedError

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"


class Square(Loss):
    """0.5 (u - y)^2: kernel ridge regression / GP posterior mean."""

    name = "square"

    def value(self, u, Y):
        return 0.5 * ((u - Y) ** 2).sum(axis=1)

    def deriv(self, u, Y):
        """u - y."""
        return u - Y


class Logistic(Loss):
    """log(1 + exp(-y u)), y in {-1, +1}."""

    name = "logistic"
    task = "classification"
    probabilistic = True
    lipschitz = 1.0
    curvature = 0.25

    def value(self, u, Y):
        xp = array_namespace(u)
        return xp.logaddexp(0.0, -Y * u).sum(axis=1)

    def deriv(self, u, Y):
        """-y sigmoid(-y u), written with tanh (finite at large |u|)."""
        xp = array_namespace(u)
        return -Y * 0.5 * (1.0 - xp.tanh(0.5 * Y * u))


class Softmax(Loss):
    """Multinomial logistic: logsumexp(u) - <Y, u>, Y one-hot."""

    name = "softmax"
    task = "classification"
    probabilistic = True
    lipschitz = 2.0 ** 0.5

    def reg_scale(self, n_outputs: int) -> float:
        """1 / C: the Hessian of the softmax loss at u = 0 is (I - 1 1^T / C) / C."""
        return 1.0 / n_outputs

    def value(self, u, Y):
        m = u.max(axis=1, keepdims=True)
        xp = array_namespace(u)
        lse = m[:, 0] + xp.log(xp.exp(u - m).sum(axis=1))
        return lse - (Y * u).sum(axis=1)

    def deriv(self, u, Y):
        """softmax(u) - Y."""
        return softmax(u) - Y


class Hinge(Loss):
    """max(0, 1 - y u): SVM."""

    name = "hinge"
    task = "classification"
    lipschitz = 1.0

    def value(self, u, Y):
        xp = array_namespace(u)
        return xp.maximum(0.0, 1.0 - Y * u).sum(axis=1)

    def deriv(self, u, Y):
        """Subgradient -y where the margin y u < 1, else 0."""
        return -Y * (Y * u < 1.0)


class SquaredHinge(Loss):
    """max(0, 1 - y u)^2: L2-SVM."""

    name = "squared_hinge"
    task = "classification"
    curvature = 2.0

    def value(self, u, Y):
        xp = array_namespace(u)
        return (xp.maximum(0.0, 1.0 - Y * u) ** 2).sum(axis=1)

    def deriv(self, u, Y):
        """-2 y max(0, 1 - y u)."""
        xp = array_namespace(u)
        return -2.0 * Y * xp.maximum(0.0, 1.0 - Y * u)


class EpsilonInsensitive(Loss):
    """max(0, |u - y| - epsilon): support vector regression (epsilon = 0: least absolute deviation)."""

    name = "epsilon_insensitive"
    lipschitz = 1.0

    def __init__(self, epsilon: float = 0.1):
        if epsilon < 0:
            raise ValueError(f"epsilon={epsilon!r} must be >= 0")
        self.epsilon = float(epsilon)

    def value(self, u, Y):
        xp = array_namespace(u)
        return xp.maximum(0.0, xp.abs(u - Y) - self.epsilon).sum(axis=1)

    def deriv(self, u, Y):
        """sign(u - y) outside the epsilon tube, 0 inside."""
        xp = array_namespace(u)
        r = u - Y
        return xp.sign(r) * (xp.abs(r) > self.epsilon)


class Huber(Loss):
    """0.5 r^2 for |r| <= delta, delta (|r| - delta/2) beyond; r = u - y."""

    name = "huber"

    def __init__(self, delta: float = 1.0):
        if delta <= 0:
            raise ValueError(f"huber delta={delta!r} must be > 0")
        self.delta = float(delta)
        self.lipschitz = self.delta

    def value(self, u, Y):
        xp = array_namespace(u)
        a = xp.abs(u - Y)
        return xp.where(a <= self.delta, 0.5 * a * a, self.delta * (a - 0.5 * self.delta)).sum(axis=1)

    def deriv(self, u, Y):
        """r = u - y clipped to [-delta, delta]."""
        xp = array_namespace(u)
        return xp.clip(u - Y, -self.delta, self.delta)


class Quantile(Loss):
    """Pinball loss at level tau: tau r for r >= 0, (tau - 1) r for r < 0, with r = y - u."""

    name = "quantile"

    def __init__(self, tau: float = 0.5):
        if not 0.0 < tau < 1.0:
            raise ValueError(f"quantile tau={tau!r} must be in (0, 1)")
        self.tau = float(tau)
        self.lipschitz = max(self.tau, 1.0 - self.tau)

    def value(self, u, Y):
        r = Y - u
        xp = array_namespace(u)
        return xp.where(r >= 0, self.tau * r, (self.tau - 1.0) * r).sum(axis=1)

    def deriv(self, u, Y):
        """-tau where y > u, 1 - tau otherwise (a subgradient at u = y)."""
        xp = array_namespace(u)
        return xp.where(Y - u > 0, -self.tau, 1.0 - self.tau)


class Novelty(Loss):
    """One-class (novelty detection) loss max(0, rho - u) - nu_o rho with a learned offset rho.

    Objective E[max(0, rho - f(x))] - nu_o rho + (nu/2)||f||^2 (Dai et al. 2014, section 4):
    d/d rho = P(f(x) < rho) - nu_o, so each step does rho <- rho - gamma (mean 1[f < rho] - nu_o);
    at the optimum a fraction nu_o of the data lies below rho. Targets are ignored.
    """

    name = "novelty"
    task = "novelty"
    lipschitz = 1.0

    def __init__(self, nu_o: float = 0.1):
        if not 0.0 < nu_o < 1.0:
            raise ValueError(f"novelty nu_o={nu_o!r} must be in (0, 1)")
        self.nu_o = float(nu_o)
        self.rho = 0.0

    def value(self, u, Y):
        xp = array_namespace(u)
        return (xp.maximum(0.0, self.rho - u) - self.nu_o * self.rho).sum(axis=1)

    def deriv(self, u, Y):
        """-1 where u < rho, else 0 (targets ignored)."""
        return -1.0 * (u < self.rho)

    def offset_grad(self, u) -> float:
        """d/d rho of the objective on outputs u: the fraction of u below rho minus nu_o."""
        return float((u < self.rho).mean()) - self.nu_o

    def update_offset(self, u, step: float) -> None:
        """One gradient step on the offset: rho <- rho - step * ``offset_grad(u)``."""
        self.rho -= step * self.offset_grad(u)


def softmax(u):
    """Row-wise softmax of u (n, C), shifted by the row max so exp cannot overflow."""
    xp = array_namespace(u)
    e = xp.exp(u - u.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sigmoid(u):
    """1 / (1 + exp(-u)), written with tanh so it stays finite for large |u|."""
    xp = array_namespace(u)
    return 0.5 * (1.0 + xp.tanh(0.5 * u))


LOSSES = {c.name: c for c in (Square, Logistic, Softmax, Hinge, SquaredHinge, EpsilonInsensitive,
                              Huber, Quantile, Novelty)}


def make_loss(name, **params) -> Loss:
    """Loss instance by name (or pass a Loss through); one-line error for an unknown name."""
    if isinstance(name, Loss):
        return name
    if not isinstance(name, str) or name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}")
    return LOSSES[name](**params)


__all__ = ["LOSSES", "Loss", "make_loss", "softmax", "sigmoid", *(c.__name__ for c in LOSSES.values())]
