"""Random Binning features (Wu et al., KDD 2016, Alg. 1), RB + CG ridge, RB + parallel CD (Alg. 2)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
from sklearn.datasets import make_classification
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelscale.backend import DeviceError, gpu_available
from kernelscale.estimators.random_binning import RBClassifier, RBRegressor
from kernelscale.kernels import make_kernel
from kernelscale.kernels.random_binning import RandomBinning, draw_grid, rb_kernel_estimate
from kernelscale.solvers.rb_cd import cd_objective, l1_cd
from kernelscale.solvers.rb_cg import ridge_cg


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 / 2 + 0.1 * rng.normal(size=300)
    return X, y


# -- features ---------------------------------------------------------------------------------------
def test_grid_regenerated_from_seed():
    a = draw_grid("laplacian", 5, 2.0, 7, 3)
    b = draw_grid("laplacian", 5, 2.0, 7, 3)
    c = draw_grid("laplacian", 5, 2.0, 7, 4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert np.all(a[1] >= 0) and np.all(a[1] < a[0])  # u ~ U[0, delta)


def test_rb_estimates_laplacian_kernel_better_with_more_grids():
    """<z(x), z(x')> = fraction of grids where x, x' share a bin, an unbiased estimate of k.

    Each entry is a mean of R Bernoulli(k) draws, so its mean absolute error is at most
    sqrt(2/pi) * sqrt(k(1-k)/R) <= 0.8 * 0.5 / sqrt(R): 0.05 at R=64 and 0.0125 at R=1024. We
    require the R=1024 error below 0.02 and at least 2x below the R=64 error (expected 4x).
    """
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    K = make_kernel("laplacian", 2.0)(X)
    err = {R: np.abs(rb_kernel_estimate(X, bandwidth=2.0, n_grids=R, seed=5) - K).mean()
           for R in (64, 1024)}
    assert err[1024] < 0.02
    assert err[1024] < err[64] / 2
    # the CSR features give the same estimate as inner products
    rb = RandomBinning("laplacian", 2.0, 64, 5)
    Z = rb.fit_transform(X)
    np.testing.assert_allclose((Z @ Z.T).toarray(), rb_kernel_estimate(X, bandwidth=2.0, n_grids=64, seed=5))


def test_feature_matrix_structure(data):
    X, _ = data
    rb = RandomBinning("laplacian", 3.0, 32, 0)
    Z = rb.fit_transform(X, chunk_rows=70)
    assert Z.shape == (300, rb.n_features_out_)
    assert np.all(np.diff(Z.indptr) == 32)  # exactly R non-zeros per training row
    np.testing.assert_allclose(Z.data, 1 / np.sqrt(32))
    assert 32 <= rb.n_features_out_ <= 300 * 32
    assert rb.kappa_ == pytest.approx(rb.n_features_out_ / 32)
    # chunking does not change Z; unseen bins give zeros at test time
    Z2 = RandomBinning("laplacian", 3.0, 32, 0).fit_transform(X, chunk_rows=1000)
    assert (Z != Z2).nnz == 0
    Zt = rb.transform(np.vstack([X[:5], X[:5] + 100.0]))
    assert (Zt[:5] != Z[:5]).nnz == 0
    assert Zt[5:].nnz == 0


# -- solvers ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("jacobi", [False, True])
def test_cg_equals_direct_sparse_solve(data, jacobi):
    X, y = data
    Z = RandomBinning("laplacian", 2.0, 32, 1).fit_transform(X)
    Y = np.stack([y, np.cos(y)], axis=1)
    W, hist, ok = ridge_cg(Z, Z.T @ Y, 0.01, tol=1e-10, max_iter=5000, jacobi=jacobi)
    assert ok
    A = (Z.T @ Z + 0.01 * sp.eye(Z.shape[1])).tocsc()
    for c in range(2):
        w = spl.spsolve(A, Z.T @ Y[:, c])
        np.testing.assert_allclose(W[:, c], w, rtol=0, atol=1e-6 * np.abs(w).max())


@pytest.mark.parametrize("loss", ["square", "logistic", "squared_hinge"])
def test_cd_two_threads_same_objective(data, loss):
    X, y = data
    Z = RandomBinning("laplacian", 2.0, 16, 2).fit_transform(X)
    t = y if loss == "square" else np.where(y > np.median(y), 1.0, -1.0)
    objs = []
    for tau in (1, 2):
        W, hist, ok = l1_cd(Z, t, 1e-3, loss=loss, tol=1e-9, max_iter=2000, n_jobs=tau, seed=0)
        objs.append(cd_objective(Z, W[:, 0], t, 1e-3, loss))
        assert hist["objective"][-1] == pytest.approx(objs[-1], rel=1e-9)
        assert hist["objective"][-1] < hist["objective"][0]
    assert objs[1] == pytest.approx(objs[0], rel=1e-4)


def test_cd_optimality(data):
    """KKT conditions of eq. (23) at the CD solution: |g_j| <= lambda, g_j = -lambda sign(w_j)."""
    X, y = data
    Z = RandomBinning("laplacian", 2.0, 16, 3).fit_transform(X)
    lam = 1e-3
    W, _, ok = l1_cd(Z, y, lam, loss="square", tol=1e-12, max_iter=5000)
    assert ok
    w = W[:, 0]
    g = Z.T @ (Z @ w - y) / len(y)
    assert np.all(np.abs(g) <= lam * (1 + 1e-3) + 1e-8)
    nz = w != 0
    np.testing.assert_allclose(g[nz], -lam * np.sign(w[nz]), atol=1e-4 * lam)


# -- estimators -------------------------------------------------------------------------------------
def _instances():
    return [
        RBRegressor(n_components=16, n_iter=200, random_state=0),
        RBRegressor(n_components=16, solver="cd", l1_reg=1e-4, n_iter=50, tol=1e-3, random_state=0),
        RBClassifier(n_components=16, n_iter=200, random_state=0),
        RBClassifier(n_components=16, solver="cd", loss="logistic", l1_reg=1e-4, n_iter=50, tol=1e-3,
                     random_state=0),
    ]


@parametrize_with_checks(_instances())
def test_sklearn_compatible(estimator, check):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_regressor_fits_well(data):
    X, y = data
    est = RBRegressor(n_components=128, random_state=0).fit(X[:200], y[:200])
    assert est.score(X[200:], y[200:]) > 0.6
    assert est.n_features_out_ > 128 and est.kappa_ > 1
    assert est.history_["residual"][-1] <= est.tol


@pytest.mark.parametrize("params", [{}, {"solver": "cd", "loss": "squared_hinge", "l1_reg": 1e-4},
                                    {"solver": "cd", "loss": "logistic", "l1_reg": 1e-4}])
def test_classifier_multiclass(params):
    X, y = make_classification(400, 6, n_informative=4, n_classes=3, random_state=0)
    est = RBClassifier(n_components=64, random_state=0, n_iter=300, tol=1e-3, **params).fit(X[:300], y[:300])
    assert est.decision_function(X[300:]).shape == (100, 3)
    assert est.score(X[300:], y[300:]) > 0.6
    if params.get("loss") == "logistic":
        p = est.predict_proba(X[300:])
        np.testing.assert_allclose(p.sum(axis=1), 1.0)
    else:
        assert not hasattr(est, "predict_proba")


@pytest.mark.parametrize("cls,params", [(RBRegressor, {}), (RBRegressor, {"solver": "cd"}),
                                        (RBClassifier, {}), (RBClassifier, {"solver": "cd", "loss": "logistic"})])
def test_pickle_and_determinism(data, cls, params):
    X, y = data
    if cls is RBClassifier:
        y = (y > np.median(y)).astype(int)
    est = cls(n_components=32, random_state=3, n_iter=300, tol=1e-3, **params).fit(X, y)
    est2 = pickle.loads(pickle.dumps(est))
    assert pickle.loads(pickle.dumps(est.features_))._grids is None  # grids are regenerated
    np.testing.assert_array_equal(est.predict(X), est2.predict(X))
    again = cls(n_components=32, random_state=3, n_iter=300, tol=1e-3, **params).fit(X, y)
    np.testing.assert_array_equal(est.coef_, again.coef_)
    np.testing.assert_array_equal(est.features_.keys_, again.features_.keys_)
    other = cls(n_components=32, random_state=4, n_iter=300, tol=1e-3, **params).fit(X, y)
    assert other.n_features_out_ != est.n_features_out_ or not np.array_equal(other.coef_, est.coef_)


@pytest.mark.parametrize("cls", [RBRegressor, RBClassifier])
def test_zarr_equals_numpy(tmp_path, data, cls):
    zarr = pytest.importorskip("zarr")
    X, y = data
    X = X.astype(np.float32)
    if cls is RBClassifier:
        y = (y > np.median(y)).astype(int)
    Xz = zarr.open_array(str(tmp_path / "X.zarr"), mode="w", shape=X.shape, chunks=(64, X.shape[1]),
                         dtype="float32")
    Xz[:] = X
    a = cls(n_components=32, random_state=0, engine={"pass_rows": 50}).fit(Xz, y)
    b = cls(n_components=32, random_state=0).fit(X, y)
    assert a.bandwidth_ == b.bandwidth_
    np.testing.assert_array_equal(a.features_.keys_, b.features_.keys_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.predict(Xz), b.predict(X), rtol=1e-12, atol=1e-12)


def test_dask_equals_numpy(data):
    da = pytest.importorskip("dask.array")
    X, y = data
    a = RBRegressor(n_components=32, random_state=0, engine={"pass_rows": 70}).fit(da.from_array(X, chunks=(64, 4)), y)
    b = RBRegressor(n_components=32, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("params,match", [
    ({"bandwidth": 0.0}, "bandwidth"),
    ({"bandwidth": -1.0}, "bandwidth"),
    ({"kernel": "gaussian"}, "kernel='gaussian' must be 'laplacian'"),
    ({"solver": "newton"}, "solver='newton' must be 'cg' or 'cd'"),
    ({"loss": "hinge"}, "unknown loss"),
    ({"solver": "cg", "loss": "logistic"}, "unknown loss"),
    ({"n_components": 0}, "n_components"),
    ({"reg": 0.0}, "reg"),
])
def test_bad_params(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        RBRegressor(**params).fit(X, y)


def test_bad_input(data):
    X, y = data
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RBRegressor().fit(Xn, y)
    Xi = X.copy()
    Xi[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity|inf"):
        RBRegressor().fit(Xi, y)
    yn = y.copy()
    yn[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RBRegressor().fit(X, yn)
    with pytest.raises(ValueError, match="Unknown label type|continuous"):
        RBClassifier().fit(X, y)
    with pytest.raises(ValueError, match="cg"):
        RBClassifier(solver="cg", loss="logistic").fit(X, y > 0)


def test_bad_input_zarr(tmp_path, data):
    zarr = pytest.importorskip("zarr")
    X, y = data
    Xz = zarr.open_array(str(tmp_path / "X.zarr"), mode="w", shape=X.shape, chunks=(64, 4),
                         dtype="float64")
    Xb = X.copy()
    Xb[200, 0] = np.nan
    Xz[:] = Xb
    with pytest.raises(ValueError, match="row 200"):
        RBRegressor(bandwidth=1.0).fit(Xz, y)


@pytest.mark.skipif(gpu_available(), reason="checks the error raised without a GPU")
def test_gpu_without_gpu_errors(data):
    X, y = data
    with pytest.raises(DeviceError):
        RBRegressor(engine={"device": "gpu"}).fit(X, y)
