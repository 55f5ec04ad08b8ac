"""What the kernel estimators share (besides the targets mixins of ``_targets``): kernel,
bandwidth, reg and engine set-up, chunked prediction, the losses and the iterative fit."""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ..budget import kernel_matrix_bytes
from ..kernels import make_kernel, resolve_bandwidth
from ..kernels.selection import select
from ..losses import make_loss
from ..params import KernelscaleEstimator, reg_and_ridge
from ..rng import seed_from
from ..solvers._common import predict_rows, steps
from ..training import Rows, train
from ..validation import OnDevice, check_X, device_and_dtype
from ._docs import fill_doc


def n_features_rule(n: int, value, floor: int = 1000) -> int:
    """Random features / Nyström centres: ``value``, or for "auto" max(``floor``,
    ceil(sqrt(n) ln n)), the count with which random-feature and Nyström ridge keep the exact
    kernel's learning rate (Rudi & Rosasco, NIPS 2017; Rudi, Camoriano & Rosasco, NIPS 2015)."""
    if value != "auto":
        return int(value)
    return max(int(floor), int(math.ceil(math.sqrt(n) * math.log(max(n, 2)))))


def exact_max_n(itemsize: int = 8) -> int:
    """Largest n whose n x n kernel matrix fits ``budget.kernel_matrix_bytes()``."""
    return int(math.sqrt(kernel_matrix_bytes() / itemsize))


def auto_kernel(est, X, Y, want_alpha: bool):
    """(kernel, alpha or None) for ``est`` (its ``kernel``, ``bandwidth``, ``seed_``): bandwidth
    "auto" and/or a wanted alpha by ``kernels.selection.select`` on targets ``Y``."""
    metric = make_kernel(est.kernel, 1.0).metric  # unknown kernel -> one-line error first
    if isinstance(est.bandwidth, str) and X.shape[0] < 2:
        raise ValueError(f"bandwidth={est.bandwidth!r} needs at least 2 samples, got "
                         f"{X.shape[0]} sample")
    if est.bandwidth == "auto" or want_alpha:
        sigma, alpha = select(X, Y, est.kernel, is_classifier(est), seed=est.seed_,
                              bandwidth=est.bandwidth, alpha=None if want_alpha else 1.0)
    else:
        sigma, alpha = resolve_bandwidth(est.bandwidth, X, metric, seed=est.seed_), None
    return make_kernel(est.kernel, sigma), (alpha if want_alpha else None)


class KernelEstimatorBase(OnDevice, KernelscaleEstimator):
    """Parameter, engine, seed, kernel and reg resolution; prediction through the fitted model
    (``_fitted_state``) in chunks of ``_predict_chunk`` rows."""

    _predict_chunk = 4096

    def _setup_common(self, X, Y, reg_scale: float = 1.0):
        """Validate the parameters, resolve the engine (``device_``, ``dtype_``) and
        ``_select``; returns (xp, dtype)."""
        self._validate_params()
        engine = self._resolve_engine()
        self.device_, xp, dtype = device_and_dtype(engine.device, engine.dtype)
        self.dtype_ = np.dtype(dtype).name
        self._select(X, Y, reg_scale)
        return xp, dtype

    def _select(self, X, Y, reg_scale: float = 1.0):
        """``seed_``, ``kernel_``, ``bandwidth_`` and, with a ``reg`` parameter, ``reg_`` = nu and
        ``_alpha`` = n nu (``params.reg_and_ridge``; "auto": ``alpha_sel_`` times ``reg_scale``)."""
        self.seed_ = seed_from(self.random_state)
        reg = getattr(self, "reg", None)
        self.kernel_, self.alpha_sel_ = auto_kernel(self, X, Y, reg == "auto")
        self.bandwidth_ = self.kernel_.bandwidth
        if reg is not None:
            self.reg_, self._alpha = reg_and_ridge(reg, int(X.shape[0]), self.alpha_sel_, reg_scale)

    def _decision(self, X) -> np.ndarray:
        """Raw outputs (n, C) as numpy float64, computed chunk by chunk on the device."""
        check_is_fitted(self, self._fitted_state)
        X = check_X(self, X, reset=False)
        return predict_rows(X, getattr(self, self._fitted_state).decision,
                            self._xp(fitting=False), np.dtype(self.dtype_), self._predict_chunk)


CLASSIFICATION_LOSSES = ("logistic", "hinge", "square", "squared_hinge")
REGRESSION_LOSSES = ("square", "epsilon_insensitive", "huber")


class LossMixin:
    """``loss``: None means ``_default_loss``; allowed: ``_losses``."""

    def _loss_name(self):
        return self.loss or self._default_loss

    def _make_loss(self):
        """The loss object, or a one-line error naming the estimator and the choices."""
        if self._loss_name() not in self._losses:
            raise ValueError(f"loss={self._loss_name()!r} is not supported by "
                             f"{type(self).__name__}; choose one of {self._losses}")
        return make_loss(self._loss_name())


@fill_doc
class IterativeEstimator(KernelEstimatorBase):
    """Fitted in ``n_iter`` steps of ``solver_`` (``training.train``): ``fit`` builds the solver
    (``_init_solver``) unless it warm-starts, then runs it (``_fit_solver``)."""

    iterative = True
    _auto_epochs = 1  # n_iter="auto": this many passes over the data per fit

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        %(fit)s
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._init_solver(X, Y)
            self.history_ = {}
        self._xp()
        self._fit_solver(X, Y)
        return self

    def _n_iter(self, batches_per_epoch: int) -> int:
        self._validate_params()  # n_iter may change between warm-started fits
        return steps(self.n_iter, batches_per_epoch, self._auto_epochs)

    def _train(self, rows: Rows, name: str, hint: str, spread=None, n_iter=None) -> None:
        """``n_iter`` (default: ``self.n_iter`` over ceil(n / B) batches per epoch) steps of
        ``self.solver_`` on ``rows``."""
        if n_iter is None:
            n = int(rows.X.shape[0])
            n_iter = self._n_iter(-(-n // max(1, min(int(rows.batch_size), n))))
        train(self, self.solver_, rows, n_iter, name=name, hint=hint, spread=spread)
