"""EigenPro estimators (Ma & Belkin, NIPS 2017, paper 004): ``EigenProRegressor`` and
``EigenProClassifier`` - square loss, multi-class by one-hot targets, prediction by argmax.

``method="kernel"``: f = sum_i alpha_i k(x_i, .) over the n training points (the model holds them,
so X is loaded onto the device once); ``method="rff"``: a linear model on ``n_components`` random
Fourier features, trained from mini-batches of a ``BatchStream`` so X may stay on disk (zarr, dask).
Batch size and step size default to the paper's §4 choice (``kernelscale.preconditioners``).
With ``warm_start=True`` each ``fit`` continues for another ``n_iter`` iterations on the same
seeded batch sequence: segments give the model of one long run. ``method="rff"`` with an
on-disk X fitted inside ``distributed.use_client`` spreads each batch's rows over the dask
workers (``kernelscale.distributed_eigenpro``; the preconditioner's subsample stays a set-up step
on the client).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from ..budget import budget_window
from ..distributed import current_client
from ..kernels import FourierBlocks
from ..solvers._common import Progress, load_rows, run_loop
from ..solvers.eigenpro import KernelEigenPro, RFFEigenPro
from ..stream import BatchStream, is_in_memory
from ._kernel_common import KernelEstimatorBase, n_features_rule
from ._params import BOOL, ITERS, Int, OneOf, Real, steps
from ._targets import ClassifierTargets, RegressorTargets

METHODS = ("kernel", "rff")
DEFAULT_TAU = {"kernel": 1.0, "rff": 0.25}  # paper 004 §6: tau = 1 primal/kernel, 1/4 for RF
AUTO_EPOCHS = 10  # n_iter="auto": epochs per fit
AUTO_MIN_FEATURES = 2000  # n_components="auto": at least the former fixed D (below n ~ 24,000)


class _EigenProBase(KernelEstimatorBase):
    """Implementation shared by the EigenPro estimators (parameters: see ``EigenProRegressor``)."""

    iterative = True
    _coding = None

    def __init__(self, method="kernel", kernel="gaussian", bandwidth="auto", n_eigenvectors=160,
                 subsample_size=4800, tau="auto", batch_size="auto", eta="auto", n_iter="auto",
                 n_components="auto", eig_method="auto", average=True, warm_start=False,
                 random_state=None, engine=None, verbose=0):
        self.method = method
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_eigenvectors = n_eigenvectors
        self.subsample_size = subsample_size
        self.tau = tau
        self.batch_size = batch_size
        self.eta = eta
        self.n_iter = n_iter
        self.n_components = n_components
        self.eig_method = eig_method
        self.average = average
        self.warm_start = warm_start
        self.random_state = random_state
        self.engine = engine
        self.verbose = verbose

    _rules = {"method": OneOf(*METHODS), "n_eigenvectors": Int(0), "subsample_size": Int(1),
              "batch_size": Int(1, "auto"), "eta": Real(0, "auto", strict=True),
              "tau": Real(0, "auto", strict=True, high=1.0), "n_iter": ITERS,
              "n_components": Int(1, "auto"), "eig_method": OneOf("auto", "eigh", "randomized"),
              "average": BOOL}
    _rff_only = ("with method='rff'", ("method",), lambda p: p["method"] == "rff")
    _used_only = {"n_components": _rff_only, "average": _rff_only,
                  "tau": ("with n_eigenvectors >= 1, to damp the preconditioner",
                          ("n_eigenvectors",), lambda p: p["n_eigenvectors"] != 0)}

    def _setup(self, X, Y):
        self._validate_params()
        xp, dtype = self._setup_common(X, Y)
        tau = DEFAULT_TAU[self.method] if self.tau == "auto" else float(self.tau)
        common = dict(n_eigenvectors=int(self.n_eigenvectors), tau=tau,
                      subsample_size=int(self.subsample_size), batch_size=self.batch_size,
                      eta=self.eta, seed=self.seed_, xp=xp, eig_method=self.eig_method)
        self.n_components_ = None
        if self.method == "kernel":
            Xd = load_rows(X, xp, dtype)
            self.solver_ = KernelEigenPro(self.kernel_, Xd, xp.asarray(Y, dtype=dtype), **common)
        else:
            self.n_components_ = n_features_rule(int(X.shape[0]), self.n_components,
                                                 floor=AUTO_MIN_FEATURES)
            blocks = FourierBlocks(self.kernel_, self.n_features_in_, self.n_components_,
                                   self.seed_, xp=xp, dtype=dtype)
            self.solver_ = RFFEigenPro(blocks, X, Y.shape[1], average=bool(self.average),
                                       **common)
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
        xp = self._xp()
        solver = self.solver_
        dtype = np.dtype(self.dtype_)
        n = int(X.shape[0])
        if self.method == "kernel":
            # the stream's "targets" are row indices: the step needs them to update alpha_B
            stream = BatchStream(solver.X, np.arange(n), batch_size=solver.batch_size,
                                 seed=self.seed_, xp=xp, dtype=dtype, check_finite=False)

            def batches(t):
                return stream.batch(t)
        else:
            window_rows = budget_window(self.engine_, X, solver.batch_size, self.n_components_,
                                        dtype)
            stream = BatchStream(X, Y, batch_size=solver.batch_size, seed=self.seed_, xp=xp,
                                 dtype=dtype, window_rows=window_rows)
            self.window_rows_ = stream.window_rows  # rows read per window (budget's choice)

            def batches(t):
                Xb, Yb = stream.batch(t)
                return Xb, xp.asarray(Yb, dtype=dtype)

        spread = None
        try:
            self._validate_params()  # n_iter may change between warm-started fits
            n_iter = steps(self.n_iter, stream.batches_per_epoch, AUTO_EPOCHS)
            client = current_client() if self.method == "rff" else None
            if client is not None and not is_in_memory(X):
                # data-parallel steps: each dask worker reads and works on its share of every
                # batch (kernelscale.distributed_eigenpro)
                from ..distributed_eigenpro import SpreadEigenProRF

                spread = batches = SpreadEigenProRF(
                    client, X, Y, dict(batch_size=solver.batch_size, seed=self.seed_,
                                       dtype=dtype, window_rows=window_rows), solver)
            progress = Progress("EigenPro", n_iter, getattr(self, "verbose", 0))
            try:
                run_loop(solver, batches, n_iter, self.history_, "EigenPro", on_step=progress,
                         hint="set a smaller eta (or tau < 1)")
            finally:
                progress.close()
        finally:
            stream.close()
            if spread is not None:
                spread.close()
                # what the fit sent and received (array payloads), for the cost model
                self.spread_ = {"workers": spread.W, "round_trips": spread.round_trips,
                                "bytes_sent": spread.bytes_sent,
                                "bytes_received": spread.bytes_received}
        self.n_iter_ = solver.t
        self.n_epochs_ = solver.t / stream.batches_per_epoch
        return self


class EigenProRegressor(RegressorTargets, RegressorMixin, _EigenProBase):
    """EigenPro least-squares regression (paper 004); multi-output y allowed.

    Mini-batch SGD on the square loss whose top-k eigendirections are flattened by a
    preconditioner estimated on a subsample, so that a much larger step is stable.

    Parameters
    ----------
    method : {"kernel", "rff"}, default="kernel"
        "kernel": EigenPro in the RKHS over the training points; "rff": EigenPro on random Fourier
        features.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float > 0, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"). EigenPro has no ``reg``: it solves the interpolation problem
        (nu -> 0) and, like the paper (§5), stops after a few epochs (early stopping regularises).
    n_eigenvectors : int, default=160
        k, top eigendirections flattened by the preconditioner (paper: 160); capped so that
        lambda_{k+1} >= max k(x,x) / M (see ``preconditioners.resolvable_k``; the value used is
        ``n_eigenvectors_``); 0 runs the same loop without a preconditioner (plain SGD).
    subsample_size : int, default=4800
        M, rows whose eigensystem estimates the preconditioner (paper: 4800); a value above n is
        capped at n (all rows; fitted: ``subsample_size_``).
    tau : "auto" or float in (0, 1], default="auto"
        Damping of the preconditioner; "auto" = 1 for "kernel", 1/4 for "rff" (paper 004 §6).
        With ``n_eigenvectors=0`` there is no preconditioner: another value is a ValueError.
    batch_size : "auto" or int, default="auto"
        m (an integer above n is capped at n; fitted: ``batch_size_``), or "auto" =
        min(max(m*, 256), n, memory cap), m* = beta / lambda_{k+1} (§4; 256 is the paper's m for
        every method, §6 - plain SGD's m* is ~1-2), evened out over the epoch
        (``solvers.eigenpro.choose_batch_and_step``). A shorter last batch gets the (S1) step of
        its own size.
    eta : "auto" or float, default="auto"
        Step size, or "auto" = m / (beta + (m - 1) lambda_{k+1}) (§4; see ``preconditioners``).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Iterations (mini-batch steps) per ``fit`` call. "auto" = 10 epochs, 10 ceil(n / m): the
        paper's §6 runs reach their error within a few epochs, and 10 leaves early stopping to the
        (pipeline's) held-out curve.
    n_components : "auto" or int >= 1, default="auto"
        D, random features for ``method="rff"``; another value than "auto" with "kernel" is a
        ValueError (it would be ignored). "auto" =
        max(2000, ceil(sqrt(n) ln n)): the count with which random-feature ridge keeps the exact
        kernel's learning rate (Rudi & Rosasco, NIPS 2017), as for RFF-SGD; EigenPro-RF converges
        to that ridge-less fit on D features, so a fixed D caps its error as n grows. At least
        2,000, the former fixed default. Fitted: ``n_components_``.
    eig_method : {"auto", "eigh", "randomized"}, default="auto"
        Top-k eigensystem of the subsample.
    average : bool, default=True
        ``method="rff"``: predict with the mean of the last half to three quarters of the
        iterates (tail averaging; Bach & Moulines 2013, Jain et al. 2018) instead of the last
        iterate. EigenPro's constant step is chosen for a model that can interpolate; D random
        features (D << n) cannot, and the last iterate stays in a noise ball around the
        least-squares fit on them. False with "kernel" is a ValueError (it would be ignored).
        Fitted: ``solver_.n_averaged``.
    warm_start : bool, default=False
        Each ``fit`` continues for another ``n_iter`` iterations.
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``; with
        ``method="rff"`` and on-disk X also ``window_rows`` / ``memory_budget`` (the feature
        matrix is batch x n_components). Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    solver_ : solvers.eigenpro.KernelEigenPro or RFFEigenPro
    batch_size_ : int
        m used.
    subsample_size_ : int
        M used: ``subsample_size``, at most n.
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
    n_components_ : int or None
        D used with ``method="rff"``; None with "kernel".
    history_ : dict
        Per-iteration records: iter, time, objective (batch MSE).
    bandwidth_ : float
    y_offset_ : ndarray of shape (n_outputs,)
        The training mean of y: f is fitted to y - y_offset_ and every prediction adds it
        back (``estimators._targets``).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from kernelscale.estimators.eigenpro import EigenProRegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = EigenProRegressor(n_iter=8, subsample_size=100, n_eigenvectors=10,
    ...                           random_state=0).fit(X, y / y.std())
    >>> model.predict(X[:3]).shape
    (3,)
    """

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (for ``method="rff"`` also an on-disk zarr / dask array).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        return self._fit(X, y)


class EigenProClassifier(ClassifierTargets, ClassifierMixin, _EigenProBase):
    """EigenPro classification: least squares on one-hot targets, predict by argmax
    (paper 004).

    Parameters
    ----------
    method : {"kernel", "rff"}, default="kernel"
        "kernel": EigenPro in the RKHS over the training points; "rff": EigenPro on random Fourier
        features.
    kernel : str, default="gaussian"
        Kernel name ("gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52").
    bandwidth : "auto", "median", "median*<f>" or float > 0, default="auto"
        sigma. "auto": held-out selection on a slice (``kernels.selection``; README "Defaults, and
        the rule behind each"). EigenPro has no ``reg``: it solves the interpolation problem
        (nu -> 0) and, like the paper (§5), stops after a few epochs (early stopping regularises).
    n_eigenvectors : int, default=160
        k, top eigendirections flattened by the preconditioner (paper: 160); capped so that
        lambda_{k+1} >= max k(x,x) / M (see ``preconditioners.resolvable_k``; the value used is
        ``n_eigenvectors_``); 0 runs the same loop without a preconditioner (plain SGD).
    subsample_size : int, default=4800
        M, rows whose eigensystem estimates the preconditioner (paper: 4800); a value above n is
        capped at n (all rows; fitted: ``subsample_size_``).
    tau : "auto" or float in (0, 1], default="auto"
        Damping of the preconditioner; "auto" = 1 for "kernel", 1/4 for "rff" (paper 004 §6).
        With ``n_eigenvectors=0`` there is no preconditioner: another value is a ValueError.
    batch_size : "auto" or int, default="auto"
        m (an integer above n is capped at n; fitted: ``batch_size_``), or "auto" =
        min(max(m*, 256), n, memory cap), m* = beta / lambda_{k+1} (§4; 256 is the paper's m for
        every method, §6 - plain SGD's m* is ~1-2), evened out over the epoch
        (``solvers.eigenpro.choose_batch_and_step``). A shorter last batch gets the (S1) step of
        its own size.
    eta : "auto" or float, default="auto"
        Step size, or "auto" = m / (beta + (m - 1) lambda_{k+1}) (§4; see ``preconditioners``).
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Iterations (mini-batch steps) per ``fit`` call. "auto" = 10 epochs, 10 ceil(n / m): the
        paper's §6 runs reach their error within a few epochs, and 10 leaves early stopping to the
        (pipeline's) held-out curve.
    n_components : "auto" or int >= 1, default="auto"
        D, random features for ``method="rff"``; another value than "auto" with "kernel" is a
        ValueError (it would be ignored). "auto" =
        max(2000, ceil(sqrt(n) ln n)): the count with which random-feature ridge keeps the exact
        kernel's learning rate (Rudi & Rosasco, NIPS 2017), as for RFF-SGD; EigenPro-RF converges
        to that ridge-less fit on D features, so a fixed D caps its error as n grows. At least
        2,000, the former fixed default. Fitted: ``n_components_``.
    eig_method : {"auto", "eigh", "randomized"}, default="auto"
        Top-k eigensystem of the subsample.
    average : bool, default=True
        ``method="rff"``: predict with the mean of the last half to three quarters of the
        iterates (tail averaging; Bach & Moulines 2013, Jain et al. 2018) instead of the last
        iterate. EigenPro's constant step is chosen for a model that can interpolate; D random
        features (D << n) cannot, and the last iterate stays in a noise ball around the
        least-squares fit on them. False with "kernel" is a ValueError (it would be ignored).
        Fitted: ``solver_.n_averaged``.
    warm_start : bool, default=False
        Each ``fit`` continues for another ``n_iter`` iterations.
    random_state : int, RandomState or None, default=None
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``; with
        ``method="rff"`` and on-disk X also ``window_rows`` / ``memory_budget`` (the feature
        matrix is batch x n_components). Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    solver_ : solvers.eigenpro.KernelEigenPro or RFFEigenPro
    batch_size_ : int
        m used.
    subsample_size_ : int
        M used: ``subsample_size``, at most n.
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
    n_components_ : int or None
        D used with ``method="rff"``; None with "kernel".
    history_ : dict
        Per-iteration records: iter, time, objective (batch MSE).
    bandwidth_ : float
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from kernelscale.estimators.eigenpro import EigenProClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = EigenProClassifier(n_iter=8, subsample_size=100, n_eigenvectors=10,
    ...                          random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    _coding = "onehot"

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (for ``method="rff"`` also an on-disk zarr / dask array).
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self
        """
        return self._fit(X, y)


__all__ = ["EigenProClassifier", "EigenProRegressor"]
