"""Where y's mean sits does not change a fitted regressor. Every regressor fits y - ``y_offset_``
(the training mean, ``estimators._targets``) and adds ``y_offset_`` back to its predictions, so
a fit on y + c predicts the fit on y, plus c, up to rounding: in memory and on disk, with
multi-output y, through warm starts and ``partial_fit``, with rows spread over dask workers and
with the "auto" bandwidth / reg selection. LIBSVM's SVR has its own intercept and is held to the
same. Classifiers' codes are not centred: the decision function depends on the classes, not on
the labels' values, and on an imbalanced set the uncentred codes are no worse than centred ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_friedman1

from kernelscale.estimators import (
    DSGClassifier,
    DSGRegressor,
    EigenProClassifier,
    EigenProRegressor,
    EigenProRFRegressor,
    ExactKRRClassifier,
    ExactKRRRegressor,
    ExactSVMClassifier,
    ExactSVMRegressor,
    NORMAClassifier,
    NORMARegressor,
    NystromRidgeClassifier,
    NystromRidgeRegressor,
    PegasosClassifier,
    RBClassifier,
    RBRegressor,
    RFFSGDClassifier,
    RFFSGDRegressor,
)

N = 300
# small settings; bandwidth and reg stay "auto" (the selection must see centred targets too)
REGRESSORS = {
    "dsg": (DSGRegressor, dict(n_iter=40, batch_size=64, block_size=32)),
    "rff_sgd": (RFFSGDRegressor, dict(n_iter=60, n_components=64)),
    "norma": (NORMARegressor, dict(n_iter=60, max_terms=300)),
    "eigenpro": (EigenProRegressor, dict(n_iter=20, subsample_size=100, n_eigenvectors=10)),
    "eigenpro_rf": (EigenProRFRegressor, dict(n_components=64, n_iter=20, subsample_size=100,
                                              n_eigenvectors=10)),
    "nystrom": (NystromRidgeRegressor, dict(n_components=50)),
    "exact_krr": (ExactKRRRegressor, {}),
    # solved to a tight tol: a shift's last bits must not move where CG / SMO stop
    "rb_cg": (RBRegressor, dict(n_components=16, tol=1e-10)),
    "rb_cd": (RBRegressor, dict(solver="cd", n_components=16, l1_reg=1e-4, n_iter=20)),
    "libsvm": (ExactSVMRegressor, dict(tol=1e-9)),
}
MULTI_OUTPUT = ["dsg", "rff_sgd", "eigenpro", "eigenpro_rf", "nystrom", "exact_krr", "rb_cg"]
WARM = ["dsg", "rff_sgd", "norma", "eigenpro", "eigenpro_rf"]


@pytest.fixture(scope="module")
def data():
    X, y = make_friedman1(n_samples=N + 100, noise=1.0, random_state=0)
    X = (X - X[:N].mean(axis=0)) / X[:N].std(axis=0)
    return X[:N], y[:N] - y[:N].mean(), X[N:]


def _make(name, **extra):
    cls, kw = REGRESSORS[name]
    return cls(**{**kw, **extra}, random_state=0)


def _same_up_to(p_shifted, p, offset):
    """Predictions of the fit on y + offset are those of the fit on y, plus offset (rounding:
    float32 models, and the offset's own last bits)."""
    scale = 1.0 + np.max(np.abs(p))
    np.testing.assert_allclose(p_shifted - offset, p, rtol=0, atol=1e-5 * scale)
    assert np.max(np.abs(p)) > 0.5  # a model that learned something, not a constant 0


@pytest.mark.parametrize("name", list(REGRESSORS))
def test_a_shift_of_y_shifts_the_predictions_and_nothing_else(data, name):
    X, y, Xte = data
    base = _make(name).fit(X, y)
    p = base.predict(Xte)
    for offset in (100.0, 1000.0):
        shifted = _make(name).fit(X, y * 1.0 + offset)
        _same_up_to(shifted.predict(Xte), p, offset)
        if name != "libsvm":  # LIBSVM's intercept is its own b
            np.testing.assert_allclose(shifted.y_offset_, [y.mean() + offset], rtol=1e-12)
            assert shifted.bandwidth_ == base.bandwidth_
            assert getattr(shifted, "reg_", None) == getattr(base, "reg_", None)


@pytest.mark.parametrize("name", MULTI_OUTPUT)
def test_multi_output_offsets_are_per_column(data, name):
    X, y, Xte = data
    Y = np.column_stack([y, np.sin(X[:, 0]) * 3.0])
    offset = np.array([100.0, -1000.0])
    p = _make(name).fit(X, Y).predict(Xte)
    shifted = _make(name).fit(X, Y + offset)
    assert shifted.y_offset_.shape == (2,)
    _same_up_to(shifted.predict(Xte), p, offset)


@pytest.mark.parametrize("name", WARM)
def test_a_warm_start_keeps_the_first_fits_offset(data, name):
    X, y, Xte = data
    ref = _make(name, warm_start=True).fit(X, y).fit(X, y)
    est = _make(name, warm_start=True).fit(X, y + 100.0)
    first = est.y_offset_.copy()
    est.fit(X, y + 100.0)
    np.testing.assert_array_equal(est.y_offset_, first)
    _same_up_to(est.predict(Xte), ref.predict(Xte), 100.0)
    # a warm start continues the first fit's problem: its offset, not the new targets' mean
    est.fit(X, y + 300.0)
    np.testing.assert_array_equal(est.y_offset_, first)


def test_partial_fit_keeps_the_first_calls_offset(data):
    X, y, Xte = data
    ref, est = _make("dsg"), _make("dsg")
    for lo in (0, 150):
        ref.partial_fit(X[lo:lo + 150], y[lo:lo + 150])
        est.partial_fit(X[lo:lo + 150], y[lo:lo + 150] + 100.0)
    np.testing.assert_allclose(est.y_offset_, [y[:150].mean() + 100.0], rtol=1e-12)
    _same_up_to(est.predict(Xte), ref.predict(Xte), 100.0)


@pytest.fixture(scope="module")
def on_disk(data, tmp_path_factory):
    zarr = pytest.importorskip("zarr")
    X, y, _ = data
    root = zarr.open_group(str(tmp_path_factory.mktemp("offsets") / "d.zarr"), mode="w")
    Xz = root.create_array("X", shape=X.shape, chunks=(64, X.shape[1]), dtype="f8")
    Xz[:] = X
    yz = root.create_array("y", shape=y.shape, chunks=(64,), dtype="f8")
    yz[:] = y + 100.0
    return Xz, yz


@pytest.mark.parametrize("name", ["dsg", "rff_sgd", "eigenpro_rf", "rb_cg", "nystrom"])
def test_out_of_core_y_is_centred_as_in_memory_y(data, on_disk, name):
    X, y, Xte = data
    Xz, yz = on_disk
    p = _make(name).fit(Xz, y).predict(Xte)
    shifted = _make(name).fit(Xz, yz)
    _same_up_to(shifted.predict(Xte), p, 100.0)


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("distributed")
    from kernelscale.spread.cluster import client_for

    c = client_for(None, n_workers=2, processes=True)  # processes: as the spread tests run
    yield c
    c.close()
    c.cluster.close()


@pytest.mark.parametrize("name", ["dsg", "rff_sgd", "eigenpro_rf", "rb_cg"])
def test_rows_spread_over_dask_workers_fit_the_centred_targets(data, on_disk, client, name):
    from kernelscale.spread.cluster import use_client

    X, y, Xte = data
    Xz, yz = on_disk
    # RB: two row blocks, one task each; a larger ridge for fewer CG round trips
    kw = {"engine": {"pass_rows": 150}, **({"reg": 1e-2} if name == "rb_cg" else {})}
    with use_client(client):
        p = _make(name, **kw).fit(Xz, y).predict(Xte)
        shifted = _make(name, **kw).fit(Xz, yz)
    assert shifted.spread_["workers"] == 2  # the spread path ran
    _same_up_to(shifted.predict(Xte), p, 100.0)


CLASSIFIERS = {
    "dsg": (DSGClassifier, dict(n_iter=40, batch_size=64, block_size=32)),
    "rff_sgd": (RFFSGDClassifier, dict(n_iter=60, n_components=64)),
    "rff_sgd_square": (RFFSGDClassifier, dict(loss="square", n_iter=60, n_components=64)),
    "norma": (NORMAClassifier, dict(n_iter=60, max_terms=300)),
    "pegasos": (PegasosClassifier, dict(n_iter=60)),
    "eigenpro": (EigenProClassifier, dict(n_iter=20, subsample_size=100, n_eigenvectors=10)),
    "nystrom": (NystromRidgeClassifier, dict(n_components=50)),
    "exact_krr": (ExactKRRClassifier, {}),
    "rb_cg": (RBClassifier, dict(n_components=16)),
    "libsvm": (ExactSVMClassifier, {}),
}


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_relabelled_classes_give_the_same_decision_function(name):
    X, y = make_classification(n_samples=N, n_features=5, n_informative=3, n_redundant=0,
                               random_state=0)
    cls, kw = CLASSIFIERS[name]
    a = cls(**kw, random_state=0).fit(X, y)
    b = cls(**kw, random_state=0).fit(X, y + 10)
    np.testing.assert_array_equal(b.classes_, [10, 11])
    np.testing.assert_allclose(b.decision_function(X), a.decision_function(X), rtol=0,
                               atol=1e-12)
    np.testing.assert_array_equal(b.predict(X), a.predict(X) + 10)


def test_uncentred_codes_are_no_worse_on_imbalanced_classes():
    """90 / 10 classes: the least-squares classifier (codes +-1, not centred) against the same
    ridge on centred codes (the regressor fitted to them, by its sign): no more test errors
    than the centred codes give, give or take one row in a hundred, and better than the
    majority class."""
    X, y = make_classification(n_samples=3000, n_features=10, n_informative=5, weights=[0.9],
                               flip_y=0.02, class_sep=0.8, random_state=0)
    X = (X - X[:2000].mean(axis=0)) / X[:2000].std(axis=0)
    Xtr, Xte, ytr, yte = X[:2000], X[2000:], y[:2000], y[2000:]
    clf = ExactKRRClassifier(random_state=0).fit(Xtr, ytr)
    assert np.all(clf.decision_function(Xtr[:5]) != 0)
    reg = ExactKRRRegressor(bandwidth=clf.bandwidth_, reg=clf.reg_).fit(Xtr, 2.0 * ytr - 1.0)
    assert abs(reg.y_offset_[0] - (2.0 * ytr.mean() - 1.0)) < 1e-12  # the codes' offset
    err = np.mean(clf.predict(Xte) != yte)
    err_centred = np.mean((reg.predict(Xte) > 0) != yte)
    assert err <= err_centred + 0.01
    assert err < 0.5 * min(yte.mean(), 1 - yte.mean())
