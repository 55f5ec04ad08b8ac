"""Nyström ridge by FALKON-preconditioned conjugate gradients (``solver="cg"``; Rudi, Carratino,
Rosasco, NIPS 2017): the same ridge problem as the direct normal equations, solved without
forming them, in memory, from zarr and on sparse rows; the "auto" choice between the two."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse

from kernelscale.estimators.exact import ExactKRRRegressor
from kernelscale.estimators.nystrom import NystromRidgeClassifier, NystromRidgeRegressor
from kernelscale.pipeline.chosen import chosen_settings
from kernelscale.solvers.nystrom import auto_method

CPU = {"device": "cpu", "pass_rows": 700}
TIGHT = dict(solver="cg", tol=1e-11, n_iter=400)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 6))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] ** 2 / 4, np.cos(X[:, 2] * X[:, 3])])
    return X, Y + 0.05 * rng.standard_normal(Y.shape)


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("reg", [1e-3, 1e-6])
def test_cg_converges_to_the_direct_solution(data, reg):
    X, Y = data
    kw = dict(n_components=300, reg=reg, bandwidth=2.0, random_state=0, engine=CPU)
    direct = NystromRidgeRegressor(solver="direct", **kw).fit(X, Y)
    cg = NystromRidgeRegressor(**TIGHT, **kw).fit(X, Y)
    assert direct.n_iter_ == 0 and direct.history_ == {}
    assert cg.solver_.method == "cg" and 1 <= cg.n_iter_ < 400
    assert cg.history_["residual"][-1] <= 1e-11
    assert _rel(cg.predict(X), direct.predict(X)) < 1e-7


def test_cg_with_every_row_a_centre_is_exact_kernel_ridge(data):
    X, Y = data[0][:400], data[1][:400, 0]
    exact = ExactKRRRegressor(reg="0.1/n", bandwidth=2.0, engine={"device": "cpu"}).fit(X, Y)
    cg = NystromRidgeRegressor(n_components=400, reg="0.1/n", bandwidth=2.0, random_state=0,
                               engine=CPU, **TIGHT).fit(X, Y)
    assert _rel(cg.predict(X), exact.predict(X)) < 1e-7


def test_cg_classifier_matches_the_direct_one_over_all_classes(data):
    X, Y = data
    labels = np.digitize(Y[:, 0], np.quantile(Y[:, 0], [0.33, 0.66]))
    kw = dict(n_components=250, reg=1e-4, bandwidth=2.0, random_state=0, engine=CPU)
    direct = NystromRidgeClassifier(solver="direct", **kw).fit(X, labels)
    cg = NystromRidgeClassifier(**TIGHT, **kw).fit(X, labels)
    assert _rel(cg.decision_function(X), direct.decision_function(X)) < 1e-7
    assert np.mean(cg.predict(X) == labels) > 0.8


def test_cg_stops_at_tol_or_n_iter(data):
    X, Y = data
    kw = dict(n_components=300, reg=1e-6, bandwidth=2.0, random_state=0, engine=CPU, solver="cg")
    loose = NystromRidgeRegressor(tol=1e-2, n_iter=400, **kw).fit(X, Y)
    assert loose.history_["residual"][-1] <= 1e-2 < loose.history_["residual"][-2]
    capped = NystromRidgeRegressor(tol=1e-12, n_iter=3, **kw).fit(X, Y)
    assert capped.n_iter_ == 3 and capped.history_["residual"][-1] > 1e-12


def test_cg_reads_zarr_and_sparse_rows_as_it_reads_memory(data, tmp_path):
    zarr = pytest.importorskip("zarr")
    X, Y = data
    kw = dict(n_components=200, reg=1e-4, bandwidth=2.0, random_state=0, engine=CPU,
              solver="cg", n_iter=15)
    ref = NystromRidgeRegressor(**kw).fit(X, Y)
    Z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(500, 6),
                        dtype="f8")
    Z[:] = X
    on_disk = NystromRidgeRegressor(**kw).fit(Z, Y)
    assert np.array_equal(on_disk.predict(X), ref.predict(X))
    Xs = X.copy()
    Xs[np.abs(Xs) < 0.5] = 0.0  # a sparse copy and its dense twin
    dense = NystromRidgeRegressor(**kw).fit(Xs, Y)
    sparse = NystromRidgeRegressor(**kw).fit(scipy.sparse.csr_matrix(Xs), Y)
    assert _rel(sparse.predict(Xs), dense.predict(Xs)) < 1e-10


def test_cg_model_pickles_without_its_solver_state(data):
    X, Y = data
    cg = NystromRidgeRegressor(n_components=100, reg=1e-3, bandwidth=2.0, random_state=0,
                               engine=CPU, solver="cg").fit(X, Y)
    back = pickle.loads(pickle.dumps(cg))
    # the model is Z and coef: no m x m factor (Cholesky or eigenvectors) stays in it
    arrays = [v for v in vars(back.solver_).values() if isinstance(v, np.ndarray)]
    assert sorted(a.shape for a in arrays) == [(100, 2), (100, 6)]
    assert np.array_equal(back.predict(X[:50]), cg.predict(X[:50]))


def test_auto_picks_the_solver_with_fewer_flops(data):
    # on the host CG reads the kept K_nZ after its first pass: Fashion-MNIST's shape (d 784,
    # 10 classes, m 2,695) takes CG there, the normal equations on a GPU, where each pass forms
    # K_nZ again; 10 classes over 852 centres (penbased): direct; one output over 500: CG unless
    # its passes outnumber what the direct solve adds
    assert auto_method(784, 2695, 10, 30) == "cg"
    assert auto_method(784, 2695, 10, 30, host=False) == "direct"
    assert auto_method(16, 852, 10, 30) == "direct"
    assert auto_method(20, 13004, 1, 30, host=False) == "cg"
    assert auto_method(8, 500, 1, 30) == "cg"
    assert auto_method(8, 500, 1, 100) == "direct"
    assert auto_method(8, 500, 1, 20, host=False) == "direct"
    assert auto_method(8, 500, 1, 1, host=False) == "cg"
    X, Y = data
    kw = dict(n_components=300, reg=1e-3, bandwidth=2.0, random_state=0, engine=CPU)
    small = NystromRidgeRegressor(n_iter=100, **kw).fit(X, Y)  # 100 x 16 x 2 >= 3 x 300
    assert small.solver_.method == "direct" and chosen_settings(small)["solver"] == "direct"
    few = NystromRidgeRegressor(n_iter=20, **kw).fit(X, Y)  # 20 x 16 x 2 < 3 x 300
    assert few.solver_.method == "cg" and chosen_settings(few)["solver"] == "cg"


@pytest.mark.parametrize("params, match", [({"solver": "qr"}, "solver"), ({"tol": 0.0}, "tol"),
                                           ({"n_iter": 0}, "n_iter")])
def test_bad_cg_settings_fail_in_one_line(data, params, match):
    X, Y = data
    with pytest.raises(ValueError, match=match) as e:
        NystromRidgeRegressor(n_components=50, **params).fit(X[:200], Y[:200])
    assert "\n" not in str(e.value)


def test_a_cg_pass_is_k_transpose_k_v_at_any_thread_count():
    from kernelscale import parallel
    from kernelscale.kernels import make_kernel
    from kernelscale.solvers.nystrom import GROUP_PIECES, HOST_PIECE_BYTES, _KernelProducts

    rng = np.random.default_rng(3)
    Z, V = rng.standard_normal((500, 6)), rng.standard_normal((500, 2))
    rows = 2 * GROUP_PIECES * (HOST_PIECE_BYTES // (500 * 8)) + 123  # three groups of pieces
    X, Y = rng.standard_normal((rows, 6)), rng.standard_normal((rows, 2))
    k = make_kernel("gaussian", 2.0)
    K = k(X, Z)
    try:
        out = {}
        for t in (1, 2):
            parallel.set_threads(t)
            out[t] = (_KernelProducts(k, Z, V, np.float64, np)(X),
                      _KernelProducts(k, Z, None, np.float64, np)(X, Y))
    finally:
        parallel.set_threads(None)
    assert np.allclose(out[1][0], K.T @ (K @ V), rtol=1e-10)
    assert np.allclose(out[1][1], K.T @ Y, rtol=1e-10, atol=1e-9)
    assert all(np.array_equal(a, b) for a, b in zip(out[1], out[2], strict=True))


def test_cg_with_k_nz_stored_reads_x_once_and_fits_the_same_bits(data, tmp_path, monkeypatch):
    zarr = pytest.importorskip("zarr")
    import kernelscale.solvers.nystrom as nystrom
    from kernelscale.budget import kernel_matrix_bytes

    X, Y = data
    Z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(500, 6),
                        dtype="f8")
    Z[:] = X
    kw = dict(n_components=200, reg=1e-6, bandwidth=2.0, random_state=0, solver="cg", n_iter=12)
    assert kernel_matrix_bytes(2.0) == 2 << 20
    reads = []
    iter_row_chunks = nystrom.iter_row_chunks
    monkeypatch.setattr(nystrom, "iter_row_chunks",
                        lambda A, rows: reads.append(A is Z) or iter_row_chunks(A, rows))
    # 3,000 x 200 kernel values are 4.8 MB: over a 1 MB budget, within the default share
    recomputed = NystromRidgeRegressor(engine={**CPU, "memory_budget": 1.0}, **kw).fit(Z, Y)
    assert reads.count(True) == recomputed.n_iter_ + 1 == 13
    reads.clear()
    stored = NystromRidgeRegressor(engine=CPU, **kw).fit(Z, Y)
    assert reads.count(True) == 1 and len(reads) == 13
    assert np.array_equal(stored.solver_.coef, recomputed.solver_.coef)
    in_memory = NystromRidgeRegressor(engine=CPU, **kw).fit(X, Y)
    assert np.array_equal(in_memory.solver_.coef, recomputed.solver_.coef)
