"""Nyström features + ridge regression (``solvers.nystrom``; Williams, Seeger, "Using the Nyström
Method to Speed Up Kernel Machines", NIPS 2001): ``NystromRidgeClassifier`` /
``NystromRidgeRegressor``."""

from __future__ import annotations

import numpy as np
import scipy.sparse
from sklearn.base import ClassifierMixin, RegressorMixin

from ..params import REG, Int, OneOf, Real, store_params
from ..solvers._common import take_rows
from ..solvers.nystrom import METHODS, NystromRidge, auto_method
from ..solvers.preconditioners import subsample_indices
from ..spread import cluster_rows
from ._docs import fill_doc
from ._kernel_common import KernelEstimatorBase, n_features_rule
from ._targets import ClassifierTargets, RegressorTargets

NYSTROM_PASS_ROWS = 8192  # Nystrom's default engine pass_rows


_NYSTROM_DOCS = {
    "nystrom_model": """\
m landmarks Z, K_ZZ = U diag(s) U^T, give the feature map phi(x) = diag(s)^{-1/2} U^T k(Z, x)
(the Nyström kernel K_xZ K_ZZ^+ K_Zx); the model is the ridge solution
min_w ||Phi w - Y||^2 + n nu ||w||^2, by its m x m normal equations or by FALKON's
preconditioned conjugate gradients (``solver``).""",
    "parameters": """\
n_components : "auto" or int >= 1, default="auto"
    m, landmarks sampled without replacement from the training rows, at most n (m = n: exact
    kernel ridge). "auto": max(500, ceil(sqrt(n) ln n)) (Rudi, Camoriano & Rosasco, NIPS 2015).
    Fitted: ``n_components_``.
%(reg)s
    The ridge solved over the span of the landmarks is alpha = n nu.
%(kernel)s
%(bandwidth)s
rcond : float >= 0, default=1e-12
    The direct solve drops eigenvalues of K_ZZ below rcond x its largest (K_ZZ^+).
solver : {"auto", "direct", "cg"}, default="auto"
    "direct": the normal equations Phi^T Phi (one pass, O(n m (d + m)) flops) and a Cholesky
    solve. "cg": conjugate gradients with FALKON's preconditioner (Rudi, Carratino, Rosasco,
    "FALKON: An Optimal Large Scale Kernel Method", NIPS 2017, Alg. 1), O(n m (d + C)) flops
    per iteration for C outputs. "auto": the one with fewer flops at ``n_iter`` iterations
    (``solvers.nystrom.auto_method``; on the host CG keeps K_nZ when it fits
    ``budget.kernel_matrix_bytes``, and the count assumes it does). Fitted: ``solver_.method``.
tol : float > 0, default=1e-3
    CG stops when every output's relative residual ||b - A w|| / ||b|| of the preconditioned
    system is below it.
n_iter : int >= 1, default=30
    CG iterations at most (reaching it is not an error). Fitted: ``n_iter_``.
%(random_state)s
    It also draws the landmarks.
%(engine)s
    ``pass_rows``: rows of X read per step of a pass (default 8192).""",
    "attributes": """\
solver_ : solvers.nystrom.NystromRidge
    Landmarks ``Z`` and ridge coefficients ``coef`` over the Nyström features.
n_components_, rank_ : int
    m used, and the eigenvalues of K_ZZ kept (<= m; m for "cg").
n_iter_, history_ : int, dict
    CG iterations run (0 for "direct") and their records: iter, time, residual (the largest).
reg_ : float
    nu used.
%(kernel_)s
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data; also an on-disk zarr / dask array, read ``engine.pass_rows`` rows at a time.
    %(sparse_X)s The m landmarks are densified (m x d).""",
}


@fill_doc(**_NYSTROM_DOCS)
class _NystromBase(KernelEstimatorBase):
    """Implementation shared by ``NystromRidgeClassifier`` / ``NystromRidgeRegressor``."""

    _rules = {"n_components": Int(1, "auto"), "reg": REG, "rcond": Real(0),
              "solver": OneOf("auto", *METHODS), "tol": Real(0, strict=True), "n_iter": Int(1)}
    _cg_only = ("by solver='cg' or 'auto'", ("solver",), lambda p: p["solver"] != "direct")
    _used_only = {"tol": _cg_only, "n_iter": _cg_only,
                  "rcond": ("by solver='direct' or 'auto'", ("solver",),
                            lambda p: p["solver"] != "cg")}

    def __init__(self, n_components="auto", reg="auto", kernel="gaussian", bandwidth="auto",
                 rcond=1e-12, solver="auto", tol=1e-3, n_iter=30, random_state=None,
                 engine=None):
        store_params(self, locals())

    def fit(self, X, y):
        """Fit the Nyström ridge model on (X, y) in one pass over X.

        %(fit)s
        """
        X, Y = self._fit_targets(X, y)
        xp, dtype = self._setup_common(X, Y)
        n = int(X.shape[0])
        m = n_features_rule(n, self.n_components, floor=500)
        idx = subsample_indices(n, m, self.seed_)
        Z = take_rows(X, idx)
        sparse = scipy.sparse.issparse(Z)
        Z = xp.asarray(Z.toarray() if sparse else Z, dtype=dtype)  # the m landmarks: dense
        self.solver_ = NystromRidge(self.kernel_, Z, xp, rcond=float(self.rcond))
        d_eff = X.nnz / n if hasattr(X, "nnz") else X.shape[1]  # the kernel's cost per row
        method = (auto_method(d_eff, int(Z.shape[0]), Y.shape[1], self.n_iter, host=xp is np)
                  if self.solver == "auto" else self.solver)
        self.solver_.fit(X, Y, self._alpha, dtype, self.engine_.pass_rows or NYSTROM_PASS_ROWS,
                         rows=None if sparse else cluster_rows(), method=method, tol=self.tol,
                         max_iter=self.n_iter, memory_budget=self.engine_.memory_budget)
        self.n_components_ = int(Z.shape[0])
        self.rank_ = self.solver_.rank
        self.n_iter_, self.history_ = self.solver_.n_iter, self.solver_.history
        return self


@fill_doc(**_NYSTROM_DOCS, example="n_components=100, random_state=0")
class NystromRidgeRegressor(RegressorTargets, RegressorMixin, _NystromBase):
    """Nyström approximation + ridge regression (Williams & Seeger 2001); multi-output y
    allowed.

    %(nystrom_model)s

    %(regressor_doc)s
    """


@fill_doc(**_NYSTROM_DOCS, example="n_components=100, random_state=0")
class NystromRidgeClassifier(ClassifierTargets, ClassifierMixin, _NystromBase):
    """Nyström approximation + ridge classification: ridge on {-1, +1} targets (one column for
    two classes, one-vs-all columns for more), predict by sign / argmax.

    %(nystrom_model)s

    %(classifier_doc)s
    """
