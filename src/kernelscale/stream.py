"""Seeded mini-batch streams over in-memory or on-disk (zarr / dask / h5py) row arrays.

Rows are served window by window: at most two windows (the current one and the next, read by a
background thread into two buffers made once per stream) are ever in memory. Each epoch

1. splits the rows into pieces of ``piece_rows = window_rows // PIECES_PER_WINDOW`` consecutive
   rows, and the pieces into ``strata`` (about ``PIECES_PER_WINDOW``) equal runs of consecutive
   pieces, each stratum with its own seeded order of its pieces;
2. lines the pieces up in rounds: round r takes, from each stratum in turn, the piece at place r
   of that stratum's order; windows are consecutive ``window_rows``-row slices of that line.

The window's rows are then shuffled and cut into batches; a window of all rows (in-memory data by
default) is one permutation of all n. Batch ``t`` is a pure function of (seed, t, n, window_rows,
batch_size), never of the on-disk chunking. zarr is read on one I/O thread, dask arrays in the
reading thread (``unwrap_dask``); a CSR store (``io.CSRStore``) gives scipy.sparse CSR batches.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import numpy as np

from .backend import asarray, is_cupy, is_sparse, to_numpy
from .io import CSRStore, single_io_thread
from .rng import BATCH_PIECES, BATCH_ROWS, block_generator, keyed_permutation

PIECES_PER_WINDOW = 32  # a window holds pieces of this many parts of the data (strata)
_PERMUTATION_ROUNDS = 6  # Feistel rounds of rng.keyed_permutation


def is_in_memory(X) -> bool:
    """numpy (not memmap), cupy or scipy.sparse arrays: random access is free."""
    return (isinstance(X, np.ndarray) and not isinstance(X, np.memmap)) or is_cupy(X) \
        or is_sparse(X)


def is_csr_store(X) -> bool:
    """Whether X is a CSR matrix on disk (``io.CSRStore``), read as scipy.sparse CSR rows."""
    return isinstance(X, CSRStore)


def is_dask(A) -> bool:
    """Whether A is a dask array (by module name, so dask need not be imported)."""
    return type(A).__module__.split(".")[0] == "dask" and hasattr(A, "compute")


def unwrap_dask(A):
    """The on-disk array behind a dask array that only views it (``da.from_zarr`` /
    ``da.from_array`` of zarr or h5py, no operation: a graph of the layer ``original-<name>``
    holding that array and the chunk getters), else ``A`` unchanged."""
    layers = getattr(getattr(A, "dask", None), "layers", None) if is_dask(A) else None
    if not layers or len(layers) != 2:
        return A
    try:  # no such layer, one that is not a mapping, or not of one array
        (inner,) = dict(layers.get("original-" + str(A.name))).values()
    except Exception:
        return A
    same = (tuple(getattr(inner, "shape", ())) == tuple(A.shape)
            and getattr(inner, "dtype", None) == A.dtype)
    viewed = same and not (is_in_memory(inner) or is_dask(inner))
    return inner if viewed and hasattr(inner, "__getitem__") else A


def _opened(X):
    """``unwrap_dask(X)``, zarr set to read on one I/O thread (``io.single_io_thread``, also for
    zarr opened by dask) before the first chunk read of every reading path."""
    X = unwrap_dask(X)
    if not is_in_memory(X):
        with contextlib.suppress(ImportError):  # no zarr installed: nothing to configure
            single_io_thread()
    return X


def _computed(block):
    """A dask block computed in this thread (``docs/design.md``); any other block as it is."""
    return block.compute(scheduler="synchronous") if hasattr(block, "compute") else block


def read_rows(A, lo: int, hi: int) -> np.ndarray:
    """Rows lo..hi-1 of any row-sliceable array as a numpy/cupy array (dask arrays computed in
    this thread); scipy.sparse rows stay sparse (all rows of one: the matrix itself), and rows of
    a CSR store (``io.CSRStore``) come as scipy.sparse CSR."""
    if is_sparse(A):
        return A if lo == 0 and hi >= A.shape[0] else A[lo:hi]
    if is_csr_store(A):
        return A[lo:hi]
    block = _computed(A[lo:hi])
    return block if is_cupy(block) else np.asarray(block)


def _row_pieces(A, lo: int, hi: int):
    """(a, b) pieces of lo..hi that never straddle one of A's row chunks (a piece spanning two
    chunks would decode both), at most one chunk each."""
    chunks = getattr(A, "chunks", None)
    if chunks and not isinstance(chunks[0], (int, np.integer)):  # dask: explicit chunk sizes
        bounds = np.cumsum((0,) + tuple(int(c) for c in chunks[0]))
    else:
        step = chunk_rows_of(A) or 65536
        bounds = np.arange(0, int(A.shape[0]) + step, step)
    a = lo
    while a < hi:
        b = min(hi, int(bounds[np.searchsorted(bounds, a, side="right")]))
        yield a, b
        a = b


def _zarr_out_buffer(A, out: np.ndarray, method: str):
    """zarr 3's NDBuffer class when ``A.<method>`` can decode straight into numpy ``out``
    (same dtype, C-contiguous); None otherwise (not zarr, zarr 2, a dtype conversion)."""
    if not (hasattr(A, method) and out.dtype == A.dtype and out.flags.c_contiguous):
        return None
    try:
        from zarr.core.buffer.cpu import NDBuffer
    except ImportError:  # zarr 2: no out= for numpy buffers
        return None
    return NDBuffer


def read_rows_into(A, lo: int, hi: int, out: np.ndarray) -> np.ndarray:
    """Rows lo..hi-1 of an on-disk array written into the preallocated numpy ``out`` (returned):
    zarr 3 and h5py read into it directly, other arrays are copied in pieces of their chunks."""
    NDBuffer = _zarr_out_buffer(A, out, "get_basic_selection")
    if NDBuffer is not None:
        A.get_basic_selection(slice(lo, hi), out=NDBuffer.from_numpy_array(out))
        return out
    if hasattr(A, "read_direct") and out.dtype == A.dtype:
        A.read_direct(out, np.s_[lo:hi])
        return out
    for a, b in _row_pieces(A, lo, hi):
        out[a - lo : b - lo] = read_rows(A, a, b)
    return out


def read_runs_into(A, runs: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row ranges ``runs`` ((lo, hi) pairs in storage order) of an on-disk array written one
    after the other into the preallocated numpy ``out`` (returned); zarr runs that lie in one
    chunk are read by one orthogonal selection (the chunk decoded once)."""
    NDBuffer = _zarr_out_buffer(A, out, "get_orthogonal_selection")
    step = chunk_rows_of(A) if NDBuffer is not None else None
    starts = np.concatenate([[0], np.cumsum(runs[:, 1] - runs[:, 0])]).astype(np.int64)
    i = 0
    while i < len(runs):
        j = i + 1
        if step and (runs[i, 1] - 1) // step == runs[i, 0] // step:
            chunk = runs[i, 0] // step
            while j < len(runs) and runs[j, 0] // step == chunk and (runs[j, 1] - 1) // step == chunk:
                j += 1
        if j == i + 1:
            read_rows_into(A, int(runs[i, 0]), int(runs[i, 1]), out[starts[i] : starts[j]])
        else:
            rows = np.concatenate([np.arange(a, b) for a, b in runs[i:j]])
            A.get_orthogonal_selection((rows,) + (slice(None),) * (A.ndim - 1),
                                       out=NDBuffer.from_numpy_array(out[starts[i] : starts[j]]))
        i = j
    return out


def read_csr_runs(X, runs: np.ndarray):
    """Row ranges ``runs`` ((lo, hi) pairs in storage order) of a CSR store (``io.CSRStore``) laid
    end to end as one scipy.sparse CSR matrix, each run read straight into its arrays."""
    import scipy.sparse

    ptrs = [np.asarray(X.indptr[int(lo) : int(hi) + 1], dtype=np.int64) for lo, hi in runs]
    nnz = sum(int(p[-1] - p[0]) for p in ptrs)
    rows = sum(len(p) - 1 for p in ptrs)
    indices = np.empty(nnz, dtype=X.indices.dtype)
    data = np.empty(nnz, dtype=X.dtype)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    at = r = 0
    for p in ptrs:
        a, k = int(p[0]), int(p[-1] - p[0])
        if k:
            indices[at : at + k] = X.indices[a : a + k]
            data[at : at + k] = X.data[a : a + k]
        indptr[r + 1 : r + len(p)] = p[1:] - a + at
        at, r = at + k, r + len(p) - 1
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(rows, int(X.shape[1])))


def chunk_rows_of(A) -> int | None:
    """Rows per on-disk chunk of a zarr / dask / h5py array (None for in-memory arrays)."""
    chunks = getattr(A, "chunks", None)
    if not chunks:
        return None
    return int(chunks[0] if isinstance(chunks[0], (int, np.integer)) else max(chunks[0]))


_CHECK_ROWS = 8192  # rows per NaN test: bounds its mask to 8192 x d bytes whatever the window


def check_finite_rows(block, lo: int, name: str = "X") -> None:
    """One-line error naming the first bad row when a block holds NaN or infinity."""
    if is_sparse(block):  # CSR rows: the stored values
        bad = np.flatnonzero(~np.isfinite(block.data))
        if bad.size:
            row = int(np.searchsorted(block.indptr, bad[0], side="right")) - 1 + lo
            raise ValueError(f"{name} contains NaN or infinity (first at row {row})")
        return
    xp = np if isinstance(block, np.ndarray) else __import__("cupy")
    step = _CHECK_ROWS if xp is np else max(1, block.shape[0])  # a GPU: one pass, one sync
    for a in range(0, max(1, block.shape[0]), step):
        ok = xp.isfinite(block[a : a + step])
        if ok.ndim > 1:
            ok = ok.all(axis=tuple(range(1, ok.ndim)))
        if not bool(ok.all()):
            bad = int(xp.argmin(ok)) + lo + a
            raise ValueError(f"{name} contains NaN or infinity (first at row {bad})")


class BatchStream:
    """Mini-batches ``batch(t)`` (t = 0, 1, ...) of rows of X (and y), moved to namespace ``xp``.

    Parameters
    ----------
    X, y : row arrays of equal length (numpy, cupy, zarr, dask, h5py, memmap; X also a
        scipy.sparse CSR matrix held in memory or a CSR matrix on disk (``io.CSRStore``, read
        window by window, ``read_csr_runs``), whose batches are CSR rows); y may be None.
    batch_size : rows per batch (the last batch of a window may be shorter).
    seed : stream seed.
    window_rows : rows per window; default all rows for in-memory data (a global shuffle) and
        ``max(batch_size, chunk rows)`` for on-disk data; rounded down to whole batches, and
        all rows when it is at least n.
    check_finite : validate the rows of on-disk X as they are read, with a one-line error naming
        the first bad row (every row is read in the first two epochs the stream serves).
    """

    def __init__(self, X, y=None, *, batch_size: int, seed: int, xp: ModuleType = np,
                 dtype=np.float64, window_rows: int | None = None, check_finite: bool = True):
        X, y = _opened(X), unwrap_dask(y)
        self.X, self.y = X, y
        self.n = n = int(X.shape[0])
        if y is not None and int(y.shape[0]) != n:
            raise ValueError(f"X has {n} rows but y has {int(y.shape[0])}")
        if n == 0:
            raise ValueError("X has 0 rows")
        self.batch_size = B = max(1, min(int(batch_size), n))
        self.seed, self.xp, self.dtype = int(seed), xp, np.dtype(dtype)
        memory = is_in_memory(X)
        if window_rows is None:
            window_rows = n if memory else max(B, chunk_rows_of(X) or 65536)
        window_rows = max(B, int(window_rows))
        # all rows fit: one window of all n (whole batches would leave n % B rows as a window)
        self.window_rows = W = n if window_rows >= n else window_rows - window_rows % B
        self.n_windows = -(-n // W)
        tail = n - (self.n_windows - 1) * W
        self.batches_per_epoch = (self.n_windows - 1) * (W // B) + -(-tail // B)
        if self.n_windows > 1:
            self.piece_rows = p = max(1, W // PIECES_PER_WINDOW)
            n_pieces = -(-n // p)
            self.strata = min(n_pieces, -(-W // p))  # a window holds about one piece of each
            self._per_stratum = divmod(n_pieces, self.strata)
            self._last_piece_rows = n - (n_pieces - 1) * p
        else:
            self.piece_rows, self.strata = n, 1
        self.check_finite = check_finite and not memory  # in memory: checked whole by check_X
        self._first_epoch: int | None = None
        self._keys: dict[int, tuple] = {}
        self._cache: dict[tuple[int, int], tuple] = {}
        self._pool = None if memory else ThreadPoolExecutor(1)
        self._pending: dict[tuple[int, int], object] = {}
        self._lock = threading.Lock()
        self._buffers: list[np.ndarray | None] = [None, None]  # current / prefetched window
        self._slot_of: dict[tuple[int, int], int] = {}

    def _locate(self, t: int):
        """(epoch, window, batch index within the window) of step t."""
        epoch, r = divmod(int(t), self.batches_per_epoch)
        return (epoch, 0, r) if self.n_windows == 1 else \
            (epoch, *divmod(r, self.window_rows // self.batch_size))

    def _epoch_keys(self, epoch: int):
        """Round keys of the strata's piece permutations in ``epoch`` and the sequence position
        of the short last piece (the rows after it in the sequence move up by its shortfall)."""
        with self._lock:
            if epoch in self._keys:
                return self._keys[epoch]
        q, _ = self._per_stratum
        keys = block_generator(self.seed, epoch, BATCH_PIECES).bit_generator.random_raw(
            self.strata * _PERMUTATION_ROUNDS).reshape(self.strata, _PERMUTATION_ROUNDS)
        # the last piece is the last one of the last stratum, which holds q pieces
        r = int(keyed_permutation([q - 1], q, keys[-1:], inverse=True)[0])
        value = keys, r * self.strata + self.strata - 1
        with self._lock:
            self._keys = {e: v for e, v in self._keys.items() if e >= epoch - 1}
            self._keys[epoch] = value
        return value

    def _runs(self, epoch: int, w: int) -> np.ndarray:
        """(lo, hi) storage row ranges of window w of ``epoch``, in storage order.

        Sequence position j holds round ``j // strata`` of stratum ``j % strata``: that stratum's
        piece at the round's place in its own permutation. Stratum s holds pieces
        ``s q + min(s, rem)`` onwards, q or q + 1 of them (``divmod(n_pieces, strata)``)."""
        if self.n_windows == 1:
            return np.array([[0, self.n]], dtype=np.int64)
        p, K, L = self.piece_rows, self.strata, self._last_piece_rows
        q, rem = self._per_stratum
        keys, short = self._epoch_keys(epoch)
        a = w * self.window_rows
        b = min(self.n, a + self.window_rows)

        def position(x):  # sequence position holding sequence row x
            return x // p if x < short * p + L else (x + p - L) // p

        j = np.arange(position(a), position(b - 1) + 1, dtype=np.int64)
        offset = j * p - (p - L) * (j > short)  # sequence row where position j starts
        r, s = np.divmod(j, K)
        local = keyed_permutation(r, q + (s < rem), keys[s]).astype(np.int64)
        piece = s * q + np.minimum(s, rem) + local
        size = np.where(piece == (q * K + rem) - 1, L, p)
        lo = piece * p + np.maximum(0, a - offset)
        hi = piece * p + np.minimum(size, b - offset)
        order = np.argsort(lo)
        return np.stack([lo[order], hi[order]], axis=1)

    def _buffer(self, slot: int, rows: int) -> np.ndarray | None:
        """Rows of reusable buffer ``slot`` (allocated on first use); None for in-memory X, CSR
        stores or arrays whose reads are not plain numpy (cupy, object dtypes)."""
        if is_in_memory(self.X) or is_csr_store(self.X) or getattr(self.X, "dtype", None) is None:
            return None
        if self._buffers[slot] is None:
            shape = (self.window_rows,) + tuple(self.X.shape[1:])
            self._buffers[slot] = np.empty(shape, dtype=self.X.dtype)
        return self._buffers[slot][:rows]

    def _load(self, epoch: int, w: int, slot: int):
        runs = self._runs(epoch, w)
        sizes = runs[:, 1] - runs[:, 0]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        out = self._buffer(slot, int(starts[-1]))
        if is_csr_store(self.X):  # CSR rows on disk: the window as one CSR matrix
            Xw = read_csr_runs(self.X, runs)
        elif out is None:  # in memory (a view when the window is one run) or not plain numpy
            Xw = _concat([read_rows(self.X, lo, hi) for lo, hi in runs])
        else:
            Xw = read_runs_into(self.X, runs, out)
        yw = None if self.y is None else _concat([read_rows(self.y, lo, hi) for lo, hi in runs])
        # the first two epochs served cover every row (the first may start mid-epoch)
        if self.check_finite and epoch <= (self._first_epoch or 0) + 1:
            y_float = yw is not None and np.issubdtype(yw.dtype, np.floating)
            for (lo, _), o, size in zip(runs, starts[:-1], sizes, strict=True):
                check_finite_rows(Xw[o : o + size], int(lo), "X")
                if y_float:
                    check_finite_rows(yw[o : o + size], int(lo), "y")
        perm = block_generator(self.seed, epoch * self.n_windows + w, BATCH_ROWS).permutation(
            int(starts[-1]))
        return Xw, yw, perm, runs

    def _free_slot(self, busy) -> int:
        """A buffer slot not holding any of the windows in ``busy``."""
        used = {self._slot_of[k] for k in busy if k in self._slot_of}
        return 1 if 0 in used else 0

    def _window(self, epoch: int, w: int):
        key = (epoch, w)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            fut = self._pending.pop(key, None)
            if fut is None:  # read here, into the slot no in-flight prefetch is writing
                slot = self._free_slot(self._pending)
                self._slot_of[key] = slot
        data = fut.result() if fut is not None else self._load(epoch, w, slot)
        with self._lock:  # keep only the current window (and the prefetched one)
            self._cache = {key: data}
            self._slot_of = {k: v for k, v in self._slot_of.items()
                             if k == key or k in self._pending}
        return data

    def _prefetch(self, epoch: int, w: int) -> None:
        if self._pool is None:
            return
        key = (epoch, w + 1) if w + 1 < self.n_windows else (epoch + 1, 0)
        with self._lock:
            if key in self._pending or key in self._cache:
                return
            # the slot the current window does not use (an older prefetch there runs first)
            slot = self._free_slot(self._cache)
            self._slot_of = {k: v for k, v in self._slot_of.items() if k in self._cache}
            self._slot_of[key] = slot
            self._pending = {key: self._pool.submit(self._load, *key, slot)}

    def batch(self, t: int, with_ids: bool = False):
        """(X_batch on xp in dtype, y_batch as numpy or None) for step t; with ``with_ids``
        also the rows' storage indices (int64, numpy), which name a row across epochs and
        warm-started segments (``solvers.row_cache``)."""
        epoch, w, j = self._locate(t)
        if self._first_epoch is None:
            self._first_epoch = epoch
        Xw, yw, perm, runs = self._window(epoch, w)
        self._prefetch(epoch, w)
        rows = perm[j * self.batch_size : (j + 1) * self.batch_size]
        Xb = Xw[self.xp.asarray(rows)] if self.xp is not np and is_cupy(Xw) else Xw[rows]
        # sparse rows stay sparse (CSR, in the stream's dtype; cupyx on a GPU)
        Xb = asarray(Xb, self.xp, self.dtype) if is_sparse(Xb) else \
            self.xp.asarray(Xb, dtype=self.dtype)
        yb = None if yw is None else \
            to_numpy(yw[rows] if isinstance(yw, np.ndarray) else yw[self.xp.asarray(rows)])
        if not with_ids:
            return Xb, yb
        # window position -> storage row: the window is its runs laid end to end
        starts = np.concatenate([[0], np.cumsum(runs[:, 1] - runs[:, 0])])
        run = np.searchsorted(starts, rows, side="right") - 1
        return Xb, yb, runs[run, 0] + (rows - starts[run])

    def close(self):
        """Stop the prefetch thread without waiting; pending window loads are cancelled."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _concat(parts: list):
    """Row blocks joined (numpy, cupy or scipy.sparse CSR, as they come); one block as it is."""
    if len(parts) == 1:
        return parts[0]
    if is_sparse(parts[0]):
        import scipy.sparse

        return scipy.sparse.vstack(parts, format="csr")
    return (__import__("cupy") if is_cupy(parts[0]) else np).concatenate(parts)


def take_rows(X, idx: np.ndarray):
    """Rows ``idx`` (sorted ints) of numpy, cupy, zarr, dask or h5py arrays; numpy or cupy out
    (scipy.sparse X: its rows, sparse; a CSR store: its rows as scipy.sparse CSR, read one row
    chunk at a time)."""
    idx = np.asarray(idx, dtype=np.int64)
    if is_sparse(X) or is_csr_store(X):
        return X[idx]
    X = _opened(X)
    if is_cupy(X):
        return X[__import__("cupy").asarray(idx)]
    if isinstance(X, np.ndarray):
        return X[idx]
    step = chunk_rows_of(X)
    if step and len(idx) and hasattr(X, "oindex"):
        # zarr (dask below alike): one chunk at a time, not every touched chunk decoded at once
        out = np.empty((len(idx),) + tuple(X.shape[1:]), dtype=X.dtype)
        bounds = np.searchsorted(idx, np.arange(0, int(X.shape[0]) + step, step))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if b > a:
                out[a:b] = X.oindex[idx[a:b]]
        return out
    if is_dask(X) and len(idx):
        out = np.empty((len(idx),) + tuple(X.shape[1:]), dtype=X.dtype)
        done = 0
        for a, b in _row_pieces(X, 0, int(X.shape[0])):
            j = done + int(np.searchsorted(idx[done:], b))
            if j > done:
                out[done:j] = _computed(X[a:b])[idx[done:j] - a]
            done = j
        return out
    return np.asarray(_computed(X[idx]))


def predict_rows(X, fn, xp: ModuleType, dtype, chunk_rows: int = 4096) -> np.ndarray:
    """Apply ``fn`` (device rows -> device outputs) over row chunks of X; numpy float64 out
    (scipy.sparse X: ``fn`` gets its rows sparse)."""
    parts = [to_numpy(fn(asarray(block, xp, dtype))) for _, block in iter_row_chunks(X, chunk_rows)]
    return np.concatenate(parts).astype(np.float64, copy=False)


def iter_row_chunks(X, chunk_rows: int):
    """Yield (lo, block) over X in row chunks (numpy/cupy views, scipy.sparse rows or rows read
    from disk; a CSR store's rows as scipy.sparse CSR)."""
    n = int(X.shape[0])
    X = _opened(X)
    for lo in range(0, n, chunk_rows):
        yield lo, read_rows(X, lo, min(n, lo + chunk_rows))
