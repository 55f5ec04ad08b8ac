"""Exact kernel methods, the accuracy references: kernel ridge by a direct solve
(``solvers.exact``: ``ExactKRRClassifier`` / ``ExactKRRRegressor``) and LIBSVM (scikit-learn's SVC /
SVR: ``ExactSVMClassifier`` / ``ExactSVMRegressor``) with kernelscale's kernel and bandwidth naming.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.svm import SVC, SVR
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import DeviceError, resolve_device
from ..rng import seed_from
from ..solvers._common import load_rows
from ..solvers.exact import ExactKRR
from ._base import _one_line, check_X
from ._kernel_common import (
    KernelEstimatorBase,
    auto_kernel,
    exact_max_n,
    reject_sparse,
    ridge_alpha,
)
from ._params import (
    REG_POSITIVE,
    Int,
    KernelscaleEstimator,
    Real,
    reg_and_ridge,
)
from ._targets import ClassifierTargets, RegressorTargets


class _ExactKRRBase(KernelEstimatorBase):
    """Implementation shared by ``ExactKRRClassifier`` / ``ExactKRRRegressor``."""

    _rules = {"reg": REG_POSITIVE, "max_n": Int(1, "auto")}

    def __init__(self, reg="auto", kernel="gaussian", bandwidth="auto", max_n="auto",
                 random_state=None, engine=None):
        self.reg = reg
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.max_n = max_n
        self.random_state = random_state
        self.engine = engine

    def fit(self, X, y):
        """Fit by one direct solve of (K + alpha I) c = Y (Cholesky, in place).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, loaded whole onto the device (n <= ``max_n``).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (classifier: class labels).

        Returns
        -------
        self
        """
        self._validate_params()
        X, Y = self._fit_targets(X, y)
        n = int(X.shape[0])
        itemsize = np.dtype(self._resolve_engine().dtype).itemsize
        max_n = exact_max_n(itemsize) if self.max_n == "auto" else self.max_n
        if n > max_n:
            gib = n * n * itemsize / 2**30
            raise ValueError(f"exact kernel ridge needs the n x n kernel matrix ({n} rows -> "
                             f"{gib:.1f} GiB) and n > max_n={max_n}; use EigenPro, Nyström "
                             "or DSG for large n (or raise max_n)")
        xp, dtype = self._setup_common(X, Y, reg=self.reg)
        alpha = ridge_alpha(self, n)
        self.solver_ = ExactKRR(self.kernel_, load_rows(X, xp, dtype), xp)
        self.solver_.fit(xp.asarray(Y, dtype=dtype), alpha)
        return self


class ExactKRRRegressor(RegressorTargets, RegressorMixin, _ExactKRRBase):
    """Exact kernel ridge regression by a direct solve (``solvers.exact``): the
    reference solution of the papers' square-loss experiments (paper 004 §6: "direct solution
    of kernel regularized least squares (KRLS) is used to obtain the reference error"; the
    square-loss case of paper 003's problem (nu/2)||f||^2 + E loss(f(x), y), solved exactly).

    f = sum_i c_i k(x_i, .) with (K + n nu I) c = Y, K the n x n kernel matrix of the
    training rows: O(n^2) memory and O(n^3) time, so n is capped by ``max_n``. Multi-output y allowed.

    Parameters
    ----------
    reg : "auto", float > 0 or "x/n", default="auto"
        nu of the averaged objective (nu/2)||f||^2 + (1/2n) sum (f(x_i) - y_i)^2; the system solved
        is (K + alpha I) c = Y with scikit-learn's ``KernelRidge`` alpha = n nu. "auto": alpha
        chosen with the bandwidth by held-out selection on a slice (``kernels.selection``; README
        "Defaults, and the rule behind each"), whose proxy is this very estimator on a 1,000-row
        slice; nu = alpha / n. Must be > 0 (the Cholesky factorisation needs K + alpha I positive
        definite). Fitted: ``reg_``.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    max_n : "auto" or int >= 1, default="auto"
        Largest n accepted; more rows is a one-line error pointing at the scalable methods.
        "auto" = the n whose n x n kernel matrix (in the engine's dtype) takes at most 60 % of the memory
        available when ``fit`` starts (``_kernel_common.exact_max_n``): the matrix is factored in
        place, so it is the one n^2 allocation, and 40 % stays for everything else.
    random_state : int, RandomState or None, default=None
        Seed of the "auto" / "median" selection's subsample (the solve itself has no randomness).
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device`` and ``dtype`` (of the kernel
        matrix and the solve). Fitted: ``engine_``.

    Attributes
    ----------
    solver_ : solvers.exact.ExactKRR
        The training rows ``X`` and the coefficients ``coef`` (n, C): f = sum_i c_i k(x_i, .).
    reg_ : float
        nu used (the ridge solved is n ``reg_``).
    kernel_ : kernels.shift_invariant.Kernel
        The kernel used; ``bandwidth_`` is its sigma.
    bandwidth_ : float
    y_offset_ : ndarray of shape (n_outputs,)
        The training mean of y: f is fitted to y - y_offset_ and every prediction adds it
        back (``estimators._targets``).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.exact import ExactKRRRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = ExactKRRRegressor(reg=1e-3, bandwidth="median", random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """


class ExactKRRClassifier(ClassifierTargets, ClassifierMixin, _ExactKRRBase):
    """Exact kernel ridge regression by a direct solve (``solvers.exact``): the
    reference solution of the papers' square-loss experiments (paper 004 §6: "direct solution
    of kernel regularized least squares (KRLS) is used to obtain the reference error"; the
    square-loss case of paper 003's problem (nu/2)||f||^2 + E loss(f(x), y), solved exactly).

    f = sum_i c_i k(x_i, .) with (K + n nu I) c = Y, K the n x n kernel matrix of the
    training rows: O(n^2) memory and O(n^3) time, so n is capped by ``max_n``. Classification: ridge on {-1, +1} targets (one column
    for two classes, one-vs-all columns for more), predict by sign / argmax.

    Parameters
    ----------
    reg : "auto", float > 0 or "x/n", default="auto"
        nu of the averaged objective (nu/2)||f||^2 + (1/2n) sum (f(x_i) - y_i)^2; the system solved
        is (K + alpha I) c = Y with scikit-learn's ``KernelRidge`` alpha = n nu. "auto": alpha
        chosen with the bandwidth by held-out selection on a slice (``kernels.selection``; README
        "Defaults, and the rule behind each"), whose proxy is this very estimator on a 1,000-row
        slice; nu = alpha / n. Must be > 0 (the Cholesky factorisation needs K + alpha I positive
        definite). Fitted: ``reg_``.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    max_n : "auto" or int >= 1, default="auto"
        Largest n accepted; more rows is a one-line error pointing at the scalable methods.
        "auto" = the n whose n x n kernel matrix (in the engine's dtype) takes at most 60 % of the memory
        available when ``fit`` starts (``_kernel_common.exact_max_n``): the matrix is factored in
        place, so it is the one n^2 allocation, and 40 % stays for everything else.
    random_state : int, RandomState or None, default=None
        Seed of the "auto" / "median" selection's subsample (the solve itself has no randomness).
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device`` and ``dtype`` (of the kernel
        matrix and the solve). Fitted: ``engine_``.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    solver_ : solvers.exact.ExactKRR
        The training rows ``X`` and the coefficients ``coef`` (n, C): f = sum_i c_i k(x_i, .).
    reg_ : float
        nu used (the ridge solved is n ``reg_``).
    kernel_ : kernels.shift_invariant.Kernel
        The kernel used; ``bandwidth_`` is its sigma.
    bandwidth_ : float
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.exact import ExactKRRClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = ExactKRRClassifier(random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """


class _KernelFunction:
    """Picklable callable kernel for LIBSVM: K(A, B) as numpy float64."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, A, B):
        return self.kernel(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64))


class _ExactSVMBase(KernelscaleEstimator):
    """Implementation shared by ``ExactSVMClassifier`` / ``ExactSVMRegressor``."""

    _rules = {"reg": REG_POSITIVE, "epsilon": Real(0), "tol": Real(0, strict=True),
              "cache_size": Real(0, strict=True)}

    def __init__(self, reg="auto", kernel="gaussian", bandwidth="auto", epsilon=0.1, tol=1e-3,
                 cache_size=500, random_state=None, engine=None):
        self.reg = reg
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.epsilon = epsilon
        self.tol = tol
        self.cache_size = cache_size
        self.random_state = random_state
        self.engine = engine

    def _svm_kernel(self, X, Y):
        """LIBSVM's kernel arguments; sets ``reg_`` and ``C_`` = 1 / (n reg_) (reg="auto":
        C = 1 / alpha of the held-out selection)."""
        device = self._resolve_engine().device
        if resolve_device(device) == "gpu" and device == "gpu":
            raise DeviceError("ExactSVM (LIBSVM) runs on the CPU only; use engine={'device': "
                              "'cpu'}")
        self.device_ = "cpu"
        self._validate_params()
        self.seed_ = seed_from(self.random_state)
        self.kernel_, alpha = auto_kernel(self, X, Y, self.reg == "auto")
        self.bandwidth_ = self.kernel_.bandwidth
        n = int(X.shape[0])
        self.reg_, ridge = reg_and_ridge(self.reg, n, alpha)
        self.C_ = 1.0 / ridge
        if self.kernel_.name == "gaussian":
            return {"kernel": "rbf", "gamma": 1.0 / (2.0 * self.bandwidth_**2)}
        return {"kernel": _KernelFunction(self.kernel_)}

    _fitted_state = "svm_"

    def _svm_rows(self, X):
        """X checked for the fitted LIBSVM model (in memory, as LIBSVM needs)."""
        check_is_fitted(self, "svm_")
        return check_X(self, reject_sparse(X), reset=False)


class ExactSVMClassifier(ClassifierTargets, ClassifierMixin, _ExactSVMBase):
    """Exact kernel SVM by LIBSVM (scikit-learn's ``SVC``; CPU only): the accuracy
    reference of paper 000 (its Table 3: DSG / UDSG / CDSG against LIBSVM's converged
    solution), with kernelscale's kernel and bandwidth naming.

    Minimises (1/2)||f||^2 + C sum_i max(0, 1 - y_i f(x_i)) (the hinge loss of paper 003's
    problem with nu = 1 / (C n)) by SMO on the dual. Several classes: LIBSVM's one-vs-one,
    ``decision_function`` in one-vs-rest shape.

    Parameters
    ----------
    reg : "auto", float > 0 or "x/n", default="auto"
        nu of the averaged objective (nu/2)||f||^2 + (1/n) sum loss, like every kernelscale
        estimator; LIBSVM is run with C = 1 / (n nu) (its (1/2)||f||^2 + C sum loss is the same
        problem times 1 / nu). "auto" = alpha / n with alpha (scikit-learn's ``KernelRidge`` alpha)
        chosen with the bandwidth by held-out selection on a slice (``kernels.selection``; README
        "Defaults, and the rule behind each"), i.e. C = 1 / alpha. Fitted: ``reg_`` and ``C_``.
        (LIBSVM's ``C`` is not a parameter here: pass reg = 1 / (n C).)
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
        "gaussian" runs as LIBSVM's own rbf with gamma = 1 / (2 sigma^2); the others as a callable
        kernel (a Gram matrix computed by kernelscale: slower, and O(n^2) memory).
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    epsilon : float, default=0.1
        ``ExactSVMRegressor`` only (the classifier refuses another value: it would be ignored):
        half-width of SVR's epsilon-insensitive tube, in the units of y. 0.1 is LIBSVM's and scikit-learn's default;
        for y scaled to unit variance it ignores residuals below a tenth of y's spread.
    tol : float, default=1e-3
        Stopping tolerance of LIBSVM's SMO solver (its KKT-violation bound); 1e-3 is LIBSVM's and
        scikit-learn's default.
    cache_size : float, default=500
        MB of LIBSVM's kernel-row cache. Larger than scikit-learn's 200 because SMO recomputes
        evicted kernel rows, and a reference run on tens of thousands of rows is worth the memory.
    random_state : int, RandomState or None, default=None
        Seed of the "auto" / "median" selection's subsample (LIBSVM's own solve is deterministic
        here: no probability estimates, no shuffling).
    engine : dict, kernelscale.engine.Engine or None, default=None
        LIBSVM runs on the CPU only (``device_`` is "cpu"); an engine device "gpu" is a one-line
        DeviceError rather than a silent CPU run. Fitted: ``engine_``.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    svm_ : sklearn.svm.SVC or sklearn.svm.SVR
        The fitted LIBSVM model (support vectors, dual coefficients).
    reg_ : float
        nu used.
    C_ : float
        LIBSVM's C = 1 / (n nu).
    kernel_ : kernels.shift_invariant.Kernel
        The kernel used; ``bandwidth_`` is its sigma.
    bandwidth_ : float
    device_ : str
        Always "cpu".
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.exact import ExactSVMClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = ExactSVMClassifier(reg=1e-3, bandwidth="median", random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    def fit(self, X, y):
        """Fit LIBSVM on (X, y) (the data are loaded into memory).

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
        kw = self._svm_kernel(X, Y)
        # LIBSVM fits the class indices, which are its own encoding of y (np.unique's order)
        self.svm_ = SVC(C=self.C_, tol=self.tol, cache_size=self.cache_size,
                        decision_function_shape="ovr", **kw).fit(X, self._coder.y_index)
        return self

    def _decision(self, X):
        """LIBSVM's decision values as (n, C): one column for two classes."""
        X = self._svm_rows(X)
        F = self.svm_.decision_function(X)
        return F.reshape(F.shape[0], -1)

    def predict(self, X):
        """Class labels by LIBSVM's own rule: the one-vs-one vote (ties to the first class),
        which can differ from the argmax of the one-vs-rest ``decision_function`` where votes tie.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        X = self._svm_rows(X)
        return self.classes_[self.svm_.predict(X).astype(np.int64)]

    _used_only = {"epsilon": ("by ExactSVMRegressor (the half-width of SVR's tube)", (),
                              lambda p: False)}


class ExactSVMRegressor(RegressorMixin, _ExactSVMBase):
    """Exact kernel support vector regression by LIBSVM (scikit-learn's ``SVR``;
    CPU only), with kernelscale's kernel and bandwidth naming.

    Minimises (1/2)||f||^2 + C sum_i max(0, |f(x_i) - y_i| - epsilon) (paper 003's
    epsilon-insensitive loss with nu = 1 / (C n)) by SMO on the dual. One output.

    Parameters
    ----------
    reg : "auto", float > 0 or "x/n", default="auto"
        nu of the averaged objective (nu/2)||f||^2 + (1/n) sum loss, like every kernelscale
        estimator; LIBSVM is run with C = 1 / (n nu) (its (1/2)||f||^2 + C sum loss is the same
        problem times 1 / nu). "auto" = alpha / n with alpha (scikit-learn's ``KernelRidge`` alpha)
        chosen with the bandwidth by held-out selection on a slice (``kernels.selection``; README
        "Defaults, and the rule behind each"), i.e. C = 1 / alpha. Fitted: ``reg_`` and ``C_``.
        (LIBSVM's ``C`` is not a parameter here: pass reg = 1 / (n C).)
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
        "gaussian" runs as LIBSVM's own rbf with gamma = 1 / (2 sigma^2); the others as a callable
        kernel (a Gram matrix computed by kernelscale: slower, and O(n^2) memory).
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    epsilon : float, default=0.1
        ``ExactSVMRegressor`` only (the classifier refuses another value: it would be ignored):
        half-width of SVR's epsilon-insensitive tube, in the units of y. 0.1 is LIBSVM's and scikit-learn's default;
        for y scaled to unit variance it ignores residuals below a tenth of y's spread.
    tol : float, default=1e-3
        Stopping tolerance of LIBSVM's SMO solver (its KKT-violation bound); 1e-3 is LIBSVM's and
        scikit-learn's default.
    cache_size : float, default=500
        MB of LIBSVM's kernel-row cache. Larger than scikit-learn's 200 because SMO recomputes
        evicted kernel rows, and a reference run on tens of thousands of rows is worth the memory.
    random_state : int, RandomState or None, default=None
        Seed of the "auto" / "median" selection's subsample (LIBSVM's own solve is deterministic
        here: no probability estimates, no shuffling).
    engine : dict, kernelscale.engine.Engine or None, default=None
        LIBSVM runs on the CPU only (``device_`` is "cpu"); an engine device "gpu" is a one-line
        DeviceError rather than a silent CPU run. Fitted: ``engine_``.

    Attributes
    ----------
    svm_ : sklearn.svm.SVC or sklearn.svm.SVR
        The fitted LIBSVM model (support vectors, dual coefficients).
    reg_ : float
        nu used.
    C_ : float
        LIBSVM's C = 1 / (n nu).
    kernel_ : kernels.shift_invariant.Kernel
        The kernel used; ``bandwidth_`` is its sigma.
    bandwidth_ : float
    device_ : str
        Always "cpu".
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.exact import ExactSVMRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = ExactSVMRegressor(reg=1e-3, bandwidth="median", random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """

    def fit(self, X, y):
        """Fit LIBSVM on (X, y) (the data are loaded into memory).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self
        """
        reject_sparse(X)
        # LIBSVM needs the data in memory; scikit-learn's validation also ravels a column y
        X, y = _one_line(validate_data, self, X, y, dtype=[np.float64, np.float32],
                         y_numeric=True)
        kw = self._svm_kernel(X, y)
        self.svm_ = SVR(C=self.C_, epsilon=float(self.epsilon), tol=self.tol,
                        cache_size=self.cache_size, **kw).fit(X, y)
        return self

    def predict(self, X):
        """Targets predicted by the fitted LIBSVM model (SVR fits one output, so its targets stay
        scikit-learn's: a column y is ravelled with the usual DataConversionWarning).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        X = self._svm_rows(X)
        return self.svm_.predict(X)


# ---------------------------------------------------------------------------------------------
# Pegasos, NORMA
# ---------------------------------------------------------------------------------------------


__all__ = ["ExactKRRClassifier", "ExactKRRRegressor", "ExactSVMClassifier", "ExactSVMRegressor"]
