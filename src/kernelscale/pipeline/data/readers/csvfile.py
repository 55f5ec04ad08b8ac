"""Delimited text (CSV): one row per line, all columns numeric, one of them the label.

The label column is ``label_column``: an index (default -1, the last; negative counts from
the end) or, with ``header: true``, a name. Read with pandas in chunks of ``block_rows`` lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import DataError
from .base import Block, float32_features, open_binary


def read_csv(path: Path, *, block_rows: int, archive: str | None = None,
             label_column: int | str = -1, header: bool = False,
             delimiter: str = ",") -> Iterator[Block]:
    """Yield blocks with the label column split off as ``y``."""
    import pandas as pd

    path = Path(path)
    first_row = 0
    with open_binary(path, archive) as stream:
        try:
            chunks = pd.read_csv(stream, sep=delimiter, header=0 if header else None,
                                 chunksize=block_rows, skip_blank_lines=True)
            for chunk in chunks:
                yield _block(chunk, path.name, first_row, label_column, header,
                             lambda row: _fields(path, archive, row, header, delimiter))
                first_row += len(chunk)
        except pd.errors.EmptyDataError:
            pass
        except pd.errors.ParserError as exc:
            raise DataError(f"{path.name}: {exc}") from None
    if first_row == 0:
        raise DataError(f"{path.name}: no data rows")


def _fields(path: Path, archive: str | None, row: int, header: bool, delimiter: str) -> int:
    """The number of fields of data row ``row`` (0-based, blank lines skipped as pandas does)
    as written in the file: pandas pads a short row with NaN, as it reads an empty field."""
    with open_binary(path, archive) as stream:
        lines = (ln for ln in stream if ln.strip())
        for _ in range(row + int(header)):
            next(lines)
        return len(next(lines).split(delimiter.encode()))


def _block(chunk, name: str, first_row: int, label_column, header: bool, fields) -> Block:
    import pandas as pd

    columns = list(chunk.columns)
    if isinstance(label_column, str):
        if label_column not in columns:
            raise DataError(f"{name}: no column named {label_column!r} (columns: "
                            f"{', '.join(map(str, columns))})")
        label_index = columns.index(label_column)
    else:
        if not -len(columns) <= label_column < len(columns):
            raise DataError(f"{name}: label_column {label_column} out of range for "
                            f"{len(columns)} columns")
        label_index = label_column % len(columns)
    numeric = chunk.apply(pd.to_numeric, errors="coerce")
    bad = (numeric.isna() & chunk.notna()).to_numpy()
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise DataError(f"{name}: row {first_row + row + 1}: column {col + 1}: "
                        f"{chunk.iat[row, col]!r} is not a number")
    padded = numeric.iloc[:, -1].isna().to_numpy()
    if padded.any():  # an empty last field, or a row with fewer fields than the others
        row = int(np.argmax(padded))
        n = fields(first_row + row)
        if n < len(columns):
            raise DataError(f"{name}: row {first_row + row + 1} has {n} fields where "
                            f"{len(columns)} are expected")
    values = numeric.to_numpy(dtype=np.float64)
    return Block(float32_features(np.delete(values, label_index, axis=1), name, first_row),
                 values[:, label_index], first_row, name)
