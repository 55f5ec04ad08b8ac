"""IDX (the MNIST ``*-ubyte`` format, optionally gzipped): images and labels in two files.

Header: two zero bytes, a type code, the number of dimensions, then each dimension as a
big-endian uint32; records follow in row-major order. Each image is flattened into one row.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import DataError
from .base import Block, open_binary, read_exactly

_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _header(stream: BinaryIO, name: str) -> tuple[np.dtype, tuple[int, ...]]:
    magic = read_exactly(stream, 4)
    if len(magic) < 4 or magic[:2] != b"\x00\x00" or magic[2] not in _TYPES or magic[3] == 0:
        raise DataError(f"{name}: not an IDX file (bad magic number)")
    dims_raw = read_exactly(stream, 4 * magic[3])
    if len(dims_raw) < 4 * magic[3]:
        raise DataError(f"{name}: truncated IDX header")
    return np.dtype(_TYPES[magic[2]]), struct.unpack(f">{magic[3]}I", dims_raw)


def read_idx(images: Path, labels: Path, *, block_rows: int,
             archive: str | None = None) -> Iterator[Block]:
    """Yield blocks of flattened images (float32) with their labels."""
    images, labels = Path(images), Path(labels)
    with open_binary(images, archive) as xs, open_binary(labels, archive) as ys:
        x_type, x_dims = _header(xs, images.name)
        y_type, y_dims = _header(ys, labels.name)
        if len(y_dims) != 1:
            raise DataError(f"{labels.name}: labels file must be 1-dimensional, is "
                            f"{len(y_dims)}-dimensional")
        if x_dims[0] != y_dims[0]:
            raise DataError(f"{images.name}: {x_dims[0]} images but {labels.name} has "
                            f"{y_dims[0]} labels")
        if x_dims[0] == 0:
            raise DataError(f"{images.name}: no data rows")
        width = int(np.prod(x_dims[1:], dtype=np.int64))
        for start in range(0, x_dims[0], block_rows):
            rows = min(block_rows, x_dims[0] - start)
            x_raw = read_exactly(xs, rows * width * x_type.itemsize)
            y_raw = read_exactly(ys, rows * y_type.itemsize)
            if len(x_raw) < rows * width * x_type.itemsize or len(y_raw) < rows * y_type.itemsize:
                complete = min(len(x_raw) // (width * x_type.itemsize),
                               len(y_raw) // y_type.itemsize)
                raise DataError(f"{images.name}: truncated at row {start + complete + 1} (header "
                                f"promises {x_dims[0]} rows)")
            X = np.frombuffer(x_raw, dtype=x_type).reshape(rows, width).astype(np.float32)
            y = np.frombuffer(y_raw, dtype=y_type).astype(np.float64)
            yield Block(X, y, start, images.name)


def idx_shape(path: Path, archive: str | None = None) -> tuple[np.dtype, tuple[int, ...]]:
    """(element type, dimensions) from the header of an IDX file; reads nothing else."""
    path = Path(path)
    with open_binary(path, archive) as stream:
        return _header(stream, path.name)


def load_idx_images(images: Path, labels: Path, archive: str | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """A whole set of byte images (n, rows, cols) uint8 and its labels (n,) float64 (for
    :mod:`..deformed`, which resamples them)."""
    images, labels = Path(images), Path(labels)
    with open_binary(images, archive) as xs, open_binary(labels, archive) as ys:
        x_type, x_dims = _header(xs, images.name)
        y_type, y_dims = _header(ys, labels.name)
        if x_type != np.dtype(">u1") or len(x_dims) != 3:
            raise DataError(f"{images.name}: expected unsigned byte images (n x rows x cols), "
                            f"got type {x_type.str} with {len(x_dims)} dimensions")
        if len(y_dims) != 1 or y_dims[0] != x_dims[0]:
            raise DataError(f"{images.name}: {x_dims[0]} images but {labels.name} has "
                            f"{'x'.join(map(str, y_dims))} labels")
        if x_dims[0] == 0:
            raise DataError(f"{images.name}: no data rows")
        size = int(np.prod(x_dims, dtype=np.int64))
        x_raw = read_exactly(xs, size)
        y_raw = read_exactly(ys, y_dims[0] * y_type.itemsize)
        if len(x_raw) < size or len(y_raw) < y_dims[0] * y_type.itemsize:
            short = images.name if len(x_raw) < size else labels.name
            raise DataError(f"{short}: truncated (header promises {x_dims[0]} rows)")
    return (np.frombuffer(x_raw, dtype=np.uint8).reshape(x_dims),
            np.frombuffer(y_raw, dtype=y_type).astype(np.float64))
