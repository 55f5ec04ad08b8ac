"""scikit-learn estimators on Random Binning features (Wu, Chen, Yen, Yan, "Revisiting Random
Binning Features: Fast Convergence and Strong Parallelizability", KDD 2016): ridge regression by
conjugate gradients (``solver="cg"``, §3.1; classes one-vs-all, as one block of right-hand sides)
or an L1-regularised loss (eq. 23) by parallel randomized coordinate descent (``solver="cd"``).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, is_regressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .. import engine as _engine
from ..backend import DeviceError, resolve_device
from ..kernels.random_binning import DEFAULT_CHUNK_ROWS, RB_KERNELS, RandomBinning
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

_RB_DOCS = {
    "parameters": """\
kernel : "laplacian", default="laplacian"
    k(x, x') = exp(-||x - x'||_1 / sigma), eq. (5) (``kernels.random_binning.RB_KERNELS``).
%(bandwidth)s
    Distances are L1; grid widths are delta ~ Gamma(2, sigma) per dimension (Algorithm 1).
n_components : int >= 1, default=256
    R, random grids (Algorithm 1): every row gets R non-zero features, so a CG iteration or CD
    epoch costs O(n R). The approximation error falls as O(1 / (kappa R)) (Theorem 1).
%(reg_positive)s
    The system solved is (Z^T Z + n nu I) W = Z^T Y (§3.1's lambda = n nu). ``solver="cg"``
    only.
l1_reg : "auto", float >= 0 or "x/n", default="auto"
    lambda, the weight of the L1 objective (23), lambda ||w||_1 + (1/n) sum L; "auto" and
    "x/n" as for ``reg``. ``solver="cd"`` only. Fitted: ``l1_reg_``.
solver : {"cg", "cd"}, default="cg"
    "cg": ridge by conjugate gradients on Z, never forming Z^T Z (``solvers.rb_cg``),
    GPU-capable. "cd": coordinate descent on the L1 objective (23) (Algorithm 2, updates
    (24)-(27); ``solvers.rb_cd``), CPU only.
%(rb_loss)s
tol : float >= 0, default=1e-4
    "cg": relative residual ||Z^T Y - (Z^T Z + lambda I) W|| / ||Z^T Y|| per column; "cd":
    relative decrease of objective (23) over an epoch.
n_iter : int >= 1, default=1000
    CG iterations / CD epochs at most; reaching it without ``tol`` is a ConvergenceWarning.
precondition : bool, default=False
    Jacobi-preconditioned CG (diag(Z^T Z) + lambda); False: the paper's plain CG
    (``solver="cg"`` only).
%(random_state)s
    Grid r is regenerated from (seed, r); the seed also orders CD's coordinates.
engine : dict, kernelscale.engine.Engine or None, default=None
    Where the work runs (``kernelscale.engine``): ``device`` (the GPU runs CG's iterations; "cd"
    runs on the CPU); ``n_jobs``, tau, CD threads (Algorithm 2; -1: all cores; 1 is
    bit-reproducible); ``pass_rows`` (default 65536), rows of X binned at a time.""",
    "attributes": """\
coef_ : ndarray of shape (D,) or (D, C)
    Coefficients over the D = ``n_features_out_`` RB features (on the host).
features_ : kernels.random_binning.RandomBinning
    The grids' seed and the training bins' vocabulary (unseen bins give a zero feature).
n_features_out_, kappa_ : int, float
    D, the non-empty bins of all grids (R <= D <= n R), and D / R (the paper's kappa).
bandwidth_, seed_ : float, int
    sigma and the seed used.
reg_, ridge_, l1_reg_ : float or None
    nu and n nu used by "cg", lambda used by "cd"; the other solver's are None.
n_iter_, history_ : int, dict
    CG iterations / CD epochs run, and the solver's per-iteration records.
%(n_features_in_)s""",
    "X_fit": """\
X : array-like of shape (n_samples, n_features)
    Training data, dense; also an on-disk zarr / dask array, read ``engine.pass_rows`` rows at
    a time. scipy.sparse X is refused in one line.""",
}


@fill_doc(**_RB_DOCS)
class _RBBase(KernelscaleEstimator):
    """Implementation shared by ``RBClassifier`` / ``RBRegressor``."""

    _fitted_state = "coef_"

    _rules = {"solver": OneOf("cg", "cd"), "n_components": Int(1), "reg": REG, "l1_reg": REG,
              "tol": Real(0), "n_iter": Int(1), "precondition": BOOL,
              "kernel": OneOf(*RB_KERNELS)}
    _cg_only = ("with solver='cg'", ("solver",), lambda p: p["solver"] == "cg")
    _used_only = {"precondition": _cg_only, "reg": _cg_only,
                  "l1_reg": ("with solver='cd'", ("solver",), lambda p: p["solver"] == "cd")}

    def __init__(self, kernel="laplacian", bandwidth="auto", n_components=256, reg="auto",
                 l1_reg="auto", solver="cg", loss="square", tol=1e-4, n_iter=1000,
                 precondition=False, random_state=None, engine=None):
        store_params(self, locals())

    _sparse_refusal = ("random binning hashes the bin of every one of the d coordinates of a "
                       "row, so it has no sparse form; pass X.toarray() (dense) or fit DSG, "
                       "RFF-SGD, EigenPro or Nyström, which take sparse X")

    def _validate_params_rb(self):
        """One-line errors for bad hyper-parameters; sets ``device_``."""
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

    def _pass_rows(self) -> int:
        return int(self.engine_.pass_rows or DEFAULT_CHUNK_ROWS)

    def _fit_features(self, X, Y):
        """Bins of the training rows; sets ``seed_``, ``bandwidth_`` and ``reg_`` / ``ridge_``
        (CG) or ``l1_reg_`` (CD), "auto" by ``kernels.selection`` with the exact kernel."""
        seed = seed_from(self.random_state)
        self.seed_ = seed % (2**32)  # the selection's
        reg = self.reg if self.solver == "cg" else self.l1_reg
        kernel, alpha = auto_kernel(self, X, Y, reg == "auto")
        self.seed_, self.bandwidth_, n = seed, kernel.bandwidth, int(X.shape[0])
        self.reg_ = self.ridge_ = self.l1_reg_ = None  # the other solver's stay None
        if self.solver == "cg":
            self.reg_, self.ridge_ = reg_and_ridge(reg, n, alpha)
        else:
            self.l1_reg_ = reg_and_ridge(reg, n, alpha)[0]
        self.features_ = RandomBinning(self.kernel, self.bandwidth_, self.n_components, seed)
        Z = None  # with dask workers: Z stays on them in row blocks (``spread.rb``)
        if self.solver == "cg" and self.device_ == "cpu":
            Z = rows_for(None, lambda client: SpreadRB(client, self.features_, X,
                                                       self._pass_rows()))
        if Z is None:
            Z = self.features_.fit_transform(X, chunk_rows=self._pass_rows(),
                                             rows=cluster_rows())
        self.n_features_out_ = self.features_.n_features_out_
        self.kappa_ = self.features_.kappa_
        return Z

    def _solve(self, Z, Y):
        """Coefficients (D, C) on the host for targets Y (n, C)."""
        if isinstance(Z, SpreadRB):
            try:
                W, hist, ok = ridge_cg(None, Z.zty(Y), self.ridge_, tol=float(self.tol),
                                       max_iter=int(self.n_iter), jacobi=bool(self.precondition),
                                       spread=Z)
            finally:
                self.spread_ = {"workers": len(Z.blocks), "round_trips": Z.round_trips,
                                "bytes_sent": Z.bytes_sent, "bytes_received": Z.bytes_received}
                Z.close()
        elif self.solver == "cg":
            if self.device_ == "gpu":
                import cupy
                import cupyx.scipy.sparse as cusp

                # run-to-run identical products (``solvers._rowwise_csr``), else cuSPARSE's
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
        tags.non_deterministic = self.solver == "cd" and _engine.resolve(self.engine).n_jobs != 1
        return tags

    def fit(self, X, y):
        """Build the RB features of X (Algorithm 1) and solve for the coefficients.

        %(fit)s
        """
        self._validate_params_rb()
        X, Y = self._fit_targets(X, y)
        W = self._solve(self._fit_features(X, Y), Y)
        self.coef_ = W[:, 0] if (self._y_1d if is_regressor(self) else W.shape[1] == 1) else W
        return self


_EXAMPLE = "n_components=32, bandwidth='median', reg=0.01, random_state=0"


@fill_doc(**_RB_DOCS, example=_EXAMPLE, rb_loss="""\
loss : "square", default="square"
    The only regression loss here.""")
class RBRegressor(RegressorTargets, RegressorMixin, _RBBase):
    """Kernel regression on Random Binning features (Wu et al. 2016): ridge by conjugate gradients
    (``solver="cg"``, §3.1) or L1-regularised square loss by parallel coordinate descent
    (``solver="cd"``, §4, Algorithm 2). Multi-output y allowed.

    %(regressor_doc)s
    """

    _allowed_losses = ("square",)


@fill_doc(**_RB_DOCS, example=_EXAMPLE, rb_loss="""\
loss : {"square", "logistic", "squared_hinge"}, default="square"
    "square" is the only one for "cg"; all three are losses of eq. (23) for "cd".""")
class RBClassifier(ClassifierTargets, ClassifierMixin, _RBBase):
    """Classification on Random Binning features (Wu et al. 2016): one-vs-all ridge by conjugate
    gradients (``solver="cg"``, §3.1) or L1-regularised square / logistic / squared-hinge loss by
    parallel coordinate descent (``solver="cd"``, §4, eq. (23), Algorithm 2). Targets {-1, +1},
    one column for two classes; predict by sign / argmax.

    %(classifier_doc)s
    """

    _allowed_losses = tuple(CD_LOSSES)

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Logistic probabilities, shape (n_samples, n_classes), columns in the order of
        ``classes_``; one-vs-all columns normalised to sum to 1 (as scikit-learn's OvR). Only for
        ``loss="logistic"``."""
        s = self.decision_function(X)
        p = sigmoid(s)
        return np.stack([1.0 - p, p], axis=1) if s.ndim == 1 else p / p.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Log of ``predict_proba``; only for ``loss="logistic"``."""
        return np.log(self.predict_proba(X))
