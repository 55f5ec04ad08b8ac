"""DSG-family estimators over ``solvers.dsg``: ``DSGRegressor``, ``DSGClassifier`` and
``DSGOneClass`` (novelty detection); X is read in mini-batches, so it may stay on disk.

DSG: Dai, Xie, He, Liang, Raj, Balcan, Song, "Scalable Kernel Methods via Doubly Stochastic
Gradients", NIPS 2014 (Alg. 1 and 2). UDSG and CDSG: "Fast Doubly Stochastic Kernel Machines"
(Alg. 3 and 4). The "eigenpro" step: Ma, Belkin, "Diving into the Shallows: a Computational
Perspective on Large-Scale Shallow Learning", NIPS 2017.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, OutlierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if

from ..kernels import FourierBlocks
from ..losses import make_loss, sigmoid, softmax
from ..params import ITERS, REG, Int, OneOf, Real, store_params
from ..solvers._common import steps
from ..solvers.dsg import SCHEDULES, DSGModel, DSGSolver, auto_settings
from ..spread import SpreadDSG, rows_for
from ..training import Rows
from ..validation import LabelCoder, check_X, check_X_y
from ._docs import fill_doc
from ._kernel_common import IterativeEstimator, LossMixin
from ._targets import LabelsFromScores, RegressorTargets

_DSG_DOCS = {
    "parameters": """\
solver : {"dsg", "udsg", "cdsg"}, default="dsg"
    DSG (Dai et al. 2014, Alg. 1: a new block of random features every iteration), UDSG (a new
    block in G = ``n_new`` of every G + U iterations, a uniformly drawn old one in the other
    U = ``n_reuse``; Alg. 3 of "Fast Doubly Stochastic Kernel Machines") or CDSG (an old block
    where the checking rule of its eq. (9) allows, with a line-search step, else a new one;
    Alg. 4 there).
%(kernel)s
%(bandwidth)s
%(reg)s
loss : str or None, default=None
    The loss (``kernelscale.losses``); the choices and the default are in the summary.
loss_params : dict or None, default=None
    Its parameters, ``epsilon``, ``delta``, ``tau`` or ``nu_o``; None: the loss's defaults.
batch_size : "auto" or int >= 1, default="auto"
    B, rows per iteration, at most n. "auto": max(4 F, 16 sqrt(n) rounded to a power of two).
    Fitted: ``batch_size_``.
block_size : "auto" or int >= 1, default="auto"
    F, random features per new block. "auto": max(4 sqrt(n), d / 2) rounded to a power of two
    in [256, 4096]. Fitted: ``block_size_``.
%(n_iter)s
    "auto": four epochs, ceil(4 n / B) iterations and at least 32, for DSG and CDSG; that count
    / sqrt(G / (G + U)) for UDSG (``solvers.dsg.auto_settings``). Fitted: ``n_iter_per_fit_``.
eta0 : "auto" or float > 0, default="auto"
    The schedule's eta0. "auto": the largest stable step B / (1 + (B - 1) lambda_1 + B nu) (Ma &
    Belkin 2017, section 4; preconditioned for "eigenpro" steps); block Newton: 1 full step.
step_schedule : {"inverse", "theory", "inverse_sqrt", "constant"}, default="inverse"
    gamma_t = eta0 / (1 + t / t0), eta0 / t (Dai et al. 2014, Alg. 1), eta0 / sqrt(1 + t / t0)
    or eta0 (``solvers.dsg.DSGConfig.step_size``).
t0 : "auto" or float > 0, default="auto"
    Offset of the "inverse" and "inverse_sqrt" schedules. "auto": one pass, max(ceil(n / B), 8),
    for the "eigenpro" step and regression's block Newton step, else 100. Fitted: ``t0_``.
n_new, n_reuse : int, default=1
    G >= 1 and U >= 0 of UDSG (``solver="udsg"`` only).
precondition : "auto", "eigenpro" or bool, default="auto"
    The block step. False: the plain step (Dai et al. 2014). True: block Newton, the whole
    gradient, regulariser included, times rho_t (cov(phi_k) + rho_t I)^-1 in the block's span
    (Ma & Belkin 2017, eq. 7). "eigenpro": EigenPro's preconditioner of the block's features.
    Each keeps the objective's minimiser. "auto": True for classification; for regression True
    when B >= 1024, "eigenpro" when B >= 128, else False. Fitted: ``precondition_``.
max_step_ratio : "auto", float > 0 or None, default="auto"
    CDSG's cap on the line-search step in units of gamma_t (``solver="cdsg"`` only); None (the
    paper's rule): eta0. "auto": 1 where ``t0`` "auto" is one pass, else None.
%(random_state)s
    Block i of random features is regenerated from (seed, i).
%(warm_start)s
%(engine)s
    dtype "auto" is float32.
%(verbose)s""",
    "attributes": """\
model_, solver_ : solvers.dsg.DSGModel, solvers.dsg.DSGSolver
    f (feature blocks and coefficients), and the solver a warm start continues.
%(kernel_)s
reg_ : float
    nu used.
precondition_, t0_, max_step_ratio_ : bool or "eigenpro", float, float or None
    The block step, the schedule's offset and CDSG's step cap used.
%(n_iter_)s
n_iter_per_fit_, n_blocks_, batch_size_, block_size_ : int
    Iterations per ``fit`` call, feature blocks in f, B (at most n) and F used.
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data; also an on-disk zarr / dask array, read in windows.
    %(sparse_X)s Its batches are CSR rows, whose features are sparse products.""",
}


class _DSGBase(LossMixin, IterativeEstimator):
    """Implementation shared by the DSG estimators (parameters: see ``DSGRegressor``)."""

    _fitted_state = "model_"
    _default_loss = "square"
    _sparse_gpu = True
    _auto_dtype = "float32"  # engine dtype "auto" (``kernelscale.engine``)
    _predict_chunk = 8192

    def __init__(self, solver="dsg", kernel="gaussian", bandwidth="auto", reg="auto", loss=None,
                 loss_params=None, batch_size="auto", block_size="auto", n_iter="auto", eta0="auto",
                 step_schedule="inverse", t0="auto", n_new=1, n_reuse=1, precondition="auto",
                 max_step_ratio="auto", random_state=None, warm_start=False, engine=None,
                 verbose=0):
        store_params(self, locals())

    _rules = {"solver": OneOf("dsg", "udsg", "cdsg"), "reg": REG, "batch_size": Int(1, "auto"),
              "block_size": Int(1, "auto"), "n_iter": ITERS, "eta0": Real(0, "auto", strict=True),
              "t0": Real(0, "auto", strict=True), "n_new": Int(1), "n_reuse": Int(0),
              "precondition": OneOf("auto", True, False, "eigenpro"),
              "step_schedule": OneOf(*SCHEDULES),
              "max_step_ratio": Real(0, "auto", strict=True, none=True)}
    _udsg = ("by solver='udsg'", ("solver",), lambda p: p["solver"] == "udsg")
    _used_only = {
        "n_new": _udsg, "n_reuse": _udsg,
        "max_step_ratio": ("by solver='cdsg'", ("solver",), lambda p: p["solver"] == "cdsg"),
        "t0": ("by step_schedule 'inverse' or 'inverse_sqrt'", ("step_schedule",),
               lambda p: p["step_schedule"] in ("inverse", "inverse_sqrt")),
        "loss_params": ("by the losses that have parameters (epsilon_insensitive, huber, quantile, "
                        "novelty)", ("loss",),
                        lambda p: p["loss"] in ("epsilon_insensitive", "huber", "quantile")),
    }

    def _init_model(self, X, n_outputs: int, loss_name: str, Y=None):
        self._validate_params()
        loss = make_loss(loss_name, **(self.loss_params or {}))
        if loss.task != self._task:
            raise ValueError(f"loss={loss.name!r}{self._wrong_loss}")
        xp, dtype = self._setup_common(X, Y, loss.reg_scale(n_outputs))
        auto = auto_settings(
            int(X.shape[0]), self.n_features_in_, loss.task, variant=self.solver,
            block_size=self.block_size, batch_size=self.batch_size, n_iter=self.n_iter,
            precondition=self.precondition, t0=self.t0, max_step_ratio=self.max_step_ratio,
            n_new=self.n_new, n_reuse=self.n_reuse, reg=self.reg_, eta0=self.eta0,
            schedule=self.step_schedule)
        config = auto.config
        self.block_size_, self._batch_rows = config.block_size, auto.batch_rows
        self.batch_size_, self._per_epoch = auto.batch_size, auto.per_epoch
        self.n_iter_per_fit_ = auto.n_iter
        self.precondition_, self.t0_ = config.precondition, config.t0
        self.max_step_ratio_ = config.max_step_ratio
        blocks = FourierBlocks(self.kernel_, self.n_features_in_, config.block_size, self.seed_,
                               xp=xp, dtype=dtype)
        self.model_ = DSGModel(blocks, n_outputs)
        self.loss_ = loss
        self.solver_ = DSGSolver(self.model_, self.kernel_, loss, config, self.seed_)
        self.history_ = {}

    def _fit_rows(self, X, y_stream, partial=False):
        """The iterations of a ``fit`` on (X, ``y_stream``), or of a ``partial_fit``: one pass,
        in a fresh batch order (a function of the seed and the iterations so far)."""
        if partial:
            seed, n_iter = self.seed_ + self.solver_.t + 1, -(-X.shape[0] // int(self._batch_rows))
        else:  # n_iter "auto" keeps the count resolved on the first fit
            if self.n_iter != "auto":
                self._validate_params()
                self.n_iter_per_fit_ = steps(self.n_iter, self._per_epoch, 1)
            seed, n_iter = self.seed_, self.n_iter_per_fit_
        self._xp()
        encode = self._encode
        rows = Rows(X, y_stream, int(self._batch_rows), seed, self.model_.blocks.dtype,
                    encode=encode, with_ids=True)

        def spread(stream_kw, stream, keep_rows):
            return rows_for(X, lambda client: SpreadDSG(
                client, X, y_stream, encode, stream_kw, self.solver_, stream=stream,
                keep_rows=keep_rows))

        self._train(rows, self.solver.upper(), "", spread=spread, n_iter=n_iter)
        self.n_blocks_ = self.model_.n_blocks
        return self


_EXAMPLE = "n_iter=20, batch_size=32, block_size=32, random_state=0"


@fill_doc(**_DSG_DOCS, example=_EXAMPLE)
class DSGRegressor(RegressorTargets, RegressorMixin, _DSGBase):
    """Kernel regression by doubly stochastic gradients: DSG or its UDSG / CDSG variants.

    ``loss``: "square" (default; kernel ridge regression, scikit-learn's ``KernelRidge`` with
    alpha = n nu), "epsilon_insensitive" (SVR), "huber" or "quantile".

    %(regressor_doc)s
    """

    _task = "regression"
    _wrong_loss = " is not a regression loss; use square, epsilon_insensitive, huber or quantile"

    def _encode(self, yb, xp):
        return xp.asarray(yb, dtype=self.model_.blocks.dtype)

    def fit(self, X, y):
        """Fit the model on (X, y) with ``n_iter`` iterations (continued with ``warm_start``).

        %(fit)s
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._init_model(X, Y.shape[1], self._loss_name(), Y)
        return self._fit_rows(X, Y)

    def partial_fit(self, X, y):
        """One pass (ceil(n / batch_size) iterations) over (X, y), continuing the fitted model."""
        fresh = not hasattr(self, "model_")
        X, y = (check_X_y(self, X, y, regression=True) if fresh
                else (check_X(self, X, reset=False, fitting=True), y))
        Y = self._targets(y, fresh)  # the first call's y_offset_ stays
        if fresh:
            self._init_model(X, Y.shape[1], self._loss_name(), Y)
        return self._fit_rows(X, Y, partial=True)


@fill_doc(**_DSG_DOCS, example=_EXAMPLE, y_fit="""\
y : array-like of shape (n_samples,)
    Class labels; also an on-disk array, read chunk by chunk.""")
class DSGClassifier(LabelsFromScores, ClassifierMixin, _DSGBase):
    """Kernel classification by doubly stochastic gradients: DSG or its UDSG / CDSG variants.

    ``loss``: None picks "logistic" for two classes and "softmax" for more; "hinge" (SVM) and
    "squared_hinge" work one-vs-all. ``predict_proba`` exists for logistic and softmax.

    %(classifier_doc)s
    """

    _default_loss = "auto"
    _task = "classification"
    _wrong_loss = " is not a classification loss; use logistic, softmax, hinge or squared_hinge"

    def _encode(self, yb, xp):
        return self._coder.encode_index(yb, xp, self.model_.blocks.dtype)

    def _loss_for(self, n_classes):
        name = self._loss_name()
        return ("logistic" if n_classes == 2 else "softmax") if name == "auto" else name

    def _setup(self, X, y, classes=None):
        """Classes, loss and model; returns the class index of every row of ``y`` (smallest
        integer dtype, read chunk by chunk: the only full-length label array training keeps)."""
        coder = LabelCoder(np.asarray(classes) if classes is not None else y, self._loss_for)
        idx = coder.y_index if classes is None else coder.index_of(y)
        coder.y_index = None  # not part of the fitted model (nor of its pickle)
        self._coder = coder
        self.classes_ = coder.classes_
        self._init_model(X, coder.n_outputs, coder.loss_name, idx)
        return idx

    def fit(self, X, y):
        """Fit the model on (X, y) with ``n_iter`` iterations (continued with ``warm_start``).

        %(fit)s
        """
        X, y = check_X_y(self, X, y, regression=False, lazy_labels=True)
        idx = self._setup(X, y) if self._fresh() else self._coder.index_of(y)
        del y  # labels loaded here (not the caller's) are not kept through training
        return self._fit_rows(X, idx)

    def partial_fit(self, X, y, classes=None):
        """One pass over (X, y); ``classes`` is required on the first call (scikit-learn convention)."""
        if not hasattr(self, "model_"):
            X, y = check_X_y(self, X, y, regression=False, lazy_labels=True)
            if classes is None:
                raise ValueError("classes must be given on the first call to partial_fit")
            idx = self._setup(X, y, classes)
        else:
            X = check_X(self, X, reset=False, fitting=True)
            idx = self._coder.index_of(y)
        return self._fit_rows(X, idx, partial=True)

    def decision_function(self, X):
        """Decision scores f(x) (Dai et al. 2014, Alg. 2); positive favours ``classes_[1]``.

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for a single output (binary, margin losses); one per class otherwise.
        """
        f = self._decision(X)
        return f[:, 0] if f.shape[1] == 1 else f

    def _probabilistic(self):
        return hasattr(self, "loss_") and self.loss_.probabilistic or (
            not hasattr(self, "loss_") and self.loss in (None, "auto", "logistic", "softmax"))

    @available_if(_probabilistic)
    def predict_proba(self, X):
        """Class probabilities (sigmoid / softmax of f), shape (n_samples, n_classes), columns in
        the order of ``classes_``; only for the logistic and softmax losses."""
        f = self._decision(X)
        return softmax(f) if f.shape[1] > 1 else np.column_stack([1.0 - sigmoid(f[:, 0]),
                                                                   sigmoid(f[:, 0])])


@fill_doc(**_DSG_DOCS, y_fit="y : ignored")
class DSGOneClass(OutlierMixin, _DSGBase):
    """Novelty detection by DSG with the one-class loss (Dai et al. 2014, section 4;
    ``losses.Novelty``).

    ``nu_o`` (in ``loss_params``, default 0.1) is the fraction of training points left outside;
    ``loss`` is fixed to "novelty".

    %(sections)s
    offset_ : float
        rho, the threshold on f.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from kernelscale import DSGOneClass
    >>> X, _ = make_blobs(n_samples=200, n_features=2, centers=1, random_state=0)
    >>> det = DSGOneClass(n_iter=40, batch_size=32, block_size=32, random_state=0).fit(X)
    >>> sorted(set(det.predict(X).tolist()))
    [-1, 1]
    """

    _default_loss = _task = "novelty"
    _wrong_loss = ": DSGOneClass uses the 'novelty' loss"
    _used_only = {k: v for k, v in _DSGBase._used_only.items() if k != "loss_params"}  # nu_o
    _encode = staticmethod(lambda yb, xp: None)  # no targets

    def fit(self, X, y=None):
        """Fit the model on X with ``n_iter`` iterations (continued with ``warm_start``).

        %(fit)s
        """
        X = check_X(self, X, reset=True)
        if self._fresh():
            self._init_model(X, 1, self._loss_name(), np.zeros(X.shape[0]))
        self._fit_rows(X, None)
        self.offset_ = float(self.loss_.rho)
        return self

    def decision_function(self, X):
        """f(x) - rho: negative for outliers.

        %(predict_n)s
        """
        return self._decision(X)[:, 0] - self.loss_.rho

    def score_samples(self, X):
        """f(x) without the offset (``decision_function`` + ``offset_``); lower is more abnormal.

        %(predict_n)s
        """
        return self._decision(X)[:, 0]

    def predict(self, X):
        """+1 for inliers (f(x) >= rho), -1 for outliers.

        %(predict_n)s
        """
        return np.where(self.decision_function(X) >= 0, 1, -1)
