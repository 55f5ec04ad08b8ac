"""LIBSVM / svmlight text: ``label index:value index:value ...`` (indices 1-based by default).

Lines are read a block at a time. A block of plain lines (no comments, no ``qid:``) is parsed
vectorized; scikit-learn's svmlight parser takes the others, and a block it rejects is parsed
line by line to name the offending line.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np

from ..errors import DataError
from .base import Block, open_binary


def read_libsvm(path: Path, *, block_rows: int, archive: str | None = None,
                n_features: int | None = None, zero_based: bool = False,
                sparse: bool = False) -> Iterator[Block]:
    """Yield blocks of at most ``block_rows`` rows, dense (float32) or, with ``sparse``, CSR.

    With ``n_features`` every block has that many columns (a larger index is an error); without
    it a block is as wide as its largest feature index, and the caller pads (absent entries of
    a sparse row are zeros, so padding is exact).
    """
    path = Path(path)
    first_row, first_line = 0, 1
    with open_binary(path, archive) as stream:
        while lines := list(islice(stream, block_rows)):
            data = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith(b"#")]
            if data:
                X, y = (_parse_plain(data, n_features, zero_based, sparse)
                        or _parse_full(path, data, lines, first_line, n_features, zero_based,
                                       sparse))
                yield Block(X, y, first_row, path.name)
                first_row += len(data)
            first_line += len(lines)
    if first_row == 0:
        raise DataError(f"{path.name}: no data rows")


def _parse_full(path: Path, data: list[bytes], lines: list[bytes], first_line: int,
                n_features: int | None, zero_based: bool, sparse: bool):
    """A block of ``data`` lines (of ``lines``) by scikit-learn's svmlight parser; a block it
    rejects is re-parsed line by line for a one-line error naming the bad line."""
    from sklearn.datasets import load_svmlight_file

    try:
        X, y = load_svmlight_file(io.BytesIO(b"".join(data)), n_features=n_features,
                                  dtype=np.float32, zero_based=zero_based)
        return (X if sparse else X.toarray()), np.asarray(y, dtype=np.float64)
    except ValueError as exc:
        rejected = exc  # raised below, outside the except: no chained traceback
    lowest = 0 if zero_based else 1
    highest = None if n_features is None else n_features - 1 if zero_based else n_features
    for offset, line in enumerate(lines):
        where = f"{path.name}: line {first_line + offset}"
        tokens = line.split(b"#", 1)[0].split()
        if not tokens:
            continue
        try:
            float(tokens[0])
        except ValueError:
            raise DataError(f"{where}: label {tokens[0].decode(errors='replace')!r} is not a "
                            "number") from None
        previous = lowest - 1
        for token in tokens[1:]:
            if token.startswith(b"qid:"):
                continue
            index, sep, value = token.partition(b":")
            try:
                index_int, _ = int(index), float(value)
                if not sep:
                    raise ValueError
            except ValueError:
                raise DataError(f"{where}: {token.decode(errors='replace')!r} is not "
                                "index:value") from None
            if index_int < lowest:
                raise DataError(f"{where}: feature index {index_int} < {lowest} (set "
                                "zero_based: true for 0-based files)")
            if highest is not None and index_int > highest:
                raise DataError(f"{where}: feature index {index_int} exceeds n_features="
                                f"{n_features}")
            if index_int <= previous:
                raise DataError(f"{where}: feature indices must be increasing")
            previous = index_int
    raise DataError(f"{path.name}: lines {first_line}-{first_line + len(lines) - 1}: {rejected}")


def _parse_plain(lines: list[bytes], n_features: int | None, zero_based: bool,
                 sparse: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """Vectorized parse of ``label index:value ...`` lines; None when the block needs the full
    parser (comments, qid, anything malformed or out of range)."""
    text = b"".join(lines)
    if b"#" in text or b"q" in text:
        return None
    pairs = np.fromiter((line.count(b":") for line in lines), dtype=np.int64, count=len(lines))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            flat = np.fromstring(text.replace(b":", b" "), sep=" ")
        except (DeprecationWarning, ValueError):
            return None
    sizes = 1 + 2 * pairs
    if flat.size != int(sizes.sum()):
        return None
    starts = np.cumsum(sizes) - sizes
    is_label = np.zeros(flat.size, dtype=bool)
    is_label[starts] = True
    entries = flat[~is_label].reshape(-1, 2)
    index = entries[:, 0]
    if not np.array_equal(index, np.round(index)):
        return None
    cols = index.astype(np.int64) - (0 if zero_based else 1)
    rows = np.repeat(np.arange(len(lines)), pairs)
    if cols.size:
        if cols.min() < 0 or (n_features is not None and cols.max() >= n_features):
            return None
        same_row = rows[1:] == rows[:-1]
        if np.any(cols[1:][same_row] <= cols[:-1][same_row]):  # must increase within a row
            return None
    width = n_features if n_features is not None else (int(cols.max()) + 1 if cols.size else 0)
    if sparse:  # indices increase within a row (checked above): canonical CSR
        import scipy.sparse

        indptr = np.concatenate([[0], np.cumsum(pairs)])
        return scipy.sparse.csr_matrix((entries[:, 1].astype(np.float32), cols, indptr),
                                       shape=(len(lines), width)), flat[starts]
    X = np.zeros((len(lines), width), dtype=np.float32)
    X[rows, cols] = entries[:, 1]
    return X, flat[starts]
