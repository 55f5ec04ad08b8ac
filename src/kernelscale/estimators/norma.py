"""NORMA, kernel SGD with a truncated expansion (``solvers.norma``; Kivinen, Smola, Williamson,
"Online Learning with Kernels", IEEE Transactions on Signal Processing 2004): ``NORMAClassifier``
/ ``NORMARegressor``."""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from ..params import ITERS, REG, Int, OneOf, Real, store_params
from ..solvers.norma import NORMA
from ..training import Rows, as_targets
from ._docs import fill_doc
from ._kernel_common import REGRESSION_LOSSES, IterativeEstimator, LossMixin
from ._targets import ClassifierTargets, RegressorTargets

NORMA_CENTRES_MB = 64  # max_terms="auto": at most this many MB of centres
NORMA_DROPPED_WEIGHT = 0.5  # warn when the ring dropped a term weighing more than this


_NORMA_DOCS = {
    "parameters": """\
loss : str or None, default=None
    Classifier: "hinge" (default), "logistic", "squared_hinge"; regressor: "square" (default),
    "epsilon_insensitive", "huber".
%(reg)s
    It is NORMA's lambda.
eta0 : float > 0, default=0.5
    Step size, at most 1 / (2 nu) per step.
schedule : {"constant", "invsqrt"}, default="constant"
    eta_t = eta0 ("constant") or eta0 / sqrt(t) ("invsqrt").
max_terms : "auto" or int >= 1, default="auto"
    Kernel terms kept in the expansion, the oldest dropped (``fit`` warns when a dropped one
    still weighed more than half of a new one). "auto": every term the fit can add, at most
    batch_size ln(10) / (eta nu) (a dropped term then weighs <= 1/10 of a new one) and
    ``NORMA_CENTRES_MB`` of centres, at least batch_size. Fitted: ``max_terms_``.
batch_size : int >= 1, default=8
    Points per step, at most n. Fitted: ``batch_size_``.
%(n_iter)s
    "auto": 3 epochs.
%(iterative_common)s
%(verbose)s""",
    "attributes": """\
solver_ : solvers.norma.NORMA
    The truncated expansion (centres, coefficients).
max_terms_, batch_size_ : int
    Terms kept and points per step used.
reg_, bandwidth_ : float
    nu and sigma used.
%(n_iter_)s
%(n_features_in_)s""",
}


class _NORMABase(LossMixin, IterativeEstimator):
    """Implementation shared by ``NORMAClassifier`` / ``NORMARegressor``."""

    _auto_epochs = 3
    _rules = {"reg": REG, "eta0": Real(0, strict=True), "schedule": OneOf("invsqrt", "constant"),
              "max_terms": Int(1, "auto"), "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, loss=None, reg="auto", eta0=0.5, schedule="constant", max_terms="auto",
                 batch_size=8, n_iter="auto", kernel="gaussian", bandwidth="auto",
                 warm_start=False, random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def _init_solver(self, X, Y):
        loss = self._make_loss()
        xp, dtype = self._setup_common(X, Y, loss.reg_scale(Y.shape[1]))
        self.max_terms_ = self._max_terms(int(X.shape[0]), np.dtype(dtype).itemsize)
        self.solver_ = NORMA(self.kernel_, loss, self.n_features_in_, Y.shape[1], reg=self.reg_,
                             eta0=float(self.eta0), schedule=self.schedule,
                             max_terms=self.max_terms_, xp=xp, dtype=dtype)

    def _fit_solver(self, X, Y):
        self.batch_size_ = min(int(self.batch_size), int(X.shape[0]))
        self._train(Rows(X, Y, int(self.batch_size), self.seed_, np.dtype(self.dtype_),
                         encode=as_targets(np.dtype(self.dtype_))), "NORMA", "set a smaller eta0")
        weight = self.solver_.dropped_weight
        if weight > NORMA_DROPPED_WEIGHT:
            warnings.warn(
                f"{type(self).__name__}: max_terms={self.max_terms_} dropped terms that still "
                f"weighed {weight:.2f} of a new one (eta0 * reg = {self._eta_reg():.2g} per step): the "
                f"truncated expansion cannot hold the regularised solution (raise max_terms, or "
                f"eta0 * reg)", UserWarning, stacklevel=3)

    def _eta_reg(self) -> float:
        """eta nu per step (the step clamped as in ``solvers.norma``)."""
        return min(float(self.eta0), 0.5 / self.reg_) * self.reg_ if self.reg_ > 0 else 0.0

    def _max_terms(self, n: int, itemsize: int) -> int:
        """``max_terms_`` (see ``max_terms``)."""
        if self.max_terms != "auto":
            return int(self.max_terms)
        m = min(int(self.batch_size), n)
        added = self._n_iter(-(-n // m)) * m  # terms this fit can add (at most one per row)
        eta_nu = self._eta_reg()
        needed = math.ceil(m * math.log(10) / eta_nu) if eta_nu > 0 else added
        centres = int(NORMA_CENTRES_MB * 2**20 // (self.n_features_in_ * itemsize))
        return int(max(m, min(added, needed, centres)))


class _PoorScore:
    """Mixin (before scikit-learn's): truncated, regularised SGD is a weak baseline."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        (tags.classifier_tags or tags.regressor_tags).poor_score = True
        return tags


@fill_doc(**_NORMA_DOCS, example="max_terms=100, random_state=0")
class NORMAClassifier(_PoorScore, ClassifierTargets, ClassifierMixin, _NORMABase):
    """NORMA kernel SGD with a truncated expansion of at most ``max_terms`` terms for
    classification; one-vs-all for several classes.

    %(classifier_doc)s
    """

    _losses = ("hinge", "logistic", "squared_hinge")
    _default_loss = "hinge"


@fill_doc(**_NORMA_DOCS, example="max_terms=100, random_state=0")
class NORMARegressor(_PoorScore, RegressorTargets, RegressorMixin, _NORMABase):
    """NORMA kernel SGD with a truncated expansion of at most ``max_terms`` terms for regression.

    %(regressor_doc)s
    """

    _losses = REGRESSION_LOSSES
    _default_loss = "square"
