"""EigenPro estimators: the square loss by the EigenPro iteration of Ma, Belkin, "Diving into the
Shallows: a Computational Perspective on Large-Scale Shallow Learning", NIPS 2017; classes by
one-hot targets, predicted by argmax.

``EigenProRegressor`` / ``EigenProClassifier``: f = sum_i alpha_i k(x_i, .) over the n training
points, held on the device. ``EigenProRFRegressor`` / ``EigenProRFClassifier``: a linear model on
``n_components`` random Fourier features, trained from mini-batches (X may stay on disk).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from ..kernels import FourierBlocks
from ..params import BOOL, ITERS, Int, OneOf, Real, store_params
from ..solvers._common import load_rows
from ..solvers.eigenpro import KernelEigenPro, RFFEigenPro
from ..spread import SpreadRFF, rows_for
from ..training import Rows, as_targets
from ._docs import fill_doc
from ._kernel_common import IterativeEstimator, n_features_rule
from ._targets import ClassifierTargets, RegressorTargets

AUTO_MIN_FEATURES = 2000  # n_components="auto": at least this many features


_EIGENPRO_DOCS = {
    "eigenpro_head": """\
%(kernel)s
%(bandwidth)s
    EigenPro has no ``reg``: it solves the interpolation problem (nu -> 0) and, like the
    paper (section 5), stops after a few epochs (early stopping regularises).
n_eigenvectors : int >= 0, default=160
    k, top eigendirections flattened by the preconditioner, at most those with
    lambda_{k+1} >= max k(x, x) / M; 0: plain SGD. Fitted: ``n_eigenvectors_``.
subsample_size : int >= 1, default=4800
    M, rows whose eigensystem estimates the preconditioner (at most n). Fitted: ``subsample_size_``.
tau : "auto" or float in (0, 1], default="auto"
    Damping of the preconditioner (only with ``n_eigenvectors >= 1``); "auto": 1, or 1/4 on
    random features (section 6).
batch_size : "auto" or int >= 1, default="auto"
    m, at most n. "auto": min(max(beta / lambda_{k+1}, 256), n, memory cap) (section 4), evened
    out over the epoch (``solvers.eigenpro.choose_batch_and_step``). Fitted: ``batch_size_``.
eta : "auto" or float > 0, default="auto"
    Step size; "auto": m / (beta + (m - 1) lambda_{k+1}) (section 4). Fitted: ``eta_``.
%(n_iter)s
    "auto": 10 epochs.
eig_method : {"auto", "eigh", "randomized"}, default="auto"
    The subsample's top-k eigensystem: dense ("eigh") or randomized; "auto": "eigh" for
    M <= 3000 (``solvers.preconditioners``).""",
    "eigenpro_tail": """\
%(warm_start)s
%(random_state)s
%(verbose)s
%(engine)s""",
    "parameters_kernel": "%(eigenpro_head)s\n%(eigenpro_tail)s",
    "parameters_rf": """\
%(eigenpro_head)s
n_components : "auto" or int >= 1, default="auto"
    D, random features. "auto": max(2000, ceil(sqrt(n) ln n)) (Rudi & Rosasco, NIPS 2017).
    Fitted: ``n_components_``.
average : bool, default=True
    Predict with the mean of the last half to three quarters of the iterates (tail averaging;
    Bach & Moulines 2013, Jain et al. 2018). Fitted: ``solver_.n_averaged``.
%(eigenpro_tail)s""",
    "attributes": """\
solver_ : solvers.eigenpro.KernelEigenPro or RFFEigenPro
    The solver a warm start continues.
batch_size_, subsample_size_, n_eigenvectors_ : int
    m, M and k used.
eta_, beta_ : float
    The step size used and max k(x, x) over the subsample.
lambda_top_, lambda_next_ : float
    lambda_1 and lambda_{k+1} of the subsample's kernel operator.
%(n_iter_)s
n_epochs_ : float
    Passes so far.
bandwidth_ : float
    sigma used.
%(n_features_in_)s""",
}


class _EigenProBase(IterativeEstimator):
    """What the EigenPro estimators share: set-up of the preconditioned solver, the fit."""

    _auto_epochs = 10  # n_iter="auto": epochs per fit
    _rules = {"n_eigenvectors": Int(0), "subsample_size": Int(1), "batch_size": Int(1, "auto"),
              "eta": Real(0, "auto", strict=True), "tau": Real(0, "auto", strict=True, high=1.0),
              "n_iter": ITERS, "eig_method": OneOf("auto", "eigh", "randomized")}
    _k = ("n_eigenvectors",), lambda p: p["n_eigenvectors"] != 0  # used only with k >= 1
    _used_only = {"tau": ("with n_eigenvectors >= 1, to damp the preconditioner", *_k)}

    def _init_solver(self, X, Y):
        xp, dtype = self._setup_common(X, Y)
        tau = self._default_tau if self.tau == "auto" else float(self.tau)
        common = dict(n_eigenvectors=int(self.n_eigenvectors), tau=tau,
                      subsample_size=int(self.subsample_size), batch_size=self.batch_size,
                      eta=self.eta, seed=self.seed_, xp=xp, eig_method=self.eig_method)
        self.solver_ = self._solver(X, Y, xp, dtype, common)
        p = self.solver_.precond
        self.batch_size_, self.eta_ = self.solver_.batch_size, self.solver_.eta
        self.subsample_size_ = min(int(self.subsample_size), int(X.shape[0]))  # as sampled
        self.n_eigenvectors_, self.beta_ = p.k, p.beta
        self.lambda_top_, self.lambda_next_ = p.lam_top, p.lam_next

    def _fit_solver(self, X, Y):
        solver, dtype, n = self.solver_, np.dtype(self.dtype_), int(X.shape[0])
        rows, spread = self._rows(X, Y, dtype)
        self._train(rows, "EigenPro", "set a smaller eta (or tau < 1)", spread=spread)
        self.n_epochs_ = solver.t / -(-n // max(1, min(solver.batch_size, n)))


class _KernelEigenPro(_EigenProBase):
    _default_tau = 1.0  # Ma & Belkin 2017, section 6
    _auto_dtype = "float32"  # engine dtype "auto" (``kernelscale.engine``)

    def __init__(self, kernel="gaussian", bandwidth="auto", n_eigenvectors=160,
                 subsample_size=4800, tau="auto", batch_size="auto", eta="auto", n_iter="auto",
                 eig_method="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def _solver(self, X, Y, xp, dtype, common):
        return KernelEigenPro(self.kernel_, load_rows(X, xp, dtype), xp.asarray(Y, dtype=dtype),
                              **common)

    def _rows(self, X, Y, dtype):  # the stream's "targets": row indices, whose alpha a step updates
        return Rows(self.solver_.X, np.arange(int(X.shape[0])), self.solver_.batch_size,
                    self.seed_, dtype, own=True), None


class _RFEigenPro(_EigenProBase):
    _default_tau = 0.25  # Ma & Belkin 2017, section 6
    _sparse_gpu = True
    _rules = {**_EigenProBase._rules, "n_components": Int(1, "auto"), "average": BOOL}
    _used_only = {**_EigenProBase._used_only,
                  "eig_method": ("with n_eigenvectors >= 1", *_EigenProBase._k)}

    def __init__(self, kernel="gaussian", bandwidth="auto", n_eigenvectors=160,
                 subsample_size=4800, tau="auto", batch_size="auto", eta="auto", n_iter="auto",
                 n_components="auto", eig_method="auto", average=True, warm_start=False,
                 random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def _solver(self, X, Y, xp, dtype, common):
        self.n_components_ = n_features_rule(int(X.shape[0]), self.n_components,
                                             floor=AUTO_MIN_FEATURES)
        blocks = FourierBlocks(self.kernel_, self.n_features_in_, self.n_components_,
                               self.seed_, xp=xp, dtype=dtype)
        return RFFEigenPro(blocks, X, Y.shape[1], average=bool(self.average), **common)

    def _rows(self, X, Y, dtype):
        solver = self.solver_

        def spread(stream_kw, **_):
            return rows_for(X, lambda client: SpreadRFF(client, X, Y, stream_kw, solver,
                                                         residual=True))

        return Rows(X, Y, solver.batch_size, self.seed_, dtype, encode=as_targets(dtype)), spread


_EXAMPLE = "n_iter=8, subsample_size=100, n_eigenvectors=10, random_state=0"


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_kernel)s", example=_EXAMPLE)
class EigenProRegressor(RegressorTargets, RegressorMixin, _KernelEigenPro):
    """EigenPro least-squares regression over the training points: mini-batch SGD on the
    square loss whose top-k eigendirections are flattened by a preconditioner estimated on a
    subsample, so that a much larger step is stable. Multi-output y allowed.

    %(regressor_doc)s
    """


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_kernel)s", example=_EXAMPLE)
class EigenProClassifier(ClassifierTargets, ClassifierMixin, _KernelEigenPro):
    """EigenPro classification over the training points: least squares on one-hot targets,
    predict by argmax.

    %(classifier_doc)s
    """

    _coding = "onehot"


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_rf)s", example=_EXAMPLE)
class EigenProRFRegressor(RegressorTargets, RegressorMixin, _RFEigenPro):
    """EigenPro least-squares regression on random Fourier features; multi-output y allowed.

    %(regressor_doc)s
    """


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_rf)s", example=_EXAMPLE)
class EigenProRFClassifier(ClassifierTargets, ClassifierMixin, _RFEigenPro):
    """EigenPro classification on random Fourier features: least squares on one-hot targets,
    predict by argmax.

    %(classifier_doc)s
    """

    _coding = "onehot"
