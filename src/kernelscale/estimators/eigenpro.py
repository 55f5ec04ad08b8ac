"""EigenPro estimators, the square loss by the EigenPro iteration of Ma, Belkin, "Diving into
the Shallows: a Computational Perspective on Large-Scale Shallow Learning", NIPS 2017; multi-class
by one-hot targets, prediction by argmax.

``EigenProRegressor`` / ``EigenProClassifier``: f = sum_i alpha_i k(x_i, .) over the n training
points (the model holds them, so X is loaded onto the device once). ``EigenProRFRegressor`` /
``EigenProRFClassifier``: a linear model on ``n_components`` random Fourier features, trained
from mini-batches of a ``BatchStream`` so X may stay on disk (zarr, dask) or be spread over dask
workers (``kernelscale.spread``). Batch size and step size default to the paper's section 4
choice (``solvers.preconditioners``). With ``warm_start=True`` each ``fit`` continues for another
``n_iter`` iterations on the same seeded batch sequence: segments give the model of one long run.
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
from ._kernel_common import IterativeMixin, KernelEstimatorBase, n_features_rule
from ._targets import ClassifierTargets, RegressorTargets

AUTO_MIN_FEATURES = 2000  # n_components="auto": at least this many features


# the parameters and attributes of both EigenPro estimators, written once (``_docs.fill_doc``)
_EIGENPRO_DOCS = {
    "eigenpro_head": """\
%(kernel)s
%(bandwidth)s
    EigenPro has no ``reg``: it solves the interpolation problem (nu -> 0) and, like the
    paper (section 5), stops after a few epochs (early stopping regularises).
n_eigenvectors : int >= 0, default=160
    k, top eigendirections flattened by the preconditioner (the paper's 160), capped so that
    lambda_{k+1} >= max k(x, x) / M (``solvers.preconditioners.resolvable_k``); 0: no
    preconditioner (plain SGD). Fitted: ``n_eigenvectors_``.
subsample_size : int >= 1, default=4800
    M, rows whose eigensystem estimates the preconditioner (the paper's 4800), at most n.
    Fitted: ``subsample_size_``.""",
    "eigenpro_steps": """\
batch_size : "auto" or int >= 1, default="auto"
    m, at most n. "auto": min(max(m*, 256), n, memory cap), m* = beta / lambda_{k+1} (section 4;
    256 is the paper's m in section 6), evened out over the epoch
    (``solvers.eigenpro.choose_batch_and_step``); a shorter last batch gets the step of its own
    size. Fitted: ``batch_size_``.
eta : "auto" or float > 0, default="auto"
    Step size; "auto": m / (beta + (m - 1) lambda_{k+1}) (section 4). Fitted: ``eta_``.
%(n_iter)s
    "auto": 10 epochs, 10 ceil(n / m) iterations.""",
    "eigenpro_tail": """\
eig_method : {"auto", "eigh", "randomized"}, default="auto"
    The subsample's top-k eigensystem: dense ("eigh") or randomized; "auto": "eigh" for
    M <= 3000 (``solvers.preconditioners``).""",
    "parameters_kernel": """\
%(eigenpro_head)s
tau : "auto" or float in (0, 1], default="auto"
    Damping of the preconditioner; "auto": 1 (section 6). Only with ``n_eigenvectors >= 1``.
%(eigenpro_steps)s
%(eigenpro_tail)s
%(warm_start)s
%(random_state)s
%(engine)s
%(verbose)s""",
    "parameters_rf": """\
%(eigenpro_head)s
tau : "auto" or float in (0, 1], default="auto"
    Damping of the preconditioner; "auto": 1/4 for random features (section 6). Only with
    ``n_eigenvectors >= 1``.
%(eigenpro_steps)s
n_components : "auto" or int >= 1, default="auto"
    D, random features. "auto": max(2000, ceil(sqrt(n) ln n)), the count with which
    random-feature ridge keeps the exact kernel's learning rate (Rudi & Rosasco, NIPS 2017).
    Fitted: ``n_components_``.
%(eigenpro_tail)s
average : bool, default=True
    Predict with the mean of the last half to three quarters of the iterates (tail averaging;
    Bach & Moulines 2013, Jain et al. 2018) instead of the last iterate. Fitted:
    ``solver_.n_averaged``.
%(warm_start)s
%(random_state)s
%(engine)s
    With on-disk X also ``window_rows`` / ``memory_budget`` (the feature matrix is m x D).
%(verbose)s""",
    "attributes": """\
solver_ : solvers.eigenpro.KernelEigenPro or RFFEigenPro
    The solver a warm start continues.
batch_size_ : int
    m used.
subsample_size_ : int
    M used.
eta_ : float
    Step size used.
n_eigenvectors_ : int
    k used.
lambda_top_, lambda_next_ : float
    lambda_1 and lambda_{k+1} of the subsample's kernel operator.
beta_ : float
    max k(x, x) over the subsample.
n_iter_ : int
    Iterations so far.
n_epochs_ : float
    Passes so far.
history_ : dict
    Per-iteration records: iter, time, objective (batch MSE).
bandwidth_ : float
    sigma used.
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data (for the random-feature estimators also an on-disk zarr / dask array).
    %(sparse_X)s Kernel EigenPro holds its training rows sparse.""",
}


_COMMON_RULES = {"n_eigenvectors": Int(0), "subsample_size": Int(1),
                 "batch_size": Int(1, "auto"), "eta": Real(0, "auto", strict=True),
                 "tau": Real(0, "auto", strict=True, high=1.0), "n_iter": ITERS,
                 "eig_method": OneOf("auto", "eigh", "randomized")}


class _EigenProBase(IterativeMixin, KernelEstimatorBase):
    """What the EigenPro estimators share: set-up of the preconditioned solver, the fit."""

    _auto_epochs = 10  # n_iter="auto": epochs per fit
    _coding = None
    _used_only = {"tau": ("with n_eigenvectors >= 1, to damp the preconditioner",
                          ("n_eigenvectors",), lambda p: p["n_eigenvectors"] != 0)}

    def _setup(self, X, Y):
        self._validate_params()
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
        self.history_ = {}

    def _fit(self, X, y):
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._setup(X, Y)
        self._xp()
        solver, dtype, n = self.solver_, np.dtype(self.dtype_), int(X.shape[0])
        rows, spread = self._rows(X, Y, dtype)
        self._train(rows, "EigenPro", "set a smaller eta (or tau < 1)", spread=spread)
        self.n_epochs_ = solver.t / -(-n // max(1, min(solver.batch_size, n)))
        return self


class _KernelEigenPro(_EigenProBase):
    _default_tau = 1.0  # Ma & Belkin 2017, section 6
    _auto_dtype = "float32"  # engine dtype "auto" (``kernelscale.engine``)
    _rules = _COMMON_RULES

    def __init__(self, kernel="gaussian", bandwidth="auto", n_eigenvectors=160,
                 subsample_size=4800, tau="auto", batch_size="auto", eta="auto", n_iter="auto",
                 eig_method="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def _solver(self, X, Y, xp, dtype, common):
        return KernelEigenPro(self.kernel_, load_rows(X, xp, dtype), xp.asarray(Y, dtype=dtype),
                              **common)

    def _rows(self, X, Y, dtype):
        # the stream's "targets" are row indices: the step updates alpha on them
        n = int(X.shape[0])
        return Rows(self.solver_.X, np.arange(n), self.solver_.batch_size, self.seed_, dtype,
                    own=True), None


class _RFEigenPro(_EigenProBase):
    _default_tau = 0.25  # Ma & Belkin 2017, section 6
    _rules = {**_COMMON_RULES, "n_components": Int(1, "auto"), "average": BOOL}
    # without eigenvectors no eigensystem of the features is computed
    _used_only = {**_EigenProBase._used_only,
                  "eig_method": ("with n_eigenvectors >= 1", ("n_eigenvectors",),
                                 lambda p: p["n_eigenvectors"] != 0)}

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


_REGRESSOR = """\
Multi-output y allowed.

%(regressor_doc)s
>>> from kernelscale.estimators.eigenpro import %(name)s
>>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
>>> model = %(name)s(n_iter=8, subsample_size=100, n_eigenvectors=10,
...                 random_state=0).fit(X, y / y.std())
>>> model.predict(X[:3]).shape
(3,)"""
_CLASSIFIER = """\
Least squares on one-hot targets, predict by argmax.

%(classifier_doc)s
>>> from kernelscale.estimators.eigenpro import %(name)s
>>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
>>> clf = %(name)s(n_iter=8, subsample_size=100, n_eigenvectors=10,
...                random_state=0).fit(X, y)
>>> bool(clf.score(X, y) > 0.7)
True"""


@fill_doc(**_EIGENPRO_DOCS)
class _Regressor(RegressorTargets, RegressorMixin, _EigenProBase):
    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        %(fit_regression)s
        """
        return self._fit(X, y)


@fill_doc(**_EIGENPRO_DOCS)
class _Classifier(ClassifierTargets, ClassifierMixin, _EigenProBase):
    _coding = "onehot"

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        %(fit_classification)s
        """
        return self._fit(X, y)


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_kernel)s", example=_REGRESSOR,
          name="EigenProRegressor")
class EigenProRegressor(_Regressor, _KernelEigenPro):
    """EigenPro least-squares regression over the training points: mini-batch SGD on the
    square loss whose top-k eigendirections are flattened by a preconditioner estimated on a
    subsample, so that a much larger step is stable.

    %(example)s
    """


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_kernel)s", example=_CLASSIFIER,
          name="EigenProClassifier")
class EigenProClassifier(_Classifier, _KernelEigenPro):
    """EigenPro classification over the training points. %(example)s"""


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_rf)s", example=_REGRESSOR,
          name="EigenProRFRegressor")
class EigenProRFRegressor(_Regressor, _RFEigenPro):
    """EigenPro least-squares regression on random Fourier features. %(example)s"""


@fill_doc(**_EIGENPRO_DOCS, parameters="%(parameters_rf)s", example=_CLASSIFIER,
          name="EigenProRFClassifier")
class EigenProRFClassifier(_Classifier, _RFEigenPro):
    """EigenPro classification on random Fourier features. %(example)s"""


__all__ = ["EigenProClassifier", "EigenProRFClassifier", "EigenProRFRegressor",
           "EigenProRegressor"]
