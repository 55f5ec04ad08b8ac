"""Helpers shared by the EigenPro and baseline solvers: device moves, row access, chunked kernel
products and the iteration loop that fills ``history``."""

from __future__ import annotations

import math
import sys
import time
from types import ModuleType

import numpy as np

from ..backend import asarray, synchronize, to_numpy
from ..stream import check_finite_rows, iter_row_chunks, predict_rows, take_rows  # noqa: F401 (re-exported)

# Bytes allowed for one kernel block K(A, centres): bounds memory independently of n.
KERNEL_BLOCK_BYTES = 128 * 2**20


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


def load_rows(X, xp: ModuleType, dtype, chunk_rows: int = 65536):
    """The whole of X on namespace ``xp``, read in row chunks; on-disk rows are checked for NaN/inf
    here (in-memory arrays were checked by the estimator's validation)."""
    if type(X).__module__.split(".")[0] == "cupy" or isinstance(X, np.ndarray):
        return asarray(X, xp, dtype)
    parts = []
    for lo, block in iter_row_chunks(X, chunk_rows):
        check_finite_rows(block, lo, "X")
        parts.append(asarray(block, xp, dtype))
    return xp.concatenate(parts)


def kernel_apply(kernel, A, centers, coef, xp: ModuleType):
    """K(A, centers) @ coef without holding more than ``KERNEL_BLOCK_BYTES`` of kernel values."""
    n_c = int(centers.shape[0])
    step_c = max(1, KERNEL_BLOCK_BYTES // max(1, A.shape[0] * A.itemsize))
    out = None
    for lo in range(0, n_c, step_c):
        part = kernel(A, centers[lo:lo + step_c]) @ coef[lo:lo + step_c]
        out = part if out is None else out + part
    if out is None:
        out = xp.zeros((A.shape[0], coef.shape[1]), dtype=A.dtype)
    return out


# batch objective over its first (positive) value that stops a run as diverged (as in DSG)
DIVERGED = 1e4
# loss on the points a step has just learned from, after that step, over the larger of the same
# points' loss before it and the run's first batch objective, that stops a run as overshooting.
# A step within the stable limit lowers its own batch's loss (the shrink of the old terms alone
# can raise it, to at most ~1/4 of the zero model's); twice the larger of the two is past it.
# Square loss on points the step alone moves (a near-delta kernel): the ratio is
# (eta k(x, x) / m - 1)^2, so eta k / m > 2.4 stops, where training R^2 turns negative at ~2.
OVERSHOOT = 2.0


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
                tqdm = None
            if tqdm is not None:
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


def run_loop(solver, batches, n_iter: int, history: dict, name: str, on_step=None,
             hint: str = "lower the step size (eta0)") -> None:
    """``n_iter`` calls of ``solver.step(*batches(solver.t))``, each appending a record
    (``iter``, ``time`` since the first segment, ``objective`` and whatever else step returns)
    and passing it to ``on_step`` (progress display). Stops with a one-line FloatingPointError
    naming the setting to change (``hint``) when the batch objective is not finite or exceeds
    ``DIVERGED`` times its first positive value (a zero first objective is not watched).

    A step may also return ``after``: the same batch's objective right after the step (the loss
    on the points it has just learned from). The batch objective is measured before a step, on
    points a kernel expansion may not have seen: with a near-delta kernel f stays ~0 there while
    each step overshoots on its own points (NORMA at sigma = 0.3 in 10 dimensions, eta0 = 5e3:
    training R^2 = -48 with a flat batch objective). ``after`` above ``OVERSHOOT`` times the
    larger of the batch objective and its start stops the run the same way. It is not recorded."""
    t_start = time.perf_counter()
    base = history["time"][-1] if history.get("time") else 0.0
    for _ in range(int(n_iter)):
        rec = solver.step(*batches(solver.t))
        solver.t += 1
        rec = {"iter": solver.t, **rec}
        obj = rec["objective"]
        after = rec.pop("after", None)
        # the start is kept on the solver, so a warm-started segment watches the same reference
        start = getattr(solver, "obj_start", None)
        if start is None and math.isfinite(obj) and obj > 1e-8:
            solver.obj_start = start = obj
        # a working run's batch objective stays within a few times its start; 1e4 times it
        # means the iteration is diverging: stop rather than return a finite but useless model
        grows = getattr(solver, "watch_growth", True) and start is not None
        if not math.isfinite(obj) or (grows and obj > DIVERGED * start):
            ratio = f", {obj / start:.3g} x its start" if start and math.isfinite(obj) else ""
            raise FloatingPointError(f"{name} diverged at iteration {solver.t} (batch objective "
                                     f"{obj:.3g}{ratio}); {hint}")
        ref = max(obj, start or 0.0)
        if after is not None and (not math.isfinite(after)
                                  or (ref > 1e-8 and after > OVERSHOOT * ref)):
            raise FloatingPointError(
                f"{name} diverged at iteration {solver.t} (the step overshoots: its batch's "
                f"objective went from {obj:.3g} to {after:.3g} on the points it learned from); "
                f"{hint}")
        synchronize(solver.xp)
        rec["time"] = base + time.perf_counter() - t_start
        for key, val in rec.items():
            history.setdefault(key, []).append(val)
        if on_step is not None:
            on_step(rec)
