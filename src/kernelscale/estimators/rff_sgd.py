"""Random Fourier features (Rahimi, Recht, "Random Features for Large-Scale Kernel Machines", NIPS
2007) + SGD or SVRG (``solvers.rff_sgd``): ``RFFSGDClassifier`` / ``RFFSGDRegressor``, the
fixed-feature baseline of Dai, Xie, He, Liang, Raj, Balcan, Song, "Scalable Kernel Methods via
Doubly Stochastic Gradients", NIPS 2014, and of "Fast Doubly Stochastic Kernel Machines".
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..kernels import FourierBlocks
from ..params import ITERS, REG, Int, OneOf, Real, reg_and_ridge, store_params
from ..solvers.rff_sgd import RFFSGD, auto_batch_size
from ..spread import SpreadRFF, rows_for
from ..training import Rows, as_targets
from ..validation import check_X
from ._docs import fill_doc
from ._kernel_common import (
    CLASSIFICATION_LOSSES,
    REGRESSION_LOSSES,
    IterativeMixin,
    KernelEstimatorBase,
    check_loss,
    n_features_rule,
)
from ._targets import ClassifierTargets, RegressorTargets

# the parameters and attributes of both RFF estimators, written once (``_docs.fill_doc``)
_RFF_DOCS = {
    "parameters": """\
loss : str or None, default=None
    Classifier: "logistic" (default), "hinge", "square", "squared_hinge"; regressor: "square"
    (default), "epsilon_insensitive", "huber".
solver : {"sgd", "svrg"}, default="sgd"
    Mini-batch SGD, or SVRG (Johnson & Zhang, NIPS 2013).
n_components : "auto" or int >= 1, default="auto"
    D, random features. "auto": max(1000, ceil(sqrt(n) ln n)), the count with which
    random-feature ridge keeps the exact kernel's learning rate (Rudi & Rosasco, NIPS 2017).
    Fitted: ``n_components_``.
%(reg)s
    Here ||f|| is the norm ||W|| of the weights on the features.
eta0 : "auto" or float > 0, default="auto"
    Step size; "auto": m / (L (beta + (m - 1) lambda_1) + m nu), the largest stable mini-batch
    step (``solvers.rff_sgd``). A given eta0 is clamped to 1 / (2 nu), so that the shrink
    factor 1 - eta nu stays in [1/2, 1]. SGD decays it as eta0 / (1 + nu eta0 t); SVRG keeps
    it constant. Fitted: ``eta0_``.
batch_size : "auto" or int >= 1, default="auto"
    m, rows per step, at most n. "auto": 64 on the host; on a GPU the smallest power of two
    whose m x D feature matrix holds 512 MB, within half the memory budget
    (``solvers.rff_sgd.auto_batch_size``). Fitted: ``batch_size_``.
svrg_inner : "epoch" or int >= 1, default="epoch"
    Steps between SVRG snapshots; "epoch": one pass (``solver="svrg"`` only).
%(n_iter)s
    "auto": 20 epochs, 20 ceil(n / m) steps.
%(iterative_common)s
    On-disk X also takes ``window_rows`` / ``memory_budget`` (the feature matrix is m x D).
%(verbose)s""",
    "attributes": """\
solver_ : solvers.rff_sgd.RFFSGD
    Holds the weights ``w`` over the random features.
reg_, eta0_, bandwidth_ : float
    nu, the step size and sigma used.
n_components_ : int
    D used.
batch_size_ : int
    m used.
n_iter_ : int
    Steps so far.
history_ : dict
    Per-iteration records: iter, time, objective (batch loss), step.
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data; also an on-disk zarr / dask array, read in windows.
    %(sparse_X)s Its batches are CSR rows, whose features are sparse products.""",
}


class _RFFSGDBase(IterativeMixin, KernelEstimatorBase):
    """Implementation shared by ``RFFSGDClassifier`` / ``RFFSGDRegressor``."""

    _auto_epochs = 20
    _rules = {"solver": OneOf("sgd", "svrg"), "n_components": Int(1, "auto"), "reg": REG,
              "eta0": Real(0, "auto", strict=True), "batch_size": Int(1, "auto"),
              "svrg_inner": Int(1, "epoch"), "n_iter": ITERS}
    _used_only = {"svrg_inner": ("with solver='svrg'", ("solver",),
                                 lambda p: p["solver"] == "svrg")}

    def __init__(self, loss=None, solver="sgd", n_components="auto", reg="auto", eta0="auto",
                 batch_size="auto", svrg_inner="epoch", n_iter="auto", kernel="gaussian",
                 bandwidth="auto", warm_start=False, random_state=None, engine=None, verbose=0):
        store_params(self, locals())

    def _fit(self, X, y):
        X, Y = self._fit_targets(X, y)
        n = int(X.shape[0])
        if self._fresh():
            self._validate_params()
            loss = check_loss(self._loss_name(), self._losses, type(self).__name__)
            xp, dtype = self._setup_common(X, Y, reg=self.reg)
            self.reg_ = reg_and_ridge(self.reg, n, self.alpha_sel_)[0]
            self.n_components_ = n_features_rule(n, self.n_components)
            blocks = FourierBlocks(self.kernel_, self.n_features_in_, self.n_components_,
                                   self.seed_, xp=xp, dtype=dtype)
            m = self.batch_size
            if m == "auto":
                m = auto_batch_size(xp, self.n_components_, self.n_features_in_, dtype,
                                    self._resolve_engine().memory_budget)
            self.batch_size_ = min(int(m), n)  # BatchStream caps it too
            per_epoch = -(-n // self.batch_size_)
            inner = per_epoch if self.svrg_inner == "epoch" else int(self.svrg_inner)
            self.solver_ = RFFSGD(blocks, loss, Y.shape[1], reg=self.reg_,
                                  solver=self.solver, eta0=self.eta0, inner=inner,
                                  X_sample=RFFSGD.sample_rows(X, self.seed_), xp=xp,
                                  batch_size=self.batch_size_)
            self.eta0_ = self.solver_.eta0
            self.history_ = {}
        self._xp()
        dtype = np.dtype(self.dtype_)

        def spread(stream_kw, **_):
            return rows_for(X, lambda client: SpreadRFF(client, X, Y, stream_kw,
                                                        self.solver_))

        self._train(Rows(X, Y, self.batch_size_, self.seed_, dtype, encode=as_targets(dtype)),
                    f"RFF+{self.solver.upper()}", "set a smaller eta0 (or a larger reg)",
                    spread=spread)
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


@fill_doc(**_RFF_DOCS)
class RFFSGDClassifier(ClassifierTargets, ClassifierMixin, _RFFSGDBase):
    """Random Fourier features (fixed count) + mini-batch SGD or SVRG; labels as -1 / +1,
    one-vs-all for several classes.

    %(classifier_doc)s
    >>> from kernelscale.estimators.rff_sgd import RFFSGDClassifier
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

        %(fit_classification)s
        """
        return self._fit(X, y)


@fill_doc(**_RFF_DOCS)
class RFFSGDRegressor(RegressorTargets, RegressorMixin, _RFFSGDBase):
    """Random Fourier features (fixed count) + mini-batch SGD or SVRG for regression;
    multi-output y allowed.

    %(regressor_doc)s
    >>> from kernelscale.estimators.rff_sgd import RFFSGDRegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = RFFSGDRegressor(n_components=100, n_iter=8, random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """
    _losses = REGRESSION_LOSSES

    def _loss_name(self):
        return self.loss or "square"

    def _encode(self, y):
        return self._targets(y, fresh=False)  # centred as the fit's (``estimators._targets``)

    def fit(self, X, y):
        """Fit the model on (X, y) (continued with ``warm_start``).

        %(fit_regression)s
        """
        return self._fit(X, y)


__all__ = ["RFFSGDClassifier", "RFFSGDRegressor"]
