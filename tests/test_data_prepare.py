"""prepare_dataset end to end: shapes, chunking, standardization, PCA, split, bad inputs."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from kernelscale.pipeline.data import DataError, open_prepared, prepare_dataset
from kernelscale.pipeline.data.split import test_mask

GEN = {"name": "classification", "n_samples": 23_000, "n_features": 6, "n_informative": 4,
       "seed": 3}


def _generated(**overrides) -> dict:
    spec = {"task": "binary", "generator": dict(GEN), "split": {"test_size": 0.25, "seed": 7},
            "preprocess": {"standardize": True}, "chunk_rows": 4000}
    spec.update(overrides)
    return spec


def test_generated_dataset_in_several_chunks(tmp_path):
    meta = prepare_dataset("gen", _generated(), tmp_path / "gen")
    meta_disk, arrays = open_prepared(tmp_path / "gen")
    assert meta_disk == json.loads(json.dumps(meta))
    assert set(arrays) == {"X_train", "y_train", "X_test", "y_test"}
    X, y, Xt, yt = (arrays[k] for k in ("X_train", "y_train", "X_test", "y_test"))
    assert meta["n_train"] + meta["n_test"] == 23_000
    assert 0.22 < meta["n_test"] / 23_000 < 0.28  # Bernoulli(0.25) per row
    assert X.shape == (meta["n_train"], 6) and Xt.shape == (meta["n_test"], 6)
    assert X.dtype == np.float32 and y.dtype == np.int64
    assert X.chunks == (4000, 6) and y.chunks == (4000,)
    assert meta["d"] == meta["d_raw"] == 6 and meta["chunk_rows"] == 4000
    assert meta["classes"] == [0, 1] and set(np.unique(y[:])) == {0, 1}
    train = X[:]
    np.testing.assert_allclose(train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(train.std(axis=0), 1, atol=1e-4)
    assert meta["source"] == {"kind": "generator", "params": meta["spec"]["generator"]}
    assert meta["sha256"]["X_train"] == hashlib.sha256(train.tobytes()).hexdigest()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_split_is_deterministic_and_independent_of_chunking(tmp_path):
    first = prepare_dataset("gen", _generated(), tmp_path / "a")
    again = prepare_dataset("gen", _generated(chunk_rows=2500), tmp_path / "b")
    other = prepare_dataset("gen", _generated(split={"test_size": 0.25, "seed": 8}),
                            tmp_path / "c")
    assert first["sha256"] == again["sha256"]
    assert first["sha256"]["y_test"] != other["sha256"]["y_test"]
    np.testing.assert_array_equal(test_mask(7, 0, 1000, 0.25), test_mask(7, 0, 1000, 0.25))
    np.testing.assert_array_equal(test_mask(7, 0, 1000, 0.25)[500:], test_mask(7, 500, 500, 0.25))


def _correlated_npz(path, rows=6000, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(rows, d)) @ rng.normal(size=(d, d)) + 5.0 * rng.normal(size=d))
    y = X @ rng.normal(size=d) + rng.normal(size=rows)
    np.savez(path, X=X.astype(np.float32), y=y)
    mask = test_mask(1, 0, rows, 0.3)
    return X.astype(np.float32).astype(np.float64), mask


def _same_up_to_sign(actual, expected, rtol=2e-4):
    signs = np.sign(np.sum(actual * expected, axis=0))
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual * signs, expected, atol=rtol * scale)


@pytest.mark.parametrize("standardize", [False, True])
def test_centered_pca_matches_sklearn(tmp_path, standardize):
    X, mask = _correlated_npz(tmp_path / "a.npz")
    spec = {"task": "regression", "path": str(tmp_path / "a.npz"), "format": "npz",
            "split": {"test_size": 0.3, "seed": 1}, "chunk_rows": 700,
            "preprocess": {"standardize": standardize, "pca": {"n_components": 3}}}
    meta = prepare_dataset("p", spec, tmp_path / "out")
    _, arrays = open_prepared(tmp_path / "out")
    train, test = X[~mask], X[mask]
    if standardize:
        scaler = StandardScaler().fit(train)
        train, test = scaler.transform(train), scaler.transform(test)
    pca = PCA(n_components=3, svd_solver="full").fit(train)
    _same_up_to_sign(arrays["X_train"][:], pca.transform(train))
    _same_up_to_sign(arrays["X_test"][:], pca.transform(test))
    np.testing.assert_allclose(meta["pca"]["explained_variance_ratio"],
                               pca.explained_variance_ratio_, rtol=1e-6)
    assert meta["d"] == 3 and meta["d_raw"] == 7 and arrays["pca_components"].shape == (3, 7)
    assert arrays["y_train"].dtype == np.float32


@pytest.mark.parametrize("preprocess", [{"standardize": True},
                                        {"standardize": True, "pca": {"n_components": 3}}])
def test_l2_normalize_scales_dense_rows_last(tmp_path, preprocess):
    """``preprocess.normalize: l2`` divides each prepared row (train and test, after standardize
    and pca) by its L2 norm, as sklearn's ``normalize`` of the rows prepared without it; the
    meta of the preparation without it has no ``normalize`` key."""
    from sklearn.preprocessing import normalize

    _correlated_npz(tmp_path / "a.npz")
    spec = {"task": "regression", "path": str(tmp_path / "a.npz"), "format": "npz",
            "split": {"test_size": 0.3, "seed": 1}, "chunk_rows": 700, "preprocess": preprocess}
    plain = prepare_dataset("p", spec, tmp_path / "plain")
    unit = prepare_dataset("p", {**spec, "preprocess": {**preprocess, "normalize": "l2"}},
                           tmp_path / "unit")
    assert "normalize" not in plain and "normalize" not in plain["spec"]["preprocess"]
    assert unit["normalize"] == "l2" and unit["standardize"] == plain["standardize"]
    _, p_arrays = open_prepared(tmp_path / "plain")
    _, u_arrays = open_prepared(tmp_path / "unit")
    for part in ("X_train", "X_test"):
        got = u_arrays[part][:]
        assert got.dtype == np.float32 and got.shape == p_arrays[part].shape
        np.testing.assert_allclose(np.linalg.norm(got.astype(np.float64), axis=1), 1.0,
                                   rtol=1e-6)
        want = normalize(p_arrays[part][:].astype(np.float64), norm="l2")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(u_arrays["y_test"][:], p_arrays["y_test"][:])


def test_l2_normalize_keeps_zero_rows_zero(tmp_path):
    (tmp_path / "z.csv").write_text("0,0,0\n3,4,1\n0,0,1\n-1,0,0\n")
    meta = prepare_dataset("z", {"task": "binary", "path": str(tmp_path / "z.csv"),
                                 "format": "csv", "split": {"test_size": 1e-9, "seed": 0},
                                 "preprocess": {"normalize": "l2"}}, tmp_path / "out")
    _, arrays = open_prepared(tmp_path / "out")
    assert meta["n_train"] == 4 and meta["normalize"] == "l2"
    np.testing.assert_array_equal(arrays["X_train"][:],
                                  np.array([[0, 0], [0.6, 0.8], [0, 0], [-1, 0]], np.float32))


def test_uncentered_pca_is_svd_of_raw_data(tmp_path):
    X, mask = _correlated_npz(tmp_path / "a.npz")
    spec = {"task": "regression", "path": str(tmp_path / "a.npz"), "format": "npz",
            "split": {"test_size": 0.3, "seed": 1}, "chunk_rows": 1000,
            "preprocess": {"pca": {"n_components": 2, "center": False}}}
    meta = prepare_dataset("p", spec, tmp_path / "out")
    _, arrays = open_prepared(tmp_path / "out")
    train = X[~mask]
    _, singular, vt = np.linalg.svd(train, full_matrices=False)
    _same_up_to_sign(arrays["X_train"][:], train @ vt[:2].T)
    _same_up_to_sign(arrays["X_test"][:], X[mask] @ vt[:2].T)
    np.testing.assert_allclose(meta["pca"]["explained_variance_ratio"],
                               singular[:2] ** 2 / np.sum(singular ** 2), rtol=1e-6)
    assert meta["pca"]["center"] is False and not any(meta["pca"]["mean"])
    # centering matters here (the data have a large mean): the first axes differ
    centered = PCA(n_components=1).fit(train).components_[0]
    assert abs(abs(centered @ vt[0]) - 1) > 1e-3


def test_sklearn_digits(tmp_path):
    meta = prepare_dataset("digits", {"task": "multiclass", "sklearn": "digits",
                                      "split": {"test_size": 0.25, "seed": 0}}, tmp_path / "d")
    _, arrays = open_prepared(tmp_path / "d")
    X, y = load_digits(return_X_y=True)
    mask = test_mask(0, 0, len(y), 0.25)
    assert meta["classes"] == list(range(10)) and meta["d"] == 64
    np.testing.assert_array_equal(arrays["X_train"][:], X[~mask].astype(np.float32))
    np.testing.assert_array_equal(arrays["y_test"][:], y[mask])
    assert meta["source"]["loader"] == "load_digits"


def test_libsvm_labels_become_class_indices_and_test_file_widens(tmp_path):
    (tmp_path / "tr.svm").write_text("-1 1:1 2:2\n1 2:1\n-1 1:3\n1 1:1 2:1\n")
    (tmp_path / "te.svm").write_text("1 3:4\n-1 1:1\n")
    meta = prepare_dataset("l", {"task": "binary", "path": str(tmp_path / "tr.svm"),
                                 "test_path": str(tmp_path / "te.svm"), "format": "libsvm"},
                           tmp_path / "out")
    _, arrays = open_prepared(tmp_path / "out")
    assert meta["classes"] == [-1, 1] and meta["d"] == 3 and meta["split"] == {"test_file": True}
    np.testing.assert_array_equal(arrays["y_train"][:], [0, 1, 0, 1])
    np.testing.assert_array_equal(arrays["X_test"][:], [[0, 0, 4], [1, 0, 0]])
    roles = [f["role"] for f in meta["source"]["files"]]
    assert roles == ["train", "test"] and len(meta["source"]["files"][0]["sha256"]) == 64


def test_url_source_is_fetched_verified_and_recorded(tmp_path):
    data = b"1,2,0\n3,4,1\n5,6,1\n7,8,0\n"
    (tmp_path / "src.csv").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    spec = {"task": "binary", "url": (tmp_path / "src.csv").as_uri(), "sha256": digest,
            "format": "csv", "split": {"test_size": 0.5, "seed": 2}}
    meta = prepare_dataset("u", spec, tmp_path / "out", cache_dir=tmp_path / "cache")
    assert (tmp_path / "cache" / "u" / "src.csv").read_bytes() == data
    assert meta["source"]["files"][0]["sha256"] == digest
    assert meta["n_train"] + meta["n_test"] == 4


def test_result_replaces_old_output_and_failure_keeps_it(tmp_path):
    out = tmp_path / "out"
    prepare_dataset("gen", _generated(), out)
    old = (out / "meta.json").read_text()
    (tmp_path / "bad.csv").write_text("1,2,0\n3,nan,1\n")
    with pytest.raises(DataError):
        prepare_dataset("gen", {"task": "binary", "path": str(tmp_path / "bad.csv"),
                                "format": "csv"}, out)
    assert (out / "meta.json").read_text() == old
    prepare_dataset("gen", _generated(chunk_rows=3000), out)
    assert json.loads((out / "meta.json").read_text())["chunk_rows"] == 3000


BAD_CASES = {
    "nan_feature": ("a.csv", "1,2,0\n3,4,1\n5,,1\n", {"format": "csv"},
                    "a.csv: row 3: feature 2 is nan"),
    "inf_feature": ("a.svm", "1 1:1\n-1 2:inf\n", {"format": "libsvm"},
                    "a.svm: row 2: feature 2 is inf"),
    "nan_label": ("a.svm", "1 1:1\nnan 2:1\n", {"format": "libsvm"},
                  "a.svm: row 2: label is nan"),
    "empty_file": ("a.csv", "", {"format": "csv"}, "a.csv: empty file"),
    "regression_labels": ("a.csv", "1,0.5\n2,1.25\n", {"format": "csv"},
                          "a.csv: row 1: label 0.5 is not an integer class label but the task "
                          "is binary"),
    "three_classes": ("a.csv", "1,0\n2,1\n3,2\n", {"format": "csv"},
                      "a.csv: task binary needs exactly 2 classes, found 3 (0, 1, 2)"),
    "one_class": ("a.csv", "1,0\n2,0\n", {"format": "csv", "task": "multiclass"},
                  "a.csv: task multiclass needs at least 2 classes, found 1"),
    "too_many_classes": ("a.csv", "".join(f"{i},{i}\n" for i in range(1002)),
                         {"format": "csv", "task": "multiclass"},
                         "a.csv: rows 1-1002: more than 1000 distinct labels"),
    "ragged_csv": ("a.csv", "1,2,0\n3,4,5,1\n", {"format": "csv"}, "a.csv: "),
    "short_csv_row": ("a.csv", "1,2,0\n3,4,1\n5,1\n", {"format": "csv"},
                      "a.csv: row 3 has 2 fields where 3 are expected"),
    "too_large_for_float32": ("a.csv", "1,2,0\n3,1e40,1\n", {"format": "csv"},
                              "a.csv: row 2: feature 2 is 1e+40, too large for float32"),
    "bad_normalize": ("a.csv", "1,2,0\n3,4,1\n", {"format": "csv", "preprocess": {
        "normalize": "max"}}, "datasets.bad.preprocess.normalize: 'max' is not one of"),
    "pca_too_wide": ("a.svm", "1 1:1\n-1 2:1\n", {"format": "libsvm", "preprocess": {
        "pca": {"n_components": 5}}},
        "datasets.bad.preprocess.pca.n_components: 5 is more than the 2 features"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_gives_one_line_and_leaves_nothing(tmp_path, case):
    name, content, extra, message = BAD_CASES[case]
    (tmp_path / name).write_text(content)
    spec = {"task": "binary", "path": str(tmp_path / name), "split": {"test_size": 0.01},
            **extra}
    out = tmp_path / "results" / "bad"
    with pytest.raises(DataError) as err:
        prepare_dataset("bad", spec, out)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)
    assert not out.exists()
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())


def test_missing_path_and_bad_checksum(tmp_path):
    with pytest.raises(DataError, match=r"^datasets.x.path: file not found: .*nope.svm$"):
        prepare_dataset("x", {"task": "binary", "path": str(tmp_path / "nope.svm"),
                              "format": "libsvm"}, tmp_path / "out")
    (tmp_path / "f.svm").write_text("1 1:1\n")
    with pytest.raises(DataError, match="sha256 mismatch"):
        prepare_dataset("x", {"task": "binary", "url": (tmp_path / "f.svm").as_uri(),
                              "sha256": "0" * 64, "format": "libsvm"}, tmp_path / "out",
                        cache_dir=tmp_path / "cache")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cache" / "x" / "f.svm").exists()


def test_idx_source_and_empty_test_set(tmp_path):
    import gzip
    import struct

    def idx(code, array):
        head = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
        return gzip.compress(head + array.tobytes())

    images = np.random.default_rng(0).integers(0, 256, size=(40, 4, 4), dtype=np.uint8)
    labels = np.arange(40, dtype=np.uint8) % 3
    (tmp_path / "x.gz").write_bytes(idx(0x08, images))
    (tmp_path / "y.gz").write_bytes(idx(0x08, labels))
    meta = prepare_dataset("i", {"task": "multiclass", "path": str(tmp_path / "x.gz"),
                                 "labels_path": str(tmp_path / "y.gz"), "format": "idx",
                                 "split": {"test_size": 1e-9, "seed": 0}, "chunk_rows": 16},
                           tmp_path / "out")
    _, arrays = open_prepared(tmp_path / "out")
    assert meta["n_test"] == 0 and arrays["X_test"].shape == (0, 16)
    np.testing.assert_array_equal(arrays["X_train"][:], images.reshape(40, 16))
    np.testing.assert_array_equal(arrays["y_train"][:], labels)
    assert meta["classes"] == [0, 1, 2]


def test_leftover_of_a_killed_run_is_cleaned(tmp_path):
    stale = tmp_path / f".gen.partial-{2**22 + 1}"  # above Linux's pid_max: never running
    (stale / "data.zarr").mkdir(parents=True)
    prepare_dataset("gen", _generated(), tmp_path / "gen")
    assert not stale.exists() and (tmp_path / "gen" / "meta.json").exists()
