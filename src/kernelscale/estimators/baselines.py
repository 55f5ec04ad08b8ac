"""Baseline estimators the papers compare with (ALGORITHMS.md, "Baselines"):

* ``RFFSGDClassifier`` / ``RFFSGDRegressor``: fixed random Fourier features + SGD or SVRG;
* ``NystromRidgeClassifier`` / ``NystromRidgeRegressor``: Nyström features + ridge;
* ``ExactKRRClassifier`` / ``ExactKRRRegressor``: exact kernel ridge by a direct solve;
* ``ExactSVMClassifier`` / ``ExactSVMRegressor``: LIBSVM (scikit-learn's SVC / SVR) as the accuracy
  reference, with kernelscale's kernel and bandwidth naming;
* ``PegasosClassifier``: kernelized mini-batch Pegasos;
* ``NORMAClassifier`` / ``NORMARegressor``: kernel SGD with a truncated expansion (budget).

Classifiers encode labels as {-1, +1} (one column for two classes, one-vs-all otherwise).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.svm import SVC, SVR
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import DeviceError, resolve_device
from ..budget import budget_window
from ..distributed import current_client
from ..kernels import FourierBlocks
from ..losses import make_loss
from ..preconditioners import subsample_indices
from ..rng import seed_from
from ..solvers._common import Progress, load_rows, run_loop, take_rows
from ..solvers.exact import ExactKRR
from ..solvers.norma import NORMA
from ..solvers.nystrom import NystromRidge
from ..solvers.pegasos import KernelPegasos
from ..solvers.rff_sgd import RFFSGD
from ..stream import BatchStream, is_in_memory
from ._base import LabelCoder, check_X, check_X_y, doc_indent
from ._kernel_common import (
    ClassifierTargets,
    KernelEstimatorBase,
    RegressorTargets,
    auto_kernel,
    exact_max_n,
    n_features_rule,
    reject_sparse,
)
from ._params import (
    ITERS,
    REG,
    REG_POSITIVE,
    Int,
    KernelscaleEstimator,
    OneOf,
    Real,
    reg_and_ridge,
    steps,
)

NYSTROM_CHUNK_ROWS = 8192  # Nystrom's default engine chunk_rows
# NORMA budget="auto": the centres it may hold. A step reads them all, so this bounds the cost
# of a step as well as the memory: 10,700 terms at d = 784 in float64 (Fashion-MNIST at 256 MB,
# 42,800 terms, did not finish its 3 epochs in 40 min on one core), while the tabular sets
# (d <= 57) never reach it
NORMA_CENTRES_MB = 64
NORMA_DROPPED_WEIGHT = 0.5  # warn when the ring dropped a term weighing more than this
CLASSIFICATION_LOSSES = ("logistic", "hinge", "square", "squared_hinge")
REGRESSION_LOSSES = ("square", "epsilon_insensitive", "huber")


def _check_loss(loss, allowed, who):
    if loss not in allowed:
        raise ValueError(f"loss={loss!r} is not supported by {who}; choose one of {allowed}")
    return make_loss(loss)


def ridge_alpha(est, n: int) -> float:
    """The ridge of a summed-loss solve, scikit-learn's KernelRidge alpha = n nu; sets ``reg_``
    = nu (``_params.reg_and_ridge``)."""
    est.reg_, alpha = reg_and_ridge(est.reg, n, getattr(est, "alpha_sel_", None))
    return alpha


class _IterativeMixin:
    """``n_iter`` handling and the training loop over a BatchStream."""

    iterative = True
    _auto_epochs = 1  # n_iter="auto": this many passes over the data per fit

    def _n_iter(self, batches_per_epoch: int) -> int:
        self._validate_params()  # n_iter may change between warm-started fits
        return steps(self.n_iter, batches_per_epoch, self._auto_epochs)

    def _train(self, stream, batches, name, hint):
        n_iter = self._n_iter(stream.batches_per_epoch)
        progress = Progress(name, n_iter, getattr(self, "verbose", 0))
        try:
            run_loop(self.solver_, batches, n_iter, self.history_, name, on_step=progress,
                     hint=hint)
        finally:
            progress.close()
            stream.close()
        self.n_iter_ = self.solver_.t


# ---------------------------------------------------------------------------------------------
# Random Fourier features + SGD / SVRG
# ---------------------------------------------------------------------------------------------
_RFF_PARAMS = """\
loss : str or None, default=None
    Classifier: "logistic" (default), "hinge", "square", "squared_hinge"; regressor: "square"
    (default), "epsilon_insensitive", "huber".
solver : {"sgd", "svrg"}, default="sgd"
n_components : "auto" or int, default="auto"
    D random features; "auto" = max(1000, ceil(sqrt(n) ln n)) (the count that keeps the exact
    kernel's learning rate, Rudi & Rosasco 2017); fitted: ``n_components_``.
reg : "auto", float >= 0 or "x/n", default="auto"
    nu, the penalty (nu/2)||W||^2 of the averaged objective on the feature weights (the RKHS
    norm of the random-feature model); "auto" = alpha_sel / n with alpha_sel from
    ``kernels.selection`` (chosen with the bandwidth); fitted: ``reg_``.
eta0 : "auto" or float, default="auto"
    Step size; "auto" = m / (L (beta + (m - 1) lambda_1) + m nu), the largest stable
    mini-batch step (``solvers.rff_sgd``). A given eta0 is clamped to 1 / (2 nu) so that the
    shrink factor 1 - eta nu stays in [1/2, 1]. SGD decays it as eta0 / (1 + nu eta0 t);
    SVRG keeps it constant. Fitted: ``eta0_``.
batch_size : int, default=64
    m, rows per step; a value above n is capped at n (one step = one pass; fitted:
    ``batch_size_``).
svrg_inner : "epoch" or int, default="epoch"
    Iterations between SVRG snapshots ("epoch" = one pass). ``solver="svrg"`` only: another
    value with "sgd" is a ValueError (it would be ignored).
n_iter : "auto", int >= 1 or "K epochs", default="auto"
    Mini-batch steps per ``fit`` call. "auto" = 20 epochs, 20 ceil(n / m): with nu ~ 1/n the
    problem is ill-conditioned (condition number ~ n), so plain SGD needs many passes and is
    limited by optimisation before the features.
kernel : str, default="gaussian"
    Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
bandwidth : "auto", "median", "median*<f>" or float, default="auto"
    sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
    the rule behind each"); fitted: ``bandwidth_``.
warm_start : bool, default=False
    Each ``fit`` continues the fitted model.
random_state : int, RandomState or None, default=None
engine : dict, kernelscale.engine.Engine or None, default=None
    Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk
    X ``window_rows`` / ``memory_budget`` (the feature matrix is batch_size x n_components).
    Fitted: ``engine_``.
verbose : int, default=0
    0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
    (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
    change the fitted model."""

_RFF_ATTRS = """\
solver_ : solvers.rff_sgd.RFFSGD
    Holds the weights ``w`` over the random features.
reg_, eta0_, n_components_, bandwidth_ : the values used.
batch_size_ : int
    m used: ``batch_size``, at most n.
n_iter_ : int
    Iterations so far.
history_ : dict
    Per-iteration records: iter, time, objective (batch loss), step.
n_features_in_ : int"""

_COMMON_KERNEL = """kernel : str, default="gaussian"
    Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
bandwidth : "auto", "median", "median*<f>" or float, default="auto"
    sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
    the rule behind each"); fitted: ``bandwidth_``."""
_VERBOSE = """verbose : int, default=0
    0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
    (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
    change the fitted model."""


class _RFFSGDBase(_IterativeMixin, KernelEstimatorBase):
    """Implementation shared by ``RFFSGDClassifier`` / ``RFFSGDRegressor``."""

    _auto_epochs = 20
    _rules = {"solver": OneOf("sgd", "svrg"), "n_components": Int(1, "auto"), "reg": REG,
              "eta0": Real(0, "auto", strict=True), "batch_size": Int(1),
              "svrg_inner": Int(1, "epoch"), "n_iter": ITERS}
    _used_only = {"svrg_inner": ("with solver='svrg'", ("solver",),
                                 lambda p: p["solver"] == "svrg")}

    def __init__(self, loss=None, solver="sgd", n_components="auto", reg="auto", eta0="auto",
                 batch_size=64, svrg_inner="epoch", n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        self.loss = loss
        self.solver = solver
        self.n_components = n_components
        self.reg = reg
        self.eta0 = eta0
        self.batch_size = batch_size
        self.svrg_inner = svrg_inner
        self.n_iter = n_iter
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.verbose = verbose

    def _fit(self, X, y):
        X, Y = self._fit_targets(X, y)
        n = int(X.shape[0])
        if self._fresh():
            self._validate_params()
            loss = _check_loss(self._loss_name(), self._losses, type(self).__name__)
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, n, self.alpha_sel_)[0]
            self.n_components_ = n_features_rule(n, self.n_components)
            blocks = FourierBlocks(self.kernel_, self.n_features_in_, self.n_components_,
                                   self.seed_, xp=xp, dtype=dtype)
            self.batch_size_ = min(int(self.batch_size), n)  # BatchStream caps it too
            per_epoch = -(-n // self.batch_size_)
            inner = per_epoch if self.svrg_inner == "epoch" else int(self.svrg_inner)
            self.solver_ = RFFSGD(blocks, loss, Y.shape[1], alpha=self.reg_,
                                  solver=self.solver, eta0=self.eta0, inner=inner,
                                  X_sample=RFFSGD.sample_rows(X, self.seed_), xp=xp,
                                  batch_size=self.batch_size_)
            self.eta0_ = self.solver_.eta0
            self.history_ = {}
        xp = self._xp()
        dtype = np.dtype(self.dtype_)
        window_rows = budget_window(self.engine_, X, int(self.batch_size), self.n_components_,
                                    dtype)
        stream = BatchStream(X, Y, batch_size=int(self.batch_size), seed=self.seed_, xp=xp,
                             dtype=dtype, window_rows=window_rows)
        self.window_rows_ = stream.window_rows  # rows read per window (budget's choice)

        def batches(t):
            Xb, Yb = stream.batch(t)
            return Xb, xp.asarray(Yb, dtype=dtype)

        spread = None
        self.solver_.data = (X, Y)
        try:
            client = current_client()
            if client is not None and not is_in_memory(X):
                # data-parallel steps: each dask worker reads and works on its share of every
                # batch (kernelscale.distributed_rff)
                from ..distributed_rff import SpreadRFF

                try:
                    spread = batches = SpreadRFF(
                        client, X, Y, dict(batch_size=int(self.batch_size), seed=self.seed_,
                                           dtype=dtype, window_rows=window_rows), self.solver_)
                except BaseException:
                    stream.close()
                    raise
            self._train(stream, batches, f"RFF+{self.solver.upper()}",
                        "set a smaller eta0 (or a larger reg)")
        finally:
            self.solver_.data = None
            if spread is not None:
                spread.close()
                # what the fit sent and received (array payloads), for the cost model
                self.spread_ = {"workers": spread.W, "round_trips": spread.round_trips,
                                "bytes_sent": spread.bytes_sent,
                                "bytes_received": spread.bytes_received}
        return self

    def objective(self, X, y) -> float:
        """The training objective F(W) = mean loss + (nu/2)||W||^2 on (X, y), nu = ``reg_``."""
        check_is_fitted(self, "solver_")
        X = check_X(self, X, reset=False)
        Y = self._encode(y)
        self._xp(fitting=False)
        self.solver_.data = (X, Y)
        try:
            return self.solver_.objective()
        finally:
            self.solver_.data = None


class RFFSGDClassifier(ClassifierTargets, ClassifierMixin, _RFFSGDBase):
    __doc__ = f"""Random Fourier features (fixed count) + mini-batch SGD or SVRG
    (``solvers.rff_sgd``); labels as -1 / +1, one-vs-all for several classes.

    Parameters
    ----------
{doc_indent(_RFF_PARAMS)}

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
{doc_indent(_RFF_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.baselines import RFFSGDClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = RFFSGDClassifier(n_components=100, n_iter=8, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """
    _losses = CLASSIFICATION_LOSSES

    def _loss_name(self):
        return self.loss or "logistic"

    def _encode(self, y):
        return self._coder.encode_index(self._coder.index_of(np.asarray(y)), np, np.float64)

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

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
        return self._fit(X, y)


class RFFSGDRegressor(RegressorTargets, RegressorMixin, _RFFSGDBase):
    __doc__ = f"""Random Fourier features (fixed count) + mini-batch SGD or SVRG
    (``solvers.rff_sgd``) for regression; multi-output y allowed.

    Parameters
    ----------
{doc_indent(_RFF_PARAMS)}

    Attributes
    ----------
{doc_indent(_RFF_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.baselines import RFFSGDRegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = RFFSGDRegressor(n_components=100, n_iter=8, random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """
    _losses = REGRESSION_LOSSES

    def _loss_name(self):
        return self.loss or "square"

    def _encode(self, y):
        return np.asarray(y, dtype=np.float64).reshape(len(y), -1)

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        return self._fit(X, y)


# ---------------------------------------------------------------------------------------------
# Nyström + ridge, exact kernel ridge
# ---------------------------------------------------------------------------------------------
_NYSTROM_PARAMS = f"""\
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
{_COMMON_KERNEL}
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
    (X is read chunk by chunk, also from zarr / dask; default {NYSTROM_CHUNK_ROWS}: a chunk x m
    kernel block, 62.5 MiB in float64 for m = 1,000). Fitted: ``engine_``."""

_NYSTROM_ATTRS = """\
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
n_features_in_ : int"""


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


_NYSTROM_METHOD = """Nyström approximation + ridge regression (Williams & Seeger, NIPS 2001; the
    "Nyström + a linear solver" baseline of papers 002 and 003), ``solvers.nystrom``.

    m landmarks Z, K_ZZ = U diag(s) U^T, give the feature map phi(x) = diag(s)^{-1/2} U^T k(Z, x)
    whose inner products are the Nyström kernel K_xZ K_ZZ^+ K_Zx; the model is the ridge solution
    min_w ||Phi w - Y||^2 + n nu ||w||^2, solved through its m x m normal equations summed
    over row chunks of X."""


class NystromRidgeRegressor(RegressorTargets, RegressorMixin, _NystromBase):
    __doc__ = f"""{_NYSTROM_METHOD} Multi-output y allowed.

    Parameters
    ----------
{doc_indent(_NYSTROM_PARAMS)}

    Attributes
    ----------
{doc_indent(_NYSTROM_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.baselines import NystromRidgeRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = NystromRidgeRegressor(n_components=100, random_state=0).fit(X, y / y.std())
    >>> model.predict(X[:3]).shape
    (3,)
    >>> model.rank_ <= model.n_components_ == 100
    True
    """


class NystromRidgeClassifier(ClassifierTargets, ClassifierMixin, _NystromBase):
    __doc__ = f"""{_NYSTROM_METHOD} Classification: ridge on {{-1, +1}} targets (one column
    for two classes, one-vs-all columns for more), predict by sign / argmax.

    Parameters
    ----------
{doc_indent(_NYSTROM_PARAMS)}

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
{doc_indent(_NYSTROM_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.baselines import NystromRidgeClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = NystromRidgeClassifier(n_components=100, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """


_EXACT_KRR_PARAMS = f"""\
reg : "auto", float > 0 or "x/n", default="auto"
    nu of the averaged objective (nu/2)||f||^2 + (1/2n) sum (f(x_i) - y_i)^2; the system solved
    is (K + alpha I) c = Y with scikit-learn's ``KernelRidge`` alpha = n nu. "auto": alpha
    chosen with the bandwidth by held-out selection on a slice (``kernels.selection``; README
    "Defaults, and the rule behind each"), whose proxy is this very estimator on a 1,000-row
    slice; nu = alpha / n. Must be > 0 (the Cholesky factorisation needs K + alpha I positive
    definite). Fitted: ``reg_``.
{_COMMON_KERNEL}
max_n : "auto" or int >= 1, default="auto"
    Largest n accepted; more rows is a one-line error pointing at the scalable methods.
    "auto" = the n whose n x n kernel matrix (in the engine's dtype) takes at most 60 % of the memory
    available when ``fit`` starts (``_kernel_common.exact_max_n``): the matrix is factored in
    place, so it is the one n^2 allocation, and 40 % stays for everything else.
random_state : int, RandomState or None, default=None
    Seed of the "auto" / "median" selection's subsample (the solve itself has no randomness).
engine : dict, kernelscale.engine.Engine or None, default=None
    Where and how to compute (``kernelscale.engine``): ``device`` and ``dtype`` (of the kernel
    matrix and the solve). Fitted: ``engine_``."""

_EXACT_KRR_ATTRS = """\
solver_ : solvers.exact.ExactKRR
    The training rows ``X`` and the coefficients ``coef`` (n, C): f = sum_i c_i k(x_i, .).
reg_ : float
    nu used (the ridge solved is n ``reg_``).
kernel_ : kernels.shift_invariant.Kernel
    The kernel used; ``bandwidth_`` is its sigma.
bandwidth_ : float
n_features_in_ : int"""


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


_EXACT_KRR_METHOD = """Exact kernel ridge regression by a direct solve (``solvers.exact``): the
    reference solution of the papers' square-loss experiments (paper 004 §6: "direct solution
    of kernel regularized least squares (KRLS) is used to obtain the reference error"; the
    square-loss case of paper 003's problem (nu/2)||f||^2 + E loss(f(x), y), solved exactly).

    f = sum_i c_i k(x_i, .) with (K + n nu I) c = Y, K the n x n kernel matrix of the
    training rows: O(n^2) memory and O(n^3) time, so n is capped by ``max_n``."""


class ExactKRRRegressor(RegressorTargets, RegressorMixin, _ExactKRRBase):
    __doc__ = f"""{_EXACT_KRR_METHOD} Multi-output y allowed.

    Parameters
    ----------
{doc_indent(_EXACT_KRR_PARAMS)}

    Attributes
    ----------
{doc_indent(_EXACT_KRR_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.baselines import ExactKRRRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = ExactKRRRegressor(reg=1e-3, bandwidth="median", random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """


class ExactKRRClassifier(ClassifierTargets, ClassifierMixin, _ExactKRRBase):
    __doc__ = f"""{_EXACT_KRR_METHOD} Classification: ridge on {{-1, +1}} targets (one column
    for two classes, one-vs-all columns for more), predict by sign / argmax.

    Parameters
    ----------
{doc_indent(_EXACT_KRR_PARAMS)}

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
{doc_indent(_EXACT_KRR_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.baselines import ExactKRRClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = ExactKRRClassifier(random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """


# ---------------------------------------------------------------------------------------------
# LIBSVM reference
# ---------------------------------------------------------------------------------------------
class _KernelFunction:
    """Picklable callable kernel for LIBSVM: K(A, B) as numpy float64."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, A, B):
        return self.kernel(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64))


_SVM_PARAMS = """\
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
    DeviceError rather than a silent CPU run. Fitted: ``engine_``."""

_SVM_ATTRS = """\
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
n_features_in_ : int"""

_SVM_FIT = """Fit LIBSVM on (X, y) (the data are loaded into memory).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            {y}

        Returns
        -------
        self
        """


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

    def predict(self, X):
        """Predictions of the fitted LIBSVM model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
            Class labels (classifier) or targets (regressor).
        """
        check_is_fitted(self, "svm_")
        reject_sparse(X)
        return self.svm_.predict(check_X(self, X, reset=False))


class ExactSVMClassifier(ClassifierMixin, _ExactSVMBase):
    __doc__ = f"""Exact kernel SVM by LIBSVM (scikit-learn's ``SVC``; CPU only): the accuracy
    reference of paper 000 (its Table 3: DSG / UDSG / CDSG against LIBSVM's converged
    solution), with kernelscale's kernel and bandwidth naming.

    Minimises (1/2)||f||^2 + C sum_i max(0, 1 - y_i f(x_i)) (the hinge loss of paper 003's
    problem with nu = 1 / (C n)) by SMO on the dual. Several classes: LIBSVM's one-vs-one,
    ``decision_function`` in one-vs-rest shape.

    Parameters
    ----------
{doc_indent(_SVM_PARAMS)}

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
{doc_indent(_SVM_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.baselines import ExactSVMClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = ExactSVMClassifier(reg=1e-3, bandwidth="median", random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    def fit(self, X, y):
        reject_sparse(X)
        X, y = check_X_y(self, X, y, regression=False)
        coder = LabelCoder(y, "hinge")  # one-line errors for regression targets / a single class
        kw = self._svm_kernel(X, coder.encode_index(coder.y_index, np, np.float64))
        self.svm_ = SVC(C=self.C_, tol=self.tol, cache_size=self.cache_size,
                        decision_function_shape="ovr", **kw).fit(X, y)
        self.classes_ = self.svm_.classes_
        return self

    fit.__doc__ = _SVM_FIT.format(y="Class labels.")
    _used_only = {"epsilon": ("by ExactSVMRegressor (the half-width of SVR's tube)", (),
                              lambda p: False)}

    def decision_function(self, X):
        """LIBSVM's decision values, one-vs-rest shaped for several classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for two classes (positive favours ``classes_[1]``).
        """
        check_is_fitted(self, "svm_")
        reject_sparse(X)
        return self.svm_.decision_function(check_X(self, X, reset=False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class ExactSVMRegressor(RegressorMixin, _ExactSVMBase):
    __doc__ = f"""Exact kernel support vector regression by LIBSVM (scikit-learn's ``SVR``;
    CPU only), with kernelscale's kernel and bandwidth naming.

    Minimises (1/2)||f||^2 + C sum_i max(0, |f(x_i) - y_i| - epsilon) (paper 003's
    epsilon-insensitive loss with nu = 1 / (C n)) by SMO on the dual. One output.

    Parameters
    ----------
{doc_indent(_SVM_PARAMS)}

    Attributes
    ----------
{doc_indent(_SVM_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.baselines import ExactSVMRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = ExactSVMRegressor(reg=1e-3, bandwidth="median", random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """

    def fit(self, X, y):
        reject_sparse(X)
        # LIBSVM needs the data in memory; scikit-learn's validation also ravels a column y
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], y_numeric=True)
        kw = self._svm_kernel(X, y)
        self.svm_ = SVR(C=self.C_, epsilon=float(self.epsilon), tol=self.tol,
                        cache_size=self.cache_size, **kw).fit(X, y)
        return self

    fit.__doc__ = _SVM_FIT.format(y="Targets.")


# ---------------------------------------------------------------------------------------------
# Pegasos, NORMA
# ---------------------------------------------------------------------------------------------
class PegasosClassifier(_IterativeMixin, ClassifierTargets, ClassifierMixin, KernelEstimatorBase):
    __doc__ = f"""Kernelized mini-batch Pegasos (``solvers.pegasos``); one-vs-all for several
    classes. Holds the training points (the support vectors), so X is loaded onto the device.

    Parameters
    ----------
    reg : "auto", float > 0 or "x/n", default="auto"
        nu of the averaged objective, Pegasos' lambda (= 1 / (C n) for LIBSVM's C); "auto" =
        alpha_sel / n with alpha_sel from ``kernels.selection`` (chosen with the bandwidth);
        fitted: ``reg_``. The step is Pegasos' own 1 / (nu t).
    batch_size : int, default=32
        Points per step; a value above n is capped at n (fitted: ``batch_size_``).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Mini-batch steps per ``fit`` call; "auto" = 5 epochs, 5 ceil(n / batch_size) (Pegasos'
        error bound falls as 1 / (nu t): a few passes suffice at the selected nu).
{doc_indent(_COMMON_KERNEL)}
    warm_start : bool, default=False
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``. Fitted:
        ``engine_``.
{doc_indent(_VERBOSE)}

    Attributes
    ----------
    classes_ : ndarray
    solver_ : solvers.pegasos.KernelPegasos
    reg_, bandwidth_ : the values used.
    n_support_ : int
        Training points with a non-zero coefficient.
    batch_size_ : int
        Points per step used: ``batch_size``, at most n.
    n_iter_ : int
    history_ : dict
        Per-iteration records: iter, time, objective (batch hinge loss).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.baselines import PegasosClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = PegasosClassifier(n_iter=14, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    _auto_epochs = 5
    _rules = {"reg": REG_POSITIVE, "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, reg="auto", batch_size=32, n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        self.reg = reg
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.verbose = verbose

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

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
        if self._fresh():
            self._validate_params()
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, int(X.shape[0]), self.alpha_sel_)[0]
            self.solver_ = KernelPegasos(self.kernel_, load_rows(X, xp, dtype),
                                         xp.asarray(Y, dtype=dtype), self.reg_, xp)
            self.history_ = {}
        xp = self._xp()
        stream = BatchStream(self.solver_.X, np.arange(int(X.shape[0])),
                             batch_size=int(self.batch_size), seed=self.seed_, xp=xp,
                             dtype=np.dtype(self.dtype_), check_finite=False)
        self.batch_size_ = stream.batch_size  # capped at n
        self._train(stream, stream.batch, "Pegasos", "set a larger reg")
        self.n_support_ = int((self.solver_.xp.abs(self.solver_.a).sum(axis=1) > 0).sum())
        return self


_NORMA_PARAMS = """\
loss : str or None, default=None
    Classifier: "hinge" (default), "logistic", "squared_hinge"; regressor: "square" (default),
    "epsilon_insensitive", "huber".
reg : "auto", float >= 0 or "x/n", default="auto"
    nu, the RKHS penalty (nu/2)||f||^2 of the averaged objective (NORMA's lambda); "auto" =
    alpha_sel / n with alpha_sel from ``kernels.selection`` (chosen with the bandwidth);
    fitted: ``reg_``.
eta0 : float, default=0.5
    Step size; each step is clamped to eta <= 1 / (2 nu) so that the shrink factor
    1 - eta nu stays in [1/2, 1].
schedule : {"constant", "invsqrt"}, default="constant"
    eta_t = eta0 ("constant": the setting of NORMA's truncation bound - with a decaying step
    the newest terms are the smallest, so truncation drops the important early ones) or
    eta0 / sqrt(t) ("invsqrt").
budget : "auto" or int, default="auto"
    At most this many kernel terms in the expansion (the oldest are dropped). "auto": every
    term the fit can add (``n_iter * batch_size``), so nothing is truncated, and at most
    batch_size ln(10) / (eta nu) terms (NORMA's truncation bound: a
    term that old weighs (1 - eta nu)^(budget / batch_size) <= 1/10 of a new one) and
    ``NORMA_CENTRES_MB`` of centres. At 1,000 terms NORMA sat near the majority class on
    held-out sets of 16k-50k rows; untruncated, twonorm went from 37 % to 2.1 % error and
    texture from 34 % to 4.9 % (``benchmarks/results/dsg-defaults.md``). When the budget
    used drops terms that still weigh more than half of a new one, ``fit`` warns: the
    truncated expansion cannot hold the regularised solution. Fitted: ``budget_``.
batch_size : int, default=8
    Points per step; a value above n is capped at n (fitted: ``batch_size_``).
n_iter : "auto", int >= 1 or "K epochs", default="auto"
    Mini-batch steps per ``fit`` call; "auto" = 3 epochs, 3 ceil(n / batch_size) (with the
    constant step the truncated expansion forgets all but the last ``budget`` points, so more
    passes do not help).
kernel : str, default="gaussian"
    Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
bandwidth : "auto", "median", "median*<f>" or float, default="auto"
    sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
    the rule behind each"); fitted: ``bandwidth_``.
warm_start : bool, default=False
random_state : int, RandomState or None, default=None
engine : dict, kernelscale.engine.Engine or None, default=None
    Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk X
    ``window_rows``. Fitted: ``engine_``.
verbose : int, default=0
    0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
    (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
    change the fitted model."""

_NORMA_ATTRS = """\
solver_ : solvers.norma.NORMA
    The truncated expansion (centres, coefficients).
budget_ : int
    Terms kept (``budget``).
reg_, bandwidth_ : the values used.
batch_size_ : int
    Points per step used: ``batch_size``, at most n.
n_iter_ : int
history_ : dict
    Per-iteration records: iter, time, objective (batch loss), step.
n_features_in_ : int"""


class _NORMABase(_IterativeMixin, KernelEstimatorBase):
    """Implementation shared by ``NORMAClassifier`` / ``NORMARegressor``: NORMA kernel SGD with a
    truncated expansion (``solvers.norma``), reading mini-batches from a BatchStream."""

    _auto_epochs = 3
    _rules = {"reg": REG, "eta0": Real(0, strict=True), "schedule": OneOf("invsqrt", "constant"),
              "budget": Int(1, "auto"), "batch_size": Int(1), "n_iter": ITERS}

    def __init__(self, loss=None, reg="auto", eta0=0.5, schedule="constant", budget="auto",
                 batch_size=8, n_iter="auto", kernel="gaussian", bandwidth="auto",
                 warm_start=False, random_state=None, engine=None, verbose=0):
        self.loss = loss
        self.reg = reg
        self.eta0 = eta0
        self.schedule = schedule
        self.budget = budget
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.verbose = verbose

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets (classifier: class labels).

        Returns
        -------
        self
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            loss = _check_loss(self._loss_name(), self._losses, type(self).__name__)
            self._validate_params()
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, int(X.shape[0]), self.alpha_sel_)[0]
            self.budget_ = self._budget(int(X.shape[0]), np.dtype(dtype).itemsize)
            self.solver_ = NORMA(self.kernel_, loss, self.n_features_in_, Y.shape[1],
                                 lam=self.reg_, eta0=float(self.eta0),
                                 schedule=self.schedule, budget=self.budget_, xp=xp,
                                 dtype=dtype)
            self.history_ = {}
        xp = self._xp()
        dtype = np.dtype(self.dtype_)
        stream = BatchStream(X, Y, batch_size=int(self.batch_size), seed=self.seed_, xp=xp,
                             dtype=dtype, window_rows=self.engine_.window_rows)
        self.batch_size_ = stream.batch_size  # capped at n

        def batches(t):
            Xb, Yb = stream.batch(t)
            return Xb, xp.asarray(Yb, dtype=dtype)

        self._train(stream, batches, "NORMA", "set a smaller eta0")
        weight = self.solver_.dropped_weight
        if weight > NORMA_DROPPED_WEIGHT:
            warnings.warn(
                f"{type(self).__name__}: budget={self.budget_} dropped terms that still weighed "
                f"{weight:.2f} of a new one (eta0 * reg = {self._eta_reg():.2g} per step): the "
                f"truncated expansion cannot hold the regularised solution (raise budget, or "
                f"eta0 * reg)", UserWarning, stacklevel=2)
        return self

    def _eta_reg(self) -> float:
        """eta nu per step (the step clamped as in ``solvers.norma``)."""
        return min(float(self.eta0), 0.5 / self.reg_) * self.reg_ if self.reg_ > 0 else 0.0

    def _budget(self, n: int, itemsize: int) -> int:
        """``budget_`` (see ``budget``)."""
        if self.budget != "auto":
            return int(self.budget)
        m = min(int(self.batch_size), n)
        added = self._n_iter(-(-n // m)) * m  # terms this fit can add (at most one per row)
        eta_nu = self._eta_reg()
        needed = math.ceil(m * math.log(10) / eta_nu) if eta_nu > 0 else added
        centres = int(NORMA_CENTRES_MB * 2**20 // (self.n_features_in_ * itemsize))
        return int(max(m, min(added, needed, centres)))


class NORMAClassifier(ClassifierTargets, ClassifierMixin, _NORMABase):
    __doc__ = f"""NORMA kernel SGD with a truncated expansion of at most ``budget`` terms
    (``solvers.norma``) for classification; one-vs-all for several classes.

    Parameters
    ----------
{doc_indent(_NORMA_PARAMS)}

    Attributes
    ----------
    classes_ : ndarray
{doc_indent(_NORMA_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.baselines import NORMAClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = NORMAClassifier(budget=100, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """
    _losses = ("hinge", "logistic", "squared_hinge")

    def _loss_name(self):
        return self.loss or "hinge"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True  # truncated, regularised SGD: a weak baseline
        return tags


class NORMARegressor(RegressorTargets, RegressorMixin, _NORMABase):
    __doc__ = f"""NORMA kernel SGD with a truncated expansion of at most ``budget`` terms
    (``solvers.norma``) for regression.

    Parameters
    ----------
{doc_indent(_NORMA_PARAMS)}

    Attributes
    ----------
{doc_indent(_NORMA_ATTRS)}

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.baselines import NORMARegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = NORMARegressor(budget=100, random_state=0).fit(X, y / y.std())
    >>> model.predict(X[:3]).shape
    (3,)
    """
    _losses = REGRESSION_LOSSES

    def _loss_name(self):
        return self.loss or "square"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # truncated, regularised SGD: a weak baseline
        return tags


__all__ = [
    "ExactKRRClassifier",
    "ExactKRRRegressor",
    "ExactSVMClassifier",
    "ExactSVMRegressor",
    "NORMAClassifier",
    "NORMARegressor",
    "NystromRidgeClassifier",
    "NystromRidgeRegressor",
    "PegasosClassifier",
    "RFFSGDClassifier",
    "RFFSGDRegressor",
]
