"""Host work on several threads: element-wise passes over large matrices in cache-sized tiles
(``rowwise``), and blocks of work whose results do not depend on the thread count
(``blockwise``, BLAS held at one thread: the tiled kernel products).

The thread count follows ``set_threads`` (the CLI's ``--threads`` sets it), default the CPUs this
process may run on. cupy arrays are passed through whole (one kernel launch per operation).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

TILE_BYTES = 256 * 2**10  # one tile of rows: well inside a core's L2
MIN_PARALLEL_BYTES = 4 * 2**20  # below this, handing work to threads costs more than it saves

_threads: int | None = None
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


@functools.cache
def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; ``os.cpu_count`` off Linux), cached."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def set_threads(n: int | None) -> None:
    """Threads for element-wise passes (None: the CPUs this process may use)."""
    global _threads, _pool
    with _lock:
        _threads = None if n is None else max(1, int(n))
        if _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None


def get_threads() -> int:
    """Threads for element-wise passes: the ``set_threads`` value, else ``available_cpus()``."""
    return _threads if _threads is not None else available_cpus()


def _get_pool(k: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers < k:
            _pool = ThreadPoolExecutor(k, thread_name_prefix="kernelscale-rows")
        return _pool


def _run_parts(run: Callable[[int], None], k: int) -> None:
    """run(0) on this thread and run(1) ... run(k - 1) on the pool; exceptions propagate."""
    futures = [_get_pool(k - 1).submit(run, p) for p in range(1, k)]
    run(0)
    for f in futures:
        f.result()


def rowwise(fn: Callable[[object, int, int], None], Z):
    """Call ``fn(Z[lo:hi], lo, hi)`` over row tiles of ``Z`` (in place; returns ``Z``); ``fn``
    must only touch its rows (writes to its tile, reads of row-aligned inputs). numpy: tiles of
    ``TILE_BYTES``, contiguous runs of tiles per thread; cupy: one call on all rows."""
    if not isinstance(Z, np.ndarray) or Z.ndim != 2 or Z.shape[0] == 0:
        fn(Z, 0, Z.shape[0])
        return Z
    n = Z.shape[0]
    tile = max(1, TILE_BYTES // max(1, Z.shape[1] * Z.itemsize))
    k = min(get_threads(), -(-n // tile)) if Z.nbytes >= MIN_PARALLEL_BYTES else 1

    def run(part: int) -> None:
        start, stop = n * part // k, n * (part + 1) // k
        for lo in range(start, stop, tile):
            hi = min(stop, lo + tile)
            fn(Z[lo:hi], lo, hi)

    _run_parts(run, k)
    return Z


_blas_lock = threading.Lock()
_blas_users = 0
_blas_limiter = None


@functools.cache
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread():
    """BLAS at one thread inside: host kernel products take their parallelism from the
    ``parallel`` threads (``blockwise``), so their BLAS calls give the same bits whatever the
    thread count, and no BLAS threads spin on the cores between calls. Counted, so that nested
    calls and calls from several threads restore the original setting once, after the last."""
    global _blas_users, _blas_limiter
    with _blas_lock:
        if _blas_users == 0:
            _blas_limiter = _blas_controller().limit(limits=1, user_api="blas")
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limiter.restore_original_limits()


def blockwise(fn: Callable[[int, int], None], n: int, rows: int) -> None:
    """Call ``fn(lo, hi)`` over ceil(n / rows) blocks of rows of (nearly) equal size, on up to
    ``get_threads()`` threads, BLAS at one thread (``one_blas_thread``). The blocks depend on n
    and rows only, so a result assembled per block is the same at any thread count; ``fn`` must
    only write its own rows."""
    count = max(1, -(-n // max(1, rows)))
    bounds = [n * b // count for b in range(count + 1)]
    k = min(get_threads(), count)

    def run(part: int) -> None:
        for b in range(part, count, k):
            fn(bounds[b], bounds[b + 1])

    with one_blas_thread():
        _run_parts(run, k)
