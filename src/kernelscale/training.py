"""The training driver of every iterative estimator.

``train`` runs one ``fit`` of a solver over mini-batches: it plans the stream's window from the
solver's working set and the memory budget (``budget``), builds the ``stream.BatchStream``,
chooses in-process rows or rows spread over dask workers (``spread``), runs ``run_loop`` with
the divergence watch and a progress display, and records on the estimator what it did
(``window_rows_``, ``spread_``, ``n_iter_``).

A solver takes part through a few attributes and methods, all optional but the step itself:

* ``step(X, Y)`` / ``advance(batch)``, ``t``, ``xp`` (``solvers._common.run_loop``);
* ``work_bytes(batch_size, n_rows, n_features)`` and ``block_size``: bytes of one step's working
  set besides the rows, and the random features a step computes per row (a solver without them
  plans no window: ``engine.window_rows`` is used as given);
* ``row_state_bytes(n_rows)`` with ``keep_rows(n_rows, n_features)`` and ``drop_rows()``:
  per-row state kept between visits (DSG's f cache), kept when it fits its share of the budget;
* ``prepare(X, Y, window_rows, n_iter)`` before the loop and ``release()`` after it, always;
* ``watch``: its ``DivergenceWatch`` (default: one named after the run with the given hint).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .budget import MB, budget_window, csr_width
from .solvers._common import Progress, run_loop
from .stream import BatchStream, is_csr_store, is_in_memory

ROW_STATE_BUDGET_SHARE = 0.25  # most of a memory budget that on-disk X's per-row state may take


@dataclass
class Rows:
    """What a fit streams: ``X`` and the stream's targets ``Y`` (any per-row array, e.g. row
    indices), ``encode(y_batch, xp)`` turning the latter into the step's targets (None: as
    read), ``with_ids`` to pass each batch's row indices to the step, and ``own=True`` where X
    is the solver's own copy on the device (neither windowed nor checked again)."""

    X: object
    Y: object
    batch_size: int
    seed: int
    dtype: object
    encode: Callable | None = None
    with_ids: bool = False
    own: bool = False


def as_targets(dtype) -> Callable:
    """``Rows.encode`` that moves a batch's targets to the device in ``dtype``."""
    return lambda yb, xp: xp.asarray(yb, dtype=dtype)


def keeps_rows(solver, X, engine) -> bool:
    """Whether per-row state is kept: the solver has it, and X is in memory, or no memory
    budget is set, or the state takes at most ``ROW_STATE_BUDGET_SHARE`` of it."""
    if getattr(solver, "row_state_bytes", None) is None or not solver.use_row_cache:
        return False
    budget = engine.memory_budget
    return budget is None or is_in_memory(X) \
        or solver.row_state_bytes(int(X.shape[0])) <= ROW_STATE_BUDGET_SHARE * budget * MB


def window_for(solver, rows: Rows, engine, keep: bool) -> int | None:
    """The stream's ``window_rows`` for this fit (``budget.budget_window``). The solver's
    working set of a CSR store's rows is that of dense rows of ``budget.csr_width`` columns
    (what one of its CSR rows costs)."""
    if rows.own:
        return None
    X = rows.X
    if not hasattr(solver, "work_bytes"):
        return engine.window_rows
    width = csr_width(X, rows.dtype) if is_csr_store(X) else int(X.shape[1])
    work = solver.work_bytes(rows.batch_size, int(X.shape[0]), width) \
        + (solver.row_state_bytes(int(X.shape[0])) if keep else 0)
    return budget_window(engine, X, rows.batch_size, solver.block_size, rows.dtype, work)


def train(est, solver, rows: Rows, n_iter: int, *, name: str, hint: str,
          spread: Callable | None = None) -> None:
    """Run ``n_iter`` steps of ``solver`` on ``rows`` for estimator ``est`` (its ``engine_``,
    ``history_`` and ``verbose``); sets ``est.window_rows_``, ``est.n_iter_`` and, for a
    spread fit, ``est.spread_``. ``spread(stream_kw, stream=, keep_rows=)`` returns the spread
    rows of this fit, or None to run in this process (``spread.rows_for``)."""
    engine, xp = est.engine_, solver.xp
    keep = not rows.own and keeps_rows(solver, rows.X, engine)
    window_rows = window_for(solver, rows, engine, keep)
    stream = BatchStream(rows.X, rows.Y, batch_size=rows.batch_size, seed=rows.seed, xp=xp,
                         dtype=rows.dtype, window_rows=window_rows,
                         check_finite=not rows.own)
    if not rows.own:
        est.window_rows_ = stream.window_rows
    def batches(t):
        batch = stream.batch(t, with_ids=rows.with_ids)
        return batch if rows.encode is None else (batch[0], rows.encode(batch[1], xp), *batch[2:])

    progress = Progress(name, n_iter, getattr(est, "verbose", 0))
    spread_rows = None
    try:
        if spread is not None:
            spread_rows = spread(dict(batch_size=rows.batch_size, seed=rows.seed,
                                      dtype=rows.dtype, window_rows=window_rows),
                                 stream=stream, keep_rows=keep)
        if hasattr(solver, "row_state_bytes"):
            if keep and spread_rows is None:
                solver.keep_rows(int(rows.X.shape[0]), int(rows.X.shape[1]))
            else:
                solver.drop_rows()
        if hasattr(solver, "prepare"):
            solver.prepare(rows.X, rows.Y, stream.window_rows, n_iter)
        run_loop(solver, batches if spread_rows is None else spread_rows, n_iter, est.history_,
                 name, on_step=progress, hint=hint, watch=getattr(solver, "watch", None))
    finally:
        progress.close()
        stream.close()
        if spread_rows is not None:
            spread_rows.close()
            est.spread_ = {"workers": spread_rows.W, "round_trips": spread_rows.round_trips,
                           "bytes_sent": spread_rows.bytes_sent,
                           "bytes_received": spread_rows.bytes_received}
        if hasattr(solver, "release"):
            solver.release()
    est.n_iter_ = solver.t
