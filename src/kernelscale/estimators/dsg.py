"""DSG-family estimators: ``DSGRegressor``, ``DSGClassifier`` (binary and multi-class) and
``DSGOneClass`` (novelty detection), thin scikit-learn wrappers over ``solvers.dsg``.

Training reads mini-batches from a ``stream.BatchStream``, so ``X`` may be an on-disk zarr/dask
array that is never loaded whole. With ``warm_start=True`` each ``fit`` continues for another
``n_iter`` iterations on the same batch sequence, so a run cut into segments (the pipeline
checkpoints between them) yields the same model as one long ``fit``.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import ClassifierMixin, OutlierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..budget import MB, budget_window
from ..distributed import current_client
from ..distributed_dsg import SpreadDSG
from ..kernels import FourierBlocks
from ..losses import make_loss, sigmoid, softmax
from ..preconditioners import subsample_indices
from ..rng import seed_from
from ..solvers._common import Progress
from ..solvers.dsg import DSGConfig, DSGModel, DSGSolver, group_bytes
from ..solvers.row_cache import RowCache
from ..stream import BatchStream, is_in_memory, predict_rows, take_rows
from ._base import LabelCoder, OnDevice, check_X, check_X_y, device_and_dtype
from ._kernel_common import auto_kernel
from ._params import ITERS, REG, Int, KernelscaleEstimator, OneOf, Real, reg_and_ridge, steps
from ._targets import LabelsFromScores, RegressorTargets

_PREDICT_CHUNK = 8192
# rows whose block covariance gives precondition="eigenpro" its P: resolves eigenvalues down to
# beta_0 / 2000, below the batch rule's beta_0 / B for every B up to 2000
EIGENPRO_SUBSAMPLE = 2000
# "auto" uses the EigenPro step only from this batch size: below it the step's noise (batch and
# random features) dominates, e.g. scikit-learn's regression check at B = 32: R^2 -0.59 after
# 100 iterations against 0.80 plain, and 0.82 against 0.63 at B = 128
EIGENPRO_MIN_BATCH = 128
# on-disk data under a memory budget keeps the per-row f cache only when it takes at most this
# share of the budget: the rest is the windows' (a smaller window decodes each chunk more often)
ROW_CACHE_BUDGET_SHARE = 0.25


# "auto" sizes and iterations (``auto_block_size``, ``auto_batch_size``, ``auto_iterations``)
AUTO_BLOCK_RANGE = (256, 4096)  # F: paper 003's smallest and largest blocks
BATCH_PER_BLOCK = 4  # B >= 4 F: each block step fits F coefficients on at least 4 F rows
AUTO_EPOCHS = 4
# at least this many iterations (blocks), so that f has enough features for the kernel's
# leading eigenfunctions when an epoch is only a few batches (small n)
MIN_AUTO_ITERATIONS = 32
DEFAULT_T0 = 100.0  # t0="auto" where the step is not EigenPro's


def _pow2(x: float) -> int:
    return 2 ** int(round(math.log2(max(1.0, x))))


def auto_block_size(n: int, d: int = 1) -> int:
    """``block_size="auto"``: F = max(4 sqrt(n), d / 2) rounded to a power of two, within
    ``AUTO_BLOCK_RANGE`` (n = 4,000: 256; 60,000: 1,024; 10^6 and more: 4,096; d = 784 and
    n = 5,000: 512).

    Why sqrt(n): the random features a kernel ridge fit needs for the full-kernel rate grow
    as sqrt(n) (Rudi and Rosasco, 2017), and with B = 4 F an epoch then adds n / 4 features
    in sqrt(n) / 16 blocks. Why d / 2: a block's F frequencies are F random directions of
    the input space; with F well below d one block step cannot follow most of them. The cap
    bounds a step's B x F feature matrix and F x F solve. Measurements:
    ``benchmarks/results/dsg-defaults.md``."""
    lo, hi = AUTO_BLOCK_RANGE
    want = max(4.0 * math.sqrt(max(1, int(n))), int(d) / 2)
    return int(min(hi, max(lo, _pow2(want))))


def auto_batch_size(n: int, block_size: int) -> int:
    """``batch_size="auto"``: B = max(4 F, 16 sqrt(n) rounded to a power of two), at most n.

    Paper 003's regime is B >> F (CIFAR-10: B = 16 F; MNIST-8M: B = 5 F). A block step fits
    the block's F coefficients to its batch (a ridge fit with the block Newton step), whose
    off-batch error grows by about (1 - F / B)^-2: at most 1.8x at B = 4 F, against the
    unbounded B = F. Beyond F's cap B keeps growing as sqrt(n), so that the blocks of an
    epoch grow as sqrt(n) and the fit's cost as n^1.5 (see ``auto_iterations``)."""
    n = max(1, int(n))
    return int(min(n, max(BATCH_PER_BLOCK * int(block_size), _pow2(16.0 * math.sqrt(n)))))


def auto_sizes(n: int, d: int, block_size="auto", batch_size="auto") -> tuple[int, int]:
    """(F, B) for ``block_size`` / ``batch_size`` (each "auto" or a number): the rules above;
    B before the cap at n that the stream applies (``auto_batch_size`` caps it already)."""
    F = auto_block_size(n, d) if block_size == "auto" else int(block_size)
    B = auto_batch_size(n, F) if batch_size == "auto" else int(batch_size)
    return F, B


def auto_iterations(n: int, batch_size: int, new_share: float = 1.0) -> int:
    """``n_iter="auto"``: the work of ``AUTO_EPOCHS`` epochs of DSG, ceil(4 n / B) iterations
    and at least ``MIN_AUTO_ITERATIONS``, divided by sqrt(``new_share``); never capped above,
    so a fit sees every row at least four times for any n.

    Cost with the "auto" sizes: T = E n / B iterations (E = 4 epochs). Step t needs f on its
    batch; the first epoch evaluates it over all t blocks so far (sum_t t B F d), later epochs
    add to each row's cached f the changes since its last visit, about n / B blocks
    (``solvers.row_cache``), so every later step costs about n F d. A fit costs
    (E - 1/2) n^2 F d / B: 7/8 n^2 d while B = 4 F (n up to ~10^6, F = 4,096), 896 n^1.5 d
    beyond (B = 16 sqrt(n)). Without the cache (on-disk data whose cache does not fit the
    memory budget) every step evaluates all blocks: E^2 n^2 F d / (2 B), 2.3 times as much at
    E = 4. A variant that draws a new block in a share s of its steps (UDSG: s = G / (G + U))
    has s t blocks at step t; T / sqrt(s) of its steps cost what DSG's T do when every step
    evaluates all blocks (paper 000's comparison, reuse against new features at equal time;
    UDSG: sqrt(2) x four epochs at G = U = 1). With the row cache its steps after the first
    epoch cost about what DSG's do, since a reused block is caught up on like a new one, so
    its fit costs more than DSG's and predicts with fewer blocks. CDSG's share is decided by
    its check as it runs; it takes DSG's count. Prediction costs n_test m F d for m blocks:
    about (E / (E - 1/2)) n_test / n of DSG's fit, since a test row needs every block once and a
    training row is caught up on each block about once per pass."""
    base = max(MIN_AUTO_ITERATIONS, -(-AUTO_EPOCHS * int(n) // max(1, int(batch_size))))
    if not 0.0 < new_share <= 1.0:
        raise ValueError(f"new_share={new_share!r} must be in (0, 1]")
    return int(math.ceil(base / math.sqrt(new_share) - 1e-9))


def new_block_share(variant: str, n_new: int = 1, n_reuse: int = 1) -> float:
    """Share of steps that draw a new block, where it is fixed in advance: G / (G + U) for
    UDSG, 1 for DSG and for CDSG (whose check decides as it runs)."""
    if variant == "udsg":
        return int(n_new) / (int(n_new) + int(n_reuse))
    return 1.0


class _DSGBase(OnDevice, KernelscaleEstimator):
    """Implementation shared by the DSG estimators (parameters: see ``DSGRegressor``)."""

    iterative = True
    _fitted_state = "model_"  # the fitted state moved between devices (``OnDevice``)
    _default_loss = "square"
    _auto_dtype = "float32"  # engine dtype "auto" (``kernelscale.engine``)

    def __init__(self, variant="dsg", kernel="gaussian", bandwidth="auto", reg="auto", loss=None,
                 loss_params=None, batch_size="auto", block_size="auto", n_iter="auto", eta0="auto",
                 step_schedule="inverse", t0="auto", n_new=1, n_reuse=1, precondition="auto",
                 max_step_ratio="auto", random_state=None, warm_start=False, engine=None,
                 verbose=0):
        self.variant = variant
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.reg = reg
        self.loss = loss
        self.loss_params = loss_params
        self.batch_size = batch_size
        self.block_size = block_size
        self.n_iter = n_iter
        self.eta0 = eta0
        self.step_schedule = step_schedule
        self.t0 = t0
        self.n_new = n_new
        self.n_reuse = n_reuse
        self.precondition = precondition
        self.max_step_ratio = max_step_ratio
        self.random_state = random_state
        self.warm_start = warm_start
        self.engine = engine
        self.verbose = verbose

    # -- set-up -------------------------------------------------------------------------
    _rules = {"variant": OneOf("dsg", "udsg", "cdsg"), "reg": REG, "batch_size": Int(1, "auto"),
              "block_size": Int(1, "auto"), "n_iter": ITERS, "eta0": Real(0, "auto", strict=True),
              "t0": Real(0, "auto", strict=True), "n_new": Int(1), "n_reuse": Int(0),
              "precondition": OneOf("auto", True, False, "eigenpro"),
              "max_step_ratio": Real(0, "auto", strict=True, none=True)}
    _used_only = {
        "n_new": ("by variant='udsg'", ("variant",), lambda p: p["variant"] == "udsg"),
        "n_reuse": ("by variant='udsg'", ("variant",), lambda p: p["variant"] == "udsg"),
        "max_step_ratio": ("by variant='cdsg'", ("variant",), lambda p: p["variant"] == "cdsg"),
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
        # the stream cuts batches of at most n rows: what "auto" decides below is decided on
        # the batch that runs (B = 256 on 100 rows runs batches of 100)
        F, B = auto_sizes(n, self.n_features_in_, self.block_size, self.batch_size)
        self.block_size_, self._batch_rows = F, B
        self.batch_size_ = min(B, n)
        self._per_epoch = -(-n // self.batch_size_)
        share = new_block_share(self.variant, self.n_new, self.n_reuse)
        self.n_iter_per_fit_ = (auto_iterations(n, self.batch_size_, share)
                                if self.n_iter == "auto" else steps(self.n_iter, self._per_epoch, 1))
        if self.precondition == "auto":
            regression = "eigenpro" if self.batch_size_ >= EIGENPRO_MIN_BATCH else False
            precondition = {"classification": True, "regression": regression}.get(loss.task,
                                                                                 False)
        else:
            precondition = (self.precondition if self.precondition == "eigenpro"
                            else bool(self.precondition))
        self.precondition_ = precondition
        if self.t0 != "auto":
            self.t0_ = float(self.t0)
        else:
            self.t0_ = float(self._per_epoch) if precondition == "eigenpro" else DEFAULT_T0
        ratio = self.max_step_ratio
        if ratio == "auto":
            ratio = 1.0 if precondition == "eigenpro" else None
        self.max_step_ratio_ = ratio
        config = DSGConfig(variant=self.variant, block_size=F, reg=self.reg_,
                           eta0=self.eta0, schedule=self.step_schedule, t0=self.t0_,
                           n_new=int(self.n_new), n_reuse=int(self.n_reuse),
                           precondition=precondition,
                           max_step_ratio=None if ratio is None else float(ratio))
        blocks = FourierBlocks(self.kernel_, self.n_features_in_, config.block_size, self.seed_,
                               xp=xp, dtype=dtype)
        self.model_ = DSGModel(blocks, n_outputs)
        self.loss_ = loss
        self.solver_ = DSGSolver(self.model_, self.kernel_, loss, config, self.seed_)
        self.history_ = {}

    def _check_loss(self, loss):
        raise NotImplementedError  # pragma: no cover

    def _train(self, X, y_stream, encode, n_iter, stream_seed):
        xp = self._xp()
        window_rows = budget_window(self.engine_, X, self._batch(), self.model_.blocks.F,
                                    self.model_.blocks.dtype, self._work_bytes(X))
        stream = BatchStream(X, y_stream, batch_size=self._batch(), seed=stream_seed, xp=xp,
                             dtype=self.model_.blocks.dtype, window_rows=window_rows)
        self.window_rows_ = stream.window_rows  # rows read per window (budget's choice)

        def batches(t):
            Xb, yb, ids = stream.batch(t, with_ids=True)
            return Xb, encode(yb, xp), ids

        spread = None
        progress = Progress(self.variant.upper(), n_iter, getattr(self, "verbose", 0))
        try:  # the stream (and the workers' replicas) are closed however the set-up ends
            client = current_client()
            if client is not None and not is_in_memory(X):
                # data-parallel steps: each dask worker reads and works on its share of every
                # batch
                spread = batches = SpreadDSG(
                    client, X, y_stream, encode,
                    dict(batch_size=self._batch(), seed=stream_seed,
                         dtype=self.model_.blocks.dtype, window_rows=window_rows),
                    self.solver_, stream=stream, keep_rows=self._keeps_rows(X))
                self.solver_.row_cache = None  # the workers keep their rows' f
            elif self._keeps_rows(X):  # f of the training rows kept between visits
                self.solver_.attach_rows(int(X.shape[0]), int(X.shape[1]))
            else:
                self.solver_.row_cache = None
            if self.solver_.config.precondition == "eigenpro":
                n = int(X.shape[0])
                idx = subsample_indices(n, min(n, EIGENPRO_SUBSAMPLE), self.seed_)
                step = max(1, int(stream.window_rows))  # window-sized pieces (out of core)
                self.solver_.X_S = xp.concatenate([
                    xp.asarray(take_rows(X, idx[i:i + step]), dtype=self.model_.blocks.dtype)
                    for i in range(0, len(idx), step)])
            self.solver_.run(batches, n_iter, self.history_, on_step=progress)
        finally:
            progress.close()
            stream.close()
            if spread is not None:
                spread.close()
                # what the fit sent and received (array payloads), for the cost model
                self.spread_ = {"workers": spread.W, "round_trips": spread.round_trips,
                                "bytes_sent": spread.bytes_sent,
                                "bytes_received": spread.bytes_received}
            self.solver_.X_S = None  # read again by the next fit: the model keeps no data
        self.n_iter_ = self.solver_.t
        self.n_blocks_ = self.model_.n_blocks

    def _row_cache_bytes(self, X) -> int:
        return RowCache.nbytes(int(X.shape[0]), self.model_.n_outputs,
                               self.model_.blocks.dtype.itemsize)

    def _keeps_rows(self, X) -> bool:
        """Whether the fit keeps f of every training row between visits (``solvers.row_cache``):
        always for in-memory X, and for on-disk X when the cache takes at most
        ROW_CACHE_BUDGET_SHARE of ``engine={"memory_budget": ...}``; else each step evaluates
        its batch over all blocks (the same model up to rounding, at a cost that grows with the
        step count)."""
        if not self.solver_.use_row_cache:
            return False
        budget = self.engine_.memory_budget
        if budget is None or is_in_memory(X):
            return True
        return self._row_cache_bytes(X) <= ROW_CACHE_BUDGET_SHARE * budget * MB

    def _work_bytes(self, X) -> int:
        """A step's working set (for the memory budget): the batch rows, one group of blocks'
        features for f(batch) (``solvers.dsg.group_bytes``) and the new block's features with
        its gradient product. Independent of the step count: the window it sizes must be the
        same in every warm-started segment, or the batches would change."""
        blocks, B = self.model_.blocks, min(self._batch(), int(X.shape[0]))
        item = blocks.dtype.itemsize
        group = blocks.group_size(B, group_bytes(blocks.xp)) * B * blocks.F * item
        work = B * (int(X.shape[1]) + 2 * blocks.F) * item + group
        if self._keeps_rows(X):
            work += self._row_cache_bytes(X)
        if self.solver_.config.precondition == "eigenpro":
            # the subsample rows and their block features; covariance and eigenvectors (float64)
            M, F = min(int(X.shape[0]), EIGENPRO_SUBSAMPLE), blocks.F
            work += M * (int(X.shape[1]) + F) * item + 3 * F * F * 8
        return work

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


class DSGRegressor(RegressorTargets, RegressorMixin, _DSGBase):
    """Kernel regression by doubly stochastic gradients (paper 003) or its UDSG/CDSG
    variants.

    ``loss``: "square" (default; kernel ridge regression), "epsilon_insensitive" (SVR), "huber",
    "quantile".  With square loss the objective (nu/2)||f||^2 + E[0.5 (f(x) - y)^2] equals
    scikit-learn's ``KernelRidge`` with ``alpha = n * nu``.

    Parameters
    ----------
    variant : {"dsg", "udsg", "cdsg"}, default="dsg"
        DSG (paper 003), UDSG (reuses old feature blocks) or CDSG (line search; paper 000).
    kernel : {"gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52"}, default="gaussian"
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        Kernel width sigma. "auto": held-out selection on a slice among the median and narrower
        multiples (``kernels.selection``; README "Defaults, and the rule behind each"); "median":
        the median trick ("median*4" for a multiple); or a positive number. Fitted: ``bandwidth_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the RKHS regularisation (nu/2)||f||^2 of the averaged objective. "auto" = alpha / n
        with alpha (= KernelRidge's alpha) chosen with the bandwidth: nu scales as 1/n like SVM's
        lambda = 1 / (C n), where a fixed nu over-regularises large n. "x/n": nu = x / n, x in the
        summed-loss scale (KernelRidge's alpha). The same ``reg`` means the same nu in every
        kernelscale estimator (``docs/architecture.md``). Fitted: ``reg_``.
    loss : str or None, default=None
        Loss name (estimator-specific choices, see the class summary).
    loss_params : dict or None, default=None
        The loss's parameters (epsilon, delta, tau, nu_o).
    batch_size : "auto" or int, default="auto"
        B, points per iteration; at most n. "auto" = ``auto_batch_size(n, F)``: 4 F, or
        16 sqrt(n) where larger (paper 003's B >> F). The value used is ``batch_size_``.
    block_size : "auto" or int, default="auto"
        F, random features per new block. "auto" = ``auto_block_size(n, d)``: max(4 sqrt(n), d / 2)
        rounded to a power of two, from 256 to 4,096. The value used is ``block_size_``.
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Iterations per ``fit`` call. "auto" = ``auto_iterations(n, B, s)``: four epochs,
        ceil(4 n / B), and at least 32, for DSG and CDSG; for UDSG, which draws a new block in a
        share s = G / (G + U) of its steps, that count / sqrt(s), the same cost as DSG's (paper
        000's comparison at equal time). No upper bound: every row is seen at least four times
        whatever n. Cost: iteration t evaluates f on the batch over all its blocks, O(m_t B F d)
        with m_t blocks (DSG: m_t = t; UDSG: G / (G + U) of t; CDSG: as many as its check adds),
        so E epochs of DSG cost O(E^2 n^2 F d / (2 B)): with the "auto" sizes O(n^2 d) up to
        n ~ 10^6 (B = 4 F) and O(n^1.5 d) beyond (F capped, B ~ sqrt(n)). "K epochs" =
        ceil(K ceil(n / B)) iterations. The value used is ``n_iter_per_fit_``.
    eta0 : "auto" or float, default="auto"
        Step size gamma_t = eta0 / (1 + t / t0) (see ``solvers.dsg.DSGConfig.step_size``).
        "auto" is the largest stable step: EigenPro's mini-batch bound
        B / (1 + (B - 1) lambda_1 + B nu) for plain steps, the same with the preconditioned
        beta and top eigenvalue (measured on the first batch) for "eigenpro" steps, and
        1 / (1 + nu) for block Newton steps.
    step_schedule : str, default="inverse"
        Step schedule (``solvers.dsg.DSGConfig.step_size``).
    t0 : "auto" or float, default="auto"
        Offset of the step schedule. "auto": one epoch, ceil(n / B) iterations, for the EigenPro
        step (the regression default), so that its large step halves after every row has been
        seen once and thirds after two (at a constant step the batch and random-feature noise of
        B = 4 F batches does not settle); 100 for the block Newton step, which fits each block
        to its batch. Measurements: ``benchmarks/results/dsg-defaults.md``. The value used is
        ``t0_``.
    n_new, n_reuse : int, default=1
        G and U of UDSG.
    precondition : "auto", "eigenpro" or bool, default="auto"
        How each block step is preconditioned. True: by (cov(phi_k) + (nu + tr cov / B) I)^-1, a
        Newton step of the square loss in the block's span (the DSG authors' code). "eigenpro":
        by the EigenPro preconditioner of the block's features on a fixed subsample of
        ``EIGENPRO_SUBSAMPLE`` rows (paper 004; see ``solvers.dsg.DSGSolver._eigenpro``), which
        flattens only the top of the spectrum. False: the plain step of paper 003. Both
        preconditioned steps precondition the loss gradient but not the shrink 1 - gamma nu, so
        their fixed point is not the minimiser of the objective above (block Newton: the ridge
        fit of a block-whitened kernel; "eigenpro": flattened directions shrunk towards
        lambda_{q+1}); only False minimises it exactly.
        "auto" = True for classification losses, "eigenpro" for regression losses when
        ``batch_size >= EIGENPRO_MIN_BATCH`` (128; smaller batches make its larger step too noisy)
        and the plain step below that. Why: the plain
        step progresses along the kernel's small eigendirections at a rate lambda_i / lambda_1
        per unit step, too slowly in one epoch on every real set tried. The block Newton step
        removes that, but it fits each batch within one block (a different ridge problem),
        which classification tolerates and the square loss does not; EigenPro's milder
        flattening moves the square loss's problem less and speeds it up. Reasons and measurements:
        ``docs/library.md``. Fitted: ``precondition_``.
    max_step_ratio : "auto", float or None, default="auto"
        CDSG's cap on the line-search step in units of gamma_t; None (the paper's method) caps it
        only at the stability limit eta0. "auto": 1 with the EigenPro step, whose gamma_t is
        already at the stability limit of a block (a reused block stepped at eta0 overshot:
        protein's test RMSE swung between 0.54 and 0.98 from one stopping point to the next), None
        with the block Newton and plain steps. Fitted: ``max_step_ratio_``.
    random_state : int, RandomState or None, default=None
        Seed of the feature blocks (block i is regenerated from (seed, i)), of the batch order
        and of the "auto" selection's subsample.
    warm_start : bool, default=False
        Each ``fit`` continues the fitted model for another ``n_iter`` iterations on the same batch
        sequence (a run cut into segments gives the same model as one long fit).
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk
        X ``window_rows`` / ``memory_budget`` (MB for two windows, chunk decoding and the batch's
        features; picks ``window_rows``). In-memory X keeps its default window (a global
        shuffle). None: the ``engine_context`` / ``set_engine`` options. Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    model_ : solvers.dsg.DSGModel
        The fitted function f (feature blocks and coefficients).
    solver_ : solvers.dsg.DSGSolver
    kernel_ : the kernel used; ``bandwidth_`` its sigma.
    reg_ : float
        nu used.
    precondition_ : bool or "eigenpro"
    n_iter_ : int
        Iterations so far (over all ``fit`` / ``partial_fit`` calls).
    n_iter_per_fit_ : int
    n_blocks_ : int
        Feature blocks in f.
    batch_size_, block_size_ : int
        B (at most n) and F used.
    t0_ : float
        The step schedule's offset used.
    max_step_ratio_ : float or None
        CDSG's step cap used (``max_step_ratio``).
    history_ : dict
        Per-iteration records: iter, time, objective (batch objective), step, n_blocks.
    y_offset_ : ndarray of shape (n_outputs,)
        The training mean of y: f is fitted to y - y_offset_ and every prediction adds it
        back (``estimators._targets``).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_regression
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

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; also an on-disk zarr / dask array, read in windows.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.

        Returns
        -------
        self
        """
        X, Y = self._fit_targets(X, y)
        if self._fresh():
            self._init_model(X, Y.shape[1], self._loss_name(), Y)
        self._train(X, Y, lambda yb, xp: xp.asarray(yb, dtype=self.model_.blocks.dtype),
                    self._fit_iters(), self.seed_)
        return self

    def partial_fit(self, X, y):
        """One pass (ceil(n / batch_size) iterations) over (X, y), continuing the fitted model."""
        fresh = not hasattr(self, "model_")
        if fresh:
            X, y = check_X_y(self, X, y, regression=True)
        else:
            X = check_X(self, X, reset=False)
        Y = self._targets(y, fresh)  # the first call's y_offset_ stays
        if fresh:
            self._init_model(X, Y.shape[1], self._loss_name(), Y)
        n_iter = -(-X.shape[0] // self._batch())
        # a fresh batch order for every call, still a pure function of (seed, iterations so far)
        self._train(X, Y, lambda yb, xp: xp.asarray(yb, dtype=self.model_.blocks.dtype),
                    n_iter, self.seed_ + self.solver_.t + 1)
        return self


class DSGClassifier(LabelsFromScores, ClassifierMixin, _DSGBase):
    """Kernel classification by doubly stochastic gradients (paper 003) or UDSG/CDSG
    (paper 000).

    ``loss``: None picks "logistic" for two classes and "softmax" for more; "hinge" (SVM) and
    "squared_hinge" work one-vs-all. ``predict_proba`` exists for logistic and softmax.

    Parameters
    ----------
    variant : {"dsg", "udsg", "cdsg"}, default="dsg"
        DSG (paper 003), UDSG (reuses old feature blocks) or CDSG (line search; paper 000).
    kernel : {"gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52"}, default="gaussian"
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        Kernel width sigma. "auto": held-out selection on a slice among the median and narrower
        multiples (``kernels.selection``; README "Defaults, and the rule behind each"); "median":
        the median trick ("median*4" for a multiple); or a positive number. Fitted: ``bandwidth_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the RKHS regularisation (nu/2)||f||^2 of the averaged objective. "auto" = alpha / n
        with alpha (= KernelRidge's alpha) chosen with the bandwidth: nu scales as 1/n like SVM's
        lambda = 1 / (C n), where a fixed nu over-regularises large n. "x/n": nu = x / n, x in the
        summed-loss scale (KernelRidge's alpha). The same ``reg`` means the same nu in every
        kernelscale estimator (``docs/architecture.md``). Fitted: ``reg_``.
    loss : str or None, default=None
        Loss name (estimator-specific choices, see the class summary).
    loss_params : dict or None, default=None
        The loss's parameters (epsilon, delta, tau, nu_o).
    batch_size : "auto" or int, default="auto"
        B, points per iteration; at most n. "auto" = ``auto_batch_size(n, F)``: 4 F, or
        16 sqrt(n) where larger (paper 003's B >> F). The value used is ``batch_size_``.
    block_size : "auto" or int, default="auto"
        F, random features per new block. "auto" = ``auto_block_size(n, d)``: max(4 sqrt(n), d / 2)
        rounded to a power of two, from 256 to 4,096. The value used is ``block_size_``.
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Iterations per ``fit`` call. "auto" = ``auto_iterations(n, B, s)``: four epochs,
        ceil(4 n / B), and at least 32, for DSG and CDSG; for UDSG, which draws a new block in a
        share s = G / (G + U) of its steps, that count / sqrt(s), the same cost as DSG's (paper
        000's comparison at equal time). No upper bound: every row is seen at least four times
        whatever n. Cost: iteration t evaluates f on the batch over all its blocks, O(m_t B F d)
        with m_t blocks (DSG: m_t = t; UDSG: G / (G + U) of t; CDSG: as many as its check adds),
        so E epochs of DSG cost O(E^2 n^2 F d / (2 B)): with the "auto" sizes O(n^2 d) up to
        n ~ 10^6 (B = 4 F) and O(n^1.5 d) beyond (F capped, B ~ sqrt(n)). "K epochs" =
        ceil(K ceil(n / B)) iterations. The value used is ``n_iter_per_fit_``.
    eta0 : "auto" or float, default="auto"
        Step size gamma_t = eta0 / (1 + t / t0) (see ``solvers.dsg.DSGConfig.step_size``).
        "auto" is the largest stable step: EigenPro's mini-batch bound
        B / (1 + (B - 1) lambda_1 + B nu) for plain steps, the same with the preconditioned
        beta and top eigenvalue (measured on the first batch) for "eigenpro" steps, and
        1 / (1 + nu) for block Newton steps.
    step_schedule : str, default="inverse"
        Step schedule (``solvers.dsg.DSGConfig.step_size``).
    t0 : "auto" or float, default="auto"
        Offset of the step schedule. "auto": one epoch, ceil(n / B) iterations, for the EigenPro
        step (the regression default), so that its large step halves after every row has been
        seen once and thirds after two (at a constant step the batch and random-feature noise of
        B = 4 F batches does not settle); 100 for the block Newton step, which fits each block
        to its batch. Measurements: ``benchmarks/results/dsg-defaults.md``. The value used is
        ``t0_``.
    n_new, n_reuse : int, default=1
        G and U of UDSG.
    precondition : "auto", "eigenpro" or bool, default="auto"
        How each block step is preconditioned. True: by (cov(phi_k) + (nu + tr cov / B) I)^-1, a
        Newton step of the square loss in the block's span (the DSG authors' code). "eigenpro":
        by the EigenPro preconditioner of the block's features on a fixed subsample of
        ``EIGENPRO_SUBSAMPLE`` rows (paper 004; see ``solvers.dsg.DSGSolver._eigenpro``), which
        flattens only the top of the spectrum. False: the plain step of paper 003. Both
        preconditioned steps precondition the loss gradient but not the shrink 1 - gamma nu, so
        their fixed point is not the minimiser of the objective above (block Newton: the ridge
        fit of a block-whitened kernel; "eigenpro": flattened directions shrunk towards
        lambda_{q+1}); only False minimises it exactly.
        "auto" = True for classification losses, "eigenpro" for regression losses when
        ``batch_size >= EIGENPRO_MIN_BATCH`` (128; smaller batches make its larger step too noisy)
        and the plain step below that. Why: the plain
        step progresses along the kernel's small eigendirections at a rate lambda_i / lambda_1
        per unit step, too slowly in one epoch on every real set tried. The block Newton step
        removes that, but it fits each batch within one block (a different ridge problem),
        which classification tolerates and the square loss does not; EigenPro's milder
        flattening moves the square loss's problem less and speeds it up. Reasons and measurements:
        ``docs/library.md``. Fitted: ``precondition_``.
    max_step_ratio : "auto", float or None, default="auto"
        CDSG's cap on the line-search step in units of gamma_t; None (the paper's method) caps it
        only at the stability limit eta0. "auto": 1 with the EigenPro step, whose gamma_t is
        already at the stability limit of a block (a reused block stepped at eta0 overshot:
        protein's test RMSE swung between 0.54 and 0.98 from one stopping point to the next), None
        with the block Newton and plain steps. Fitted: ``max_step_ratio_``.
    random_state : int, RandomState or None, default=None
        Seed of the feature blocks (block i is regenerated from (seed, i)), of the batch order
        and of the "auto" selection's subsample.
    warm_start : bool, default=False
        Each ``fit`` continues the fitted model for another ``n_iter`` iterations on the same batch
        sequence (a run cut into segments gives the same model as one long fit).
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk
        X ``window_rows`` / ``memory_budget`` (MB for two windows, chunk decoding and the batch's
        features; picks ``window_rows``). In-memory X keeps its default window (a global
        shuffle). None: the ``engine_context`` / ``set_engine`` options. Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    model_ : solvers.dsg.DSGModel
        The fitted function f (feature blocks and coefficients).
    solver_ : solvers.dsg.DSGSolver
    kernel_ : the kernel used; ``bandwidth_`` its sigma.
    reg_ : float
        nu used.
    precondition_ : bool or "eigenpro"
    n_iter_ : int
        Iterations so far (over all ``fit`` / ``partial_fit`` calls).
    n_iter_per_fit_ : int
    n_blocks_ : int
        Feature blocks in f.
    batch_size_, block_size_ : int
        B (at most n) and F used.
    t0_ : float
        The step schedule's offset used.
    max_step_ratio_ : float or None
        CDSG's step cap used (``max_step_ratio``).
    history_ : dict
        Per-iteration records: iter, time, objective (batch objective), step, n_blocks.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
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
        X : array-like of shape (n_samples, n_features)
            Training data; also an on-disk zarr / dask array, read in windows.
        y : array-like of shape (n_samples,)
            Class labels; also an on-disk array, read chunk by chunk.

        Returns
        -------
        self
        """
        X, y = check_X_y(self, X, y, regression=False, lazy_labels=True)
        idx = self._setup(X, y) if self._fresh() else self._coder.index_of(y)
        del y  # labels loaded here (not the caller's) are not kept through training
        self._train(X, idx, lambda yb, xp: self._coder.encode_index(yb, xp, self.model_.blocks.dtype),
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
            X = check_X(self, X, reset=False)
            idx = self._coder.index_of(y)
        n_iter = -(-X.shape[0] // self._batch())
        self._train(X, idx, lambda yb, xp: self._coder.encode_index(yb, xp, self.model_.blocks.dtype),
                    n_iter, self.seed_ + self.solver_.t + 1)
        return self

    def decision_function(self, X):
        """Decision scores f(x) (paper 003, Alg. 2); positive favours ``classes_[1]`` (binary).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

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


class DSGOneClass(OutlierMixin, _DSGBase):
    """Novelty detection by DSG with the one-class loss (paper 003, section 4;
    ``losses.Novelty``).

    ``nu_o`` (in ``loss_params``, default 0.1) is the fraction of training points left outside.
    ``decision_function`` is f(x) - rho: negative for outliers; ``predict`` gives +1 / -1.
    ``loss`` is fixed to "novelty".

    Parameters
    ----------
    variant : {"dsg", "udsg", "cdsg"}, default="dsg"
        DSG (paper 003), UDSG (reuses old feature blocks) or CDSG (line search; paper 000).
    kernel : {"gaussian", "laplacian", "cauchy", "matern12", "matern32", "matern52"}, default="gaussian"
    bandwidth : "auto", "median", "median*<f>" or float, default="auto"
        Kernel width sigma. "auto": held-out selection on a slice among the median and narrower
        multiples (``kernels.selection``; README "Defaults, and the rule behind each"); "median":
        the median trick ("median*4" for a multiple); or a positive number. Fitted: ``bandwidth_``.
    reg : "auto", float >= 0 or "x/n", default="auto"
        nu, the RKHS regularisation (nu/2)||f||^2 of the averaged objective. "auto" = alpha / n
        with alpha (= KernelRidge's alpha) chosen with the bandwidth: nu scales as 1/n like SVM's
        lambda = 1 / (C n), where a fixed nu over-regularises large n. "x/n": nu = x / n, x in the
        summed-loss scale (KernelRidge's alpha). The same ``reg`` means the same nu in every
        kernelscale estimator (``docs/architecture.md``). Fitted: ``reg_``.
    loss : str or None, default=None
        Loss name (estimator-specific choices, see the class summary).
    loss_params : dict or None, default=None
        The loss's parameters (epsilon, delta, tau, nu_o).
    batch_size : "auto" or int, default="auto"
        B, points per iteration; at most n. "auto" = ``auto_batch_size(n, F)``: 4 F, or
        16 sqrt(n) where larger (paper 003's B >> F). The value used is ``batch_size_``.
    block_size : "auto" or int, default="auto"
        F, random features per new block. "auto" = ``auto_block_size(n, d)``: max(4 sqrt(n), d / 2)
        rounded to a power of two, from 256 to 4,096. The value used is ``block_size_``.
    n_iter : "auto", int >= 1 or "K epochs", default="auto"
        Iterations per ``fit`` call. "auto" = ``auto_iterations(n, B, s)``: four epochs,
        ceil(4 n / B), and at least 32, for DSG and CDSG; for UDSG, which draws a new block in a
        share s = G / (G + U) of its steps, that count / sqrt(s), the same cost as DSG's (paper
        000's comparison at equal time). No upper bound: every row is seen at least four times
        whatever n. Cost: iteration t evaluates f on the batch over all its blocks, O(m_t B F d)
        with m_t blocks (DSG: m_t = t; UDSG: G / (G + U) of t; CDSG: as many as its check adds),
        so E epochs of DSG cost O(E^2 n^2 F d / (2 B)): with the "auto" sizes O(n^2 d) up to
        n ~ 10^6 (B = 4 F) and O(n^1.5 d) beyond (F capped, B ~ sqrt(n)). "K epochs" =
        ceil(K ceil(n / B)) iterations. The value used is ``n_iter_per_fit_``.
    eta0 : "auto" or float, default="auto"
        Step size gamma_t = eta0 / (1 + t / t0) (see ``solvers.dsg.DSGConfig.step_size``).
        "auto" is the largest stable step: EigenPro's mini-batch bound
        B / (1 + (B - 1) lambda_1 + B nu) for plain steps, the same with the preconditioned
        beta and top eigenvalue (measured on the first batch) for "eigenpro" steps, and
        1 / (1 + nu) for block Newton steps.
    step_schedule : str, default="inverse"
        Step schedule (``solvers.dsg.DSGConfig.step_size``).
    t0 : "auto" or float, default="auto"
        Offset of the step schedule. "auto": one epoch, ceil(n / B) iterations, for the EigenPro
        step (the regression default), so that its large step halves after every row has been
        seen once and thirds after two (at a constant step the batch and random-feature noise of
        B = 4 F batches does not settle); 100 for the block Newton step, which fits each block
        to its batch. Measurements: ``benchmarks/results/dsg-defaults.md``. The value used is
        ``t0_``.
    n_new, n_reuse : int, default=1
        G and U of UDSG.
    precondition : "auto", "eigenpro" or bool, default="auto"
        How each block step is preconditioned. True: by (cov(phi_k) + (nu + tr cov / B) I)^-1, a
        Newton step of the square loss in the block's span (the DSG authors' code). "eigenpro":
        by the EigenPro preconditioner of the block's features on a fixed subsample of
        ``EIGENPRO_SUBSAMPLE`` rows (paper 004; see ``solvers.dsg.DSGSolver._eigenpro``), which
        flattens only the top of the spectrum. False: the plain step of paper 003. Both
        preconditioned steps precondition the loss gradient but not the shrink 1 - gamma nu, so
        their fixed point is not the minimiser of the objective above (block Newton: the ridge
        fit of a block-whitened kernel; "eigenpro": flattened directions shrunk towards
        lambda_{q+1}); only False minimises it exactly.
        "auto" = True for classification losses, "eigenpro" for regression losses when
        ``batch_size >= EIGENPRO_MIN_BATCH`` (128; smaller batches make its larger step too noisy)
        and the plain step below that. Why: the plain
        step progresses along the kernel's small eigendirections at a rate lambda_i / lambda_1
        per unit step, too slowly in one epoch on every real set tried. The block Newton step
        removes that, but it fits each batch within one block (a different ridge problem),
        which classification tolerates and the square loss does not; EigenPro's milder
        flattening moves the square loss's problem less and speeds it up. Reasons and measurements:
        ``docs/library.md``. Fitted: ``precondition_``.
    max_step_ratio : "auto", float or None, default="auto"
        CDSG's cap on the line-search step in units of gamma_t; None (the paper's method) caps it
        only at the stability limit eta0. "auto": 1 with the EigenPro step, whose gamma_t is
        already at the stability limit of a block (a reused block stepped at eta0 overshot:
        protein's test RMSE swung between 0.54 and 0.98 from one stopping point to the next), None
        with the block Newton and plain steps. Fitted: ``max_step_ratio_``.
    random_state : int, RandomState or None, default=None
        Seed of the feature blocks (block i is regenerated from (seed, i)), of the batch order
        and of the "auto" selection's subsample.
    warm_start : bool, default=False
        Each ``fit`` continues the fitted model for another ``n_iter`` iterations on the same batch
        sequence (a run cut into segments gives the same model as one long fit).
    engine : dict, kernelscale.engine.Engine or None, default=None
        Where and how to compute (``kernelscale.engine``): ``device``, ``dtype``, and for on-disk
        X ``window_rows`` / ``memory_budget`` (MB for two windows, chunk decoding and the batch's
        features; picks ``window_rows``). In-memory X keeps its default window (a global
        shuffle). None: the ``engine_context`` / ``set_engine`` options. Fitted: ``engine_``.
    verbose : int, default=0
        0: silent. 1: a progress line on stderr every ~10 % of a fit's iterations and at the end
        (iteration, elapsed seconds, batch objective); a tqdm bar instead on a terminal. Does not
        change the fitted model.

    Attributes
    ----------
    offset_ : float
        rho, the threshold on f.
    model_ : solvers.dsg.DSGModel
        The fitted function f (feature blocks and coefficients).
    solver_ : solvers.dsg.DSGSolver
    kernel_ : the kernel used; ``bandwidth_`` its sigma.
    reg_ : float
        nu used.
    precondition_ : bool or "eigenpro"
    n_iter_ : int
        Iterations so far (over all ``fit`` / ``partial_fit`` calls).
    n_iter_per_fit_ : int
    n_blocks_ : int
        Feature blocks in f.
    batch_size_, block_size_ : int
        B (at most n) and F used.
    t0_ : float
        The step schedule's offset used.
    max_step_ratio_ : float or None
        CDSG's step cap used (``max_step_ratio``).
    history_ : dict
        Per-iteration records: iter, time, objective (batch objective), step, n_blocks.
    n_features_in_ : int

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
        """Fit the model on (X, y) with ``n_iter`` iterations (continued with ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; also an on-disk zarr / dask array, read in windows.
        y : ignored

        Returns
        -------
        self
        """
        X = check_X(self, X, reset=True)
        if self._fresh():
            self._init_model(X, 1, self._loss_name(), np.zeros(X.shape[0]))
        self._train(X, None, lambda yb, xp: None, self._fit_iters(), self.seed_)
        self.offset_ = float(self.loss_.rho)
        return self

    def decision_function(self, X):
        """f(x) - rho: negative for outliers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)[:, 0] - self.loss_.rho

    def score_samples(self, X):
        """f(x) without the offset (``decision_function`` + ``offset_``); lower is more abnormal.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)[:, 0]

    def predict(self, X):
        """+1 for inliers (f(x) >= rho), -1 for outliers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return np.where(self.decision_function(X) >= 0, 1, -1)
