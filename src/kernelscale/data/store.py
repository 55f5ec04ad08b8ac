"""The prepared dataset on disk: ``<out>/data.zarr`` (Zarr v3) + ``<out>/meta.json``.

Arrays: ``X_train`` (n_train, d) and ``X_test`` float32, chunked by ``chunk_rows`` rows with all
columns in one chunk (the access pattern of mini-batch solvers); ``y_train``/``y_test`` int64
class indices (classification) or float32 targets (regression); ``pca_components`` (k, d_raw)
when PCA was applied. ``meta.json`` is written last; a folder is only ever published whole,
by renaming a finished temporary folder (see :func:`publish`).
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


def open_prepared(out_dir: str | os.PathLike) -> tuple[dict, dict]:
    """Open a prepared dataset: ``(meta, arrays)`` with arrays a dict of read-only Zarr arrays
    (``X_train``, ``y_train``, ``X_test``, ``y_test`` and ``pca_components`` if present)."""
    import zarr

    out_dir = Path(out_dir)
    meta_path = out_dir / META_FILE
    if not meta_path.exists():
        raise DataError(f"{out_dir}: not a prepared dataset (no {META_FILE}); run "
                        "`kernelscale prepare` first")
    meta = json.loads(meta_path.read_text())
    group = zarr.open_group(str(out_dir / ZARR_DIR), mode="r")
    return meta, dict(group.arrays())
