"""Kernelized mini-batch Pegasos (``solvers.pegasos``; Shalev-Shwartz, Singer, Srebro, Cotter,
"Pegasos: Primal Estimated sub-GrAdient SOlver for SVM", Mathematical Programming 2011):
``PegasosClassifier``."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin

from ..params import ITERS, REG_POSITIVE, Int, store_params
from ..solvers._common import load_rows
from ..solvers.pegasos import KernelPegasos
from ..training import Rows
from ._docs import fill_doc
from ._kernel_common import IterativeEstimator
from ._targets import ClassifierTargets

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
n_support_, batch_size_ : int
    Training points with a non-zero coefficient, and points per step used.
%(n_iter_)s
%(n_features_in_)s""",
}


@fill_doc(**_PEGASOS_DOCS, example="n_iter=14, random_state=0")
class PegasosClassifier(ClassifierTargets, ClassifierMixin, IterativeEstimator):
    """Kernelized mini-batch Pegasos; one-vs-all for several classes. Holds the training points
    (the support vectors), so X is loaded onto the device.

    %(classifier_doc)s
    """

    _auto_epochs = 5
    _rules = {"reg": REG_POSITIVE, "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, reg="auto", batch_size=32, n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def _init_solver(self, X, Y):
        xp, dtype = self._setup_common(X, Y)
        self.solver_ = KernelPegasos(self.kernel_, load_rows(X, xp, dtype),
                                     xp.asarray(Y, dtype=dtype), self.reg_, xp)

    def _fit_solver(self, X, Y):
        self.batch_size_ = min(int(self.batch_size), int(X.shape[0]))
        self._train(Rows(self.solver_.X, np.arange(int(X.shape[0])), int(self.batch_size),
                         self.seed_, np.dtype(self.dtype_), own=True), "Pegasos",
                    "set a larger reg")
        self.n_support_ = int((self.solver_.xp.abs(self.solver_.a).sum(axis=1) > 0).sum())
