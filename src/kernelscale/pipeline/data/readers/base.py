"""What every reader shares: the Block record and transparent decompression."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import DataError

_SUFFIX_ARCHIVE = {".bz2": "bz2", ".gz": "gz", ".xz": "xz", ".zip": "zip"}
_OPENERS = {"bz2": bz2.open, "gz": gzip.open, "xz": lzma.open}


@dataclass
class Block:
    """Consecutive rows of one source file.

    ``X`` is float32 (rows, width), dense or scipy.sparse CSR; ``y`` float64 (rows,) with the
    labels/targets as written in the file; ``first_row`` the 0-based index of the first row in
    the file; ``origin`` the file name used in error messages.
    """

    X: np.ndarray
    y: np.ndarray
    first_row: int
    origin: str

    def __len__(self) -> int:
        return len(self.y)

    def fail(self, offset: int, what: str) -> DataError:
        """A one-line error about row ``first_row + offset`` (reported 1-based)."""
        return DataError(f"{self.origin}: row {self.first_row + offset + 1}: {what}")


def float32_features(values: np.ndarray, origin: str, first_row: int) -> np.ndarray:
    """Rows of features ``values`` as float32; a one-line DataError naming the first row and
    feature whose finite value float32 cannot hold (it would be stored as inf)."""
    with np.errstate(over="ignore"):
        X = np.asarray(values).astype(np.float32)
    over = np.isinf(X)
    if over.any() and (over & np.isfinite(values)).any():
        row, col = np.argwhere(over & np.isfinite(values))[0]
        raise DataError(f"{origin}: row {first_row + row + 1}: feature {col + 1} is "
                        f"{values[row, col]:g}, too large for float32 (at most "
                        f"{np.finfo(np.float32).max:.4g}); rescale it")
    return X


def open_binary(path: str | Path, archive: str | None = None) -> BinaryIO:
    """Open ``path`` for streaming reads, decompressing bz2/gz/xz/zip (one member) on the fly;
    the compression is ``archive``, else guessed from the file suffix."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise DataError(f"{path.name}: empty file")
    kind = archive or _SUFFIX_ARCHIVE.get(path.suffix.lower(), "none")
    if kind in _OPENERS:
        return _OPENERS[kind](path, "rb")
    if kind == "zip":
        archive_file = zipfile.ZipFile(path)
        members = [m for m in archive_file.infolist() if not m.is_dir()]
        if len(members) != 1:
            archive_file.close()
            raise DataError(f"{path.name}: zip archive must hold exactly one file, holds "
                            f"{len(members)}")
        return _ZipMember(archive_file, members[0])
    return open(path, "rb")


class _ZipMember(io.BufferedReader):
    """A zip member's stream that also closes its archive."""

    def __init__(self, archive_file: zipfile.ZipFile, member: zipfile.ZipInfo):
        self._archive_file = archive_file
        super().__init__(archive_file.open(member))

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._archive_file.close()


def read_exactly(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes (decompressing streams may return short reads)."""
    chunks, remaining = [], size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
