"""Random Fourier features (Rahimi, Recht, "Random Features for Large-Scale Kernel Machines", NIPS
2007) + SGD or SVRG (``solvers.rff_sgd``): ``RFFSGDClassifier`` / ``RFFSGDRegressor``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..kernels import FourierBlocks
from ..params import ITERS, REG, Int, OneOf, Real, store_params
from ..solvers.rff_sgd import RFFSGD, auto_batch_size
from ..spread import SpreadRFF, rows_for
from ..training import Rows, as_targets
from ..validation import check_X
from ._docs import fill_doc
from ._kernel_common import (
    CLASSIFICATION_LOSSES,
    REGRESSION_LOSSES,
    IterativeEstimator,
    LossMixin,
    n_features_rule,
)
from ._targets import ClassifierTargets, RegressorTargets

_RFF_DOCS = {
    "parameters": """\
loss : str or None, default=None
    Classifier: "logistic" (default), "hinge", "square", "squared_hinge"; regressor: "square"
    (default), "epsilon_insensitive", "huber".
solver : {"sgd", "svrg"}, default="sgd"
    Mini-batch SGD, or SVRG (Johnson & Zhang, NIPS 2013).
n_components : "auto" or int >= 1, default="auto"
    D, random features. "auto": max(1000, ceil(sqrt(n) ln n)) (Rudi & Rosasco, NIPS 2017).
    Fitted: ``n_components_``.
%(reg)s
    Here ||f|| is the norm ||W|| of the weights on the features.
eta0 : "auto" or float > 0, default="auto"
    Step size; "auto": m / (L (beta + (m - 1) lambda_1) + m nu), the largest stable mini-batch
    step (``solvers.rff_sgd``); at most 1 / (2 nu). SGD decays it as eta0 / (1 + nu eta0 t);
    SVRG keeps it constant. Fitted: ``eta0_``.
batch_size : "auto" or int >= 1, default="auto"
    m, rows per step, at most n. "auto": 64 on the host, on a GPU a power of two sized by the
    memory budget (``solvers.rff_sgd.auto_batch_size``). Fitted: ``batch_size_``.
svrg_inner : "epoch" or int >= 1, default="epoch"
    Steps between SVRG snapshots; "epoch": one pass (``solver="svrg"`` only).
average : "auto" or bool, default="auto"
    Predict with the tail mean of the SGD iterates (``solver="sgd"`` only); "auto": True for the
    square loss (``solvers.rff_sgd.RFFSGD``). Fitted: ``solver_.n_averaged``.
%(n_iter)s
    "auto": 20 epochs.
%(iterative_common)s
%(verbose)s""",
    "attributes": """\
solver_ : solvers.rff_sgd.RFFSGD
    Holds the weights ``w`` over the random features.
reg_, eta0_, bandwidth_ : float
    nu, the step size and sigma used.
n_components_, batch_size_ : int
    D and m used.
%(n_iter_)s
%(n_features_in_)s""",
}


class _RFFSGDBase(LossMixin, IterativeEstimator):
    """Implementation shared by ``RFFSGDClassifier`` / ``RFFSGDRegressor``."""

    _auto_epochs = 20
    _sparse_gpu = True
    _rules = {"solver": OneOf("sgd", "svrg"), "n_components": Int(1, "auto"), "reg": REG,
              "eta0": Real(0, "auto", strict=True), "batch_size": Int(1, "auto"), "n_iter": ITERS,
              "svrg_inner": Int(1, "epoch"), "average": OneOf("auto", True, False)}
    _used_only = {name: (f"with solver={s!r}", ("solver",), lambda p, s=s: p["solver"] == s)
                  for name, s in (("svrg_inner", "svrg"), ("average", "sgd"))}

    def __init__(self, loss=None, solver="sgd", n_components="auto", reg="auto", eta0="auto",
                 batch_size="auto", svrg_inner="epoch", average="auto", n_iter="auto",
                 kernel="gaussian", bandwidth="auto", warm_start=False, random_state=None,
                 engine=None, verbose=0):
        store_params(self, locals())

    def _init_solver(self, X, Y):
        n = int(X.shape[0])
        self._validate_params()
        loss = self._make_loss()
        xp, dtype = self._setup_common(X, Y, loss.reg_scale(Y.shape[1]))
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
        self.solver_ = RFFSGD(blocks, loss, Y.shape[1], reg=self.reg_, solver=self.solver,
                              eta0=self.eta0, inner=inner, xp=xp, batch_size=self.batch_size_,
                              X_sample=RFFSGD.sample_rows(X, self.seed_), average=self.average)
        self.eta0_ = self.solver_.eta0

    def _fit_solver(self, X, Y):
        dtype = np.dtype(self.dtype_)

        def spread(stream_kw, **_):
            return rows_for(X, lambda client: SpreadRFF(client, X, Y, stream_kw, self.solver_))

        self._train(Rows(X, Y, self.batch_size_, self.seed_, dtype, encode=as_targets(dtype)),
                    f"RFF+{self.solver.upper()}", "set a smaller eta0 (or a larger reg)",
                    spread=spread)

    def objective(self, X, y) -> float:
        """The training objective F(W) = mean loss + (nu/2)||W||^2 on (X, y), nu = ``reg_``."""
        check_is_fitted(self, "solver_")
        X = check_X(self, X, reset=False)
        Y = self._encode(y)
        self._xp(fitting=False)
        return self.solver_.objective((X, Y))


@fill_doc(**_RFF_DOCS, example="n_components=100, n_iter=8, random_state=0")
class RFFSGDClassifier(ClassifierTargets, ClassifierMixin, _RFFSGDBase):
    """Random Fourier features (fixed count) + mini-batch SGD or SVRG; labels as -1 / +1,
    one-vs-all for several classes.

    %(classifier_doc)s
    """
    _losses = CLASSIFICATION_LOSSES
    _default_loss = "logistic"

    def _encode(self, y):
        return self._coder.encode_index(self._coder.index_of(np.asarray(y)), np, np.float64)


@fill_doc(**_RFF_DOCS, example="n_components=100, n_iter=8, random_state=0")
class RFFSGDRegressor(RegressorTargets, RegressorMixin, _RFFSGDBase):
    """Random Fourier features (fixed count) + mini-batch SGD or SVRG for regression;
    multi-output y allowed.

    %(regressor_doc)s
    """
    _losses = REGRESSION_LOSSES
    _default_loss = "square"

    def _encode(self, y):
        return self._targets(y, fresh=False)  # centred as the fit's (``estimators._targets``)
