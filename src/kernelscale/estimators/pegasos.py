"""Kernelized mini-batch Pegasos (``solvers.pegasos``; Shalev-Shwartz, Singer, Srebro, Cotter,
"Pegasos: Primal Estimated sub-GrAdient SOlver for SVM", Mathematical Programming 2011):
``PegasosClassifier``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin

from ..params import ITERS, REG_POSITIVE, Int, reg_and_ridge, store_params
from ..solvers._common import load_rows
from ..solvers.pegasos import KernelPegasos
from ..training import Rows
from ._docs import fill_doc
from ._kernel_common import IterativeMixin, KernelEstimatorBase
from ._targets import ClassifierTargets

# the parameters and attributes of the Pegasos estimator (``_docs.fill_doc``)
_PEGASOS_DOCS = {
    "parameters": """\
%(reg_positive)s
    It is Pegasos' lambda (= 1 / (C n) for LIBSVM's C); the step is Pegasos' own 1 / (nu t).
batch_size : int >= 1, default=32
    Points per step, at most n. Fitted: ``batch_size_``.
%(n_iter)s
    "auto": 5 epochs.
%(iterative_common)s
%(verbose)s""",
    "attributes": """\
solver_ : solvers.pegasos.KernelPegasos
    The training points and their margin-violation counts.
reg_, bandwidth_ : float
    nu and sigma used.
n_support_ : int
    Training points with a non-zero coefficient.
batch_size_ : int
    Points per step used.
n_iter_ : int
    Steps so far.
history_ : dict
    Per-iteration records: iter, time, objective (batch hinge loss).
%(n_features_in_)s""",
}


@fill_doc(**_PEGASOS_DOCS)
class PegasosClassifier(IterativeMixin, ClassifierTargets, ClassifierMixin, KernelEstimatorBase):
    """Kernelized mini-batch Pegasos; one-vs-all for several classes. Holds the training points
    (the support vectors), so X is loaded onto the device.

    %(classifier_doc)s
    >>> from kernelscale.estimators.pegasos import PegasosClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = PegasosClassifier(n_iter=14, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7), clf.n_support_ > 0
    (True, True)
    """

    _auto_epochs = 5
    _rules = {"reg": REG_POSITIVE, "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, reg="auto", batch_size=32, n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        %(fit_classification)s
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._validate_params()
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, int(X.shape[0]), self.alpha_sel_)[0]
            self.solver_ = KernelPegasos(self.kernel_, load_rows(X, xp, dtype),
                                         xp.asarray(Y, dtype=dtype), self.reg_, xp)
            self.history_ = {}
        self._xp()
        self.batch_size_ = min(int(self.batch_size), int(X.shape[0]))
        self._train(Rows(self.solver_.X, np.arange(int(X.shape[0])), int(self.batch_size),
                         self.seed_, np.dtype(self.dtype_), own=True), "Pegasos",
                    "set a larger reg")
        self.n_support_ = int((self.solver_.xp.abs(self.solver_.a).sum(axis=1) > 0).sum())
        return self


__all__ = ["PegasosClassifier"]
