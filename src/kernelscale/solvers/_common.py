"""Helpers shared by the EigenPro and baseline solvers: device moves, row access, chunked kernel
products and the iteration loop that fills ``history``."""

from __future__ import annotations

import math
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


def run_loop(solver, batches, n_iter: int, history: dict, name: str) -> None:
    """``n_iter`` calls of ``solver.step(*batches(solver.t))``, each appending a record
    (``iter``, ``time`` since the first segment, ``objective`` and whatever else step returns)."""
    t_start = time.perf_counter()
    base = history["time"][-1] if history.get("time") else 0.0
    for _ in range(int(n_iter)):
        rec = solver.step(*batches(solver.t))
        solver.t += 1
        rec = {"iter": solver.t, **rec}
        if not math.isfinite(rec["objective"]):
            raise FloatingPointError(f"{name} diverged at iteration {solver.t} "
                                     f"(objective {rec['objective']}); lower the step size")
        synchronize(solver.xp)
        rec["time"] = base + time.perf_counter() - t_start
        for key, val in rec.items():
            history.setdefault(key, []).append(val)
