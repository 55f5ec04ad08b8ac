"""Helpers shared by the EigenPro and baseline solvers: device moves, row access, chunked kernel
products and the iteration loop that fills ``history``."""

from __future__ import annotations

import math
import sys
import time
import warnings
from types import ModuleType

import numpy as np

from ..backend import asarray, is_sparse, synchronize, to_numpy
from ..budget import batch_bytes
from ..parallel import blockwise
from ..stream import (  # noqa: F401 (re-exported)
    check_finite_rows,
    is_csr_store,
    iter_row_chunks,
    predict_rows,
    take_rows,
)

# Bytes allowed for one kernel block K(A, centres): bounds memory independently of n.
KERNEL_BLOCK_BYTES = 128 * 2**20
# On the host: rows of A per pass over the centres, centres per thread's chunk, and bytes of one
# kernel tile (within a core's L2)
ROW_BLOCK = 1024
CHUNK_COLS = 2048
TILE_BYTES = 2**20


class DeviceState:
    """Mixin for solver state: arrays named in ``_arrays`` move between numpy and cupy together.

    Pickling stores host (numpy) copies, so a model trained on a GPU loads on a CPU machine;
    ``to(xp)`` moves it back before use.
    """

    _arrays: tuple[str, ...] = ()
    _children: tuple[str, ...] = ()
    xp: ModuleType = np

    def to(self, xp: ModuleType):
        """Move the ``_arrays`` and the ``_children`` to namespace ``xp``, in place; returns self
        (a no-op when already there)."""
        if self.xp is xp:
            return self
        for name in self._arrays:
            val = getattr(self, name, None)
            if val is not None:
                setattr(self, name, asarray(val, xp))
        for name in self._children:
            child = getattr(self, name, None)
            if child is not None:
                child.to(xp)
        self.xp = xp
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in self._arrays:
            if state.get(name) is not None:
                state[name] = to_numpy(state[name])
        state["xp"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.xp = np


class TailAverage:
    """Mixin: the suffix average of Rakhlin, Shamir & Sridharan, "Making gradient descent optimal
    for strongly convex stochastic optimization", ICML 2012 (the mean of the last alpha T of T
    iterates), alpha in [1/2, 3/4]: after step t, 2^k <= t < 2^(k+1), the mean of the iterates of
    steps 2^(k-1) .. t, kept as two running sums (before 2^k, from 2^k on) that move on at every
    power of two; warm-started segments average what one run does.

    The solver sets ``sum_before`` and ``sum_since`` to zero arrays of the iterate's shape (None:
    no averaging) and names them in ``_arrays``; its step calls ``_average_in`` with the new
    iterate before ``t`` advances (or keeps its sums itself, turned over where ``_tail_turns``
    says)."""

    n_before = n_since = 0

    def _tail_turns(self) -> bool:
        """Count the iterate of step s = t + 1 into the tail; True where s is a power of two:
        the iterates since the last one become those before, the older ones leave, and the
        caller turns its sums over."""
        s = self.t + 1
        turns = s & (s - 1) == 0
        if turns:
            self.n_before, self.n_since = self.n_since, 0
        self.n_since += 1
        return turns

    def _average_in(self, iterate) -> None:
        """Add the iterate of step s = t + 1 to the tail sums."""
        if self.sum_since is None:
            return
        if self._tail_turns():
            self.sum_before, self.sum_since = self.sum_since, self.sum_before
            self.sum_since *= 0
        self.sum_since += iterate

    @property
    def n_averaged(self) -> int:
        """Iterates in the tail mean (0: the model is the last iterate)."""
        return self.n_before + self.n_since if self.sum_since is not None else 0


class FourierModel(TailAverage):
    """Mixin for a linear model w on one ``FourierBlocks`` block (``blocks``): its feature count,
    one step's working set, the move of the blocks with the arrays, and its prediction with
    ``w_model`` (the tail mean of the iterates where ``sum_since`` is kept, else w)."""

    @property
    def block_size(self) -> int:
        return self.blocks.F

    def work_bytes(self, batch_size: int, n_rows: int, n_features: int) -> int:
        """One step's working set (``training``): ``budget.batch_bytes``."""
        return batch_bytes(batch_size, n_features, self.blocks.F, self.blocks.dtype)

    def to(self, xp):
        """Move the weights and the feature blocks to namespace ``xp``."""
        if self.blocks.xp is not xp:
            self.blocks.to(xp)
        return super().to(xp)

    @property
    def w_model(self):
        """The weights the model predicts with: the tail mean, or the last iterate w (no
        averaging, or no step yet)."""
        n = self.n_averaged
        return self.w if n == 0 else (self.sum_before + self.sum_since) / n

    def decision(self, A):
        """f(A) = phi(A) ``w_model``."""
        return self.blocks.features(A, 0) @ self.w_model


def load_rows(X, xp: ModuleType, dtype, chunk_rows: int = 65536):
    """The whole of X on namespace ``xp``, read in row chunks; on-disk rows are checked for NaN/inf
    here (in-memory arrays were checked by the estimator's validation). Sparse X stays sparse
    (CSR, in ``dtype``: ``backend.asarray``), and a CSR store (``io.CSRStore``) is read into one
    in-memory scipy CSR matrix (numpy only)."""
    if type(X).__module__.split(".")[0] == "cupy" or isinstance(X, np.ndarray) or is_sparse(X):
        return asarray(X, xp, dtype)
    parts = []
    for lo, block in iter_row_chunks(X, chunk_rows):
        check_finite_rows(block, lo, "X")
        parts.append(asarray(block, xp, dtype))
    if is_csr_store(X):
        import scipy.sparse

        return scipy.sparse.vstack(parts, format="csr") if len(parts) > 1 else parts[0]
    return xp.concatenate(parts)


def kernel_apply(kernel, A, centers, coef, xp: ModuleType, keep=None):
    """K(A, centers) @ coef (zeros for no centres); with ``keep`` (sorted indices into
    ``centers``) the pair (K(A, centers) @ coef, K(A, centers[keep])).

    Dense host arrays: for each block of at most ``ROW_BLOCK`` rows of A, the centres are split
    into chunks of ``CHUNK_COLS`` (at least one tile) shared out over the ``parallel`` threads; a
    thread forms its
    chunk's kernel values in tiles of ``TILE_BYTES`` (``Kernel.tile``), each multiplied by its
    rows of coef and dropped. The chunks' sums are added in chunk order, so the result does not
    depend on the thread count. GPU and sparse arrays: blocks of ``KERNEL_BLOCK_BYTES``.
    """
    m, n_c = int(A.shape[0]), int(centers.shape[0])
    dtype = np.result_type(A.dtype, centers.dtype, coef.dtype)
    item = np.dtype(np.result_type(A.dtype, centers.dtype)).itemsize
    out = xp.zeros((m, int(coef.shape[1])), dtype=dtype)
    kept = None if keep is None else xp.empty((m, len(keep)), dtype=dtype)
    keep_host = None if keep is None else to_numpy(keep)

    def add_tiles(rows, A_rows, lo, hi, part, tile_bytes, acc):
        """acc += K(A[rows], centers[lo:hi]) coef[lo:hi], formed by ``part`` in blocks of at
        most ``tile_bytes``; the kept columns are copied out."""
        step = max(1, tile_bytes // ((rows.stop - rows.start) * item))
        for j in range(lo, hi, step):
            K = part(A_rows, centers[j:min(hi, j + step)])
            acc += K @ coef[j:j + K.shape[1]]
            if kept is not None:
                a, b = np.searchsorted(keep_host, (j, j + K.shape[1]))
                if a < b:
                    kept[rows, a:b] = K.take(keep[a:b] - j, axis=1)

    if m == 0:
        pass
    elif xp is not np or is_sparse(A) or is_sparse(centers):
        add_tiles(slice(0, m), A, 0, n_c, kernel, KERNEL_BLOCK_BYTES, out)
    else:
        count = -(-m // ROW_BLOCK)
        for r in range(count):
            rows = slice(m * r // count, m * (r + 1) // count)
            A_rows = kernel.tile_rows(A[rows])
            width = max(CHUNK_COLS, TILE_BYTES // ((rows.stop - rows.start) * item))
            chunks = range(0, n_c, width)
            sums = np.zeros((len(chunks), rows.stop - rows.start, out.shape[1]), dtype=dtype)

            def run(c0, c1, rows=rows, A_rows=A_rows, sums=sums, chunks=chunks, width=width):
                for c in range(c0, c1):
                    hi = min(n_c, chunks[c] + width)
                    add_tiles(rows, A_rows, chunks[c], hi, kernel.tile, TILE_BYTES, sums[c])

            blockwise(run, len(chunks), 1)
            out[rows] = sums.sum(axis=0)  # in chunk order
    return out if keep is None else (out, kept)


# The watch's thresholds (``DivergenceWatch``; reasons: docs/design.md, "The overshoot check")
DIVERGED = 1e4  # batch objective over its first (positive) value
OVERSHOOT = 2.0  # a batch's objective after its step over the larger of before and the start
WORSE_THAN_ZERO = 2.0  # smoothed objective over that of f = 0
WATCH_AFTER = 20  # iterations before the smoothed objective is judged
WATCH_DECAY = 0.9  # the smoothing: an exponential average over ~10 iterations
NOISE_SE = 3.0  # standard errors over f = 0 that stop a run at its end


def steps(n_iter, per_epoch: int, auto_epochs: float) -> int:
    """Solver steps for ``n_iter``: an integer as given, "K epochs" = ceil(K ``per_epoch``),
    "auto" = ``auto_epochs`` epochs."""
    if n_iter == "auto":
        epochs = auto_epochs
    elif isinstance(n_iter, str):
        epochs = float(n_iter.strip().split("epoch")[0])
    else:
        return int(n_iter)
    return int(math.ceil(epochs * per_epoch - 1e-9))


class Progress:
    """``verbose=1`` progress of one ``fit``: a plain line to stderr every ~10 % of its
    ``n_iter`` iterations and at the end (iteration, elapsed seconds, batch objective); on a
    terminal a tqdm bar instead when tqdm is installed. Reads the records only: the fitted
    model does not depend on it."""

    def __init__(self, name: str, n_iter: int, verbose=0):
        self.name, self.n_iter, self.verbose = name, int(n_iter), int(verbose or 0)
        self.done = 0
        self.t0 = time.perf_counter()
        self.every = max(1, -(-self.n_iter // 10))
        self.bar = None
        if self.verbose > 0 and self.n_iter > 0 and sys.stderr.isatty():
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - plain lines then
                return
            self.bar = tqdm(total=self.n_iter, desc=name, file=sys.stderr, leave=True)

    def __call__(self, rec: dict) -> None:
        if self.verbose <= 0:
            return
        self.done += 1
        obj = rec.get("objective", float("nan"))
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(objective=f"{obj:.4g}", refresh=False)
            if self.done == self.n_iter:
                self.bar.close()
            return
        if self.done % self.every == 0 or self.done == self.n_iter:
            print(f"[{self.name}] iteration {rec.get('iter', self.done)} "
                  f"({self.done}/{self.n_iter}), {time.perf_counter() - self.t0:.2f} s, "
                  f"batch objective {obj:.6g}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Close the tqdm bar, if any (safe to call twice; ``fit`` calls it in ``finally``)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class DivergenceWatch:
    """The divergence watch of every iterative run (``run_loop``): a one-line
    FloatingPointError, "<name> diverged at iteration t (...); <hint>", when

    * the batch objective is not finite, or above ``DIVERGED`` times its first positive value
      (a zero first objective is not watched; nor is growth where the solver sets
      ``watch_growth = False``);
    * the record's ``after`` (the same batch's objective right after its step) is not finite or
      above ``OVERSHOOT`` times the larger of the batch objective and its start;
    * ``smoothed``: the averaged batch objective, after ``WATCH_AFTER`` iterations, is above
      ``WORSE_THAN_ZERO`` times the average objective of f = 0 (the solver's
      ``zero_objective``, set by its step), and at the end of a run (``end``) above it by more
      than ``NOISE_SE`` standard errors of the smoothed difference; within that noise a
      ConvergenceWarning, no error (a model no better than f = 0).

    The state (``obj_start``, ``obj_avg``, ``zero_avg``, ``diff_sq_avg``) is kept on the solver,
    so a warm-started segment watches the same reference."""

    def __init__(self, name: str, hint: str, smoothed: bool = False):
        self.name, self.hint, self.smoothed = name, hint, smoothed

    def _stop(self, when: str, what: str) -> FloatingPointError:
        return FloatingPointError(f"{self.name} {when} ({what}); {self.hint}")

    def __call__(self, solver, rec: dict, after=None) -> None:
        obj, t = rec["objective"], rec["iter"]
        start = getattr(solver, "obj_start", None)
        if start is None and math.isfinite(obj) and obj > 1e-8:
            solver.obj_start = start = obj
        worse = False
        if self.smoothed:
            zero = getattr(solver, "zero_objective", obj)
            if math.isfinite(obj):
                avg = lambda old, new: new if old is None else (  # noqa: E731
                    WATCH_DECAY * old + (1 - WATCH_DECAY) * new)
                solver.obj_avg = avg(getattr(solver, "obj_avg", None), obj)
                solver.zero_avg = avg(getattr(solver, "zero_avg", None), zero)
                solver.diff_sq_avg = avg(getattr(solver, "diff_sq_avg", None), (obj - zero) ** 2)
            worse = (start is not None and t > WATCH_AFTER and solver.zero_avg > 1e-8
                     and solver.obj_avg > WORSE_THAN_ZERO * solver.zero_avg)
        grows = getattr(solver, "watch_growth", True) and start is not None
        if worse:
            raise self._stop(f"diverged at iteration {t}", self._average(solver))
        if not math.isfinite(obj) or (grows and obj > DIVERGED * start):
            ratio = f", {obj / start:.3g} x its start" if start and math.isfinite(obj) else ""
            raise self._stop(f"diverged at iteration {t}", f"batch objective {obj:.3g}{ratio}")
        ref = max(obj, start or 0.0)
        if after is not None and (not math.isfinite(after)
                                  or (ref > 1e-8 and after > OVERSHOOT * ref)):
            raise self._stop(f"diverged at iteration {t}",
                             f"the step overshoots: its batch's objective went from {obj:.3g} "
                             f"to {after:.3g} on the points it learned from")

    def end(self, solver) -> None:
        """At the end of a run: the smoothed objective above that of f = 0 by more than its noise
        stops it; within the noise, a ConvergenceWarning. The noise: the standard error of the
        exponential average of d = objective - objective of f = 0 over roughly independent
        batches, sqrt(Var d (1 - WATCH_DECAY) / (1 + WATCH_DECAY))."""
        zero_avg, obj_avg = getattr(solver, "zero_avg", None), getattr(solver, "obj_avg", None)
        if not (self.smoothed and solver.t > WATCH_AFTER and zero_avg and zero_avg > 1e-8
                and obj_avg is not None and obj_avg > zero_avg):
            return
        excess = obj_avg - zero_avg
        var = max(getattr(solver, "diff_sq_avg", 0.0) - excess**2, 0.0)
        if excess > NOISE_SE * math.sqrt(var * (1 - WATCH_DECAY) / (1 + WATCH_DECAY)):
            raise self._stop(f"diverged or learned nothing by iteration {solver.t}",
                             self._average(solver))
        from sklearn.exceptions import ConvergenceWarning

        warnings.warn(f"{self.name} learned nothing better than f = 0 by iteration {solver.t} "
                      f"({self._average(solver)}, within its noise): right where y holds no "
                      f"signal these settings can learn; else {self.hint}", ConvergenceWarning,
                      stacklevel=2)

    @staticmethod
    def _average(solver) -> str:
        return (f"average batch objective {solver.obj_avg:.3g}, "
                f"{solver.obj_avg / solver.zero_avg:.3g} x that of f = 0")


def run_loop(solver, batches, n_iter: int, history: dict, name: str, on_step=None,
             hint: str = "lower the step size (eta0)", watch: DivergenceWatch | None = None) -> None:
    """The training loop of every iterative solver: ``n_iter`` steps on ``batches(solver.t)``,
    each appending a record (``iter``, ``time`` since the first segment, ``objective`` and
    whatever else the step returns) to ``history`` and passing it to ``on_step`` (progress
    display), watched by ``watch`` (default: ``DivergenceWatch(name, hint)``).

    A step is ``solver.advance(batch)`` where the solver has one (it advances ``solver.t`` and
    returns a record with ``iter``: DSG), else ``solver.step(*batch)`` followed by
    ``solver.t += 1``. A record's ``after`` goes to the watch and is not recorded."""
    watch = watch or DivergenceWatch(name, hint)
    advance = getattr(solver, "advance", None)
    t_start = time.perf_counter()
    base = history["time"][-1] if history.get("time") else 0.0
    for _ in range(int(n_iter)):
        if advance is not None:
            rec = advance(batches(solver.t))
        else:
            rec = solver.step(*batches(solver.t))
            solver.t += 1
            rec = {"iter": solver.t, **rec}
        watch(solver, rec, rec.pop("after", None))
        synchronize(solver.xp)
        rec["time"] = base + time.perf_counter() - t_start
        for key, val in rec.items():
            history.setdefault(key, []).append(val)
        if on_step is not None:
            on_step(rec)
    watch.end(solver)
