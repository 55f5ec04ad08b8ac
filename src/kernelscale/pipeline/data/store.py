"""The prepared dataset on disk: ``<out>/data.zarr`` (Zarr v3) + ``<out>/meta.json``.

Arrays: ``X_train`` (n_train, d) and ``X_test`` float32, chunked by ``chunk_rows`` rows with all
columns in one chunk (the access pattern of mini-batch solvers); ``y_train``/``y_test`` int64
class indices (classification) or float32 targets (regression); ``pca_components`` (k, d_raw)
when PCA was applied. ``meta.json`` is written last; a folder is only ever published whole,
by renaming a finished temporary folder (see :func:`publish`).

Integrity: ``meta.json`` records the size and sha256 of every file of every array's store
(``checksums``: metadata and chunk files, as written); :func:`verify_prepared` checks them before
a dataset is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from .errors import DataError

META_FILE = "meta.json"
ZARR_DIR = "data.zarr"


class ChunkedWriter:
    """Appends rows to a row-chunked Zarr array, writing whole chunks only.

    Splitting rows into train and test leaves blocks of arbitrary size; buffering until a full
    chunk is ready means every chunk is encoded exactly once (no read-modify-write). Also keeps
    a sha256 of the rows written, in order, as a content hash of the array.
    """

    def __init__(self, array):
        self.array = array
        self.chunk_rows = array.chunks[0]
        self.position = 0
        self._pending: list[np.ndarray] = []
        self._pending_rows = 0
        self.digest = hashlib.sha256()

    def append(self, rows: np.ndarray) -> None:
        if len(rows) == 0:
            return
        rows = np.ascontiguousarray(rows, dtype=self.array.dtype)
        self.digest.update(rows.astype(rows.dtype.newbyteorder("<"), copy=False).tobytes())
        self._pending.append(rows)
        self._pending_rows += len(rows)
        if self._pending_rows >= self.chunk_rows:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self._pending:
            return
        buffer = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        full = len(buffer) if final else len(buffer) - len(buffer) % self.chunk_rows
        end = self.position + full
        if end > self.array.shape[0]:
            raise DataError(f"{self.array.name}: more rows than counted in the first pass; did "
                            "the source change while it was being read?")
        if full:
            self.array[self.position:end] = buffer[:full]
        self.position = end
        rest = buffer[full:]
        self._pending = [rest] if len(rest) else []
        self._pending_rows = len(rest)

    def close(self) -> str:
        """Write the last partial chunk; return the hex sha256 of all rows."""
        self._flush(final=True)
        if self.position != self.array.shape[0]:
            raise DataError(f"{self.array.name}: wrote {self.position} rows, expected "
                            f"{self.array.shape[0]}; did the source change while being read?")
        return self.digest.hexdigest()


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write JSON to ``path`` through a temporary file and a rename."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")
    os.replace(part, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def staging_dir(out_dir: Path) -> Path:
    """A fresh temporary folder beside ``out_dir`` (same file system, so rename is atomic).

    Leftovers of killed runs (``.<name>.partial-<pid>`` whose process is gone) are removed.
    """
    for stale in out_dir.parent.glob(f".{out_dir.name}.partial-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def publish(staging: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` by the finished ``staging`` folder.

    Renaming a folder is atomic; if ``out_dir`` exists (an older result, or the empty folder
    Snakemake creates for outputs) it is moved aside first and deleted after.
    """
    if out_dir.exists():
        old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
        os.replace(out_dir, old)
        os.replace(staging, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out_dir)


CHECKSUMS_KEY = "checksums"
_HASH_BLOCK = 1 << 22


class SparseWriter:
    """``ChunkedWriter`` for CSR rows (``preprocess.sparse``): appends them to a
    ``kernelscale.io.CSRWriter`` store named ``name`` (arrays ``<name>.indptr`` / ``.indices`` /
    ``.data``) and keeps a sha256 of the rows written (their indptr, indices and values, in
    order)."""

    def __init__(self, group, name: str, n_rows: int, n_features: int, chunk_rows: int):
        from ...io import CSRWriter

        self.name, self.n_rows = name, int(n_rows)
        self.writer = CSRWriter(group, name, n_features, chunk_rows=chunk_rows)
        self.digest = hashlib.sha256()

    def append(self, rows) -> None:
        rows = rows.tocsr()
        if rows.shape[0] == 0:
            return
        rows.sort_indices()
        for part in (np.diff(rows.indptr).astype("<i8"), rows.indices.astype("<i4"),
                     rows.data.astype("<f4")):
            self.digest.update(part.tobytes())
        self.writer.append(rows)

    def close(self) -> str:
        store = self.writer.close()
        if store.shape[0] != self.n_rows:
            raise DataError(f"{self.name}: wrote {store.shape[0]} rows, expected {self.n_rows}; "
                            "did the source change while being read?")
        return self.digest.hexdigest()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def _array_dirs(zarr_dir: Path) -> list[Path]:
    """Top-level array folders of a Zarr v3 group (those whose zarr.json says 'array')."""
    out = []
    for child in sorted(zarr_dir.iterdir()):
        meta = child / "zarr.json"
        if child.is_dir() and meta.is_file():
            try:
                kind = json.loads(meta.read_text()).get("node_type")
            except (OSError, ValueError):
                kind = "array"  # unreadable metadata: still hash it, verification will say so
            if kind == "array":
                out.append(child)
    return out


def chunk_checksums(zarr_dir: str | os.PathLike) -> dict[str, dict[str, list]]:
    """``{array: {relative file: [size, sha256]}}`` for every file of every array in the group
    (its ``zarr.json`` and chunk files). Zarr does not write chunks that are all fill value, so
    the record, not the chunk grid, says which chunk files must exist."""
    zarr_dir = Path(zarr_dir)
    out: dict[str, dict[str, list]] = {}
    for adir in _array_dirs(zarr_dir):
        files = {}
        for f in sorted(p for p in adir.rglob("*") if p.is_file()):
            files[f.relative_to(adir).as_posix()] = [f.stat().st_size, _file_sha256(f)]
        out[adir.name] = files
    return out


def _damaged(out_dir: Path, message: str) -> DataError:
    err = DataError(f"{out_dir}: {message}; the prepared data are damaged: re-run prepare "
                    f"(delete {out_dir} and run the workflow again, or `kernelscale prepare "
                    f"--out {out_dir} ...`)")
    err.problem = message  # the fault alone (the workflow re-prepares by itself)
    return err


def prepared_fault(out_dir: str | os.PathLike) -> str | None:
    """What is wrong with the prepared dataset in ``out_dir`` (one line), or None when it is
    complete and every file matches ``meta.json`` (:func:`verify_prepared`, sha256 included) or
    when there is no ``meta.json`` at all (not prepared yet). Reads no array through Zarr."""
    meta_path = Path(out_dir) / META_FILE
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        return f"{META_FILE} is unreadable ({' '.join(str(exc).split())})"
    if not isinstance(meta, dict):
        return f"{META_FILE} is not a JSON object"
    if not isinstance(meta.get(CHECKSUMS_KEY), dict):
        return f"{META_FILE} has no chunk checksums"
    try:
        verify_prepared(out_dir, meta)
    except DataError as e:
        return getattr(e, "problem", str(e))
    return None


def verify_prepared(out_dir: str | os.PathLike, meta: dict, names=None, *,
                    hashes: bool = True) -> None:
    """Check the arrays ``names`` (default: all recorded) against ``meta['checksums']``.

    Every recorded file must exist with its size (a stat: cheap) and, when ``hashes``, its
    sha256 (reads the stored bytes once; ``hashes=False`` only stats them). A chunk file that is
    not recorded is an error too (zarr would read it instead
    of the fill value). Raises :class:`DataError`, one line naming the array and the file.
    """
    out_dir = Path(out_dir)
    record = meta.get(CHECKSUMS_KEY)
    if not isinstance(record, dict):
        raise DataError(f"{out_dir}/{META_FILE} has no chunk checksums (prepared by an older "
                        "kernelscale, or by hand), so lost or damaged chunks cannot be detected; "
                        f"re-run prepare (delete {out_dir} and run the workflow again)")
    zarr_dir = out_dir / ZARR_DIR
    for name in (record if names is None else names):
        files = record.get(name)
        if files is None:
            raise _damaged(out_dir, f"{META_FILE} records no array {name!r}")
        adir = zarr_dir / name
        if not adir.is_dir():
            raise _damaged(out_dir, f"array {name} is missing ({adir} does not exist)")
        for rel, (size, digest) in files.items():
            path = adir / rel
            try:
                actual = path.stat().st_size
            except FileNotFoundError:
                what = "metadata" if rel == "zarr.json" else "chunk"
                raise _damaged(out_dir, f"array {name}: {what} file {rel} is missing") from None
            if actual != size or (hashes and _file_sha256(path) != digest):
                raise _damaged(out_dir, f"array {name}: file {rel} has changed (its "
                               f"{'size' if actual != size else 'sha256'} differs from "
                               f"{META_FILE})")
        extra = sorted(p.relative_to(adir).as_posix() for p in adir.rglob("*")
                       if p.is_file() and p.relative_to(adir).as_posix() not in files)
        if extra:
            raise _damaged(out_dir, f"array {name}: unexpected file {extra[0]}"
                           + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))


def open_prepared(out_dir: str | os.PathLike, verify: bool = True) -> tuple[dict, dict]:
    """Open a prepared dataset: ``(meta, arrays)`` with arrays a dict of read-only Zarr arrays
    (``X_train``, ``y_train``, ``X_test``, ``y_test`` and ``pca_components`` if present; with
    ``meta["sparse"]`` X_train / X_test are ``kernelscale.io.CSRStore``).

    ``verify`` (default): check every file of every array against the checksums in meta.json
    first (:func:`verify_prepared`), so a lost chunk is never read as zeros."""
    import zarr

    out_dir = Path(out_dir)
    meta_path = out_dir / META_FILE
    if not meta_path.exists():
        raise DataError(f"{out_dir}: not a prepared dataset (no {META_FILE}); run "
                        "`kernelscale prepare` first")
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError as exc:
        raise DataError(f"{meta_path} is not valid JSON ({exc}); re-run prepare (delete "
                        f"{out_dir} and run the workflow again)") from None
    if not isinstance(meta, dict):
        raise DataError(f"{meta_path}: expected a JSON object; re-run prepare")
    if verify:
        verify_prepared(out_dir, meta)
    try:
        group = zarr.open_group(str(out_dir / ZARR_DIR), mode="r")
        arrays = dict(group.arrays())
        if meta.get("sparse"):  # CSR stores (``SparseWriter``) in place of their three arrays
            from ...io import open_csr

            for name in ("X_train", "X_test"):
                arrays[name] = open_csr(group, name)
                for part in ("indptr", "indices", "data"):
                    arrays.pop(f"{name}.{part}", None)
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise _damaged(out_dir, f"{ZARR_DIR} cannot be opened ({first})") from None
    return meta, arrays
