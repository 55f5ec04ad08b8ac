"""Nyström features + ridge regression (``solvers.nystrom``; Williams, Seeger, "Using the Nyström
Method to Speed Up Kernel Machines", NIPS 2001): ``NystromRidgeClassifier`` /
``NystromRidgeRegressor``, the "Nyström + a linear solver" baseline of Dai, Xie, He, Liang, Raj,
Balcan, Song, "Scalable Kernel Methods via Doubly Stochastic Gradients", NIPS 2014, and of Wu,
Chen, Yen, Yan, "Revisiting Random Binning Features: Fast Convergence and Strong
Parallelizability", KDD 2016.
"""

from __future__ import annotations

import scipy.sparse
from sklearn.base import ClassifierMixin, RegressorMixin

from ..params import REG, Int, OneOf, Real, store_params
from ..solvers._common import take_rows
from ..solvers.nystrom import METHODS, NystromRidge, auto_method
from ..solvers.preconditioners import subsample_indices
from ..spread import cluster_rows
from ._docs import fill_doc
from ._kernel_common import KernelEstimatorBase, n_features_rule, ridge_alpha
from ._targets import ClassifierTargets, RegressorTargets

NYSTROM_PASS_ROWS = 8192  # Nystrom's default engine pass_rows


# the parameters and attributes of both Nyström estimators, written once (``_docs.fill_doc``)
_NYSTROM_DOCS = {
    "nystrom_model": """\
m landmarks Z, K_ZZ = U diag(s) U^T, give the feature map phi(x) = diag(s)^{-1/2} U^T k(Z, x)
whose inner products are the Nyström kernel K_xZ K_ZZ^+ K_Zx; the model is the ridge solution
min_w ||Phi w - Y||^2 + n nu ||w||^2, solved through its m x m normal equations summed over row
chunks of X, or by FALKON's preconditioned conjugate gradients (Rudi, Carratino, Rosasco, NIPS
2017), which never form them (``solver``).""",
    "parameters": """\
n_components : "auto" or int >= 1, default="auto"
    m, landmarks (centres) sampled without replacement from the training rows, at most n (m = n:
    exact kernel ridge). "auto": max(500, ceil(sqrt(n) ln n)), the count with which Nyström
    ridge keeps the exact kernel's learning rate (Rudi, Camoriano & Rosasco, NIPS 2015).
    Fitted: ``n_components_``.
%(reg)s
    The ridge solved over the span of the landmarks is alpha = n nu.
%(kernel)s
%(bandwidth)s
rcond : float >= 0, default=1e-12
    The direct solve's: eigenvalues of K_ZZ below rcond x its largest are dropped (the
    pseudo-inverse K_ZZ^+). Fitted: ``rank_``, the eigenvalues kept.
solver : {"auto", "direct", "cg"}, default="auto"
    "direct": the normal equations Phi^T Phi (one pass, O(n m (d + m)) flops) and a Cholesky
    solve. "cg": conjugate gradients with FALKON's preconditioner (Rudi, Carratino, Rosasco,
    "FALKON: An Optimal Large Scale Kernel Method", NIPS 2017, Alg. 1), one pass of
    O(n m (d + C)) flops per iteration for C outputs. "auto": the one with fewer flops at
    ``n_iter`` iterations (``solvers.nystrom.auto_method``; d counts non-zeros for sparse X).
    Fitted: ``solver_.method``.
tol : float > 0, default=1e-3
    CG stops when every output's relative residual ||b - A w|| / ||b|| of the preconditioned
    system is below it.
n_iter : int >= 1, default=30
    CG iterations at most; reaching it without ``tol`` is not an error (the residuals are in
    ``history_``). Fitted: ``n_iter_``, the iterations run (0 for "direct").
%(random_state)s
    It also draws the landmarks.
%(engine)s
    ``pass_rows``: the rows of X per step of the normal equations' pass (default 8192; X is
    read that many rows at a time, also from zarr / dask).""",
    "attributes": """\
solver_ : solvers.nystrom.NystromRidge
    Landmarks ``Z`` and ridge coefficients ``coef`` over the Nyström features.
n_components_ : int
    m used.
rank_ : int
    Eigenvalues of K_ZZ kept (<= m): the dimension of the Nyström feature map (m for "cg").
n_iter_ : int
    CG iterations run (0 for the direct solve).
history_ : dict
    CG's per-iteration records: iter, time, residual (the largest relative residual); empty for
    the direct solve.
reg_ : float
    nu used (the ridge solved is n ``reg_``).
%(kernel_)s
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data; also an on-disk zarr / dask array, read ``engine.pass_rows`` rows at a time
    (only the m landmark rows are held).
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

        %(fit_either)s
        """
        X, Y = self._fit_targets(X, y)
        self._validate_params()
        xp, dtype = self._setup_common(X, Y, reg=self.reg)
        n = int(X.shape[0])
        alpha = ridge_alpha(self, n)
        m = n_features_rule(n, self.n_components, floor=500)
        idx = subsample_indices(n, m, self.seed_)
        Z = take_rows(X, idx)
        sparse = scipy.sparse.issparse(Z)
        Z = xp.asarray(Z.toarray() if sparse else Z, dtype=dtype)  # the m landmarks: dense
        self.solver_ = NystromRidge(self.kernel_, Z, xp, rcond=float(self.rcond))
        d_eff = X.nnz / n if hasattr(X, "nnz") else X.shape[1]  # the kernel's cost per row
        method = (auto_method(d_eff, int(Z.shape[0]), Y.shape[1], self.n_iter)
                  if self.solver == "auto" else self.solver)
        # sparse X (in memory) is passed over here, not in dask row blocks
        self.solver_.fit(X, Y, alpha, dtype, self.engine_.pass_rows or NYSTROM_PASS_ROWS,
                         rows=None if sparse else cluster_rows(), method=method,
                         tol=self.tol, max_iter=self.n_iter)
        self.n_components_ = int(Z.shape[0])
        self.rank_ = self.solver_.rank
        self.n_iter_, self.history_ = self.solver_.n_iter, self.solver_.history
        return self


@fill_doc(**_NYSTROM_DOCS)
class NystromRidgeRegressor(RegressorTargets, RegressorMixin, _NystromBase):
    """Nyström approximation + ridge regression (Williams & Seeger 2001); multi-output y
    allowed.

    %(nystrom_model)s

    %(regressor_doc)s
    >>> from kernelscale.estimators.nystrom import NystromRidgeRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = NystromRidgeRegressor(n_components=100, random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    >>> model.rank_ <= model.n_components_ == 100
    True
    """


@fill_doc(**_NYSTROM_DOCS)
class NystromRidgeClassifier(ClassifierTargets, ClassifierMixin, _NystromBase):
    """Nyström approximation + ridge classification: ridge on {-1, +1} targets (one column for
    two classes, one-vs-all columns for more), predict by sign / argmax.

    %(nystrom_model)s

    %(classifier_doc)s
    >>> from kernelscale.estimators.nystrom import NystromRidgeClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = NystromRidgeClassifier(n_components=100, random_state=0).fit(X, y)
    >>> clf.n_components_, bool(clf.score(X, y) > 0.7)
    (100, True)
    """


__all__ = ["NystromRidgeClassifier", "NystromRidgeRegressor"]
