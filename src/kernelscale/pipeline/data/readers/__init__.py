"""Streaming readers: each yields :class:`Block` s of rows from one data file, never holding
the whole file (compressed files are decompressed as a stream)."""

from __future__ import annotations

import lzma
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import DataError
from .base import Block, open_binary
from .csvfile import read_csv
from .idx import read_idx
from .libsvm import read_libsvm
from .npz import read_npz

__all__ = ["Block", "open_binary", "read_file", "read_csv", "read_idx", "read_libsvm",
           "read_npz"]


def read_file(fmt: str, path: Path, *, block_rows: int, labels_path: Path | None = None,
              archive: str | None = None, n_features: int | None = None,
              zero_based: bool = False, csv_options: dict | None = None,
              sparse: bool = False) -> Iterator[Block]:
    """Blocks of (X float32, y float64) rows from ``path`` in format ``fmt`` (``sparse``: X as
    scipy.sparse CSR, libsvm only); a compressed file that ends early or is damaged (an
    incomplete download) is a one-line error naming it."""
    if fmt == "idx" and labels_path is None:
        raise DataError(f"{path.name}: format idx needs a labels file")
    readers = {
        "libsvm": lambda: read_libsvm(path, block_rows=block_rows, archive=archive,
                                      n_features=n_features, zero_based=zero_based, sparse=sparse),
        "idx": lambda: read_idx(path, labels_path, block_rows=block_rows, archive=archive),
        "csv": lambda: read_csv(path, block_rows=block_rows, archive=archive,
                                **(csv_options or {})),
        "npz": lambda: read_npz(path, block_rows=block_rows),
    }
    if fmt not in readers:
        raise DataError(f"{path.name}: unknown format {fmt!r}")
    try:
        yield from readers[fmt]()
    except (EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, OSError) as e:
        if isinstance(e, OSError) and e.errno is not None:
            raise  # the file system's error, not the data's (a decoder's OSError has no errno)
        files = f"{path}" + (f" or {labels_path}" if labels_path else "")
        raise DataError(f"{files}: compressed data truncated or damaged ({e}); delete the file "
                        "(an incomplete download?) and run again") from None
