"""NumPy ``.npz`` with arrays ``X`` (n, d) and ``y`` (n,), read row blocks at a time from the
members ``X.npy`` and ``y.npy`` as zip streams (never a whole member)."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import DataError
from .base import Block, float32_features, read_exactly


def _open_member(archive: zipfile.ZipFile, key: str, name: str):
    member = f"{key}.npy"
    if member not in archive.namelist():
        raise DataError(f"{name}: no array {key!r} in the npz (has: "
                        f"{', '.join(m.removesuffix('.npy') for m in archive.namelist())})")
    stream = archive.open(member)
    version = np.lib.format.read_magic(stream)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, fortran_order, dtype = read_header(stream)
    if dtype.hasobject:
        raise DataError(f"{name}: array {key!r} has dtype object; store numbers")
    if fortran_order and len(shape) > 1:
        raise DataError(f"{name}: array {key!r} is Fortran-ordered; save it C-ordered "
                        "(np.ascontiguousarray) so rows can be streamed")
    return stream, shape, dtype


def read_npz(path: Path, *, block_rows: int) -> Iterator[Block]:
    """Yield blocks of rows of ``X`` (float32) and ``y`` (float64)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise DataError(f"{path.name}: not an npz file") from None
    with archive:
        xs, x_shape, x_type = _open_member(archive, "X", path.name)
        ys, y_shape, y_type = _open_member(archive, "y", path.name)
        with xs, ys:
            if len(x_shape) != 2 or len(y_shape) != 1:
                raise DataError(f"{path.name}: X must be 2-d and y 1-d, got shapes {x_shape} "
                                f"and {y_shape}")
            if x_shape[0] != y_shape[0]:
                raise DataError(f"{path.name}: X has {x_shape[0]} rows but y has {y_shape[0]}")
            if x_shape[0] == 0:
                raise DataError(f"{path.name}: no data rows")
            width = x_shape[1]
            for start in range(0, x_shape[0], block_rows):
                rows = min(block_rows, x_shape[0] - start)
                X = np.frombuffer(read_exactly(xs, rows * width * x_type.itemsize),
                                  dtype=x_type).reshape(rows, width)
                y = np.frombuffer(read_exactly(ys, rows * y_type.itemsize), dtype=y_type)
                yield Block(float32_features(X, path.name, start), y.astype(np.float64), start,
                            path.name)
