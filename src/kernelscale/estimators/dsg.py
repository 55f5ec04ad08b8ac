"""DSG-family estimators over ``solvers.dsg``: ``DSGRegressor``, ``DSGClassifier`` (binary and
multi-class) and ``DSGOneClass`` (novelty detection).

DSG: Dai, Xie, He, Liang, Raj, Balcan, Song, "Scalable Kernel Methods via Doubly Stochastic
Gradients", NIPS 2014 (Alg. 1 and 2). UDSG and CDSG, which reuse earlier feature blocks: "Fast
Doubly Stochastic Kernel Machines" (Alg. 3 and 4). The "eigenpro" step: Ma, Belkin, "Diving into
the Shallows: a Computational Perspective on Large-Scale Shallow Learning", NIPS 2017.

Training reads mini-batches from a ``stream.BatchStream``, so ``X`` may be an on-disk zarr / dask
array that is never loaded whole. With ``warm_start=True`` each ``fit`` continues for another
``n_iter`` iterations on the same batch sequence, so a run cut into segments (the pipeline
checkpoints between them) yields the same model as one long ``fit``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, OutlierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..kernels import FourierBlocks
from ..losses import make_loss, sigmoid, softmax
from ..params import ITERS, REG, Int, KernelscaleEstimator, OneOf, Real, reg_and_ridge, store_params
from ..rng import seed_from
from ..solvers._common import steps
from ..solvers.dsg import SCHEDULES, DSGModel, DSGSolver, auto_settings
from ..spread import SpreadDSG, rows_for
from ..stream import predict_rows
from ..training import Rows
from ..validation import LabelCoder, OnDevice, check_X, check_X_y, device_and_dtype
from ._docs import fill_doc
from ._kernel_common import IterativeMixin, auto_kernel
from ._targets import LabelsFromScores, RegressorTargets

_PREDICT_CHUNK = 8192


# the parameters and attributes of the three DSG estimators, written once (``_docs.fill_doc``)
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
    The loss (``kernelscale.losses``): the choices and what None picks are in the summary.
loss_params : dict or None, default=None
    The loss's parameters: ``epsilon`` (epsilon_insensitive), ``delta`` (huber), ``tau``
    (quantile), ``nu_o`` (novelty); None: the loss's defaults.
batch_size : "auto" or int >= 1, default="auto"
    B, rows per iteration, at most n. "auto": max(4 F, 16 sqrt(n) rounded to a power of two).
    Fitted: ``batch_size_``.
block_size : "auto" or int >= 1, default="auto"
    F, random features per new block. "auto": max(4 sqrt(n), d / 2) rounded to a power of two
    in [256, 4096]. Fitted: ``block_size_``.
%(n_iter)s
    "auto": four epochs, ceil(4 n / B) iterations and at least 32, for DSG and CDSG; UDSG,
    which draws a new block in a share s = G / (G + U) of its iterations, takes that count
    / sqrt(s) (``solvers.dsg.auto_settings``). Fitted: ``n_iter_per_fit_``.
eta0 : "auto" or float > 0, default="auto"
    The step schedule's eta0. "auto": the largest stable step, EigenPro's mini-batch bound
    B / (1 + (B - 1) lambda_1 + B nu) (Ma & Belkin 2017, section 4) for plain steps, the same
    with the preconditioned beta and top eigenvalue (on the first batch) for "eigenpro" steps,
    1 / (1 + nu) for block Newton steps.
step_schedule : {"inverse", "theory", "inverse_sqrt", "constant"}, default="inverse"
    gamma_t = eta0 / (1 + t / t0), eta0 / t (Dai et al. 2014, Alg. 1), eta0 / sqrt(1 + t / t0)
    or eta0 (``solvers.dsg.DSGConfig.step_size``).
t0 : "auto" or float > 0, default="auto"
    The offset of the "inverse" and "inverse_sqrt" schedules. "auto": with the "eigenpro" step
    one of the four passes of DSG's "auto" run, max(ceil(n / B), 32 / 4) iterations (one epoch
    wherever the run's minimum of 32 iterations does not bind); 100 otherwise. Fitted: ``t0_``.
n_new, n_reuse : int, default=1
    G >= 1 and U >= 0 of UDSG (``solver="udsg"`` only).
precondition : "auto", "eigenpro" or bool, default="auto"
    The step of a block. False: the plain step of Dai et al. 2014. True: block Newton, the loss
    gradient times (cov(phi_k) + (nu + tr cov / B) I)^-1 of the block's features (the DSG
    authors' code). "eigenpro": EigenPro's preconditioner of the block's features on a fixed
    subsample of ``solvers.dsg.EIGENPRO_SUBSAMPLE`` rows, which flattens the top of their
    spectrum (Ma & Belkin 2017). Both preconditioned steps leave the shrink 1 - gamma nu
    unpreconditioned, so only False converges to the minimiser of the objective. "auto": True
    for classification losses; "eigenpro" for regression losses when B >= 128, else False;
    False for the novelty loss. Fitted: ``precondition_``.
max_step_ratio : "auto", float > 0 or None, default="auto"
    CDSG's cap on the line-search step, in units of gamma_t; None (the paper's rule) caps it
    only at eta0. "auto": 1 with the "eigenpro" step, else None (``solver="cdsg"`` only).
    Fitted: ``max_step_ratio_``.
%(random_state)s
    Block i of random features is regenerated from (seed, i).
%(warm_start)s
%(engine)s
    dtype "auto" is float32. On-disk X also takes ``window_rows`` / ``memory_budget`` (MB for
    two windows, chunk decoding and the batch's features; it picks ``window_rows``); in-memory
    X keeps its default window.
%(verbose)s""",
    "attributes": """\
model_ : solvers.dsg.DSGModel
    The fitted function f (feature blocks and coefficients).
solver_ : solvers.dsg.DSGSolver
    The solver a warm start continues.
%(kernel_)s
reg_ : float
    nu used.
precondition_ : bool or "eigenpro"
    The block step used.
n_iter_ : int
    Iterations so far, over all ``fit`` / ``partial_fit`` calls.
n_iter_per_fit_ : int
    Iterations per ``fit`` call.
n_blocks_ : int
    Feature blocks in f.
batch_size_, block_size_ : int
    B (at most n) and F used.
t0_ : float
    The step schedule's offset used.
max_step_ratio_ : float or None
    CDSG's step cap used.
history_ : dict
    Per-iteration records: iter, time, objective (batch objective), step, n_blocks.
%(n_features_in_)s""",
    "X_fit": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training data; also an on-disk zarr / dask array, read in windows.
    %(sparse_X)s Its batches are CSR rows, whose features are sparse products.""",
}


class _DSGBase(IterativeMixin, OnDevice, KernelscaleEstimator):
    """Implementation shared by the DSG estimators (parameters: see ``DSGRegressor``)."""

    iterative = True
    _fitted_state = "model_"  # the fitted state moved between devices (``OnDevice``)
    _default_loss = "square"
    _auto_dtype = "float32"  # engine dtype "auto" (``kernelscale.engine``)

    def __init__(self, solver="dsg", kernel="gaussian", bandwidth="auto", reg="auto", loss=None,
                 loss_params=None, batch_size="auto", block_size="auto", n_iter="auto", eta0="auto",
                 step_schedule="inverse", t0="auto", n_new=1, n_reuse=1, precondition="auto",
                 max_step_ratio="auto", random_state=None, warm_start=False, engine=None,
                 verbose=0):
        store_params(self, locals())

    # -- set-up -------------------------------------------------------------------------
    _rules = {"solver": OneOf("dsg", "udsg", "cdsg"), "reg": REG, "batch_size": Int(1, "auto"),
              "block_size": Int(1, "auto"), "n_iter": ITERS, "eta0": Real(0, "auto", strict=True),
              "t0": Real(0, "auto", strict=True), "n_new": Int(1), "n_reuse": Int(0),
              "precondition": OneOf("auto", True, False, "eigenpro"),
              "step_schedule": OneOf(*SCHEDULES),
              "max_step_ratio": Real(0, "auto", strict=True, none=True)}
    _used_only = {
        "n_new": ("by solver='udsg'", ("solver",), lambda p: p["solver"] == "udsg"),
        "n_reuse": ("by solver='udsg'", ("solver",), lambda p: p["solver"] == "udsg"),
        "max_step_ratio": ("by solver='cdsg'", ("solver",), lambda p: p["solver"] == "cdsg"),
        "t0": ("by step_schedule 'inverse' or 'inverse_sqrt'", ("step_schedule",),
               lambda p: p["step_schedule"] in ("inverse", "inverse_sqrt")),
        "loss_params": ("by the losses that have parameters (epsilon_insensitive, huber, quantile, "
                        "novelty)", ("loss",),
                        lambda p: p["loss"] in ("epsilon_insensitive", "huber", "quantile")),
    }

    def _loss_name(self, n_classes=None):
        return self.loss or self._default_loss

    def _init_model(self, X, n_outputs: int, loss_name: str, Y=None):
        self._validate_params()
        loss = make_loss(loss_name, **(self.loss_params or {}))
        self._check_loss(loss)
        engine = self._resolve_engine()
        self.device_, xp, dtype = device_and_dtype(engine.device, engine.dtype)
        self.seed_ = seed_from(self.random_state)
        n = int(X.shape[0])
        self.kernel_, alpha = auto_kernel(self, X, Y, self.reg == "auto")
        self.bandwidth_ = self.kernel_.bandwidth
        self.reg_ = reg_and_ridge(self.reg, n, alpha)[0]
        auto = auto_settings(
            n, self.n_features_in_, loss.task, variant=self.solver, block_size=self.block_size,
            batch_size=self.batch_size, n_iter=self.n_iter, precondition=self.precondition,
            t0=self.t0, max_step_ratio=self.max_step_ratio, n_new=self.n_new,
            n_reuse=self.n_reuse, reg=self.reg_, eta0=self.eta0, schedule=self.step_schedule)
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

    def _check_loss(self, loss):
        raise NotImplementedError  # pragma: no cover

    def _fit_rows(self, X, y_stream, encode, n_iter, stream_seed):
        self._xp()
        rows = Rows(X, y_stream, self._batch(), stream_seed, self.model_.blocks.dtype,
                    encode=encode, with_ids=True)

        def spread(stream_kw, stream, keep_rows):
            return rows_for(X, lambda client: SpreadDSG(
                client, X, y_stream, encode, stream_kw, self.solver_, stream=stream,
                keep_rows=keep_rows))

        self._train(rows, self.solver.upper(), "", spread=spread, n_iter=n_iter)
        self.n_blocks_ = self.model_.n_blocks

    def _fit_iters(self) -> int:
        """Iterations of this ``fit`` call: ``n_iter`` as set now (a warm-started fit may change
        it); "auto" keeps the count resolved on the first fit."""
        if self.n_iter != "auto":
            self._validate_params()
            self.n_iter_per_fit_ = steps(self.n_iter, self._per_epoch, 1)
        return self.n_iter_per_fit_

    def _batch(self) -> int:
        """B as resolved by the first fit (before the cap at that fit's n)."""
        return int(self._batch_rows)

    def _decision(self, X):
        check_is_fitted(self, "model_")
        X = check_X(self, X, reset=False)
        return predict_rows(X, self.model_.decision, self._xp(fitting=False), self.model_.blocks.dtype,
                            _PREDICT_CHUNK)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


@fill_doc(**_DSG_DOCS)
class DSGRegressor(RegressorTargets, RegressorMixin, _DSGBase):
    """Kernel regression by doubly stochastic gradients: DSG or its UDSG / CDSG variants.

    ``loss``: "square" (default; kernel ridge regression), "epsilon_insensitive" (SVR), "huber"
    or "quantile". With the square loss the objective (nu/2)||f||^2 + E[(f(x) - y)^2 / 2] is
    scikit-learn's ``KernelRidge`` with alpha = n nu.

    %(regressor_doc)s
    >>> from kernelscale.estimators.dsg import DSGRegressor
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    >>> model = DSGRegressor(n_iter=20, batch_size=32, block_size=32, random_state=0)
    >>> model.fit(X, y / y.std()).predict(X[:3]).shape
    (3,)
    """

    def _check_loss(self, loss):
        if loss.task != "regression":
            raise ValueError(f"loss={loss.name!r} is not a regression loss; use square, "
                             "epsilon_insensitive, huber or quantile")

    def fit(self, X, y):
        """Fit the model on (X, y) with ``n_iter`` iterations (continued with ``warm_start``).

        %(fit_regression)s
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._init_model(X, Y.shape[1], self._loss_name(), Y)
        self._fit_rows(X, Y, lambda yb, xp: xp.asarray(yb, dtype=self.model_.blocks.dtype),
                    self._fit_iters(), self.seed_)
        return self

    def partial_fit(self, X, y):
        """One pass (ceil(n / batch_size) iterations) over (X, y), continuing the fitted model."""
        fresh = not hasattr(self, "model_")
        if fresh:
            X, y = check_X_y(self, X, y, regression=True)
        else:
            X = check_X(self, X, reset=False, fitting=True)
        Y = self._targets(y, fresh)  # the first call's y_offset_ stays
        if fresh:
            self._init_model(X, Y.shape[1], self._loss_name(), Y)
        n_iter = -(-X.shape[0] // self._batch())
        # a fresh batch order for every call, still a pure function of (seed, iterations so far)
        self._fit_rows(X, Y, lambda yb, xp: xp.asarray(yb, dtype=self.model_.blocks.dtype),
                    n_iter, self.seed_ + self.solver_.t + 1)
        return self


@fill_doc(**_DSG_DOCS)
class DSGClassifier(LabelsFromScores, ClassifierMixin, _DSGBase):
    """Kernel classification by doubly stochastic gradients: DSG or its UDSG / CDSG variants.

    ``loss``: None picks "logistic" for two classes and "softmax" for more; "hinge" (SVM) and
    "squared_hinge" work one-vs-all. ``predict_proba`` exists for logistic and softmax.

    %(classifier_doc)s
    >>> from kernelscale.estimators.dsg import DSGClassifier
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = DSGClassifier(n_iter=20, batch_size=32, block_size=32, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    _default_loss = "auto"

    def _check_loss(self, loss):
        if loss.task != "classification":
            raise ValueError(f"loss={loss.name!r} is not a classification loss; use logistic, "
                             "softmax, hinge or squared_hinge")

    def _loss_for(self, n_classes):
        name = self.loss or "auto"
        if name == "auto":
            return "logistic" if n_classes == 2 else "softmax"
        return name

    def _setup(self, X, y, classes=None):
        """Classes, loss and model; returns the class index of every row of ``y`` (smallest
        integer dtype, read chunk by chunk: the only full-length label array training keeps)."""
        coder = LabelCoder(np.asarray(classes) if classes is not None else y, self._loss_for)
        idx = coder.y_index if classes is None else coder.index_of(y)
        coder.y_index = None  # not part of the fitted model (nor of its pickle)
        self._coder = coder
        self.classes_ = coder.classes_
        # the bandwidth / reg selection reads only its sample's rows of the class indices
        self._init_model(X, coder.n_outputs, coder.loss_name, idx)
        return idx

    def fit(self, X, y):
        """Fit the model on (X, y) with ``n_iter`` iterations (continued with ``warm_start``).

        Parameters
        ----------
        %(X_fit)s
        y : array-like of shape (n_samples,)
            Class labels; also an on-disk array, read chunk by chunk.

        Returns
        -------
        self
            The fitted estimator.
        """
        X, y = check_X_y(self, X, y, regression=False, lazy_labels=True)
        idx = self._setup(X, y) if self._fresh() else self._coder.index_of(y)
        del y  # labels loaded here (not the caller's) are not kept through training
        self._fit_rows(X, idx, lambda yb, xp: self._coder.encode_index(yb, xp, self.model_.blocks.dtype),
                    self._fit_iters(), self.seed_)
        return self

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
        n_iter = -(-X.shape[0] // self._batch())
        self._fit_rows(X, idx, lambda yb, xp: self._coder.encode_index(yb, xp, self.model_.blocks.dtype),
                    n_iter, self.seed_ + self.solver_.t + 1)
        return self

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
        if f.shape[1] == 1:
            p = sigmoid(f[:, 0])
            return np.column_stack([1.0 - p, p])
        return softmax(f)


@fill_doc(**_DSG_DOCS)
class DSGOneClass(OutlierMixin, _DSGBase):
    """Novelty detection by DSG with the one-class loss (Dai et al. 2014, section 4;
    ``losses.Novelty``).

    ``nu_o`` (in ``loss_params``, default 0.1) is the fraction of training points left outside.
    ``decision_function`` is f(x) - rho: negative for outliers; ``predict`` gives +1 / -1.
    ``loss`` is fixed to "novelty".

    %(sections)s
    offset_ : float
        rho, the threshold on f.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from kernelscale.estimators.dsg import DSGOneClass
    >>> X, _ = make_blobs(n_samples=200, n_features=2, centers=1, random_state=0)
    >>> det = DSGOneClass(n_iter=40, batch_size=32, block_size=32, random_state=0).fit(X)
    >>> sorted(set(det.predict(X).tolist()))
    [-1, 1]
    """

    _default_loss = "novelty"
    _used_only = {k: v for k, v in _DSGBase._used_only.items() if k != "loss_params"}  # nu_o

    def _check_loss(self, loss):
        if loss.task != "novelty":
            raise ValueError(f"loss={loss.name!r}: DSGOneClass uses the 'novelty' loss")

    def fit(self, X, y=None):
        """Fit the model on X with ``n_iter`` iterations (continued with ``warm_start``).

        Parameters
        ----------
        %(X_fit)s
        y : ignored

        Returns
        -------
        self
            The fitted estimator.
        """
        X = check_X(self, X, reset=True)
        if self._fresh():
            self._init_model(X, 1, self._loss_name(), np.zeros(X.shape[0]))
        self._fit_rows(X, None, lambda yb, xp: None, self._fit_iters(), self.seed_)
        self.offset_ = float(self.loss_.rho)
        return self

    def decision_function(self, X):
        """f(x) - rho: negative for outliers.

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)[:, 0] - self.loss_.rho

    def score_samples(self, X):
        """f(x) without the offset (``decision_function`` + ``offset_``); lower is more abnormal.

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)[:, 0]

    def predict(self, X):
        """+1 for inliers (f(x) >= rho), -1 for outliers.

        %(predict_X)s

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return np.where(self.decision_function(X) >= 0, 1, -1)
