"""Opening on-disk row arrays for estimators, with one-line errors naming the path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def single_io_thread() -> bool:
    """Have zarr read chunks on one thread unless the user configured its pool (process-wide;
    effective before zarr's first read); returns whether the setting is now 1."""
    import zarr

    if zarr.config.get("threading.max_workers", None) is None:
        zarr.config.set({"threading.max_workers": 1})
    return zarr.config.get("threading.max_workers") == 1


def open_zarr(path: str | os.PathLike, name: str | None = None):
    """Open the zarr array at ``path`` read-only (``name``: an array inside a group at ``path``,
    else the group's CSR store ``name``, ``open_csr``); calls ``single_io_thread``. One-line
    ``FileNotFoundError`` naming the path when there is nothing there or no such array / store.
    """
    import zarr

    single_io_thread()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"zarr array not found: {path} does not exist")
    try:
        if name is None:
            return zarr.open_array(str(path), mode="r")
        group = zarr.open_group(str(path), mode="r")
        if name in group:
            return group[name]
    except (FileNotFoundError, ValueError) as e:
        # ArrayNotFoundError / ContainsGroupError / a corrupt zarr.json: keep the first line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        what = "a zarr array" if name is None else "a zarr group"
        raise FileNotFoundError(f"{path} is not {what} ({first})") from None
    try:
        store = open_csr(group, name)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"zarr group {path}: {e}") from None
    if store is None:
        raise FileNotFoundError(f"zarr group {path} has no array {name!r}")
    return store


class CSRStore:
    """A CSR matrix on disk: three zarr arrays ``indptr`` (n + 1, int64), ``indices`` (nnz,
    int32) and ``data`` (nnz, float) and its ``shape`` (n, d). ``store[lo:hi]`` reads only those
    rows' stretch of ``indices`` / ``data`` as a scipy.sparse CSR matrix; ``store[idx]`` (integer
    or boolean row indices, any order) those rows in that order, each row chunk read once.
    ``shape``, ``dtype``, ``ndim``, ``nnz``, ``nbytes`` and ``chunks`` (rows per chunk of
    ``indptr``) behave as an array's; ``row_nbytes`` is a row's mean in-memory CSR cost."""

    def __init__(self, indptr, indices, data, shape):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.shape = (int(shape[0]), int(shape[1]))
        if int(indptr.shape[0]) != self.shape[0] + 1:
            raise ValueError(f"CSR store: indptr has {indptr.shape[0]} entries for "
                             f"{self.shape[0]} rows (want rows + 1)")
        if int(indices.shape[0]) != int(data.shape[0]):
            raise ValueError(f"CSR store: {indices.shape[0]} column indices but "
                             f"{data.shape[0]} values")
        self.dtype, self.ndim, self.nnz = data.dtype, 2, int(indices.shape[0])
        self.chunks = (int(indptr.chunks[0]), self.shape[1])

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"CSRStore(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype})"

    @property
    def nbytes(self) -> int:
        return int(self.nnz * (self.dtype.itemsize + 4) + 8 * (self.shape[0] + 1))

    @property
    def row_nbytes(self) -> float:
        """Mean in-memory CSR bytes of one row (its values, column indices and pointer)."""
        return self.nbytes / max(1, self.shape[0])

    def _rows(self, lo: int, hi: int):
        import scipy.sparse

        ptr = np.asarray(self.indptr[lo:hi + 1], dtype=np.int64)
        a, b = int(ptr[0]), int(ptr[-1])
        return scipy.sparse.csr_matrix(
            (np.asarray(self.data[a:b]), np.asarray(self.indices[a:b]), ptr - a),
            shape=(hi - lo, self.shape[1]))

    def __getitem__(self, key):
        import scipy.sparse

        if isinstance(key, tuple):
            if not (len(key) == 2 and isinstance(key[1], slice) and key[1] == slice(None)):
                raise IndexError("a CSR store is indexed by rows only")
            key = key[0]
        n = self.shape[0]
        if isinstance(key, slice):
            lo, hi, step = key.indices(n)
            if step == 1:
                return self._rows(lo, max(lo, hi))
            key = np.arange(lo, hi, step)
        if isinstance(key, (int, np.integer)):
            k = int(key) + (n if int(key) < 0 else 0)
            if not 0 <= k < n:
                raise IndexError(f"row {key} is out of range for {n} rows")
            return self._rows(k, k + 1)
        idx = np.asarray(key)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        idx = np.where(idx < 0, idx + n, idx).astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"row indices out of range for {n} rows")
        order = np.argsort(idx, kind="stable")
        ordered = idx[order]
        step = self.chunks[0]
        parts, at = [], 0
        for c in np.unique(ordered // step):
            lo, hi = int(c) * step, min(n, (int(c) + 1) * step)
            stop = at + int(np.searchsorted(ordered[at:], hi))
            parts.append(self._rows(lo, hi)[ordered[at:stop] - lo])
            at = stop
        rows = scipy.sparse.vstack(parts, format="csr") if parts else \
            scipy.sparse.csr_matrix((0, self.shape[1]), dtype=self.dtype)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return rows[inverse]


class CSRWriter:
    """Appends CSR row blocks (scipy.sparse, ``n_features`` columns) to a new ``CSRStore`` in a
    zarr group: arrays ``<name>.indptr`` / ``.indices`` / ``.data`` (chunks: ``chunk_rows``
    pointers, ``chunk_nnz`` entries) and, at ``close()``, the group attribute ``<name>.shape``.
    Row pointers are written a whole ``indptr`` chunk at a time as rows arrive; fewer than
    ``chunk_rows`` of them are held in memory between appends (the last, partial chunk is
    written by ``close()``). The store is the same, file for file, however the rows are split
    into blocks."""

    def __init__(self, group, name: str, n_features: int, *, chunk_rows: int,
                 chunk_nnz: int = 1 << 20, dtype="float32"):
        self.group, self.name, self.n_features = group, name, int(n_features)
        self.dtype, self._chunk = np.dtype(dtype), max(1, int(chunk_rows))
        self.indptr, self.indices, self.data = (
            group.create_array(f"{name}.{part}", shape=(0,), chunks=(chunk,), dtype=dt)
            for part, chunk, dt in (("indptr", self._chunk, "int64"),
                                    ("indices", int(chunk_nnz), "int32"),
                                    ("data", int(chunk_nnz), self.dtype)))
        self._ptrs = np.zeros(1, dtype=np.int64)  # indptr[self._written:], not written yet
        self._written = 0  # leading indptr entries on disk: whole chunks
        self.n_rows = self.nnz = 0

    def append(self, block) -> None:
        block = block.tocsr()
        if block.shape[1] != self.n_features:
            raise ValueError(f"CSR block has {block.shape[1]} columns, want {self.n_features}")
        if block.shape[0] == 0:
            return
        if not block.has_sorted_indices:  # a sorted copy: the caller's matrix is left as it is
            block = block.sorted_indices()
        k = int(block.nnz)
        for arr, values in ((self.indices, block.indices.astype(np.int32, copy=False)),
                            (self.data, block.data.astype(self.dtype, copy=False))):
            arr.resize((self.nnz + k,))
            arr[self.nnz:self.nnz + k] = values
        self._ptrs = np.concatenate([self._ptrs, block.indptr[1:].astype(np.int64) + self.nnz])
        self.n_rows, self.nnz = self.n_rows + block.shape[0], self.nnz + k
        full = len(self._ptrs) // self._chunk * self._chunk
        if full:  # whole chunks, each written once with its final content
            self.indptr.resize((self._written + full,))
            self.indptr[self._written:] = self._ptrs[:full]
            self._ptrs, self._written = self._ptrs[full:].copy(), self._written + full

    def close(self) -> CSRStore:
        self.indptr.resize((self.n_rows + 1,))
        if len(self._ptrs):
            self.indptr[self._written:] = self._ptrs
        self.group.attrs[f"{self.name}.shape"] = [self.n_rows, self.n_features]
        return CSRStore(self.indptr, self.indices, self.data, (self.n_rows, self.n_features))


def write_csr(group, name: str, blocks, n_features: int, *, chunk_rows: int,
              chunk_nnz: int = 1 << 20, dtype="float32") -> CSRStore:
    """Write CSR row blocks (an iterable of scipy.sparse matrices) with a ``CSRWriter``;
    returns the ``CSRStore`` over them."""
    writer = CSRWriter(group, name, n_features, chunk_rows=chunk_rows, chunk_nnz=chunk_nnz,
                       dtype=dtype)
    for block in blocks:
        writer.append(block)
    return writer.close()


def open_csr(group, name: str) -> CSRStore | None:
    """The ``CSRStore`` named ``name`` in an open zarr group (``write_csr``'s three arrays and
    the group attribute ``<name>.shape``), or None when the group holds no such store."""
    try:
        parts = [group[f"{name}.{p}"] for p in ("indptr", "indices", "data")]
    except KeyError:
        return None
    shape = group.attrs.get(f"{name}.shape")
    if shape is None:
        raise FileNotFoundError(f"zarr group has the arrays of CSR store {name!r} but no "
                                f"attribute {name}.shape")
    return CSRStore(*parts, shape)
