"""Doubly stochastic functional gradients: DSG (Dai, Xie, He, Liang, Raj, Balcan, Song, "Scalable
Kernel Methods via Doubly Stochastic Gradients", NIPS 2014, Alg. 1-2) and the variants that reuse
old random features, UDSG and CDSG ("Fast Doubly Stochastic Kernel Machines", Alg. 3, and Alg. 4
with eqs. 6-9).

The model is f(x) = sum_j phi_j(x) alpha_j, phi_j the j-th seeded block of F random Fourier features
(``kernels.FourierBlocks``) and alpha_j an F x C coefficient block. Iteration t (1-based), batch of B:

1. u = f(X_b) with all current blocks (Alg. 2); a row seen before adds the changes since its
   last visit to its f then (``row_cache``) instead of evaluating every block again;
2. g = loss'(u, Y_b)  (B x C);
3. choose the block k to update and its step s (DSG: a new block, s = gamma_t; UDSG: a new block in
   G of every G+U iterations, else a uniformly chosen old one; CDSG: the checking rule below);
4. shrink every block, alpha_j <- (1 - s nu) alpha_j — done lazily with one running scale factor;
5. alpha_k <- alpha_k - s * P^-1 (1/B) phi_k(X_b)^T g, with P = I (the plain step), the block
   EigenPro preconditioner (``precondition="eigenpro"``) or, for the block Newton step
   (``precondition=True``), the whole functional gradient preconditioned
   (``DSGSolver._newton_direction``).

Step size gamma_t = eta0 / (1 + t / t0) ("inverse"), eta0 / t ("theory", needs eta0 nu in (1, 2)),
eta0 / sqrt(1 + t / t0) ("inverse_sqrt") or eta0 ("constant"). ``eta0="auto"``: the largest
stable mini-batch step of EigenPro (Ma, Belkin, "Diving into the Shallows: a Computational
Perspective on Large-Scale Shallow Learning", NIPS 2017, section 4) with the shrink term,
``DSGSolver._auto_eta0``, capped by ``DSGSolver._noise_cap``; with "eigenpro"
``DSGSolver._eigenpro_eta0`` (also capped); with ``precondition=True`` the step of
``DSGSolver._newton_direction``.

CDSG checking rule: our reading of eq. (9) of "Fast Doubly Stochastic Kernel Machines". For block
k let beta_k be the running sum of -step * mean-gradient put into it (shrunk like alpha),
g_bar = (1/B) sum_b loss'(u_b, y_b), M a bound on |loss'| and sigma_k^2 the variance of the block's
kernel estimate phi_k(x)^T phi_k(x') - k(x, x') (estimated on the batch that created it).
Reusing block k with step eta keeps the DSG error bound when

    2 ||beta_k - eta g_bar||^2 + 2 eta^2 M^2 sigma_k^2 / B  <=  ||beta_k||^2 + gamma_t^2 ||g_bar||^2,

a quadratic inequality a eta^2 + b eta + c <= 0 with a = 2||g||^2 + 2 M^2 sigma_k^2 / B,
b = -4 beta_k.g, c = ||beta_k||^2 - gamma_t^2 ||g||^2. Its largest root is the expected line-search
step eta_k. With k* = argmax eta_k: if eta_k* < gamma_t (or no root is real) a new block is drawn,
otherwise block k* is updated with step min(eta_k*, cap). The cap is eta0, the largest stable step,
with ``max_step_ratio=None`` (the paper's method), else max_step_ratio * gamma_t (1: CDSG only
saves blocks); with nu > 0 it is at most 0.5 / nu, so that the shrink factor 1 - eta nu stays at
least 1/2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..backend import asarray, is_sparse, to_numpy
from ..kernels import FourierBlocks, Kernel
from ..losses import Loss
from ..rng import UDSG_REUSE, block_generator
from ._common import DivergenceWatch, is_csr_store, steps, take_rows
from .preconditioners import PrimalPreconditioner, step_size, subsample_indices
from .row_cache import RowCache

VARIANTS = ("dsg", "udsg", "cdsg")
SCHEDULES = ("inverse", "theory", "inverse_sqrt", "constant")
# bytes of the (rows, g F) feature matrix of a group of blocks in ``DSGModel.decision`` (at least
# one block): fixed, so that a model does not depend on the memory budget (docs/design.md,
# "DSG's block groups"); ``work_bytes`` counts it
GROUP_BYTES = 2 * 2**20
GPU_GROUP_BYTES = 64 * 2**20  # the same on a GPU
SCALE_FLOOR = 1e-100  # the lazy shrink factor is folded into the coefficients below this
RIDGE_FACTOR = 0.01  # the block Newton step's ridge is at least nu + RIDGE_FACTOR tr(cov) / B
NEWTON_DF_SHARE = 0.5  # ... and keeps its degrees of freedom at most this share of B
NEWTON_RIDGE_GROWTH = 0.5  # ... and grows as rho_t >= nu t s_t / NEWTON_RIDGE_GROWTH
NOISE_SHARE = 1.0  # noise of all plain steps over the objective of f = 0, at most (``_noise_cap``)
EIGENPRO_BIAS = 0.01  # largest relative change of the fixed point "eigenpro" may cause


def group_bytes(xp) -> int:
    """Feature-matrix bytes per group of blocks in ``DSGModel.decision`` on namespace ``xp``."""
    return GROUP_BYTES if xp is np else GPU_GROUP_BYTES


@dataclass
class DSGConfig:
    """Settings of one DSG / UDSG / CDSG run (the module docstring), taken as given (the
    estimators check them)."""

    variant: str = "dsg"
    block_size: int = 256
    reg: float = 1e-4
    eta0: float | str = "auto"
    schedule: str = "inverse"
    t0: float = 100.0
    n_new: int = 1  # G of UDSG
    n_reuse: int = 1  # U of UDSG
    precondition: bool | str = False  # True: block Newton step; "eigenpro": block EigenPro step
    max_step_ratio: float | None = None  # None: capped at the stability limit eta0 only
    grad_bound: float | None = None  # M of CDSG; None: the loss's own bound, else running max

    def step_size(self, t: int, eta0: float) -> float:
        """gamma_t for 1-based iteration t (the schedules of the module docstring)."""
        if self.schedule == "inverse":
            return eta0 / (1.0 + t / self.t0)
        if self.schedule == "theory":
            return eta0 / t
        if self.schedule == "inverse_sqrt":
            return eta0 / math.sqrt(1.0 + t / self.t0)
        return eta0


# -- "auto" settings: the rules (reasons and measurements: docs/design.md) ----------------------
AUTO_BLOCK_RANGE = (256, 4096)  # F: the smallest and largest blocks of Dai et al. 2014
BATCH_PER_BLOCK = 4  # B >= 4 F
AUTO_EPOCHS = 4
MIN_AUTO_ITERATIONS = 32
DEFAULT_T0 = 100.0  # t0 where the schedule does not average the noise (``auto_settings``)
EIGENPRO_MIN_BATCH = 128  # regression's "auto" takes the EigenPro step from this batch size on
# ... and the block Newton step from the smallest "auto" batch on, where B rows estimate an F x F
# block covariance well enough for a full step on the square loss (unbounded loss', unlike
# classification's)
NEWTON_MIN_BATCH = BATCH_PER_BLOCK * AUTO_BLOCK_RANGE[0]
EIGENPRO_SUBSAMPLE = 2000  # rows whose block covariance gives the "eigenpro" preconditioner


def _pow2(x: float) -> int:
    return 2 ** int(round(math.log2(max(1.0, x))))


def auto_block_size(n: int, d: int = 1) -> int:
    """F for ``block_size="auto"``: max(4 sqrt(n), d / 2) rounded to a power of two, within
    ``AUTO_BLOCK_RANGE``."""
    lo, hi = AUTO_BLOCK_RANGE
    want = max(4.0 * math.sqrt(max(1, int(n))), int(d) / 2)
    return int(min(hi, max(lo, _pow2(want))))


def auto_batch_size(n: int, block_size: int) -> int:
    """B for ``batch_size="auto"``: max(4 F, 16 sqrt(n) rounded to a power of two), at most n."""
    n = max(1, int(n))
    return int(min(n, max(BATCH_PER_BLOCK * int(block_size), _pow2(16.0 * math.sqrt(n)))))


def auto_sizes(n: int, d: int, block_size="auto", batch_size="auto") -> tuple[int, int]:
    """(F, B) for ``block_size`` / ``batch_size``, each "auto" or a number."""
    F = auto_block_size(n, d) if block_size == "auto" else int(block_size)
    B = auto_batch_size(n, F) if batch_size == "auto" else int(batch_size)
    return F, B


def auto_iterations(n: int, batch_size: int, new_share: float = 1.0) -> int:
    """T for ``n_iter="auto"``: max(``MIN_AUTO_ITERATIONS``, ceil(``AUTO_EPOCHS`` n / B)) /
    sqrt(``new_share``), rounded up; no upper bound."""
    base = max(MIN_AUTO_ITERATIONS, -(-AUTO_EPOCHS * int(n) // max(1, int(batch_size))))
    if not 0.0 < new_share <= 1.0:
        raise ValueError(f"new_share={new_share!r} must be in (0, 1]")
    return int(math.ceil(base / math.sqrt(new_share) - 1e-9))


def new_block_share(variant: str, n_new: int = 1, n_reuse: int = 1) -> float:
    """Share of steps that draw a new block where it is fixed in advance: G / (G + U) for UDSG,
    1 for DSG and CDSG."""
    return int(n_new) / (int(n_new) + int(n_reuse)) if variant == "udsg" else 1.0


@dataclass(frozen=True)
class AutoSettings:
    """What the "auto" rules resolve for one fit on n rows of d columns."""

    config: DSGConfig
    batch_rows: int  # B as asked (before the cap at n)
    batch_size: int  # B used: min(B, n)
    per_epoch: int  # ceil(n / B)
    n_iter: int  # iterations per fit


def auto_settings(n: int, d: int, task: str, *, variant="dsg", block_size="auto",
                  batch_size="auto", n_iter="auto", precondition="auto", t0="auto",
                  max_step_ratio="auto", n_new=1, n_reuse=1, reg=0.0, eta0="auto",
                  schedule="inverse") -> AutoSettings:
    """Resolve every "auto" setting of a DSG-family fit (``task``: "classification",
    "regression" or "novelty"; ``n_iter`` "auto", an integer or "K epochs"):

    * F, B: ``auto_sizes``; B is capped at n;
    * ``n_iter``: ``auto_iterations(n, B, new_block_share(...))``;
    * ``precondition``: True (block Newton) for classification; for regression True at
      B >= ``NEWTON_MIN_BATCH``, "eigenpro" at B >= ``EIGENPRO_MIN_BATCH``, False below; False
      otherwise;
    * ``t0``: one of DSG's ``AUTO_EPOCHS`` "auto" passes, max(ceil(n / B),
      ``MIN_AUTO_ITERATIONS`` / ``AUTO_EPOCHS``), with the "eigenpro" step and with a
      preconditioned step on regression (the schedule averages the batches' noise), else
      ``DEFAULT_T0``;
    * ``max_step_ratio``: 1 where ``t0`` is one pass (CDSG's reused blocks keep the schedule),
      else None."""
    F, B = auto_sizes(n, d, block_size, batch_size)
    used = min(B, n)
    per_epoch = -(-n // used)
    if n_iter == "auto":
        iters = auto_iterations(n, used, new_block_share(variant, n_new, n_reuse))
    else:
        iters = steps(n_iter, per_epoch, 1)
    if precondition == "auto":
        regression = (True if used >= NEWTON_MIN_BATCH else
                      "eigenpro" if used >= EIGENPRO_MIN_BATCH else False)
        precondition = {"classification": True, "regression": regression}.get(task, False)
    else:
        precondition = precondition if precondition == "eigenpro" else bool(precondition)
    # the schedule averages the batches' noise within the "auto" passes
    averaging = precondition == "eigenpro" or (bool(precondition) and task == "regression")
    if t0 == "auto":
        t0 = float(max(per_epoch, MIN_AUTO_ITERATIONS // AUTO_EPOCHS)) if averaging else DEFAULT_T0
    if max_step_ratio == "auto":
        max_step_ratio = 1.0 if averaging else None
    config = DSGConfig(variant=variant, block_size=F, reg=reg, eta0=eta0, schedule=schedule,
                       t0=float(t0), n_new=int(n_new), n_reuse=int(n_reuse),
                       precondition=precondition,
                       max_step_ratio=None if max_step_ratio is None else float(max_step_ratio))
    return AutoSettings(config, B, used, per_epoch, iters)


class DSGModel:
    """Coefficients of f: blocks of F x C numbers and one scale factor, plus the seeds' owner.

    alpha_j = scale * coef[j]; the lazy scale makes the shrink step O(1) instead of O(m F C).
    """

    def __init__(self, blocks: FourierBlocks, n_outputs: int):
        xp, F = blocks.xp, blocks.F
        self.blocks = blocks
        self.n_outputs = int(n_outputs)
        self.coef = xp.zeros((4, F, self.n_outputs), dtype=blocks.dtype)
        self.beta = np.zeros((4, self.n_outputs))  # CDSG bookkeeping (host, tiny)
        self.sigma2 = np.zeros(4)
        self.scale = 1.0
        self.n_blocks = 0

    @property
    def xp(self):
        """Array namespace of the model: that of its feature blocks."""
        return self.blocks.xp

    def to(self, xp) -> DSGModel:
        """Move the coefficients to another array namespace (a no-op when already there)."""
        if self.xp is not xp:
            self.coef = asarray(self.coef, xp)
            self.blocks.to(xp)
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        state["coef"] = np.array(to_numpy(self.coef[: self.n_blocks]))
        state["beta"] = self.beta[: self.n_blocks].copy()
        state["sigma2"] = self.sigma2[: self.n_blocks].copy()
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.n_blocks == 0:  # keep room for the next block
            self.coef = np.zeros((4, self.blocks.F, self.n_outputs), dtype=self.blocks.dtype)
            self.beta, self.sigma2 = np.zeros((4, self.n_outputs)), np.zeros(4)

    def new_block(self) -> int:
        """Append a zero coefficient block (doubling the storage when full); returns its index."""
        cap = self.coef.shape[0]
        if self.n_blocks >= cap:
            new = self.xp.zeros((2 * cap,) + self.coef.shape[1:], dtype=self.coef.dtype)
            new[:cap] = self.coef
            self.coef = new
            self.beta = np.concatenate([self.beta, np.zeros_like(self.beta)])
            self.sigma2 = np.concatenate([self.sigma2, np.zeros_like(self.sigma2)])
        self.n_blocks += 1
        return self.n_blocks - 1

    def shrink(self, factor: float) -> float:
        """alpha_j <- factor * alpha_j for all j, in O(1) (renormalised when the scale underflows).
        Returns the factor the stored coefficients were multiplied by (1 unless renormalised)."""
        self.scale *= factor
        if self.scale < SCALE_FLOOR:
            renorm = self.scale
            self.coef[: self.n_blocks] *= renorm
            self.beta[: self.n_blocks] *= renorm
            self.scale = 1.0
            return renorm
        return 1.0

    def decision(self, X, coefficient_units: bool = False):
        """f(X) = sum_j phi_j(X) alpha_j (Alg. 2): on a GPU in one fused kernel where it applies
        (``FourierBlocks.weighted_sum``), else blocks stacked into products of ``group_bytes``
        feature matrices (whole blocks; at least one). ``coefficient_units``:
        f / (scale sqrt(2 / F)), the stored coefficients' units (``row_cache``)."""
        xp = self.xp
        out = xp.zeros((X.shape[0], self.n_outputs), dtype=self.blocks.dtype)
        m = self.n_blocks
        if m == 0:
            return out
        F = self.blocks.F
        g = self.blocks.group_size(X.shape[0], group_bytes(xp))
        fused = self.blocks.weighted_sum(X, np.arange(m), self.coef[:m],
                                         np.full(m, X.shape[0]), out)
        for lo in range(0, 0 if fused else m, g):
            hi = min(m, lo + g)
            Z = self.blocks.features(X, lo, hi, scaled=False)  # sqrt(2/F) applied below
            out += Z @ self.coef[lo:hi].reshape((hi - lo) * F, self.n_outputs)
        if not coefficient_units:
            out *= self.scale * self.blocks.scale
        return out


class DSGSolver:
    """Runs DSG / UDSG / CDSG iterations on a model (see the module docstring)."""

    newton_ridge = None  # rho_0 of the block Newton step, set by its first step
    use_row_cache = True  # False: every step evaluates f on its batch over all blocks
    watch = DivergenceWatch("DSG", "set a smaller eta0, a larger t0, a larger bandwidth or reg, or "
                                   "precondition=False", smoothed=True)

    def __init__(self, model: DSGModel, kernel: Kernel, loss: Loss, config: DSGConfig, seed: int):
        self.model, self.kernel, self.loss, self.config = model, kernel, loss, config
        self.seed = int(seed)
        self.t = 0  # iterations done
        self.grad_max = 0.0  # running max of |loss'| (CDSG's M when the loss has no bound)
        self.eta0 = None if config.eta0 == "auto" else float(config.eta0)
        self.obj_start = None  # batch objective of the first iteration (divergence watch)
        self.X_S = None  # subsample rows for the "eigenpro" preconditioner (set by the estimator)
        self.horizon = 0  # iterations of the first run (the noise cap's sum for open schedules)
        self.obj_avg = self.zero_avg = None  # the watch's averages of the objective, and at f = 0
        self.row_cache = None  # per-row f between visits (``keep_rows``)

    def __getstate__(self):  # no per-row data: a resumed fit evaluates each row afresh
        state = self.__dict__.copy()
        state["row_cache"] = None
        return state

    def keep_rows(self, n_rows: int, n_features: int) -> None:
        """Keep f of the n_rows training rows between visits (``row_cache.RowCache``); a cache
        of other sizes or another device is replaced."""
        model, cache = self.model, self.row_cache
        if not self.use_row_cache:
            self.row_cache = None
        elif cache is None or not cache.fits(n_rows, model.n_outputs, n_features, model.xp,
                                             model.blocks.dtype):
            self.row_cache = RowCache(n_rows, model.n_outputs, n_features, model.xp,
                                      model.blocks.dtype, self.seed)

    def _eigenpro(self, k: int, batch: int):
        """EigenPro preconditioner P_k of block k (Ma & Belkin 2017, Algorithm EigenPro, on the
        block's features phi_k; the step alpha_k -= gamma P_k (1/B) Phi_k(X_b)^T loss'): of the
        covariance of phi_k over the fixed subsample ``X_S``, the eigenvalues above
        beta_0 / min(M, B), at most F / 4 of them and only while lambda_{q+1} >= nu /
        EIGENPRO_BIAS, are flattened to lambda_{q+1} (tau = 1)."""
        Z_S = self.model.blocks.features(self.X_S, k)
        q = min(min(Z_S.shape) - 1, Z_S.shape[1] // 4)
        return PrimalPreconditioner(Z_S, q, 1.0, self.model.xp, method="eigh",
                                    seed=self.seed, batch_size=batch,
                                    min_eigenvalue=self.config.reg / EIGENPRO_BIAS)

    def _eigenpro_eta0(self, X) -> float:
        """Step of a preconditioned block: B / (beta + (B - 1) lambda + B nu) ((S1) of
        ``preconditioners`` with the shrink term) for block 0, beta the largest over the first
        batch and the subsample, lambda the larger of the subsample's lambda_{q+1} and the top
        eigenvalue of the preconditioned covariance on the first batch (``top_eigenvalue``)."""
        if self.X_S is None:
            raise ValueError('precondition="eigenpro" needs the subsample rows (solver.X_S)')
        B = X.shape[0]
        P = self._eigenpro(0, B)
        Z = self.model.blocks.features(X, 0)
        beta = P.set_beta(Z)
        lam = max(P.lam_next, P.top_eigenvalue(Z, seed=self.seed))
        return step_size(beta, lam, B, self.config.reg)

    def _noise_cap(self, X, Y, horizon: int) -> float:
        """Largest eta0 whose random-feature noise stays bounded (docs/design.md, "DSG's block
        steps"): sqrt(NOISE_SHARE B / (sigma^2 S)), sigma^2 the variance of the block's kernel
        estimate (``_block_variance``) and S = sum_t (gamma_t / eta0)^2 over the run (t0 for
        "inverse", pi^2/6 for "theory", ``horizon`` terms otherwise); for the square loss at
        least lambda_r B / sigma^2, lambda_r = <r, K r> / ||r||^2 at f = 0 (r = Y) estimated off
        the batch's diagonal (a U-statistic)."""
        cfg = self.config
        sigma2 = max(self._block_variance(self.model.blocks.features(X, 0), X), 1e-12)
        B = X.shape[0]
        if Y is not None and self.loss.task == "regression" and B > 1:
            xp = self.model.xp
            K = self.kernel(X)
            Yc = xp.asarray(Y, dtype=K.dtype).reshape(B, -1)
            quad = float(xp.sum(Yc * (K @ Yc)) - xp.sum(xp.diagonal(K)[:, None] * Yc * Yc))
            power = float(xp.sum(Yc * Yc)) / B
            learn = max(0.0, quad / (B * (B - 1))) / max(power, 1e-300) * B / sigma2
        else:
            learn = 0.0
        if cfg.schedule == "inverse":
            S = cfg.t0
        elif cfg.schedule == "theory":
            S = math.pi ** 2 / 6
        else:
            S = sum((cfg.step_size(t, 1.0)) ** 2 for t in range(1, max(1, int(horizon)) + 1))
        return max(learn, math.sqrt(NOISE_SHARE * B / (sigma2 * S)))

    def _auto_eta0(self, X) -> float:
        """EigenPro's mini-batch step for the regularised problem, B / (1 + (B - 1) lambda_1 + B nu)
        (beta = max k(x, x) = 1), lambda_1 the top eigenvalue of block 0's feature covariance on
        this batch; gamma nu < 1 by construction."""
        B = X.shape[0]
        Z = self.model.blocks.features(X, 0)
        return step_size(1.0, float(self.model.xp.linalg.eigvalsh(Z.T @ Z / B)[-1]), B,
                         self.config.reg)

    # -- the pieces of one iteration ------------------------------------------------------
    def _choose(self, t: int, gamma: float, g_bar: np.ndarray, batch: int, stable: float):
        """(block index or None for a new one, step) per the variant's rule; ``stable``: the
        largest stable step at iteration t (CDSG's cap)."""
        cfg, model = self.config, self.model
        m = model.n_blocks
        if m == 0 or cfg.variant == "dsg":
            return None, gamma
        if cfg.variant == "udsg":  # G new blocks, then U old ones drawn uniformly
            if (t - 1) % (cfg.n_new + cfg.n_reuse) < cfg.n_new:
                return None, gamma
            return int(block_generator(self.seed, t, UDSG_REUSE).integers(m)), gamma
        # CDSG: expected line search on every old block (host arithmetic on m x C numbers)
        M = cfg.grad_bound or self.loss.lipschitz or max(self.grad_max, 1e-12)
        beta = model.beta[:m] * model.scale
        gg = float(g_bar @ g_bar)
        a = 2.0 * gg + 2.0 * M * M * model.sigma2[:m] / batch
        b = -4.0 * (beta @ g_bar)
        c = (beta * beta).sum(axis=1) - gamma * gamma * gg
        disc = b * b - 4.0 * a * c
        with np.errstate(invalid="ignore", divide="ignore"):
            eta = np.where((disc >= 0) & (a > 0), (-b + np.sqrt(np.maximum(disc, 0))) / (2 * a), -np.inf)
        k = int(np.argmax(eta))
        if not eta[k] >= gamma:
            return None, gamma
        cap = stable if cfg.max_step_ratio is None else cfg.max_step_ratio * gamma
        cap = min(cap, 0.5 / cfg.reg) if cfg.reg > 0 else cap
        return k, float(min(eta[k], cap))

    def _newton_setup(self, X) -> None:
        """rho_0 = max(nu + RIDGE_FACTOR tr C / B, ``_newton_ridge``) from block 0's covariance
        C = phi^T phi / B on the first batch, and eta0 = s / (rho_0 + nu), s = ``eta0`` in units
        of the full Newton step (1 when "auto")."""
        B, reg = X.shape[0], self.config.reg
        Z = self.model.blocks.features(X, 0)
        cov = Z.T @ Z / B
        self.newton_ridge = max(reg + RIDGE_FACTOR * float(self.model.xp.trace(cov)) / B,
                                self._newton_ridge(cov, B))
        s = 1.0 if self.config.eta0 == "auto" else float(self.config.eta0)
        self.eta0 = s / (self.newton_ridge + reg)

    def _newton_direction(self, cov, grad, rho: float):
        """rho (C + rho I)^-1 grad for C = ``cov`` (changed in place) and
        grad = phi_k(X_b)^T (g - (nu / rho) f(X_b)) / B.

        The block Newton step preconditions the whole functional gradient, regulariser included
        (Ma & Belkin, "Diving into the Shallows: a Computational Perspective on Large-Scale
        Shallow Learning", NIPS 2017, eq. 7, on the regularised objective):
        f <- f - gamma_t A_t (grad L_b + nu f) with A_t = rho_t (C + rho_t I)^-1 on block k's span
        and the identity off it. By Woodbury this is the shrink 1 - gamma_t nu of every block and

            alpha_k <- alpha_k - gamma_t rho_t (C + rho_t I)^-1 phi_k(X_b)^T g_t / B,
            g_t = loss'(f(X_b), y_b) - (nu / rho_t) f(X_b),

        whose fixed point, grad L + nu f = 0, is the plain step's for every positive definite
        A_t. gamma_t = s_t / (rho_t + nu), s_t = eta0 sched(t) the schedule in units of the full
        Newton step (sched(t) = ``DSGConfig.step_size(t, 1)``), and
        rho_t = max(rho_0, nu t sched(t) / NEWTON_RIDGE_GROWTH) (``_newton_setup``). The step
        along an eigendirection of C with eigenvalue mu >> rho_t is then s_t (the schedule
        averages the batches' noise), along one with mu << rho_t it is s_t nu / rho_t, that is
        eta0 NEWTON_RIDGE_GROWTH / t where rho_t grows (the sum diverges: every direction
        converges), and the shrink gamma_t nu is at most eta0 NEWTON_RIDGE_GROWTH / t (old blocks
        fade polynomially in t, not geometrically)."""
        xp = self.model.xp
        cov[xp.diag_indices_from(cov)] += rho
        return xp.linalg.solve(cov, rho * grad)

    def _newton_ridge(self, cov, batch: int) -> float:
        """Smallest ridge lambda with tr(C (C + lambda I)^-1) <= NEWTON_DF_SHARE * B for the first
        block's covariance C = phi^T phi / B (fixed for the run: every block has the same
        spectrum in law)."""
        e = np.clip(to_numpy(self.model.xp.linalg.eigvalsh(cov)).astype(np.float64), 0, None)
        target = NEWTON_DF_SHARE * batch
        df = lambda lam: float(np.sum(e / (e + lam)))  # noqa: E731
        if np.count_nonzero(e > 0) <= target:
            return 0.0
        lo, hi = 0.0, float(e.max())
        while df(hi) > target:
            lo, hi = hi, 2 * hi
        for _ in range(60):  # bisection on a monotone df
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if df(mid) > target else (lo, mid)
        return hi

    def _block_variance(self, Z, X) -> float:
        """sigma_k^2: mean over x of Var_x'[phi_k(x)^T phi_k(x') - k(x, x')] on up to 64 batch rows."""
        n = min(64, X.shape[0])
        err = Z[:n] @ Z[:n].T - self.kernel(X[:n])
        return float(err.var(axis=1).mean())

    def step(self, X, Y, ids=None) -> dict:
        """One iteration on batch (X, Y) (device arrays; ``ids``: the rows' storage indices,
        for the row cache); returns the iteration's record."""
        return self.step_rows(LocalRows(self, X, Y, ids))

    def step_rows(self, rows: LocalRows) -> dict:
        """One iteration whose row work (f on the batch, the loss derivative, the block's
        products) ``rows`` does: here (``LocalRows``) or spread over dask workers
        (``kernelscale.spread``); the choices and the update are made here."""
        cfg, model = self.config, self.model
        self.t += 1
        t = self.t
        newton = cfg.precondition is True
        if self.eta0 is None or (newton and self.newton_ridge is None):
            X, Y = rows.first_batch()
            if newton:
                self._newton_setup(X)
            else:
                self.eta0 = (self._eigenpro_eta0(X) if cfg.precondition == "eigenpro"
                             else self._auto_eta0(X))
                self.eta0 = min(self.eta0, self._noise_cap(X, Y, self.horizon))
        gamma, stable = cfg.step_size(t, self.eta0), self.eta0
        if newton:  # gamma_t = s_t / (rho_t + nu), at most the full step (``_newton_direction``)
            rho = max(self.newton_ridge,
                      cfg.reg * t * cfg.step_size(t, 1.0) / NEWTON_RIDGE_GROWTH)
            ratio = (self.newton_ridge + cfg.reg) / (rho + cfg.reg)
            gamma, stable = gamma * ratio, stable * ratio
        # batch objective, the same batch's at f = 0 (the watch's yardstick), mean and max |loss'|
        batch_loss, self.zero_objective, g_bar, g_max = rows.forward()
        if cfg.variant == "cdsg" and self.loss.lipschitz is None:
            self.grad_max = max(self.grad_max, g_max)
        B = rows.n_rows
        k, step = self._choose(t, gamma, g_bar, B, stable)
        new = k is None
        if new:
            k = model.new_block()
        renorm = model.shrink(1.0 - step * cfg.reg)
        if renorm != 1.0 and self.row_cache is not None:
            self.row_cache.rescale(renorm)
        grad, cov = rows.block_products(k, newton, cfg.reg / rho if newton else 0.0)
        grad /= B
        if cfg.precondition == "eigenpro":
            grad = self._eigenpro(k, B).apply(grad)
        elif newton:
            grad = self._newton_direction(cov / B, grad, rho)
        delta = (-step / model.scale) * grad
        model.coef[k] += delta
        if self.row_cache is not None:
            self.row_cache.record(k, delta)
        model.beta[k] -= (step / model.scale) * g_bar
        if new and cfg.variant == "cdsg":
            model.sigma2[k] = rows.block_variance(k)
        if hasattr(self.loss, "update_offset"):
            self.loss.update_offset(rows.u, gamma)
        rows.updated(k, new, 1.0 - step * cfg.reg)
        return {"iter": t, "objective": batch_loss, "n_blocks": model.n_blocks, "step": step,
                "new_block": bool(new)}

    @property
    def xp(self):
        return self.model.xp

    @property
    def block_size(self) -> int:
        return self.model.blocks.F

    def work_bytes(self, batch_size: int, n_rows: int, n_features: int) -> int:
        """Bytes of one step's working set besides the rows (``training``): one group of
        blocks' features for f(batch) (``group_bytes``), the new block's features with its
        gradient product, and with ``precondition="eigenpro"`` the subsample rows, their block
        features and the F x F eigen-decomposition. Independent of t, so that every
        warm-started segment plans the same window."""
        blocks, B, d = self.model.blocks, min(int(batch_size), int(n_rows)), int(n_features)
        item = blocks.dtype.itemsize
        group = blocks.group_size(B, group_bytes(blocks.xp)) * B * blocks.F * item
        work = B * (d + 2 * blocks.F) * item + group
        if self.config.precondition == "eigenpro":
            M, F = min(int(n_rows), EIGENPRO_SUBSAMPLE), blocks.F
            work += M * (d + F) * item + 3 * F * F * 8
        return work

    def row_state_bytes(self, n_rows: int) -> int:
        """Bytes of the per-row f cache for ``n_rows`` rows (``row_cache.RowCache``)."""
        return RowCache.nbytes(int(n_rows), self.model.n_outputs, self.model.blocks.dtype.itemsize)

    def drop_rows(self) -> None:
        self.row_cache = None

    def prepare(self, X, Y, window_rows: int, n_iter: int) -> None:
        """Before a run: the "eigenpro" subsample rows (read in window-sized pieces) and the
        first run's horizon (``_noise_cap``)."""
        if self.config.precondition == "eigenpro":
            xp, dtype, n = self.xp, self.model.blocks.dtype, int(X.shape[0])
            idx = subsample_indices(n, min(n, EIGENPRO_SUBSAMPLE), self.seed)
            if is_sparse(X) or is_csr_store(X):  # one sparse selection of the rows
                self.X_S = asarray(take_rows(X, idx), xp, dtype)
            else:
                step = max(1, int(window_rows))
                self.X_S = xp.concatenate([xp.asarray(take_rows(X, idx[i:i + step]), dtype=dtype)
                                           for i in range(0, len(idx), step)])
        if not self.horizon:
            self.horizon = int(n_iter)

    def release(self) -> None:
        """After a run: the model keeps no data (the next run reads its subsample again)."""
        self.X_S = None

    def advance(self, batch) -> dict:
        """One step of ``run_loop`` on ``batch``: (X, Y[, ids]) held here, or the row work of
        a spread batch (``kernelscale.spread``)."""
        return self.step(*batch) if isinstance(batch, tuple) else self.step_rows(batch)


def block_products(Z, g, u, u_weight: float, want_cov: bool):
    """(phi_k^T (g - u_weight u), phi_k^T phi_k or None), both unscaled by 1 / B, for a block's
    features Z = phi_k(X) on a batch or a worker's part of it, u = f(X), g = loss'(u, y)
    (u_weight = nu / rho_t: ``DSGSolver._newton_direction``)."""
    if u_weight:
        g = g - u_weight * u
    return Z.T @ g, (Z.T @ Z if want_cov else None)


class LocalRows:
    """The row work of one iteration on a batch held here: what ``DSGSolver.step_rows`` asks of
    a batch, with the in-process arithmetic (``kernelscale.spread.dsg.SpreadRows`` does the
    same over dask workers and adds their partial sums in worker order)."""

    def __init__(self, solver: DSGSolver, X, Y, ids=None):
        self.solver, self.X, self.Y, self.ids = solver, X, Y, ids
        self.n_rows = int(X.shape[0])
        self.u = self.g = self.Z = None

    def first_batch(self):
        """The batch itself (the first step sets eta0 from it)."""
        return self.X, self.Y

    def forward(self) -> tuple[float, float, np.ndarray, float]:
        """u = f(X_b) (Alg. 2) and g = loss'(u, y); returns the batch objective, the objective
        at f = 0, mean(g) (host, float64) and max |g|."""
        loss, model, cache = self.solver.loss, self.solver.model, self.solver.row_cache
        use = cache is not None and self.ids is not None
        u = self.u = cache.decision(model, self.X, self.ids) if use else model.decision(self.X)
        g = self.g = loss.deriv(u, self.Y)
        obj = float(loss.value(u, self.Y).mean())
        zero = float(loss.value(self.solver.model.xp.zeros_like(u), self.Y).mean())
        g_bar = np.asarray(to_numpy(g.mean(axis=0)), dtype=np.float64)
        g_max = float(abs(g).max()) if self.solver.config.variant == "cdsg" else 0.0
        return obj, zero, g_bar, g_max

    def block_products(self, k: int, want_cov: bool, u_weight: float = 0.0):
        """``block_products`` of block k on the batch."""
        self.Z = self.solver.model.blocks.features(self.X, k)
        return block_products(self.Z, self.g, self.u, u_weight, want_cov)

    def block_variance(self, k: int) -> float:
        return self.solver._block_variance(self.Z, self.X)

    def updated(self, k: int, new: bool, factor: float) -> None:
        """Block k (``new`` or old) has its new value after a shrink by ``factor`` (spread rows
        send this to the workers' replicas)."""
