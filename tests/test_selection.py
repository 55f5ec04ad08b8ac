"""The automatic (sigma, alpha) selection (kernels.selection) picks the same grid point on fixed
data sets, whatever form the classes are given in; labels are encoded chunk by chunk into the
smallest integer dtype (kernelscale.validation.LabelCoder), giving the same models as before."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from kernelscale.estimators.dsg import DSGClassifier
from kernelscale.kernels.selection import ALPHAS, SIGMA_FACTORS, select
from kernelscale.validation import LABEL_CHUNK, LabelCoder, find_classes

# (sigma, alpha) chosen by the code before the selection's memory was reduced (commit eb86e9c):
# the memory work reorders and frees arrays only, so these must not move.
CHOSEN = {
    "c0": (3.3975798263492383, 0.1), "c1": (3.623833262268868, 0.1),
    "c2": (2.5137016248701007, 1.0),
    "r0": (11.114441918385895, 0.01), "r1": (11.034222167848135, 0.01),
    "r2": (11.121501275849779, 0.01),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_result_is_unchanged(seed):
    X, y = make_classification(n_samples=2500, n_features=10, n_informative=6, n_classes=3,
                               random_state=seed)
    sigma, alpha = CHOSEN[f"c{seed}"]
    for Y in (np.eye(3)[y] * 2 - 1,        # one-vs-all {-1, +1} columns
              np.eye(3)[y],                # one-hot
              y.astype(np.uint8)):         # class indices (DSGClassifier's path)
        got = select(X, Y, "gaussian", True, seed=seed)
        assert got[0] == pytest.approx(sigma, rel=1e-12) and got[1] == alpha
    Xr, yr = make_regression(n_samples=2500, n_features=10, noise=3.0, random_state=seed)
    sigma, alpha = CHOSEN[f"r{seed}"]
    got = select(Xr, yr / yr.std(), "laplacian", False, seed=seed)
    assert got[0] == pytest.approx(sigma, rel=1e-12) and got[1] == alpha
    assert alpha in ALPHAS and len(SIGMA_FACTORS) == 4


def test_binary_indices_select_as_margin_targets():
    X, y = make_classification(n_samples=2400, n_features=8, random_state=4)
    margin = (2.0 * y - 1.0)[:, None]
    assert select(X, y.astype(np.uint8), "gaussian", True, seed=3) == \
        select(X, margin, "gaussian", True, seed=3)


def _labels(n, rng):
    y = rng.integers(0, 3, n).astype(np.int64) * 10
    y[-5] = 70  # a class seen only in the last chunk
    return y


def test_label_coder_reads_chunk_by_chunk_into_the_smallest_dtype():
    rng = np.random.default_rng(0)
    y = _labels(3 * LABEL_CHUNK + 17, rng)
    coder = LabelCoder(y, "hinge")
    assert list(coder.classes_) == [0, 10, 20, 70] and coder.n_outputs == 4
    assert coder.y_index.dtype == np.uint8
    assert np.array_equal(coder.y_index, np.unique(y, return_inverse=True)[1])
    assert LabelCoder(y, lambda k: "softmax" if k > 2 else "logistic").loss_name == "softmax"
    many = np.arange(300).repeat(2)
    assert LabelCoder(many, "hinge").y_index.dtype == np.uint16
    zarr = pytest.importorskip("zarr")
    Z = zarr.create_array(store={}, shape=y.shape, chunks=(50_000,), dtype=y.dtype)
    Z[:] = y
    assert np.array_equal(LabelCoder(Z, "hinge").y_index, coder.y_index)


def test_label_errors_in_a_later_chunk():
    n = 2 * LABEL_CHUNK + 3
    y = np.zeros(n)
    y[::2] = 1.0
    y[-1] = 0.5  # continuous values only in the last chunk
    with pytest.raises(ValueError, match="Unknown label type"):
        find_classes(y)
    mixed = np.array(["a"] * LABEL_CHUNK + [1] * 3 + [2] * 3, dtype=object)
    with pytest.raises(ValueError, match="label"):  # a chunk of numbers among strings
        find_classes(mixed)
    with pytest.raises(ValueError, match="only one class"):
        LabelCoder(np.full(n, 3), "hinge")
    coder = LabelCoder(np.arange(n) % 2, "hinge")
    with pytest.raises(ValueError, match="not seen"):
        coder.index_of(np.array([0, 1, 2]))


def test_dsg_classifier_same_model_for_any_label_container(tmp_path):
    """numpy ints, strings, on-disk zarr and dask labels: one model; the fitted estimator keeps
    no full-length label array (nor does its pickle)."""
    X, y = make_classification(n_samples=1500, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    params = dict(n_iter=15, batch_size=64, block_size=32, random_state=0)
    ref = DSGClassifier(**params).fit(X, y)
    f = ref.decision_function(X)
    names = np.array(["x", "y", "z"])[y]
    assert np.array_equal(DSGClassifier(**params).fit(X, names).decision_function(X), f)
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    Xz = zarr.open_array(tmp_path / "X.zarr", mode="w", shape=X.shape, chunks=(400, 6),
                         dtype=X.dtype)
    Xz[:] = X
    yz = zarr.open_array(tmp_path / "y.zarr", mode="w", shape=y.shape, chunks=(400,),
                         dtype=y.dtype)
    yz[:] = y
    on_disk = DSGClassifier(engine={"window_rows": 1500}, **params)
    for labels in (yz, da.from_zarr(str(tmp_path / "y.zarr")), y):
        assert np.array_equal(on_disk.fit(Xz, labels).decision_function(X), f)
    assert ref._coder.y_index is None
    assert np.array_equal(pickle.loads(pickle.dumps(ref)).decision_function(X), f)
