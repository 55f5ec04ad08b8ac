"""Memory budget for out-of-core training: how many rows to read per window; peak RSS.

A solver that reads a row-chunked on-disk array through ``stream.BatchStream`` holds, at its peak,
two windows of rows (the current one and the prefetched one), each with its NaN check mask (1
byte a value) and row permutation (8 bytes a row); ``CHUNKS_IN_FLIGHT`` decoded on-disk chunks
(zarr decodes whole chunks); and the batch's working set in the model dtype (its rows and
``FEATURE_MATRICES`` ``batch_size x block_size`` matrices). ``plan_window`` inverts that sum: the
largest window (whole batches) that fits ``budget_mb``, or a one-line ``ValueError`` naming the
numbers when not even one batch fits. The budget bounds what is read from X: the targets (n
numbers), the model and the bandwidth / reg selection before the stream
(``kernels.selection.transient_bytes``) are outside it. A CSR store (``io.CSRStore``) is planned
from its rows' CSR bytes and its chunks' (``csr_row_bytes``, ``csr_chunk_bytes``), not its width.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

from .stream import chunk_rows_of, is_csr_store, is_in_memory

MB = 2**20
FEATURE_MATRICES = 3  # features, an intermediate of their shape, a gradient-side product
CHUNKS_IN_FLIGHT = 2  # decoded chunks held while a window is read


@dataclass(frozen=True)
class WindowPlan:
    """Rows per window and the byte counts behind it (for logs and error messages)."""

    window_rows: int
    window_bytes: int   # one window with its mask and permutation
    batch_bytes: int    # the batch working set
    chunk_bytes: int    # decode buffers of the chunks in flight
    budget_bytes: int

    @property
    def peak_bytes(self) -> int:
        """Planned peak: two windows + decode buffers + batch working set."""
        return 2 * self.window_bytes + self.chunk_bytes + self.batch_bytes


def row_bytes(n_features: int, dtype) -> int:
    """Bytes one row costs inside a window: values, NaN-check mask and permutation index."""
    return int(n_features) * np.dtype(dtype).itemsize + int(n_features) + 8


def csr_row_bytes(row_nbytes: float, dtype) -> int:
    """Bytes one CSR row costs inside a window: ``row_nbytes`` (``io.CSRStore``'s mean), the
    NaN-check mask (1 byte a stored value) and permutation index."""
    values = max(0.0, float(row_nbytes) - 8) / (np.dtype(dtype).itemsize + 4)
    return int(math.ceil(float(row_nbytes) + values)) + 8


def csr_chunk_bytes(X) -> int:
    """Bytes of one on-disk chunk of each of a CSR store's three arrays (pointers, column
    indices, values): what decoding a piece of a window holds."""
    return sum(int(a.chunks[0]) * np.dtype(a.dtype).itemsize
               for a in (X.indptr, X.indices, X.data))


def csr_width(X, model_dtype) -> int:
    """The dense width whose row in ``model_dtype`` costs what a CSR row of the store X does in
    memory: the ``n_features`` of dense working-set estimates (``batch_bytes``, ``work_bytes``)."""
    item = np.dtype(model_dtype).itemsize
    per_row = X.nnz / max(1, int(X.shape[0])) * (item + 4) + 8
    return max(1, int(math.ceil(per_row / item)))


def batch_bytes(batch_size: int, n_features: int, block_size: int, model_dtype) -> int:
    """The batch's working set: its rows and ``FEATURE_MATRICES`` feature-sized matrices."""
    item = np.dtype(model_dtype).itemsize
    return int(batch_size) * (int(n_features) + FEATURE_MATRICES * int(block_size)) * item


def plan_window(budget_mb: float, n_features: int, dtype, batch_size: int, block_size: int,
                *, model_dtype=None, chunk_rows: int | None = None,
                n_rows: int | None = None, work_bytes: int | None = None,
                row_cost: int | None = None, chunk_cost: int | None = None) -> WindowPlan:
    """The window (rows read from disk at once) that keeps training within ``budget_mb``.

    Parameters
    ----------
    budget_mb : memory budget in MiB for reading X and the batch working set.
    n_features, dtype : columns of X and its on-disk dtype (the window keeps it).
    batch_size, block_size : rows per batch and random features per block.
    model_dtype : dtype the solver computes in (default ``dtype``).
    chunk_rows : on-disk rows per chunk; zarr decodes a whole chunk to read any of its rows.
    n_rows : rows of X; the window never exceeds it.
    work_bytes : the batch working set when the solver knows it better than ``batch_bytes``
        (DSG: its feature matrix is a group of blocks, ``solvers.dsg.group_bytes``).
    row_cost : bytes one row costs inside a window where it is not ``row_bytes(n_features,
        dtype)``: CSR rows (``csr_row_bytes``).
    chunk_cost : bytes of one decoded on-disk chunk where it is not ``chunk_rows`` rows of
        ``n_features`` values: a CSR store's (``csr_chunk_bytes``).
    """
    if not (isinstance(budget_mb, (int, float, np.integer, np.floating)) and budget_mb > 0):
        raise ValueError(f"memory_budget={budget_mb!r} must be a positive number of MB")
    model_dtype = dtype if model_dtype is None else model_dtype
    budget = int(budget_mb * MB)
    per_row = row_bytes(n_features, dtype) if row_cost is None else int(row_cost)
    work = int(work_bytes) if work_bytes is not None else batch_bytes(
        batch_size, n_features, block_size, model_dtype)
    chunk = CHUNKS_IN_FLIGHT * (
        int(chunk_rows or 0) * int(n_features) * np.dtype(dtype).itemsize
        if chunk_cost is None else int(chunk_cost))
    free = budget - work - chunk
    rows = free // (2 * per_row)
    if rows < batch_size:
        need = (2 * batch_size * per_row + work + chunk) / MB
        what = f"{n_features} features ({np.dtype(dtype).name})" if row_cost is None else \
            f"{n_features} features (CSR, {per_row} bytes a row)"
        raise ValueError(
            f"memory_budget={budget_mb:g} MB is too small for one batch: batch_size={batch_size} "
            f"rows x {what} with block_size={block_size}"
            + (f" and {chunk_rows}-row chunks" if chunk_rows else "")
            + f" needs at least {need:.2f} MB")
    if n_rows is not None and rows >= n_rows:
        rows = int(n_rows)  # one window of all rows: a permutation of the whole data
    else:  # whole batches (not whole chunks: a window is made of pieces of chunks)
        rows -= rows % int(batch_size)
    return WindowPlan(int(rows), int(rows * per_row), int(work), int(chunk), budget)


def window_rows_for(X, budget_mb, batch_size: int, block_size: int, model_dtype,
                    work_bytes: int | None = None) -> int:
    """``plan_window`` for a concrete array X (its width, dtype, chunking and length); a CSR
    store by ``csr_row_bytes``, ``csr_chunk_bytes`` and (without ``work_bytes``) ``csr_width``."""
    dtype, csr = getattr(X, "dtype", model_dtype), is_csr_store(X)
    if csr and work_bytes is None:
        work_bytes = batch_bytes(batch_size, csr_width(X, model_dtype), block_size, model_dtype)
    return plan_window(budget_mb, int(X.shape[1]), dtype, int(batch_size), int(block_size),
                       model_dtype=model_dtype, chunk_rows=chunk_rows_of(X),
                       n_rows=int(X.shape[0]), work_bytes=work_bytes,
                       row_cost=csr_row_bytes(X.row_nbytes, dtype) if csr else None,
                       chunk_cost=csr_chunk_bytes(X) if csr else None).window_rows


def budget_window(engine, X, batch_size: int, block_size: int, model_dtype,
                  work_bytes: int | None = None) -> int | None:
    """The ``window_rows`` to stream X with, from a resolved ``engine``: ``engine.window_rows``
    when set, else the window of ``engine.memory_budget`` for on-disk X when set, else None (the
    stream's default; in-memory X is resident, re-windowing it would only change the shuffle)."""
    window_rows, budget = engine.window_rows, engine.memory_budget
    if window_rows is not None or budget is None or is_in_memory(X):
        return window_rows
    return window_rows_for(X, budget, batch_size, block_size, model_dtype, work_bytes)


KERNEL_MEMORY_SHARE = 0.6  # of the memory available now, for a kernel matrix held whole


def kernel_matrix_bytes(budget_mb: float | None = None) -> int:
    """Bytes a kernel matrix held whole may take: ``budget_mb`` (an engine's ``memory_budget``)
    when set, else ``KERNEL_MEMORY_SHARE`` of the memory available now (exact solvers' n x n
    matrix, Nyström CG's stored K_nZ)."""
    if budget_mb is not None:
        return int(budget_mb * MB)
    import psutil

    return int(KERNEL_MEMORY_SHARE * psutil.virtual_memory().available)


def _status_bytes(field: str) -> int | None:
    """A ``/proc/self/status`` size field in bytes (None where ``/proc`` is absent): the one
    reader behind ``peak_rss_bytes`` and ``rss_bytes``."""
    try:
        with open("/proc/self/status") as f:
            return next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith(field + ":")), None)
    except OSError:
        return None


def lifetime_peak_rss_bytes() -> int:
    """This process's peak resident set since it started, in bytes (``getrusage``'s
    ``ru_maxrss``: never reset; after ``fork`` it includes the parent's peak)."""
    import resource

    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def peak_rss_bytes() -> int:
    """This process's peak resident set in bytes since it started or since the last
    ``reset_peak_rss`` (Linux ``VmHWM``); ``lifetime_peak_rss_bytes`` without ``/proc``."""
    hwm = _status_bytes("VmHWM")
    return lifetime_peak_rss_bytes() if hwm is None else hwm


def rss_bytes() -> int | None:
    """This process's resident set now, in bytes (Linux ``VmRSS``; None elsewhere)."""
    return _status_bytes("VmRSS")


def reset_peak_rss() -> bool:
    """Reset ``peak_rss_bytes`` to the current resident set (Linux: write 5 to
    ``/proc/self/clear_refs``); False where that is refused or absent."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@functools.cache
def _malloc_trim():
    try:
        import ctypes

        fn = ctypes.CDLL(None).malloc_trim
        fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
        return fn
    except (OSError, AttributeError):  # not glibc
        return None


def release_freed_memory() -> None:
    """Hand memory freed to the C allocator back to the OS (glibc's ``malloc_trim(0)``; a no-op
    elsewhere). Meant for the boundary between phases, not for loops."""
    if _malloc_trim() is not None:
        _malloc_trim()(0)
