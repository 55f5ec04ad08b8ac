"""scikit-learn estimators on Random Binning features (Wu et al., KDD 2016).

* ``solver="cg"``: ridge regression (Z^T Z + reg I) W = Z^T Y by conjugate gradients (paper §3.1);
  classification is one-vs-all ridge on {-1, +1} targets, all classes as one block of right-hand
  sides. ``reg`` is the paper's lambda (default 0.01): in terms of the per-sample ERM (1),
  (lambda_1/2)||w||^2 + (1/N) sum 1/2 (f(x_i) - y_i)^2, reg = N lambda_1, so the same ``reg``
  regularises less as N grows.
* ``solver="cd"``: L1-regularised loss lambda ||w||_1 + (1/N) sum L (eq. 23) by parallel randomized
  coordinate descent (Algorithm 2) with ``n_jobs`` threads; losses square (regression and
  classification), logistic and squared hinge (classification). Here ``reg`` is lambda of eq. (23)
  (per-sample normalised, so it does not scale with N).

Features (Algorithm 1) are built chunk by chunk from numpy, cupy, zarr or dask inputs; on
``device="gpu"`` the CG iterations run on cupy / cupyx.scipy.sparse (binning stays on the host, where
it is a numba loop). CD is CPU-only (numba threads). Fitted models keep only the seed, the bin
vocabulary and the coefficients, on the host, so they pickle and predict on any machine.

Regression targets are centred (``intercept_`` = their mean) before solving, because both
regularisers would otherwise shrink the mean towards 0; the RB features themselves already contain
a constant (each grid's columns sum to 1/sqrt(R) on every training row).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..backend import DeviceError, resolve_device
from ..kernels.bandwidth import resolve_bandwidth
from ..kernels.random_binning import DEFAULT_CHUNK_ROWS, RB_KERNELS, RandomBinning, check_rb_kernel
from ..losses import sigmoid
from ..rng import seed_from
from ..solvers.rb_cd import CD_LOSSES, l1_cd
from ..solvers.rb_cg import ridge_cg
from ._base import LabelCoder, check_X, check_X_y
from ._kernel_common import auto_kernel

SOLVERS = ("cg", "cd")


def _reject_sparse(X):
    # RB bins dense rows; say so plainly instead of scikit-learn's generic sparse-input error
    if sp.issparse(X):
        raise TypeError("sparse input is not supported by random binning; pass a dense array")
    return X


def _check_number(name, value, *, low, strict=True, integer=False):
    kind = numbers.Integral if integer else numbers.Real
    ok = isinstance(value, kind) and not isinstance(value, bool) and np.isfinite(value) and (
        value > low if strict else value >= low)
    if not ok:
        op = ">" if strict else ">="
        raise ValueError(f"{name}={value!r} must be {'an integer' if integer else 'a number'} {op} {low}")


class _RBBase(BaseEstimator):
    """Shared fitting code; see the module docstring for the parameters' meaning."""

    iterative = False  # no warm_start segments: the whole solve is one fit

    def __init__(self, kernel="laplacian", bandwidth="auto", n_grids=256, reg="auto", solver="cg",
                 loss="square", tol=1e-4, max_iter=1000, precondition=False, n_jobs=1,
                 chunk_rows=DEFAULT_CHUNK_ROWS, device="auto", random_state=None):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_grids = n_grids
        self.reg = reg
        self.solver = solver
        self.loss = loss
        self.tol = tol
        self.max_iter = max_iter
        self.precondition = precondition
        self.n_jobs = n_jobs
        self.chunk_rows = chunk_rows
        self.device = device
        self.random_state = random_state

    _allowed_losses: tuple = ()

    def _validate_params_rb(self) -> str:
        """One-line errors for bad hyper-parameters; returns the resolved device."""
        check_rb_kernel(self.kernel)
        if self.solver not in SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; choose one of {SOLVERS}")
        if self.loss not in self._allowed_losses:
            raise ValueError(f"unknown loss {self.loss!r} for {type(self).__name__}; choose one of "
                             f"{list(self._allowed_losses)}")
        if self.solver == "cg" and self.loss != "square":
            raise ValueError(f"solver='cg' solves ridge regression (loss='square'), got loss={self.loss!r};"
                             " use solver='cd' for other losses")
        _check_number("n_grids", self.n_grids, low=1, strict=False, integer=True)
        if self.reg != "auto":
            _check_number("reg", self.reg, low=0, strict=self.solver == "cg")
        _check_number("tol", self.tol, low=0, strict=False)
        _check_number("max_iter", self.max_iter, low=1, strict=False, integer=True)
        if self.n_jobs != -1:
            _check_number("n_jobs", self.n_jobs, low=1, strict=False, integer=True)
        _check_number("chunk_rows", self.chunk_rows, low=1, strict=False, integer=True)
        if not isinstance(self.bandwidth, str) and self.bandwidth != "auto":
            resolve_bandwidth(self.bandwidth, None, "cityblock")  # numeric check only
        device = resolve_device(self.device)
        if self.solver == "cd" and device == "gpu":
            if self.device == "gpu":
                raise DeviceError("solver='cd' runs on the CPU only (numba threads); use device='cpu'")
            device = "cpu"
        return device

    def _fit_features(self, X, Y):
        """Bins of the training rows; sets ``bandwidth_`` and ``reg_``. ``bandwidth="auto"`` /
        ``reg="auto"``: held-out selection with the exact kernel (``kernels.selection``); the
        CG ridge (Z^T Z + reg I) is KernelRidge's alpha, taken as selected; CD's L1 weight is
        per sample (eq. 23): alpha / n."""
        seed = seed_from(self.random_state)
        if isinstance(self.bandwidth, str) and X.shape[0] < 2:
            raise ValueError(f"bandwidth={self.bandwidth!r} needs at least 2 samples, got "
                             "n_samples = 1")
        self.seed_ = seed % (2**32)
        kernel, alpha = auto_kernel(self, X, Y, self.reg == "auto",
                                    kernel_name=check_rb_kernel(self.kernel))
        sigma = kernel.bandwidth
        if self.reg == "auto":
            self.reg_ = alpha if self.solver == "cg" else alpha / int(X.shape[0])
        else:
            self.reg_ = float(self.reg)
        self.seed_ = seed
        self.bandwidth_ = sigma
        self.features_ = RandomBinning(self.kernel, sigma, self.n_grids, seed)
        Z = self.features_.fit_transform(X, chunk_rows=int(self.chunk_rows))
        self.n_features_out_ = self.features_.n_features_out_
        self.kappa_ = self.features_.kappa_
        return Z

    def _solve(self, Z, Y, device):
        """Coefficients (D, C) on the host for targets Y (n, C)."""
        if self.solver == "cg":
            if device == "gpu":
                import cupy
                import cupyx.scipy.sparse as cusp

                xp, Zd = cupy, cusp.csr_matrix(Z)
            else:
                xp, Zd = np, Z
            Yd = xp.asarray(Y, dtype=np.float64)
            W, hist, ok = ridge_cg(Zd, Zd.T @ Yd, self.reg_, tol=float(self.tol),
                                   max_iter=int(self.max_iter), xp=xp,
                                   jacobi=bool(self.precondition))
            W = W.get() if xp is not np else W
        else:
            W, hist, ok = l1_cd(Z, Y, self.reg_, loss=self.loss, tol=float(self.tol),
                                max_iter=int(self.max_iter), n_jobs=int(self.n_jobs), seed=self.seed_)
        if not ok:
            warnings.warn(f"{type(self).__name__} ({self.solver}) did not reach tol={self.tol} in "
                          f"max_iter={self.max_iter} iterations", ConvergenceWarning, stacklevel=3)
        self.history_ = hist
        self.n_iter_ = int(hist["iter"][-1])
        return np.asarray(W)

    def _scores(self, X):
        check_is_fitted(self, "coef_")
        X = check_X(self, _reject_sparse(X), reset=False)
        Z = self.features_.transform(X, chunk_rows=int(self.chunk_rows))
        return Z @ self.coef_ + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.solver == "cd" and self.n_jobs != 1
        return tags


class RBRegressor(RegressorMixin, _RBBase):
    """Kernel regression on Random Binning features (ridge by CG, or L1 + square loss by CD).

    Parameters
    ----------
    kernel : "laplacian" -- k(x, x') = exp(-||x - x'||_1 / sigma).
    bandwidth : "median" (median L1 distance of a sample), "median*<f>" or sigma > 0.
    n_grids : R, the number of random grids (each row gets exactly R non-zero features).
    reg : lambda; ridge for "cg" (paper default 0.01, see module docstring for its N-scaling),
        L1 weight of eq. (23) for "cd".
    solver : "cg" or "cd".  loss : "square" (the only regression loss here).
    tol : CG relative residual / CD relative objective decrease per epoch.
    max_iter : CG iterations / CD epochs.
    precondition : Jacobi-preconditioned CG (diag(Z^T Z) + reg); default False = the paper's plain
        CG (Jacobi helps at loose tolerances, can hurt at tight ones: see ``solvers.rb_cg``).  n_jobs : CD threads (tau; -1 = all cores).
    chunk_rows : rows read at a time from on-disk (zarr / dask) inputs.
    device : "auto" | "cpu" | "gpu" (GPU for CG).  random_state : seed of the grids.

    Attributes: ``coef_`` (D,) or (D, C), ``intercept_``, ``n_features_out_`` (D), ``kappa_``,
    ``bandwidth_`` (sigma used), ``history_``, ``n_iter_``.
    """

    _allowed_losses = ("square",)

    def fit(self, X, y):
        device = self._validate_params_rb()
        X, y = check_X_y(self, _reject_sparse(X), y, regression=True)
        y = np.asarray(y, dtype=np.float64)
        Y = y[:, None] if y.ndim == 1 else y
        Z = self._fit_features(X, Y)
        self.intercept_ = Y.mean(axis=0)
        W = self._solve(Z, Y - self.intercept_, device)
        if y.ndim == 1:
            W, self.intercept_ = W[:, 0], float(self.intercept_[0])
        self.coef_ = W
        return self

    def predict(self, X):
        return self._scores(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RBClassifier(ClassifierMixin, _RBBase):
    """Classification on Random Binning features: one-vs-all ridge by CG, or L1-regularised
    square / logistic / squared-hinge loss by parallel coordinate descent (``solver="cd"``).

    Parameters are those of :class:`RBRegressor`; ``loss`` is one of "square" (the only one for
    "cg"), "logistic" (gives ``predict_proba``) or "squared_hinge". Targets are {-1, +1}: one column
    for two classes, one-vs-all columns otherwise.
    """

    _allowed_losses = tuple(CD_LOSSES)

    def fit(self, X, y):
        device = self._validate_params_rb()
        X, y = check_X_y(self, _reject_sparse(X), y, regression=False)
        coder = LabelCoder(y, self.loss)
        self.classes_ = coder.classes_
        Y = coder.encode_index(coder.y_index, np, np.float64)
        Z = self._fit_features(X, Y)
        W = self._solve(Z, Y, device)
        self.coef_ = W[:, 0] if W.shape[1] == 1 else W
        self.intercept_ = 0.0
        return self

    def decision_function(self, X):
        return self._scores(X)

    def predict(self, X):
        s = self.decision_function(X)
        idx = (s > 0).astype(np.int64) if s.ndim == 1 else s.argmax(axis=1)
        return self.classes_[idx]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Logistic probabilities; one-vs-all columns normalised to sum to 1 (as sklearn's OvR)."""
        s = self.decision_function(X)
        if s.ndim == 1:
            p = sigmoid(s)
            return np.stack([1.0 - p, p], axis=1)
        p = sigmoid(s)
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))


__all__ = ["RB_KERNELS", "RBClassifier", "RBRegressor"]
