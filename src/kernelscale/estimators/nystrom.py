"""Nyström features + ridge regression (``solvers.nystrom``): ``NystromRidgeClassifier`` /
``NystromRidgeRegressor``.
"""

from __future__ import annotations

from sklearn.base import ClassifierMixin, RegressorMixin

from ..preconditioners import subsample_indices
from ..solvers._common import take_rows
from ..solvers.nystrom import NystromRidge
from ._kernel_common import (
    KernelEstimatorBase,
    n_features_rule,
    ridge_alpha,
)
from ._params import (
    REG,
    Int,
    Real,
)
from ._targets import ClassifierTargets, RegressorTargets

NYSTROM_CHUNK_ROWS = 8192  # Nystrom's default engine chunk_rows


class _NystromBase(KernelEstimatorBase):
    """Implementation shared by ``NystromRidgeClassifier`` / ``NystromRidgeRegressor``."""

    _rules = {"n_components": Int(1, "auto"), "reg": REG, "rcond": Real(0)}

    def __init__(self, n_components="auto", reg="auto", kernel="gaussian", bandwidth="auto",
                 rcond=1e-12, random_state=None, engine=None):
        self.n_components = n_components
        self.reg = reg
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.rcond = rcond
        self.random_state = random_state
        self.engine = engine

    def fit(self, X, y):
        """Fit the Nyström ridge model on (X, y) in one pass over X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; also an on-disk zarr / dask array, read ``engine.chunk_rows`` rows
            at a time (only the m landmark rows are held).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (classifier: class labels).

        Returns
        -------
        self
        """
        X, Y = self._fit_targets(X, y)
        self._validate_params()
        xp, dtype = self._setup_common(X, Y, reg=self.reg)
        n = int(X.shape[0])
        alpha = ridge_alpha(self, n)
        m = n_features_rule(n, self.n_components, floor=500)
        idx = subsample_indices(n, m, self.seed_)
        Z = xp.asarray(take_rows(X, idx), dtype=dtype)
        self.solver_ = NystromRidge(self.kernel_, Z, xp, rcond=float(self.rcond))
        self.solver_.fit(X, Y, alpha, dtype, self.engine_.chunk_rows or NYSTROM_CHUNK_ROWS)
        self.n_components_ = int(Z.shape[0])
        self.rank_ = self.solver_.rank
        return self


class NystromRidgeRegressor(RegressorTargets, RegressorMixin, _NystromBase):
    """Nyström approximation + ridge regression (Williams & Seeger, NIPS 2001; the
    "Nyström + a linear solver" baseline of papers 002 and 003), ``solvers.nystrom``.

    m landmarks Z, K_ZZ = U diag(s) U^T, give the feature map phi(x) = diag(s)^{-1/2} U^T k(Z, x)
    whose inner products are the Nyström kernel K_xZ K_ZZ^+ K_Zx; the model is the ridge solution
    min_w ||Phi w - Y||^2 + n nu ||w||^2, solved through its m x m normal equations summed
    over row chunks of X. Multi-output y allowed.

    Parameters
    ----------
    n_components : "auto" or int >= 1, default="auto"
        m, landmarks (centres) sampled without replacement from the training rows with the seed.
        "auto" = max(500, ceil(sqrt(n) ln n)), at most n: the count with which Nyström ridge
        keeps the exact kernel's learning rate (Rudi, Camoriano & Rosasco, NIPS 2015); 500 keeps
        small sets from a needlessly coarse approximation. With m = n the fit is exact kernel
        ridge; an integer above n is capped at n the same way (every row a landmark), so one
        setting serves datasets of any size. Fitted: ``n_components_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu of the averaged objective (nu/2)||f||^2 + (1/2n) sum (f(x_i) - y_i)^2, solved over the
        span of the landmarks; the ridge solved is scikit-learn's ``KernelRidge`` alpha = n nu.
        "auto": alpha chosen with the bandwidth by held-out selection on a slice
        (``kernels.selection``; README "Defaults, and the rule behind each"), nu = alpha / n.
        Fitted: ``reg_``.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    rcond : float, default=1e-12
        Eigenvalues of the landmarks' kernel matrix K_ZZ below rcond x its largest are dropped
        (the pseudo-inverse K_ZZ^+): a smooth kernel's K_ZZ is numerically singular, and
        1 / sqrt(s) of an eigenvalue at rounding level would amplify noise. 1e-12 is a few
        thousand times float64's precision (2.2e-16), so nothing that float64 resolves is cut.
        Fitted: ``rank_``, the eigenvalues kept.
    random_state : int, RandomState or None, default=None
        Seed of the landmark sample and of the "auto" / "median" selection's subsample.
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype`` (of the kernel
        blocks and the solve) and ``chunk_rows``, the rows of X per chunk of the normal equations
        (X is read chunk by chunk, also from zarr / dask; default 8192: a chunk x m
        kernel block, 62.5 MiB in float64 for m = 1,000). Fitted: ``engine_``.

    Attributes
    ----------
    solver_ : solvers.nystrom.NystromRidge
        Landmarks ``Z`` and ridge coefficients ``coef`` over the Nyström features.
    n_components_ : int
        m used (``n_components`` capped at n).
    rank_ : int
        Eigenvalues of K_ZZ kept (<= m): the dimension of the Nyström feature map.
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
    >>> from kernelscale.estimators.nystrom import NystromRidgeRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = NystromRidgeRegressor(n_components=100, random_state=0).fit(X, y / y.std())
    >>> model.predict(X[:3]).shape
    (3,)
    >>> model.rank_ <= model.n_components_ == 100
    True
    """


class NystromRidgeClassifier(ClassifierTargets, ClassifierMixin, _NystromBase):
    """Nyström approximation + ridge regression (Williams & Seeger, NIPS 2001; the
    "Nyström + a linear solver" baseline of papers 002 and 003), ``solvers.nystrom``.

    m landmarks Z, K_ZZ = U diag(s) U^T, give the feature map phi(x) = diag(s)^{-1/2} U^T k(Z, x)
    whose inner products are the Nyström kernel K_xZ K_ZZ^+ K_Zx; the model is the ridge solution
    min_w ||Phi w - Y||^2 + n nu ||w||^2, solved through its m x m normal equations summed
    over row chunks of X. Classification: ridge on {-1, +1} targets (one column
    for two classes, one-vs-all columns for more), predict by sign / argmax.

    Parameters
    ----------
    n_components : "auto" or int >= 1, default="auto"
        m, landmarks (centres) sampled without replacement from the training rows with the seed.
        "auto" = max(500, ceil(sqrt(n) ln n)), at most n: the count with which Nyström ridge
        keeps the exact kernel's learning rate (Rudi, Camoriano & Rosasco, NIPS 2015); 500 keeps
        small sets from a needlessly coarse approximation. With m = n the fit is exact kernel
        ridge; an integer above n is capped at n the same way (every row a landmark), so one
        setting serves datasets of any size. Fitted: ``n_components_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu of the averaged objective (nu/2)||f||^2 + (1/2n) sum (f(x_i) - y_i)^2, solved over the
        span of the landmarks; the ridge solved is scikit-learn's ``KernelRidge`` alpha = n nu.
        "auto": alpha chosen with the bandwidth by held-out selection on a slice
        (``kernels.selection``; README "Defaults, and the rule behind each"), nu = alpha / n.
        Fitted: ``reg_``.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"); fitted: ``bandwidth_``.
    rcond : float, default=1e-12
        Eigenvalues of the landmarks' kernel matrix K_ZZ below rcond x its largest are dropped
        (the pseudo-inverse K_ZZ^+): a smooth kernel's K_ZZ is numerically singular, and
        1 / sqrt(s) of an eigenvalue at rounding level would amplify noise. 1e-12 is a few
        thousand times float64's precision (2.2e-16), so nothing that float64 resolves is cut.
        Fitted: ``rank_``, the eigenvalues kept.
    random_state : int, RandomState or None, default=None
        Seed of the landmark sample and of the "auto" / "median" selection's subsample.
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype`` (of the kernel
        blocks and the solve) and ``chunk_rows``, the rows of X per chunk of the normal equations
        (X is read chunk by chunk, also from zarr / dask; default 8192: a chunk x m
        kernel block, 62.5 MiB in float64 for m = 1,000). Fitted: ``engine_``.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    solver_ : solvers.nystrom.NystromRidge
        Landmarks ``Z`` and ridge coefficients ``coef`` over the Nyström features.
    n_components_ : int
        m used (``n_components`` capped at n).
    rank_ : int
        Eigenvalues of K_ZZ kept (<= m): the dimension of the Nyström feature map.
    reg_ : float
        nu used (the ridge solved is n ``reg_``).
    kernel_ : kernels.shift_invariant.Kernel
        The kernel used; ``bandwidth_`` is its sigma.
    bandwidth_ : float
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.nystrom import NystromRidgeClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = NystromRidgeClassifier(n_components=100, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """


__all__ = ["NystromRidgeClassifier", "NystromRidgeRegressor"]
