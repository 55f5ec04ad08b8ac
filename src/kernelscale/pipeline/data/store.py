"""The prepared dataset on disk: ``<out>/data.zarr`` (Zarr v3) + ``<out>/meta.json``.

Arrays: ``X_train`` (n_train, d) and ``X_test`` float32 in chunks of ``chunk_rows`` rows and all
columns (``meta["sparse"]``: CSR stores); ``y_train``/``y_test`` int64 class indices or float32
targets; ``pca_components`` (k, d_raw) after PCA. ``meta.json``, written last, records the size
and sha256 of every file of every array (``checksums``), which :func:`verify_prepared` checks
before a dataset is used; a folder is only ever published whole (:func:`publish`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from .download import sha256_of
from .errors import DataError

META_FILE = "meta.json"
ZARR_DIR = "data.zarr"


class ChunkedWriter:
    """Appends rows to a row-chunked Zarr array, buffering them so that each chunk is written
    once, whole; keeps a sha256 of the rows written, in order, as a content hash of the array."""

    def __init__(self, array):
        self.array = array
        self.chunk_rows = array.chunks[0]
        self.position = 0
        self._pending: list[np.ndarray] = []
        self.digest = hashlib.sha256()

    def append(self, rows: np.ndarray) -> None:
        if len(rows) == 0:
            return
        rows = np.ascontiguousarray(rows, dtype=self.array.dtype)
        self.digest.update(rows.astype(rows.dtype.newbyteorder("<"), copy=False).tobytes())
        self._pending.append(rows)
        if sum(map(len, self._pending)) >= self.chunk_rows:
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
    part.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(part, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return True


def staging_dir(out_dir: Path) -> Path:
    """A fresh temporary folder beside ``out_dir`` (same file system, so rename is atomic);
    leftovers of killed runs (``.<name>.partial-<pid>`` whose process is gone) are removed."""
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
    """Replace ``out_dir`` (if any: moved aside, then deleted) by the finished ``staging``
    folder, by renaming it."""
    old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
    if out_dir.exists():
        os.replace(out_dir, old)
    os.replace(staging, out_dir)
    shutil.rmtree(old, ignore_errors=True)


CHECKSUMS_KEY = "checksums"


class SparseWriter:
    """``ChunkedWriter`` for CSR rows (``preprocess.sparse``): a ``kernelscale.io.CSRWriter``
    store ``name`` (arrays ``<name>.indptr`` / ``.indices`` / ``.data``); the sha256 is of the
    rows' indptr, indices and values, in order."""

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


def chunk_checksums(zarr_dir: str | os.PathLike) -> dict[str, dict[str, list]]:
    """``{array: {relative file: [size, sha256]}}`` for every file (``zarr.json`` and the chunks
    written: not those all fill value) of every top-level array in the Zarr v3 group."""
    out: dict[str, dict[str, list]] = {}
    for adir in sorted(Path(zarr_dir).iterdir()):
        meta = adir / "zarr.json"
        if not meta.is_file():
            continue
        try:
            kind = json.loads(meta.read_text()).get("node_type")
        except (OSError, ValueError):
            kind = "array"  # unreadable metadata: still hash it, verification will say so
        if kind == "array":
            out[adir.name] = {f.relative_to(adir).as_posix(): [f.stat().st_size, sha256_of(f)]
                              for f in sorted(p for p in adir.rglob("*") if p.is_file())}
    return out


def _damaged(out_dir: Path, message: str) -> DataError:
    err = DataError(f"{out_dir}: {message}; the prepared data are damaged: re-run prepare "
                    f"(delete {out_dir} and run the workflow again, or `kernelscale prepare "
                    f"--out {out_dir} ...`)")
    err.problem = message  # the fault alone (the workflow re-prepares by itself)
    return err


def prepared_fault(out_dir: str | os.PathLike) -> str | None:
    """What is wrong with the prepared dataset in ``out_dir`` (one line), or None when every file
    matches ``meta.json`` (:func:`verify_prepared`) or there is no ``meta.json`` (not prepared)."""
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

    Every recorded file must exist with its size and, when ``hashes``, its sha256; a file that
    is not recorded is an error too. Raises :class:`DataError`, one line naming the array and
    the file.
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
            if actual != size or (hashes and sha256_of(path) != digest):
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
    ``meta["sparse"]`` X_train / X_test are ``kernelscale.io.CSRStore``), checked first against
    meta.json's checksums (:func:`verify_prepared`) unless ``verify`` is False."""
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
