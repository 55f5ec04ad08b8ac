"""scikit-learn estimators on Random Binning features (Wu, Chen, Yen, Yan, "Revisiting Random
Binning Features: Fast Convergence and Strong Parallelizability", KDD 2016).

* ``solver="cg"``: ridge regression (Z^T Z + N reg I) W = Z^T Y by conjugate gradients (paper
  §3.1); classification is one-vs-all ridge on {-1, +1} targets, all classes as one block of
  right-hand sides. ``reg`` is nu of the averaged objective (nu/2)||w||^2 + (1/N) sum 1/2
  (f(x_i) - y_i)^2 (the per-sample ERM (1)), like every kernelscale estimator; the paper's
  lambda of the ridge system is N nu.
* ``solver="cd"``: L1-regularised loss lambda ||w||_1 + (1/N) sum L (eq. 23) by parallel
  randomized coordinate descent (Algorithm 2) with the engine's ``n_jobs`` threads; losses square
  (regression and classification), logistic and squared hinge (classification). ``l1_reg`` is
  lambda of eq. (23): the same per-sample scaling as ``reg``, but of an L1 norm (the paper's
  objective for CD); ``reg`` is CG's only.

Features (Algorithm 1) are built chunk by chunk from numpy, cupy, zarr or dask inputs; on
an engine device "gpu" the CG iterations run on cupy / cupyx.scipy.sparse (binning stays on the host, where
it is a numba loop). CD is CPU-only (numba threads). Fitted models keep only the seed, the bin
vocabulary and the coefficients, on the host, so they pickle and predict on any machine.

Regression targets are centred (``y_offset_`` = their mean, ``estimators._targets``) before
solving, because both regularisers would otherwise shrink the mean towards 0; the RB features
themselves already contain a constant (each grid's columns sum to 1/sqrt(R) on every training row).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .. import engine as _engine
from ..backend import DeviceError, resolve_device
from ..kernels.random_binning import DEFAULT_CHUNK_ROWS, RB_KERNELS, RandomBinning, check_rb_kernel
from ..losses import sigmoid
from ..params import BOOL, REG, Int, KernelscaleEstimator, OneOf, Real, reg_and_ridge, store_params
from ..rng import seed_from
from ..solvers._rowwise_csr import RowwiseCSR
from ..solvers.rb_cd import CD_LOSSES, l1_cd
from ..solvers.rb_cg import ridge_cg
from ..spread import SpreadRB, cluster_rows, rows_for
from ..validation import check_X
from ._docs import fill_doc
from ._kernel_common import auto_kernel
from ._targets import ClassifierTargets, RegressorTargets

SOLVERS = ("cg", "cd")


# the parameters and attributes of both RB estimators, written once (``_docs.fill_doc``)
_RB_DOCS = {
    "parameters": """\
kernel : "laplacian", default="laplacian"
    k(x, x') = exp(-||x - x'||_1 / sigma), eq. (5) of Wu et al. 2016: the product kernels with
    k_j'' >= 0 have RB features (eq. (6)), and the Laplacian is the one implemented
    (``kernels.random_binning.RB_KERNELS``).
%(bandwidth)s
    Distances are L1. Grid widths are drawn as delta ~ Gamma(2, sigma) per dimension
    (Algorithm 1, p(delta) ∝ delta k''(delta)).
n_components : int >= 1, default=256
    R, random grids (Algorithm 1): every row gets exactly R non-zero features, so Z holds n R
    entries and a CG iteration or CD epoch costs O(n R). The approximation error falls as
    O(1 / (kappa R)) (Theorem 1).
reg : "auto", float > 0 or "x/n", default="auto"
    nu, per sample: the ridge (nu/2)||w||^2 of the averaged objective (ERM (1)); the system
    solved is (Z^T Z + N nu I) W = Z^T Y (§3.1's lambda = N nu). "auto": nu = alpha / N with
    alpha from the held-out selection (``kernels.selection``: kernel ridge's alpha, the same
    ridge system with the exact kernel). "x/n": nu = x / N. ``solver="cg"`` only. Fitted:
    ``reg_``.
l1_reg : "auto", float >= 0 or "x/n", default="auto"
    lambda, per sample: the weight of the L1 objective (23), lambda ||w||_1 + (1/N) sum L.
    "auto": lambda = alpha / N with the held-out selection's alpha as for ``reg`` (for an L1
    penalty only a scale). "x/n": lambda = x / N. ``solver="cd"`` only. Fitted: ``l1_reg_``.
solver : {"cg", "cd"}, default="cg"
    "cg": ridge by conjugate gradients on Z, never forming Z^T Z (§3.1, ``solvers.rb_cg``),
    GPU-capable. "cd": parallel randomized coordinate descent on the L1 objective (23)
    (Algorithm 2, updates (24)-(27); ``solvers.rb_cd``), CPU only.
%(rb_loss)s
tol : float >= 0, default=1e-4
    "cg": relative residual ||Z^T Y - (Z^T Z + lambda I) W|| / ||Z^T Y|| per column; "cd":
    relative decrease of objective (23) over an epoch.
n_iter : int >= 1, default=1000
    CG iterations / CD epochs at most (each one pass over Z); reaching it without ``tol`` is a
    ConvergenceWarning.
precondition : bool, default=False
    Jacobi-preconditioned CG (diag(Z^T Z) + lambda: exact and cheap for RB features); False:
    the paper's plain CG (``solver="cg"`` only).
%(random_state)s
    Grid r is regenerated from (seed, r); the seed also orders CD's coordinates.
engine : dict, kernelscale.engine.Engine or None, default=None
    Where and how the work runs (``kernelscale.engine``):

    * ``device``: only CG iterations run on the GPU (binning is a numba loop on the host);
      "cd" with "auto" runs on the CPU, with "gpu" it is a one-line DeviceError;
    * ``n_jobs``: tau, CD threads (Algorithm 2; -1 = all cores). 1 is bit-reproducible; more
      threads update coordinates asynchronously (eq. (29)) and converge to the same
      objective, not to the same bits. Ignored by "cg";
    * ``pass_rows`` (default 65536): rows of X read and binned at a time, in ``fit`` and at
      predict time: it bounds the dense rows held (pass_rows x d floats), not the fit's
      n x R bin hashes and Z, kept whole.

    Fitted: ``engine_``.""",
    "attributes": """\
coef_ : ndarray of shape (D,) or (D, C)
    Coefficients over the D = ``n_features_out_`` RB features (on the host).
features_ : kernels.random_binning.RandomBinning
    The grids' seed and the training bins' vocabulary (bins unseen in training give a zero
    feature at predict time).
n_features_out_ : int
    D, the non-empty bins of all grids (R <= D <= n R).
kappa_ : float
    D / R, the mean non-empty bins per grid (the paper's kappa).
bandwidth_ : float
    sigma used.
reg_ : float or None
    nu used (see ``reg``) with ``solver="cg"``; None with "cd".
l1_reg_ : float or None
    lambda used (see ``l1_reg``) with ``solver="cd"``; None with "cg".
seed_ : int
    The seed used.
history_ : dict
    Per-iteration records of the solver: iter, time, and the residual (CG) or objective (CD).
n_iter_ : int
    CG iterations / CD epochs run.
%(n_features_in_)s""",
    "X_fit": """\
X : array-like of shape (n_samples, n_features)
    Training data, dense; also an on-disk zarr / dask array, read ``engine.pass_rows`` rows at
    a time. scipy.sparse X is refused in one line: a row's bin in a grid hashes the bins of
    all d coordinates, zeros included.""",
}


class _RBBase(KernelscaleEstimator):
    """Shared fitting code; see the module docstring for the parameters' meaning."""

    iterative = False  # no warm_start segments: the whole solve is one fit
    _fitted_state = "coef_"

    _rules = {"solver": OneOf(*SOLVERS), "n_components": Int(1), "reg": REG, "l1_reg": REG,
              "tol": Real(0), "n_iter": Int(1), "precondition": BOOL,
              "kernel": OneOf(*RB_KERNELS)}
    _cg_only = ("with solver='cg'", ("solver",), lambda p: p["solver"] == "cg")
    _used_only = {"precondition": _cg_only, "reg": _cg_only,
                  "l1_reg": ("with solver='cd'", ("solver",), lambda p: p["solver"] == "cd")}

    def __init__(self, kernel="laplacian", bandwidth="auto", n_components=256, reg="auto",
                 l1_reg="auto", solver="cg", loss="square", tol=1e-4, n_iter=1000,
                 precondition=False, random_state=None, engine=None):
        store_params(self, locals())

    _allowed_losses: tuple = ()
    # a grid's bin of a row is a hash of all d of its coordinates' bins (zeros included)
    _sparse_refusal = ("random binning hashes the bin of every one of the d coordinates of a "
                       "row, so it has no sparse form; pass X.toarray() (dense) or fit DSG, "
                       "RFF-SGD, EigenPro or Nyström, which take sparse X")

    def _validate_params_rb(self) -> str:
        """One-line errors for bad hyper-parameters; returns the resolved device."""
        self._validate_params()
        if self.loss not in self._allowed_losses:
            raise ValueError(f"unknown loss {self.loss!r} for {type(self).__name__}; choose one of "
                             f"{list(self._allowed_losses)}")
        if self.solver == "cg" and self.loss != "square":
            raise ValueError(f"solver='cg' solves ridge regression (loss='square'), got loss={self.loss!r};"
                             " use solver='cd' for other losses")
        if self.solver == "cg" and self.reg != "auto" and reg_and_ridge(self.reg, 1)[0] == 0:
            raise ValueError("reg=0 must be > 0 for solver='cg' (the ridge system needs it)")
        engine = self._resolve_engine()
        device = resolve_device(engine.device)
        if self.solver == "cd" and device == "gpu":
            if engine.device == "gpu":
                raise DeviceError("solver='cd' runs on the CPU only (numba threads); use "
                                  "engine={'device': 'cpu'}")
            device = "cpu"
        self.device_ = device
        return device

    def _pass_rows(self) -> int:
        return int(self.engine_.pass_rows or DEFAULT_CHUNK_ROWS)

    def _fit_features(self, X, Y):
        """Bins of the training rows; sets ``bandwidth_`` and ``reg_`` (CG) or ``l1_reg_`` (CD).
        ``bandwidth="auto"`` / ``reg="auto"`` / ``l1_reg="auto"``: held-out selection with the
        exact kernel (``kernels.selection``); the CG ridge (Z^T Z + n reg I) is KernelRidge's
        alpha, taken as selected (n nu = alpha); CD's L1 weight is per sample (eq. 23): alpha / n,
        the same scale."""
        seed = seed_from(self.random_state)
        if isinstance(self.bandwidth, str) and X.shape[0] < 2:
            raise ValueError(f"bandwidth={self.bandwidth!r} needs at least 2 samples, got "
                             "n_samples = 1")
        self.seed_ = seed % (2**32)
        reg = self.reg if self.solver == "cg" else self.l1_reg
        kernel, alpha = auto_kernel(self, X, Y, reg == "auto",
                                    kernel_name=check_rb_kernel(self.kernel))
        sigma = kernel.bandwidth
        n = int(X.shape[0])
        self.reg_ = self.ridge_ = self.l1_reg_ = None  # the other solver's stay None
        if self.solver == "cg":
            self.reg_, self.ridge_ = reg_and_ridge(reg, n, alpha)  # nu and CG's ridge N nu
        else:
            self.l1_reg_ = reg_and_ridge(reg, n, alpha)[0]  # lambda of eq. (23)
        self.seed_ = seed
        self.bandwidth_ = sigma
        self.features_ = RandomBinning(self.kernel, sigma, self.n_components, seed)
        Z = None
        if self.solver == "cg" and self.device_ == "cpu":
            # Z stays on the workers in row blocks (spread.rb): X never reaches the client
            Z = rows_for(None, lambda client: SpreadRB(client, self.features_, X,
                                                       self._pass_rows()))
        if Z is None:
            Z = self.features_.fit_transform(X, chunk_rows=self._pass_rows(),
                                             rows=cluster_rows())
        self.n_features_out_ = self.features_.n_features_out_
        self.kappa_ = self.features_.kappa_
        return Z

    def _solve(self, Z, Y, device):
        """Coefficients (D, C) on the host for targets Y (n, C)."""
        if isinstance(Z, SpreadRB):
            try:
                W, hist, ok = ridge_cg(None, Z.zty(Y), self.ridge_, tol=float(self.tol),
                                       max_iter=int(self.n_iter), jacobi=bool(self.precondition),
                                       spread=Z)
            finally:
                # what the CG products sent and received (array payloads), for the cost model
                self.spread_ = {"workers": len(Z.blocks), "round_trips": Z.round_trips,
                                "bytes_sent": Z.bytes_sent, "bytes_received": Z.bytes_received}
                Z.close()
        elif self.solver == "cg":
            if device == "gpu":
                import cupy
                import cupyx.scipy.sparse as cusp

                # products that are the same on every run (solvers._rowwise_csr), Z^T stored
                # as its own CSR matrix; cupyx's (cuSPARSE) where cupy has no RawKernel
                xp, ZT = cupy, Z.T.tocsr()
                Zd, ZTd = RowwiseCSR.from_scipy(Z, cupy), RowwiseCSR.from_scipy(ZT, cupy)
                if Zd is None:
                    Zd, ZTd = cusp.csr_matrix(Z), cusp.csr_matrix(ZT)
            else:
                xp, Zd, ZTd = np, Z, Z.T
            Yd = xp.asarray(Y, dtype=np.float64)
            W, hist, ok = ridge_cg(Zd, ZTd @ Yd, self.ridge_, tol=float(self.tol),
                                   max_iter=int(self.n_iter), xp=xp,
                                   jacobi=bool(self.precondition), ZT=ZTd)
            W = W.get() if xp is not np else W
        else:
            W, hist, ok = l1_cd(Z, Y, self.l1_reg_, loss=self.loss, tol=float(self.tol),
                                max_iter=int(self.n_iter), n_jobs=int(self.engine_.n_jobs),
                                seed=self.seed_)
        if not ok:
            warnings.warn(f"{type(self).__name__} ({self.solver}) did not reach tol={self.tol} in "
                          f"n_iter={self.n_iter} iterations", ConvergenceWarning, stacklevel=3)
        self.history_ = hist
        self.n_iter_ = int(hist["iter"][-1])
        return np.asarray(W)

    def _decision(self, X):
        """Raw outputs Z(x) coef_, (n, C) (bins unseen in training contribute 0)."""
        check_is_fitted(self, "coef_")
        X = check_X(self, X, reset=False)
        Z = self.features_.transform(X, chunk_rows=self._pass_rows(), rows=cluster_rows())
        F = Z @ self.coef_
        return F.reshape(F.shape[0], -1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        n_jobs = _engine.resolve(self.engine).n_jobs
        tags.non_deterministic = self.solver == "cd" and n_jobs != 1
        return tags


@fill_doc(**_RB_DOCS, rb_loss="""\
loss : "square", default="square"
    The only regression loss here.""")
class RBRegressor(RegressorTargets, RegressorMixin, _RBBase):
    """Kernel regression on Random Binning features (Wu et al. 2016): ridge by conjugate gradients
    (``solver="cg"``, §3.1) or L1-regularised square loss by parallel coordinate descent
    (``solver="cd"``, §4, Algorithm 2). Multi-output y allowed.

    The targets are centred first (``y_offset_``): both regularisers would otherwise shrink the
    mean towards 0.

    %(regressor_doc)s
    >>> from kernelscale.estimators.random_binning import RBRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    >>> model = RBRegressor(n_components=32, bandwidth="median", reg=0.01, random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    >>> model.n_features_out_ >= 32
    True
    """

    _allowed_losses = ("square",)

    def fit(self, X, y):
        """Build the RB features of X (Algorithm 1) and solve for the coefficients.

        %(fit_regression)s
        """
        device = self._validate_params_rb()
        X, Y = self._fit_targets(X, y)
        Z = self._fit_features(X, Y)
        W = self._solve(Z, Y, device)
        self.coef_ = W[:, 0] if self._y_1d else W
        return self


@fill_doc(**_RB_DOCS, rb_loss="""\
loss : {"square", "logistic", "squared_hinge"}, default="square"
    "square" is the only one for "cg"; all three are losses of eq. (23) for "cd".""")
class RBClassifier(ClassifierTargets, ClassifierMixin, _RBBase):
    """Classification on Random Binning features (Wu et al. 2016): one-vs-all ridge by conjugate
    gradients (``solver="cg"``, §3.1; all classes as one block of right-hand sides) or
    L1-regularised square / logistic / squared-hinge loss by parallel coordinate descent
    (``solver="cd"``, §4, eq. (23), Algorithm 2).

    Targets are {-1, +1}: one column for two classes, one-vs-all columns otherwise; predict by
    sign / argmax. ``predict_proba`` exists for ``loss="logistic"``.

    %(classifier_doc)s
    >>> from kernelscale.estimators.random_binning import RBClassifier
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = RBClassifier(n_components=32, bandwidth="median", reg=0.01, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.7)
    True
    >>> cd = RBClassifier(solver="cd", loss="logistic", n_components=32, bandwidth="median",
    ...                   l1_reg=1e-4, random_state=0).fit(X, y)
    >>> cd.predict_proba(X[:2]).shape
    (2, 2)
    """

    _allowed_losses = tuple(CD_LOSSES)

    def fit(self, X, y):
        """Build the RB features of X (Algorithm 1) and solve for the one-vs-all coefficients,
        all classes as one block of right-hand sides.

        %(fit_classification)s
        """
        device = self._validate_params_rb()
        X, Y = self._fit_targets(X, y)
        Z = self._fit_features(X, Y)
        W = self._solve(Z, Y, device)
        self.coef_ = W[:, 0] if W.shape[1] == 1 else W
        return self

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
        """Log of ``predict_proba``; only for ``loss="logistic"``.

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return np.log(self.predict_proba(X))


__all__ = ["RB_KERNELS", "RBClassifier", "RBRegressor"]
