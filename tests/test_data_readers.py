"""Streaming readers on small files written by the tests."""

from __future__ import annotations

import bz2
import gzip
import struct
import zipfile

import numpy as np
import pytest

from kernelscale.pipeline.data import DataError
from kernelscale.pipeline.data.readers import read_csv, read_file, read_idx, read_libsvm, read_npz

LIBSVM = b"""1 1:0.5 3:2
# a comment line
-1 2:1.5
1 qid:3 4:-1
-1
1 1:1 2:2 3:3 4:4
"""
DENSE = np.array([[0.5, 0, 2, 0], [0, 1.5, 0, 0], [0, 0, 0, -1], [0, 0, 0, 0], [1, 2, 3, 4]],
                 dtype=np.float32)
LABELS = np.array([1, -1, 1, -1, 1], dtype=np.float64)


def _collect(blocks):
    blocks = list(blocks)
    width = max(b.X.shape[1] for b in blocks)
    X = np.vstack([np.pad(b.X, ((0, 0), (0, width - b.X.shape[1]))) for b in blocks])
    return blocks, X, np.concatenate([b.y for b in blocks])


@pytest.mark.parametrize("compress", ["none", "bz2", "gz"])
def test_libsvm_blocks_with_known_width(tmp_path, compress):
    path = tmp_path / {"none": "a.svm", "bz2": "a.svm.bz2", "gz": "a.svm.gz"}[compress]
    writer = {"none": bytes, "bz2": bz2.compress, "gz": gzip.compress}[compress]
    path.write_bytes(writer(LIBSVM))
    blocks, X, y = _collect(read_libsvm(path, block_rows=2, n_features=4))
    assert all(b.X.dtype == np.float32 and b.X.shape[1] == 4 for b in blocks)
    np.testing.assert_array_equal(X, DENSE)
    np.testing.assert_array_equal(y, LABELS)
    assert [b.first_row for b in blocks] == [0, 1, 3]  # the comment line is not a row


def test_libsvm_width_grows_without_n_features(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(LIBSVM)
    blocks, X, _ = _collect(read_libsvm(path, block_rows=2))
    assert [b.X.shape[1] for b in blocks] == [3, 4, 4]
    np.testing.assert_array_equal(X, DENSE)


def test_libsvm_zero_based(tmp_path):
    path = tmp_path / "z.svm"
    path.write_bytes(b"1 0:1 2:3\n")
    (block,) = read_libsvm(path, block_rows=10, zero_based=True)
    np.testing.assert_array_equal(block.X, [[1, 0, 3]])


@pytest.mark.parametrize("content, message", [
    (b"1 1:1\n1 0:2\n", "a.svm: line 2: feature index 0 < 1"),
    (b"1 1:1\nabc 1:2\n", "a.svm: line 2: label 'abc' is not a number"),
    (b"1 1:1\n1 2:x\n", "a.svm: line 2: '2:x' is not index:value"),
    (b"1 1:1 5:1\n", "a.svm: line 1: feature index 5 exceeds n_features=4"),
    (b"1 3:1 2:1\n", "a.svm: line 1: feature indices must be increasing"),
    (b"", "a.svm: empty file"),
    (b"# only a comment\n\n", "a.svm: no data rows"),
])
def test_libsvm_errors_name_the_line(tmp_path, content, message):
    path = tmp_path / "a.svm"
    path.write_bytes(content)
    with pytest.raises(DataError) as err:
        list(read_libsvm(path, block_rows=10, n_features=4))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def _idx(dtype_code: int, array: np.ndarray) -> bytes:
    header = bytes([0, 0, dtype_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def test_idx_gzipped_images_and_labels(tmp_path):
    images = np.arange(5 * 3 * 2, dtype=np.uint8).reshape(5, 3, 2)
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    (tmp_path / "x-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(0x08, images)))
    (tmp_path / "y-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(0x08, labels)))
    blocks, X, y = _collect(read_idx(tmp_path / "x-idx3-ubyte.gz", tmp_path / "y-idx1-ubyte.gz",
                                     block_rows=2))
    assert [len(b) for b in blocks] == [2, 2, 1] and X.dtype == np.float32
    np.testing.assert_array_equal(X, images.reshape(5, 6))
    np.testing.assert_array_equal(y, labels)


def test_idx_errors(tmp_path):
    images, labels = tmp_path / "x", tmp_path / "y"
    images.write_bytes(_idx(0x08, np.zeros((4, 2, 2), np.uint8)))
    labels.write_bytes(_idx(0x08, np.zeros(3, np.uint8)))
    with pytest.raises(DataError, match="x: 4 images but y has 3 labels"):
        list(read_idx(images, labels, block_rows=2))
    images.write_bytes(b"\x01\x02\x03\x04garbage")
    with pytest.raises(DataError, match="x: not an IDX file"):
        list(read_idx(images, labels, block_rows=2))
    images.write_bytes(_idx(0x08, np.zeros((3, 2, 2), np.uint8))[:-5])
    with pytest.raises(DataError, match="x: truncated at row 2 "):
        list(read_idx(images, labels, block_rows=2))


def test_csv_label_last_by_default_and_by_name(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1.5,2,0\n3,4,1\n5,6.5,1\n")
    blocks, X, y = _collect(read_csv(path, block_rows=2))
    np.testing.assert_array_equal(X, [[1.5, 2], [3, 4], [5, 6.5]])
    np.testing.assert_array_equal(y, [0, 1, 1])
    assert [b.first_row for b in blocks] == [0, 2]
    named = tmp_path / "b.csv"
    named.write_text("target;f1;f2\n7;1;2\n8;3;4\n")
    _, X, y = _collect(read_csv(named, block_rows=10, header=True, delimiter=";",
                                label_column="target"))
    np.testing.assert_array_equal(X, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(y, [7, 8])
    _, X, y = _collect(read_csv(path, block_rows=10, label_column=0))
    np.testing.assert_array_equal(y, [1.5, 3, 5])


# (file text, read_csv options, the one line naming the real cause)
CSV_CASES = [
    ("1,2,0\n3,4,1\n5,oops,1\n", {}, r"a.csv: row 3: column 2: 'oops' is not a number$"),
    ("1,2,3,4,5,0\n" * 150 + "1,2,3,0\n" + "1,2,3,4,5,0\n", {},
     r"a.csv: row 151 has 4 fields where 6 are expected$"),
    ("f1,f2,f3,y\n\n1,2,3,0\n\n1,2,0\n", {"header": True},
     r"a.csv: row 2 has 3 fields where 4 are expected$"),
    ("1,2,0\n3,1e40,1\n", {}, r"a.csv: row 2: feature 2 is 1e\+40, too large for float32"),
    ("1,2,0\n3,4,1\n-1e300,4,1\n", {}, r"a.csv: row 3: feature 1 is -1e\+300, too large for "),
]


@pytest.mark.parametrize("text,options,message", CSV_CASES, ids=range(len(CSV_CASES)))
def test_csv_errors_name_row_and_cause(tmp_path, text, options, message):
    path = tmp_path / "a.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        list(read_csv(path, block_rows=64, **options))


def test_csv_empty_last_field_is_a_missing_value_not_a_short_row(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1,2,3,0\n1,2,,\n")  # 4 fields, two empty: NaN, found by the NaN check
    _, X, y = _collect(read_csv(path, block_rows=64))
    assert np.isnan(X[1, 2]) and np.isnan(y[1])


def test_npz_value_too_large_for_float32(tmp_path):
    path = tmp_path / "a.npz"
    X = np.ones((5, 3))
    X[3, 1] = 1e300
    np.savez(path, X=X, y=np.zeros(5))
    with pytest.raises(DataError, match=r"a.npz: row 4: feature 2 is 1e\+300, too large for "):
        list(read_npz(path, block_rows=2))


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_streams_rows(tmp_path, compressed):
    X = np.random.default_rng(0).normal(size=(7, 3))
    y = np.arange(7)
    path = tmp_path / "a.npz"
    (np.savez_compressed if compressed else np.savez)(path, X=X, y=y)
    blocks, got_X, got_y = _collect(read_npz(path, block_rows=3))
    assert [len(b) for b in blocks] == [3, 3, 1]
    np.testing.assert_allclose(got_X, X.astype(np.float32))
    np.testing.assert_array_equal(got_y, y)


def test_npz_errors(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, X=np.zeros((3, 2)), labels=np.zeros(3))
    with pytest.raises(DataError, match="a.npz: no array 'y' in the npz"):
        list(read_npz(path, block_rows=2))
    np.savez(path, X=np.zeros((3, 2)), y=np.zeros(4))
    with pytest.raises(DataError, match="a.npz: X has 3 rows but y has 4"):
        list(read_npz(path, block_rows=2))


def test_zip_archive_and_dispatch(tmp_path):
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("inner.svm", LIBSVM)
    _, X, _ = _collect(read_file("libsvm", path, block_rows=3, n_features=4))
    np.testing.assert_array_equal(X, DENSE)
    with pytest.raises(DataError, match="file not found"):
        list(read_file("csv", tmp_path / "missing.csv", block_rows=3))


@pytest.mark.parametrize("fmt,suffix,compress", [
    ("csv", ".csv.gz", gzip.compress), ("libsvm", ".svm.gz", gzip.compress),
    ("libsvm", ".svm.bz2", bz2.compress), ("csv", ".csv.xz", __import__("lzma").compress)])
def test_truncated_compressed_file_is_named(tmp_path, fmt, suffix, compress):
    """An incomplete download: the one line names the file, not only the decoder's complaint."""
    text = ("1,2,3,0\n" if fmt == "csv" else "1 1:2 2:3\n") * 20000
    whole = compress(text.encode())
    path = tmp_path / f"a{suffix}"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=rf"^{path}: compressed data truncated or damaged") as e:
        list(read_file(fmt, path, block_rows=1000))
    assert "\n" not in str(e.value)
