"""Random Fourier features + SGD or SVRG (``solvers.rff_sgd``): ``RFFSGDClassifier`` /
``RFFSGDRegressor``, the fixed-feature baseline of papers 003 and 000.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..budget import budget_window
from ..distributed import current_client
from ..kernels import FourierBlocks
from ..solvers.rff_sgd import RFFSGD
from ..stream import BatchStream, is_in_memory
from ._base import check_X
from ._kernel_common import (
    CLASSIFICATION_LOSSES,
    REGRESSION_LOSSES,
    IterativeMixin,
    KernelEstimatorBase,
    check_loss,
    n_features_rule,
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


class _RFFSGDBase(IterativeMixin, KernelEstimatorBase):
    """Implementation shared by ``RFFSGDClassifier`` / ``RFFSGDRegressor``."""

    _auto_epochs = 20
    _rules = {"solver": OneOf("sgd", "svrg"), "n_components": Int(1, "auto"), "reg": REG,
              "eta0": Real(0, "auto", strict=True), "batch_size": Int(1),
              "svrg_inner": Int(1, "epoch"), "n_iter": ITERS}
    _used_only = {"svrg_inner": ("with solver='svrg'", ("solver",),
                                 lambda p: p["solver"] == "svrg")}

    def __init__(self, loss=None, solver="sgd", n_components="auto", reg="auto", eta0="auto",
                 batch_size=64, svrg_inner="epoch", n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        self.loss = loss
        self.solver = solver
        self.n_components = n_components
        self.reg = reg
        self.eta0 = eta0
        self.batch_size = batch_size
        self.svrg_inner = svrg_inner
        self.n_iter = n_iter
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.verbose = verbose

    def _fit(self, X, y):
        X, Y = self._fit_targets(X, y)
        n = int(X.shape[0])
        if self._fresh():
            self._validate_params()
            loss = check_loss(self._loss_name(), self._losses, type(self).__name__)
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, n, self.alpha_sel_)[0]
            self.n_components_ = n_features_rule(n, self.n_components)
            blocks = FourierBlocks(self.kernel_, self.n_features_in_, self.n_components_,
                                   self.seed_, xp=xp, dtype=dtype)
            self.batch_size_ = min(int(self.batch_size), n)  # BatchStream caps it too
            per_epoch = -(-n // self.batch_size_)
            inner = per_epoch if self.svrg_inner == "epoch" else int(self.svrg_inner)
            self.solver_ = RFFSGD(blocks, loss, Y.shape[1], reg=self.reg_,
                                  solver=self.solver, eta0=self.eta0, inner=inner,
                                  X_sample=RFFSGD.sample_rows(X, self.seed_), xp=xp,
                                  batch_size=self.batch_size_)
            self.eta0_ = self.solver_.eta0
            self.history_ = {}
        xp = self._xp()
        dtype = np.dtype(self.dtype_)
        window_rows = budget_window(self.engine_, X, int(self.batch_size), self.n_components_,
                                    dtype)
        stream = BatchStream(X, Y, batch_size=int(self.batch_size), seed=self.seed_, xp=xp,
                             dtype=dtype, window_rows=window_rows)
        self.window_rows_ = stream.window_rows  # rows read per window (budget's choice)

        def batches(t):
            Xb, Yb = stream.batch(t)
            return Xb, xp.asarray(Yb, dtype=dtype)

        spread = None
        self.solver_.data = (X, Y)
        try:
            client = current_client()
            if client is not None and not is_in_memory(X):
                # data-parallel steps: each dask worker reads and works on its share of every
                # batch (kernelscale.distributed_rff)
                from ..distributed_rff import SpreadRFF

                try:
                    spread = batches = SpreadRFF(
                        client, X, Y, dict(batch_size=int(self.batch_size), seed=self.seed_,
                                           dtype=dtype, window_rows=window_rows), self.solver_)
                except BaseException:
                    stream.close()
                    raise
            self._train(stream, batches, f"RFF+{self.solver.upper()}",
                        "set a smaller eta0 (or a larger reg)")
        finally:
            self.solver_.data = None
            if spread is not None:
                spread.close()
                # what the fit sent and received (array payloads), for the cost model
                self.spread_ = {"workers": spread.W, "round_trips": spread.round_trips,
                                "bytes_sent": spread.bytes_sent,
                                "bytes_received": spread.bytes_received}
        return self

    def objective(self, X, y) -> float:
        """The training objective F(W) = mean loss + (nu/2)||W||^2 on (X, y), nu = ``reg_``."""
        check_is_fitted(self, "solver_")
        X = check_X(self, X, reset=False)
        Y = self._encode(y)
        self._xp(fitting=False)
        self.solver_.data = (X, Y)
        try:
            return self.solver_.objective()
        finally:
            self.solver_.data = None


class RFFSGDClassifier(ClassifierTargets, ClassifierMixin, _RFFSGDBase):
    """Random Fourier features (fixed count) + mini-batch SGD or SVRG
    (``solvers.rff_sgd``); labels as -1 / +1, one-vs-all for several classes.

    Parameters
    ----------
    loss : str or None, default=None
        Classifier: "logistic" (default), "hinge", "square", "squared_hinge"; regressor: "square"
        (default), "epsilon_insensitive", "huber".
    solver : {"sgd", "svrg"}, default="sgd"
    n_components : "auto" or int, default="auto"
        D random features; "auto" = max(1000, ceil(sqrt(n) ln n)) (the count that keeps the exact
        kernel's learning rate, Rudi & Rosasco 2017); fitted: ``n_components_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the penalty (nu/2)||W||^2 of the averaged objective on the feature weights (the RKHS
        norm of the random-feature model); "auto" = alpha_sel / n with alpha_sel from
        ``kernels.selection`` (chosen with the bandwidth); fitted: ``reg_``.
    eta0 : "auto" or float, default="auto"
        Step size; "auto" = m / (L (beta + (m - 1) lambda_1) + m nu), the largest stable
        mini-batch step (``solvers.rff_sgd``). A given eta0 is clamped to 1 / (2 nu) so that the
        shrink factor 1 - eta nu stays in [1/2, 1]. SGD decays it as eta0 / (1 + nu eta0 t);
        SVRG keeps it constant. Fitted: ``eta0_``.
    batch_size : int, default=64
        m, rows per step; a value above n is capped at n (one step = one pass; fitted:
        ``batch_size_``).
    svrg_inner : "epoch" or int, default="epoch"
        Iterations between SVRG snapshots ("epoch" = one pass). ``solver="svrg"`` only: another
        value with "sgd" is a ValueError (it would be ignored).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Mini-batch steps per ``fit`` call. "auto" = 20 epochs, 20 ceil(n / m): with nu ~ 1/n the
        problem is ill-conditioned (condition number ~ n), so plain SGD needs many passes and is
        limited by optimisation before the features.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    warm_start : bool, default=False
        Each ``fit`` continues the fitted model.
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk
        X ``window_rows`` / ``memory_budget`` (the feature matrix is batch_size x n_components).
        Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    solver_ : solvers.rff_sgd.RFFSGD
        Holds the weights ``w`` over the random features.
    reg_, eta0_, n_components_, bandwidth_ : the values used.
    batch_size_ : int
        m used: ``batch_size``, at most n.
    n_iter_ : int
        Iterations so far.
    history_ : dict
        Per-iteration records: iter, time, objective (batch loss), step.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.rff_sgd import RFFSGDClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = RFFSGDClassifier(n_components=100, n_iter=8, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """
    _losses = CLASSIFICATION_LOSSES

    def _loss_name(self):
        return self.loss or "logistic"

    def _encode(self, y):
        return self._coder.encode_index(self._coder.index_of(np.asarray(y)), np, np.float64)

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self
        """
        return self._fit(X, y)


class RFFSGDRegressor(RegressorTargets, RegressorMixin, _RFFSGDBase):
    """Random Fourier features (fixed count) + mini-batch SGD or SVRG
    (``solvers.rff_sgd``) for regression; multi-output y allowed.

    Parameters
    ----------
    loss : str or None, default=None
        Classifier: "logistic" (default), "hinge", "square", "squared_hinge"; regressor: "square"
        (default), "epsilon_insensitive", "huber".
    solver : {"sgd", "svrg"}, default="sgd"
    n_components : "auto" or int, default="auto"
        D random features; "auto" = max(1000, ceil(sqrt(n) ln n)) (the count that keeps the exact
        kernel's learning rate, Rudi & Rosasco 2017); fitted: ``n_components_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the penalty (nu/2)||W||^2 of the averaged objective on the feature weights (the RKHS
        norm of the random-feature model); "auto" = alpha_sel / n with alpha_sel from
        ``kernels.selection`` (chosen with the bandwidth); fitted: ``reg_``.
    eta0 : "auto" or float, default="auto"
        Step size; "auto" = m / (L (beta + (m - 1) lambda_1) + m nu), the largest stable
        mini-batch step (``solvers.rff_sgd``). A given eta0 is clamped to 1 / (2 nu) so that the
        shrink factor 1 - eta nu stays in [1/2, 1]. SGD decays it as eta0 / (1 + nu eta0 t);
        SVRG keeps it constant. Fitted: ``eta0_``.
    batch_size : int, default=64
        m, rows per step; a value above n is capped at n (one step = one pass; fitted:
        ``batch_size_``).
    svrg_inner : "epoch" or int, default="epoch"
        Iterations between SVRG snapshots ("epoch" = one pass). ``solver="svrg"`` only: another
        value with "sgd" is a ValueError (it would be ignored).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Mini-batch steps per ``fit`` call. "auto" = 20 epochs, 20 ceil(n / m): with nu ~ 1/n the
        problem is ill-conditioned (condition number ~ n), so plain SGD needs many passes and is
        limited by optimisation before the features.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    warm_start : bool, default=False
        Each ``fit`` continues the fitted model.
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk
        X ``window_rows`` / ``memory_budget`` (the feature matrix is batch_size x n_components).
        Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    solver_ : solvers.rff_sgd.RFFSGD
        Holds the weights ``w`` over the random features.
    reg_, eta0_, n_components_, bandwidth_ : the values used.
    batch_size_ : int
        m used: ``batch_size``, at most n.
    n_iter_ : int
        Iterations so far.
    history_ : dict
        Per-iteration records: iter, time, objective (batch loss), step.
    y_offset_ : ndarray of shape (n_outputs,)
        The training mean of y: f is fitted to y - y_offset_ and every prediction adds it
        back (``estimators._targets``).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.rff_sgd import RFFSGDRegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = RFFSGDRegressor(n_components=100, n_iter=8, random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """
    _losses = REGRESSION_LOSSES

    def _loss_name(self):
        return self.loss or "square"

    def _encode(self, y):
        return self._targets(y, fresh=False)  # centred as the fit's (``estimators._targets``)

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        return self._fit(X, y)


# ---------------------------------------------------------------------------------------------
# Nyström + ridge, exact kernel ridge
# ---------------------------------------------------------------------------------------------


__all__ = ["RFFSGDClassifier", "RFFSGDRegressor"]
