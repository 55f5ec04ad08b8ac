"""Pieces shared by the EigenPro and baseline estimators: kernel/bandwidth/device set-up
(the targets mixins are in ``_targets``), chunked prediction through a solver's ``decision``, the
losses they accept, the ridge of a summed-loss solve and the iterative estimators'
training loop."""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ..kernels import make_kernel, resolve_bandwidth
from ..kernels.selection import select
from ..losses import make_loss
from ..params import KernelscaleEstimator, reg_and_ridge
from ..rng import seed_from
from ..solvers._common import predict_rows, steps
from ..training import Rows, train
from ..validation import OnDevice, check_X, device_and_dtype

__all__ = ["KernelEstimatorBase", "IterativeMixin",
           "auto_kernel", "check_loss", "ridge_alpha", "exact_max_n", "n_features_rule",
           "CLASSIFICATION_LOSSES", "REGRESSION_LOSSES"]


def n_features_rule(n: int, value, floor: int = 1000) -> int:
    """Random features / Nyström centres: ``value``, or for "auto" ceil(sqrt(n) ln n), the count
    with which random-feature and Nyström ridge regression keep the exact kernel's learning rate
    (Rudi & Rosasco, NIPS 2017; Rudi, Camoriano & Rosasco, NIPS 2015), at least ``floor``,
    at most n for Nyström-style centres (``floor`` <= n is not enforced for features)."""
    if value != "auto":
        return int(value)
    return max(int(floor), int(math.ceil(math.sqrt(n) * math.log(max(n, 2)))))


def exact_max_n(itemsize: int = 8) -> int:
    """Largest n whose n x n kernel matrix takes at most 60 % of the memory available now."""
    import psutil

    return int(math.sqrt(0.6 * psutil.virtual_memory().available / itemsize))


def auto_kernel(est, X, Y, want_alpha: bool, kernel_name: str | None = None):
    """(kernel, alpha or None) for estimator ``est`` (its ``kernel``, ``bandwidth``,
    ``seed_``): bandwidth "auto" and/or a wanted alpha by ``kernels.selection.select`` on
    targets ``Y`` (regression values, class indices or encoded classes); otherwise the bandwidth as given."""
    name = kernel_name or est.kernel
    metric = make_kernel(name, 1.0).metric  # unknown kernel -> one-line error first
    if isinstance(est.bandwidth, str) and X.shape[0] < 2:
        raise ValueError(f"bandwidth={est.bandwidth!r} needs at least 2 samples, got "
                         f"{X.shape[0]} sample")
    if est.bandwidth == "auto" or want_alpha:
        if Y is None:
            raise ValueError("bandwidth='auto' needs the training targets")
        sigma, alpha = select(X, Y, name, is_classifier(est), seed=est.seed_,
                              bandwidth=est.bandwidth, alpha=None if want_alpha else 1.0)
    else:
        sigma, alpha = resolve_bandwidth(est.bandwidth, X, metric, seed=est.seed_), None
    return make_kernel(name, sigma), (alpha if want_alpha else None)


class KernelEstimatorBase(OnDevice, KernelscaleEstimator):
    """Kernel, bandwidth, seed and engine resolution; prediction through ``self.solver_``."""

    def _setup_common(self, X, Y=None, reg="fixed"):
        """Resolve the engine (device, dtype), seed, bandwidth and kernel; with ``reg="auto"``
        also ``alpha_sel_`` = n nu (``kernels.selection``: held-out selection on a slice for
        ``bandwidth="auto"`` / ``reg="auto"``, the median trick for "median")."""
        engine = self._resolve_engine()
        self.device_, xp, dtype = device_and_dtype(engine.device, engine.dtype)
        self.dtype_ = np.dtype(dtype).name
        self.seed_ = seed_from(self.random_state)
        self.kernel_, self.alpha_sel_ = auto_kernel(self, X, Y, reg == "auto")
        self.bandwidth_ = self.kernel_.bandwidth
        return xp, dtype

    def _decision(self, X) -> np.ndarray:
        """Raw outputs (n, C) as numpy float64, computed chunk by chunk on the device."""
        check_is_fitted(self, "solver_")
        X = check_X(self, X, reset=False)
        xp = self._xp(fitting=False)
        return predict_rows(X, self.solver_.decision, xp, np.dtype(self.dtype_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


CLASSIFICATION_LOSSES = ("logistic", "hinge", "square", "squared_hinge")
REGRESSION_LOSSES = ("square", "epsilon_insensitive", "huber")


def check_loss(loss, allowed, who):
    """The loss object for name ``loss``, or a one-line error naming ``who`` and the choices."""
    if loss not in allowed:
        raise ValueError(f"loss={loss!r} is not supported by {who}; choose one of {allowed}")
    return make_loss(loss)


def ridge_alpha(est, n: int) -> float:
    """The ridge of a summed-loss solve, scikit-learn's KernelRidge alpha = n nu; sets ``reg_``
    = nu (``kernelscale.params.reg_and_ridge``)."""
    est.reg_, alpha = reg_and_ridge(est.reg, n, getattr(est, "alpha_sel_", None))
    return alpha


class IterativeMixin:
    """``n_iter`` and one ``fit``'s run through ``training.train``."""

    iterative = True
    _auto_epochs = 1  # n_iter="auto": this many passes over the data per fit

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
