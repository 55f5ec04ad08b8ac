"""NORMA, kernel SGD with a truncated expansion (``solvers.norma``): ``NORMAClassifier`` /
``NORMARegressor``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from ..solvers.norma import NORMA
from ..stream import BatchStream
from ._kernel_common import (
    REGRESSION_LOSSES,
    IterativeMixin,
    KernelEstimatorBase,
    check_loss,
)
from ._params import (
    ITERS,
    REG,
    Int,
    OneOf,
    Real,
    reg_and_ridge,
)
from ._targets import ClassifierTargets, RegressorTargets

# NORMA budget="auto": the centres it may hold. A step reads them all, so this bounds the cost
# of a step as well as the memory: 10,700 terms at d = 784 in float64 (Fashion-MNIST at 256 MB,
# 42,800 terms, did not finish its 3 epochs in 40 min on one core), while the tabular sets
# (d <= 57) never reach it
NORMA_CENTRES_MB = 64
NORMA_DROPPED_WEIGHT = 0.5  # warn when the ring dropped a term weighing more than this


class _NORMABase(IterativeMixin, KernelEstimatorBase):
    """Implementation shared by ``NORMAClassifier`` / ``NORMARegressor``: NORMA kernel SGD with a
    truncated expansion (``solvers.norma``), reading mini-batches from a BatchStream."""

    _auto_epochs = 3
    _rules = {"reg": REG, "eta0": Real(0, strict=True), "schedule": OneOf("invsqrt", "constant"),
              "budget": Int(1, "auto"), "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, loss=None, reg="auto", eta0=0.5, schedule="constant", budget="auto",
                 batch_size=8, n_iter="auto", kernel="gaussian", bandwidth="auto",
                 warm_start=False, random_state=None, engine=None, verbose=0):
        self.loss = loss
        self.reg = reg
        self.eta0 = eta0
        self.schedule = schedule
        self.budget = budget
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.verbose = verbose

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets (classifier: class labels).

        Returns
        -------
        self
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            loss = check_loss(self._loss_name(), self._losses, type(self).__name__)
            self._validate_params()
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, int(X.shape[0]), self.alpha_sel_)[0]
            self.budget_ = self._budget(int(X.shape[0]), np.dtype(dtype).itemsize)
            self.solver_ = NORMA(self.kernel_, loss, self.n_features_in_, Y.shape[1],
                                 reg=self.reg_, eta0=float(self.eta0),
                                 schedule=self.schedule, budget=self.budget_, xp=xp,
                                 dtype=dtype)
            self.history_ = {}
        xp = self._xp()
        dtype = np.dtype(self.dtype_)
        stream = BatchStream(X, Y, batch_size=int(self.batch_size), seed=self.seed_, xp=xp,
                             dtype=dtype, window_rows=self.engine_.window_rows)
        self.batch_size_ = stream.batch_size  # capped at n

        def batches(t):
            Xb, Yb = stream.batch(t)
            return Xb, xp.asarray(Yb, dtype=dtype)

        self._train(stream, batches, "NORMA", "set a smaller eta0")
        weight = self.solver_.dropped_weight
        if weight > NORMA_DROPPED_WEIGHT:
            warnings.warn(
                f"{type(self).__name__}: budget={self.budget_} dropped terms that still weighed "
                f"{weight:.2f} of a new one (eta0 * reg = {self._eta_reg():.2g} per step): the "
                f"truncated expansion cannot hold the regularised solution (raise budget, or "
                f"eta0 * reg)", UserWarning, stacklevel=2)
        return self

    def _eta_reg(self) -> float:
        """eta nu per step (the step clamped as in ``solvers.norma``)."""
        return min(float(self.eta0), 0.5 / self.reg_) * self.reg_ if self.reg_ > 0 else 0.0

    def _budget(self, n: int, itemsize: int) -> int:
        """``budget_`` (see ``budget``)."""
        if self.budget != "auto":
            return int(self.budget)
        m = min(int(self.batch_size), n)
        added = self._n_iter(-(-n // m)) * m  # terms this fit can add (at most one per row)
        eta_nu = self._eta_reg()
        needed = math.ceil(m * math.log(10) / eta_nu) if eta_nu > 0 else added
        centres = int(NORMA_CENTRES_MB * 2**20 // (self.n_features_in_ * itemsize))
        return int(max(m, min(added, needed, centres)))


class NORMAClassifier(ClassifierTargets, ClassifierMixin, _NORMABase):
    """NORMA kernel SGD with a truncated expansion of at most ``budget`` terms
    (``solvers.norma``) for classification; one-vs-all for several classes.

    Parameters
    ----------
    loss : str or None, default=None
        Classifier: "hinge" (default), "logistic", "squared_hinge"; regressor: "square" (default),
        "epsilon_insensitive", "huber".
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the RKHS penalty (nu/2)||f||^2 of the averaged objective (NORMA's lambda); "auto" =
        alpha_sel / n with alpha_sel from ``kernels.selection`` (chosen with the bandwidth);
        fitted: ``reg_``.
    eta0 : float, default=0.5
        Step size; each step is clamped to eta <= 1 / (2 nu) so that the shrink factor
        1 - eta nu stays in [1/2, 1].
    schedule : {"constant", "invsqrt"}, default="constant"
        eta_t = eta0 ("constant": the setting of NORMA's truncation bound - with a decaying step
        the newest terms are the smallest, so truncation drops the important early ones) or
        eta0 / sqrt(t) ("invsqrt").
    budget : "auto" or int, default="auto"
        At most this many kernel terms in the expansion (the oldest are dropped). "auto": every
        term the fit can add (``n_iter * batch_size``), so nothing is truncated, and at most
        batch_size ln(10) / (eta nu) terms (NORMA's truncation bound: a
        term that old weighs (1 - eta nu)^(budget / batch_size) <= 1/10 of a new one) and
        ``NORMA_CENTRES_MB`` of centres. At 1,000 terms NORMA sat near the majority class on
        held-out sets of 16k-50k rows; untruncated, twonorm went from 37 % to 2.1 % error and
        texture from 34 % to 4.9 % (``benchmarks/results/dsg-defaults.md``). When the budget
        used drops terms that still weigh more than half of a new one, ``fit`` warns: the
        truncated expansion cannot hold the regularised solution. Fitted: ``budget_``.
    batch_size : int, default=8
        Points per step; a value above n is capped at n (fitted: ``batch_size_``).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Mini-batch steps per ``fit`` call; "auto" = 3 epochs, 3 ceil(n / batch_size) (with the
        constant step the truncated expansion forgets all but the last ``budget`` points, so more
        passes do not help).
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    warm_start : bool, default=False
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk X
        ``window_rows``. Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    classes_ : ndarray
    solver_ : solvers.norma.NORMA
        The truncated expansion (centres, coefficients).
    budget_ : int
        Terms kept (``budget``).
    reg_, bandwidth_ : the values used.
    batch_size_ : int
        Points per step used: ``batch_size``, at most n.
    n_iter_ : int
    history_ : dict
        Per-iteration records: iter, time, objective (batch loss), step.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.norma import NORMAClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = NORMAClassifier(budget=100, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """
    _losses = ("hinge", "logistic", "squared_hinge")

    def _loss_name(self):
        return self.loss or "hinge"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True  # truncated, regularised SGD: a weak baseline
        return tags


class NORMARegressor(RegressorTargets, RegressorMixin, _NORMABase):
    """NORMA kernel SGD with a truncated expansion of at most ``budget`` terms
    (``solvers.norma``) for regression.

    Parameters
    ----------
    loss : str or None, default=None
        Classifier: "hinge" (default), "logistic", "squared_hinge"; regressor: "square" (default),
        "epsilon_insensitive", "huber".
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the RKHS penalty (nu/2)||f||^2 of the averaged objective (NORMA's lambda); "auto" =
        alpha_sel / n with alpha_sel from ``kernels.selection`` (chosen with the bandwidth);
        fitted: ``reg_``.
    eta0 : float, default=0.5
        Step size; each step is clamped to eta <= 1 / (2 nu) so that the shrink factor
        1 - eta nu stays in [1/2, 1].
    schedule : {"constant", "invsqrt"}, default="constant"
        eta_t = eta0 ("constant": the setting of NORMA's truncation bound - with a decaying step
        the newest terms are the smallest, so truncation drops the important early ones) or
        eta0 / sqrt(t) ("invsqrt").
    budget : "auto" or int, default="auto"
        At most this many kernel terms in the expansion (the oldest are dropped). "auto": every
        term the fit can add (``n_iter * batch_size``), so nothing is truncated, and at most
        batch_size ln(10) / (eta nu) terms (NORMA's truncation bound: a
        term that old weighs (1 - eta nu)^(budget / batch_size) <= 1/10 of a new one) and
        ``NORMA_CENTRES_MB`` of centres. At 1,000 terms NORMA sat near the majority class on
        held-out sets of 16k-50k rows; untruncated, twonorm went from 37 % to 2.1 % error and
        texture from 34 % to 4.9 % (``benchmarks/results/dsg-defaults.md``). When the budget
        used drops terms that still weigh more than half of a new one, ``fit`` warns: the
        truncated expansion cannot hold the regularised solution. Fitted: ``budget_``.
    batch_size : int, default=8
        Points per step; a value above n is capped at n (fitted: ``batch_size_``).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Mini-batch steps per ``fit`` call; "auto" = 3 epochs, 3 ceil(n / batch_size) (with the
        constant step the truncated expansion forgets all but the last ``budget`` points, so more
        passes do not help).
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    warm_start : bool, default=False
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk X
        ``window_rows``. Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    solver_ : solvers.norma.NORMA
        The truncated expansion (centres, coefficients).
    budget_ : int
        Terms kept (``budget``).
    reg_, bandwidth_ : the values used.
    batch_size_ : int
        Points per step used: ``batch_size``, at most n.
    n_iter_ : int
    history_ : dict
        Per-iteration records: iter, time, objective (batch loss), step.
    y_offset_ : ndarray of shape (n_outputs,)
        The training mean of y: f is fitted to y - y_offset_ and every prediction adds it
        back (``estimators._targets``).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.norma import NORMARegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = NORMARegressor(budget=100, random_state=0).fit(X, y / y.std())
    >>> model.predict(X[:3]).shape
    (3,)
    """
    _losses = REGRESSION_LOSSES

    def _loss_name(self):
        return self.loss or "square"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # truncated, regularised SGD: a weak baseline
        return tags


__all__ = ["NORMAClassifier", "NORMARegressor"]
