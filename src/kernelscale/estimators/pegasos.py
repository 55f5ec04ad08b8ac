"""Kernelized mini-batch Pegasos (``solvers.pegasos``): ``PegasosClassifier``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin

from ..solvers._common import load_rows
from ..solvers.pegasos import KernelPegasos
from ..stream import BatchStream
from ._kernel_common import (
    IterativeMixin,
    KernelEstimatorBase,
)
from ._params import (
    ITERS,
    REG_POSITIVE,
    Int,
    reg_and_ridge,
)
from ._targets import ClassifierTargets


class PegasosClassifier(IterativeMixin, ClassifierTargets, ClassifierMixin, KernelEstimatorBase):
    """Kernelized mini-batch Pegasos (``solvers.pegasos``); one-vs-all for several
    classes. Holds the training points (the support vectors), so X is loaded onto the device.

    Parameters
    ----------
    reg : "auto", float > 0 or "x/n", default="auto"
        nu of the averaged objective, Pegasos' lambda (= 1 / (C n) for LIBSVM's C); "auto" =
        alpha_sel / n with alpha_sel from ``kernels.selection`` (chosen with the bandwidth);
        fitted: ``reg_``. The step is Pegasos' own 1 / (nu t).
    batch_size : int, default=32
        Points per step; a value above n is capped at n (fitted: ``batch_size_``).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Mini-batch steps per ``fit`` call; "auto" = 5 epochs, 5 ceil(n / batch_size) (Pegasos'
        error bound falls as 1 / (nu t): a few passes suffice at the selected nu).
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    warm_start : bool, default=False
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``. Fitted:
        ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    classes_ : ndarray
    solver_ : solvers.pegasos.KernelPegasos
    reg_, bandwidth_ : the values used.
    n_support_ : int
        Training points with a non-zero coefficient.
    batch_size_ : int
        Points per step used: ``batch_size``, at most n.
    n_iter_ : int
    history_ : dict
        Per-iteration records: iter, time, objective (batch hinge loss).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.pegasos import PegasosClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = PegasosClassifier(n_iter=14, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    _auto_epochs = 5
    _rules = {"reg": REG_POSITIVE, "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, reg="auto", batch_size=32, n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        self.reg = reg
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
            Class labels.

        Returns
        -------
        self
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._validate_params()
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, int(X.shape[0]), self.alpha_sel_)[0]
            self.solver_ = KernelPegasos(self.kernel_, load_rows(X, xp, dtype),
                                         xp.asarray(Y, dtype=dtype), self.reg_, xp)
            self.history_ = {}
        xp = self._xp()
        stream = BatchStream(self.solver_.X, np.arange(int(X.shape[0])),
                             batch_size=int(self.batch_size), seed=self.seed_, xp=xp,
                             dtype=np.dtype(self.dtype_), check_finite=False)
        self.batch_size_ = stream.batch_size  # capped at n
        self._train(stream, stream.batch, "Pegasos", "set a larger reg")
        self.n_support_ = int((self.solver_.xp.abs(self.solver_.a).sum(axis=1) > 0).sum())
        return self


__all__ = ["PegasosClassifier"]
