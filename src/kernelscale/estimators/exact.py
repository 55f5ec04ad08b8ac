"""Exact kernel methods, the accuracy references: kernel ridge by a direct solve (``solvers.exact``)
and LIBSVM (Chang, Lin, "LIBSVM: A Library for Support Vector Machines", ACM TIST 2011) through
scikit-learn's SVC / SVR, for the problem of Dai, Xie, He, Liang, Raj, Balcan, Song, "Scalable
Kernel Methods via Doubly Stochastic Gradients", NIPS 2014, with kernelscale's naming.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.svm import SVC, SVR
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import DeviceError, resolve_device
from ..params import REG_POSITIVE, Int, Real, store_params
from ..solvers._common import load_rows
from ..solvers.exact import ExactKRR
from ..validation import _one_line, _reject_sparse_y, _sparse_checks, check_X, load_csr_store
from ._docs import fill_doc
from ._kernel_common import KernelEstimatorBase, exact_max_n
from ._targets import ClassifierTargets, RegressorTargets

_KRR_DOCS = {
    "krr_model": """\
f = sum_i c_i k(x_i, .) with (K + n nu I) c = Y, K the n x n kernel matrix of the training rows:
O(n^2) memory and O(n^3) time, so n is capped by ``max_n``.""",
    "parameters": """\
%(reg_positive)s
    The system solved is (K + alpha I) c = Y with alpha = n nu (Cholesky).
%(kernel)s
%(bandwidth)s
max_n : "auto" or int >= 1, default="auto"
    Largest n accepted; more rows is a one-line error. "auto": the n whose n x n kernel matrix,
    in the engine's dtype, takes at most 60 % of the memory available when ``fit`` starts
    (``_kernel_common.exact_max_n``).
%(random_state)s
%(engine)s""",
    "attributes": """\
reg_ : float
    nu used.
solver_ : solvers.exact.ExactKRR
    The training rows ``X`` and the coefficients ``coef`` (n, C).
%(kernel_)s
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data, loaded whole onto the device (n <= ``max_n``).
    %(sparse_X)s The training rows are held sparse; the kernel matrix is dense.""",
}


@fill_doc(**_KRR_DOCS)
class _ExactKRRBase(KernelEstimatorBase):
    """Implementation shared by ``ExactKRRClassifier`` / ``ExactKRRRegressor``."""

    _rules = {"reg": REG_POSITIVE, "max_n": Int(1, "auto")}

    def __init__(self, reg="auto", kernel="gaussian", bandwidth="auto", max_n="auto",
                 random_state=None, engine=None):
        store_params(self, locals())

    def fit(self, X, y):
        """Fit by one direct solve of (K + alpha I) c = Y (Cholesky, in place).

        %(fit)s
        """
        self._validate_params()
        X, Y = self._fit_targets(X, y)
        n = int(X.shape[0])
        itemsize = np.dtype(self._resolve_engine().dtype).itemsize
        max_n = exact_max_n(itemsize) if self.max_n == "auto" else self.max_n
        if n > max_n:
            raise ValueError(f"exact kernel ridge needs the n x n kernel matrix ({n} rows -> "
                             f"{n * n * itemsize / 2**30:.1f} GiB) and n > max_n={max_n}; use "
                             "EigenPro, Nyström or DSG for large n (or raise max_n)")
        xp, dtype = self._setup_common(X, Y)
        self.solver_ = ExactKRR(self.kernel_, load_rows(X, xp, dtype), xp)
        self.solver_.fit(xp.asarray(Y, dtype=dtype), self._alpha)
        return self


_EXAMPLE = "reg=1e-3, bandwidth='median', random_state=0"


@fill_doc(**_KRR_DOCS, example=_EXAMPLE)
class ExactKRRRegressor(RegressorTargets, RegressorMixin, _ExactKRRBase):
    """Exact kernel ridge regression by a direct solve; multi-output y allowed.

    %(krr_model)s

    %(regressor_doc)s
    """


@fill_doc(**_KRR_DOCS, example=_EXAMPLE)
class ExactKRRClassifier(ClassifierTargets, ClassifierMixin, _ExactKRRBase):
    """Exact kernel ridge classification by a direct solve: ridge on {-1, +1} targets (one column
    for two classes, one-vs-all columns for more), predict by sign / argmax.

    %(krr_model)s

    %(classifier_doc)s
    """


SVM_DENSE_ROWS = 4096  # rows of sparse X densified at a time for a model fitted on dense rows


class _KernelFunction:
    """Picklable callable kernel for LIBSVM: K(A, B) in float64 (dense or scipy.sparse rows)."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, A, B):
        return self.kernel(*(a.astype(np.float64) if scipy.sparse.issparse(a)
                             else np.asarray(a, dtype=np.float64) for a in (A, B)))


_SVM_DOCS = {
    "parameters": """\
%(reg_positive)s
    LIBSVM runs with C = 1 / (n nu), the same problem times 1 / nu ("auto": C = 1 / alpha); for
    LIBSVM's C pass reg = 1 / (n C). Fitted also: ``C_``.
%(kernel)s
    "gaussian" runs as LIBSVM's rbf with gamma = 1 / (2 sigma^2), the others as a callable
    kernel (a Gram matrix computed by kernelscale, O(n^2) memory).
%(bandwidth)s
epsilon : float >= 0, default=0.1
    Half-width of SVR's epsilon-insensitive tube (``ExactSVMRegressor`` only).
tol : float > 0, default=1e-3
    Stopping tolerance of LIBSVM's SMO solver, its KKT-violation bound.
cache_size : float > 0, default=500
    MB of LIBSVM's kernel-row cache.
%(random_state)s
engine : dict, kernelscale.engine.Engine or None, default=None
    LIBSVM runs on the CPU only: an engine device "gpu" is a one-line ``DeviceError``.""",
    "attributes": """\
svm_ : sklearn.svm.SVC or sklearn.svm.SVR
    The fitted LIBSVM model (support vectors, dual coefficients).
reg_, C_ : float
    nu used, and LIBSVM's C = 1 / (n nu).
%(kernel_)s
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data, loaded into memory; scipy.sparse X goes to LIBSVM as CSR (its sparse
    kernel evaluations; a callable kernel gets the sparse rows).""",
}


class _ExactSVMBase(KernelEstimatorBase):
    """Implementation shared by ``ExactSVMClassifier`` / ``ExactSVMRegressor``."""

    _fitted_state = "svm_"
    _rules = {"reg": REG_POSITIVE, "epsilon": Real(0), "tol": Real(0, strict=True),
              "cache_size": Real(0, strict=True)}

    def __init__(self, reg="auto", kernel="gaussian", bandwidth="auto", epsilon=0.1, tol=1e-3,
                 cache_size=500, random_state=None, engine=None):
        store_params(self, locals())

    def _svm_kernel(self, X, Y):
        """LIBSVM's kernel arguments; sets ``reg_`` and ``C_`` = 1 / (n reg_)."""
        device = self._resolve_engine().device
        if resolve_device(device) == "gpu" and device == "gpu":
            raise DeviceError("ExactSVM (LIBSVM) runs on the CPU only; use engine={'device': "
                              "'cpu'}")
        self.device_ = "cpu"
        self._validate_params()
        self._select(X, Y)
        self.C_ = 1.0 / self._alpha
        if self.kernel_.name == "gaussian":
            return {"kernel": "rbf", "gamma": 1.0 / (2.0 * self.bandwidth_**2)}
        return {"kernel": _KernelFunction(self.kernel_)}

    def _svm_apply(self, method: str, X):
        """The fitted LIBSVM model's ``method`` on X (in memory); sparse X for LIBSVM's own
        kernel fitted on dense rows is densified ``SVM_DENSE_ROWS`` rows at a time."""
        check_is_fitted(self, "svm_")
        X = check_X(self, load_csr_store(X), reset=False)
        fn = getattr(self.svm_, method)
        if not scipy.sparse.issparse(X) or scipy.sparse.issparse(self.svm_.support_vectors_) \
                or callable(self.svm_.kernel):
            return fn(X)
        return np.concatenate([fn(X[lo:lo + SVM_DENSE_ROWS].toarray())
                               for lo in range(0, X.shape[0], SVM_DENSE_ROWS)])


@fill_doc(**_SVM_DOCS, example=_EXAMPLE)
class ExactSVMClassifier(ClassifierTargets, ClassifierMixin, _ExactSVMBase):
    """Exact kernel SVM by LIBSVM (scikit-learn's ``SVC``; CPU only).

    Minimises (1/2)||f||^2 + C sum_i max(0, 1 - y_i f(x_i)) (the hinge loss of Dai et al. 2014's
    problem with nu = 1 / (C n)) by SMO on the dual. Several classes: LIBSVM's one-vs-one,
    ``decision_function`` in one-vs-rest shape.

    %(classifier_doc)s
    """

    _used_only = {"epsilon": ("by ExactSVMRegressor (the half-width of SVR's tube)", (), lambda p: False)}

    def fit(self, X, y):
        """Fit LIBSVM on (X, y).

        %(fit)s
        """
        X, Y = self._fit_targets(load_csr_store(X), y)  # LIBSVM takes rows in memory
        kw = self._svm_kernel(X, Y)  # LIBSVM fits the class indices (np.unique's order)
        self.svm_ = SVC(C=self.C_, tol=self.tol, cache_size=self.cache_size,
                        decision_function_shape="ovr", **kw).fit(X, self._coder.y_index)
        return self

    def _decision(self, X):
        """LIBSVM's decision values as (n, C): one column for two classes."""
        F = self._svm_apply("decision_function", X)
        return F.reshape(F.shape[0], -1)

    def predict(self, X):
        """Class labels by LIBSVM's own rule: the one-vs-one vote (ties to the first class),
        which can differ from the argmax of the one-vs-rest ``decision_function`` where votes tie.

        %(predict_labels)s
        """
        idx = self._svm_apply("predict", X).astype(np.int64)
        return self.classes_[idx]


@fill_doc(**_SVM_DOCS, example=_EXAMPLE, y_fit="y : array-like of shape (n_samples,)\n    Targets.")
class ExactSVMRegressor(RegressorMixin, _ExactSVMBase):
    """Exact kernel support vector regression by LIBSVM (scikit-learn's ``SVR``; CPU only).

    Minimises (1/2)||f||^2 + C sum_i max(0, |f(x_i) - y_i| - epsilon) (the epsilon-insensitive
    loss of Dai et al. 2014's problem with nu = 1 / (C n)) by SMO on the dual. One output.

    %(sections)s

    %(regression_example)s
    """

    def fit(self, X, y):
        """Fit LIBSVM on (X, y).

        %(fit)s
        """
        _reject_sparse_y(y)
        X = load_csr_store(X)  # a CSR store: its rows as one CSR matrix
        _sparse_checks(self, X, True, True)
        X, y = _one_line(validate_data, self, X, y, dtype=[np.float64, np.float32],
                         y_numeric=True, accept_sparse="csr")
        kw = self._svm_kernel(X, y)
        self.svm_ = SVR(C=self.C_, epsilon=float(self.epsilon), tol=self.tol,
                        cache_size=self.cache_size, **kw).fit(X, y)
        return self

    def predict(self, X):
        """Targets predicted by the fitted LIBSVM model (SVR fits one output: a column y is
        ravelled with scikit-learn's DataConversionWarning).

        %(predict_n)s
        """
        return self._svm_apply("predict", X)
