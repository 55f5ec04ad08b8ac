"""LIBSVM data kept sparse end to end in the pipeline (``preprocess.sparse``): CSR on disk,
scaled without centring, the same rows as the dense preparation, one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from sklearn.datasets import dump_svmlight_file

from kernelscale.io import CSRStore
from kernelscale.pipeline.data import DataError, open_prepared, prepare_dataset


def _text_like(path, n=3000, d=5000, per_row=12, seed=0):
    """Sparse rows with Zipf column frequencies and a label from a few frequent columns."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, d + 1)
    rows, cols = [], []
    for i in range(n):
        c = np.unique(rng.choice(d, size=per_row, p=p / p.sum()))
        rows += [i] * len(c)
        cols += c.tolist()
    X = scipy.sparse.csr_matrix((rng.integers(1, 4, len(rows)).astype(np.float64),
                                 (rows, cols)), shape=(n, d))
    w = np.zeros(d)
    w[:50] = rng.standard_normal(50)
    y = np.where(X @ w > np.median(X @ w), 1, -1)
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return X, y


def _spec(path, **pre):
    return {"task": "binary", "path": str(path), "format": "libsvm", "n_features": 5000,
            "split": {"test_size": 0.25, "seed": 1}, "chunk_rows": 500,
            "preprocess": {"sparse": True, **pre}}


def test_sparse_preparation_keeps_csr_on_disk_with_the_dense_rows(tmp_path):
    X, y = _text_like(tmp_path / "t.svm")
    meta = prepare_dataset("t", _spec(tmp_path / "t.svm", standardize=True), tmp_path / "sp")
    dense = prepare_dataset("t", {**_spec(tmp_path / "t.svm", standardize=True),
                                  "preprocess": {"standardize": True}}, tmp_path / "de")
    _, arrays = open_prepared(tmp_path / "sp")
    _, d_arrays = open_prepared(tmp_path / "de")
    Xs, Xt = arrays["X_train"], arrays["X_test"]
    assert isinstance(Xs, CSRStore) and isinstance(Xt, CSRStore) and meta["sparse"]
    assert Xs.shape == (meta["n_train"], 5000) and meta["n_train"] == dense["n_train"]
    assert set(arrays) == {"X_train", "y_train", "X_test", "y_test"}
    np.testing.assert_array_equal(arrays["y_train"][:], d_arrays["y_train"][:])
    # the same split; scaled by the same standard deviations, but never centred
    scale = np.asarray(meta["standardize"]["scale"])
    assert meta["standardize"]["mean"] is None
    np.testing.assert_allclose(scale, dense["standardize"]["scale"], rtol=1e-10)
    shift = np.asarray(dense["standardize"]["mean"])
    np.testing.assert_allclose(Xs[:].toarray(), d_arrays["X_train"][:] + (shift / scale),
                               rtol=1e-5, atol=1e-4)
    assert Xs.nnz == X[:].nnz - Xt.nnz  # no explicit zeros written
    on_disk = sum(f.stat().st_size for f in (tmp_path / "sp" / "data.zarr").rglob("*")
                  if f.is_file())
    assert on_disk < 0.05 * (meta["n_train"] + meta["n_test"]) * 5000 * 4  # vs dense float32
    # read back by row range and by index, as the training stream does
    idx = np.array([5, 3, 1200, 7, 2000])
    assert (Xs[idx] != Xs[:][idx]).nnz == 0 and (Xs[480:1020] != Xs[:][480:1020]).nnz == 0


def test_sparse_preparation_is_reproducible(tmp_path):
    _text_like(tmp_path / "t.svm")
    a = prepare_dataset("t", _spec(tmp_path / "t.svm"), tmp_path / "a")
    b = prepare_dataset("t", _spec(tmp_path / "t.svm"), tmp_path / "b")
    assert a["sha256"] == b["sha256"] and a["checksums"] == b["checksums"]
    assert set(a["checksums"]) >= {"X_train.indptr", "X_train.indices", "X_train.data"}


@pytest.mark.parametrize("spec, message", [
    ({"format": "csv", "n_features": None}, "preprocess.sparse: only for format libsvm"),
    ({"preprocess": {"sparse": True, "pca": {"n_components": 2}}}, "pca would make every row"),
    ({"preprocess": {"sparse": True, "normalize": "l1"}},
     "datasets.t.preprocess.normalize: 'l1' is not one of"),
])
def test_sparse_config_errors_are_one_line(tmp_path, spec, message):
    (tmp_path / "t.svm").write_text("1 1:1 3:2\n-1 2:1\n1 1:1\n-1 3:1\n")
    full = {k: v for k, v in {**_spec(tmp_path / "t.svm"), **spec}.items() if v is not None}
    with pytest.raises(DataError, match=message) as err:
        prepare_dataset("t", full, tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("standardize", [False, True])
def test_l2_normalized_sparse_rows_are_sklearns_normalize(tmp_path, standardize):
    """``preprocess.normalize: l2`` scales every CSR row (train and test, after standardize) to
    norm 1 and leaves empty rows empty, as sklearn's ``normalize`` does to the rows prepared
    without it; the structure stays sparse; meta.json records it, and only when it is set."""
    from sklearn.preprocessing import normalize

    _text_like(tmp_path / "t.svm")
    with open(tmp_path / "t.svm", "a") as f:
        f.write("1\n-1\n1\n")  # rows without a feature: stay zero
    plain = prepare_dataset("t", _spec(tmp_path / "t.svm", standardize=standardize),
                            tmp_path / "plain")
    unit = prepare_dataset("t", _spec(tmp_path / "t.svm", standardize=standardize,
                                      normalize="l2"), tmp_path / "unit")
    assert unit["normalize"] == "l2" and "normalize" not in plain
    assert unit["spec"]["preprocess"]["normalize"] == "l2"
    assert "normalize" not in plain["spec"]["preprocess"]
    _, p_arrays = open_prepared(tmp_path / "plain")
    _, u_arrays = open_prepared(tmp_path / "unit")
    empty = 0
    for part in ("X_train", "X_test"):
        got, before = u_arrays[part][:], p_arrays[part][:]
        assert isinstance(u_arrays[part], CSRStore) and scipy.sparse.issparse(got)
        assert got.nnz == before.nnz and np.array_equal(got.indptr, before.indptr)
        norms = np.sqrt(np.asarray(got.multiply(got).sum(axis=1)).ravel())
        zero = np.diff(got.indptr) == 0
        np.testing.assert_allclose(norms[~zero], 1.0, rtol=1e-6)
        assert not norms[zero].any()
        empty += int(zero.sum())
        want = normalize(before.astype(np.float64), norm="l2")
        np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-6, atol=1e-7)
    assert empty == 3
    np.testing.assert_array_equal(u_arrays["y_train"][:], p_arrays["y_train"][:])
    # standardize: the same column scales, fitted before normalizing
    assert unit["standardize"] == plain["standardize"]


def test_non_finite_sparse_value_names_row_and_feature(tmp_path):
    (tmp_path / "t.svm").write_text("1 1:1 3:2\n-1 2:nan\n1 1:1\n-1 3:1\n")
    with pytest.raises(DataError, match="row 2: feature 2 is nan"):
        prepare_dataset("t", _spec(tmp_path / "t.svm"), tmp_path / "out")


@pytest.mark.parametrize("algorithm, params", [
    ("rff_sgd", {"n_components": 500, "n_iter": "4 epochs"}),
    ("dsg", {"n_iter": 12, "batch_size": 512, "block_size": 128}),
    ("nystrom", {"n_components": 300}),
])
def test_training_run_streams_the_sparse_rows_and_learns(tmp_path, algorithm, params):
    """A pipeline run on the prepared CSR store (train_run.train: segments, evaluation, model
    file) under a memory budget learns the task (chance: 0.5; unscaled counts, as text models
    take them: scaling rare columns by their deviation makes them dominate the distances); the
    model predicts the in-memory CSR rows as it predicts the store."""
    import pickle

    from kernelscale.pipeline.train_run import train

    _text_like(tmp_path / "t.svm")
    prepare_dataset("t", _spec(tmp_path / "t.svm"), tmp_path / "data")
    spec = {"estimator": algorithm, "device": "cpu", "segments": 2,
            "params": {**params, "random_state": 0, "engine": {"memory_budget": 64}}}
    final = train(tmp_path / "data", tmp_path / "run", algorithm, spec, seed=0)
    assert final["metric"] == "test_error" and final["test_error"] < 0.35
    with open(tmp_path / "run" / "model.pkl", "rb") as f:
        model = pickle.load(f)
    _, arrays = open_prepared(tmp_path / "data")
    Xt = arrays["X_test"]
    np.testing.assert_array_equal(model.predict(Xt), model.predict(Xt[:]))
