"""Sparse X on the GPU: the random-feature estimators (``_sparse_gpu``: DSG / UDSG / CDSG with
every block step and the row cache, RFF-SGD / SVRG, EigenPro-RF) move CSR batches to the device
as ``cupyx.scipy.sparse`` matrices and never densify them; the others keep the CPU rule.

Features of sparse rows are cuSPARSE products where dense rows use cuBLAS: the same sums in
another order. Stated tolerance (as ``test_estimators_gpu``): float64 outputs of a sparse GPU fit
agree with the dense GPU fit and with the sparse CPU fit to 1e-6 x (1 + max |output|), float32
ones to 2e-3 x (1 + max |output|).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from gpu_data import classification, regression

from kernelscale.backend import DeviceError, asarray, is_sparse, to_numpy
from kernelscale.estimators import (
    DSGClassifier,
    DSGOneClass,
    DSGRegressor,
    EigenProRFClassifier,
    EigenProRFRegressor,
    ExactKRRRegressor,
    NystromRidgeClassifier,
    RFFSGDClassifier,
    RFFSGDRegressor,
)

# explicit bandwidth and reg: the fits compared are the same problem, whatever X's format
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

DSG = dict(n_iter=30, batch_size=100, block_size=64, bandwidth=2.0, reg=1e-3)
RFF = dict(n_components=100, n_iter="3 epochs", batch_size=64, bandwidth=2.0, reg=1e-3)
EP = dict(n_eigenvectors=20, subsample_size=300, n_components=300, batch_size=64,
          n_iter="2 epochs", bandwidth=2.0)

CASES = [
    ("dsg", lambda **k: DSGRegressor(solver="dsg", precondition=False, **DSG, **k), "reg"),
    ("udsg", lambda **k: DSGRegressor(solver="udsg", **DSG, **k), "reg"),
    ("cdsg", lambda **k: DSGRegressor(solver="cdsg", **DSG, **k), "reg"),
    ("dsg-eigenpro", lambda **k: DSGRegressor(precondition="eigenpro", **DSG, **k), "reg"),
    ("dsg-clf-newton", lambda **k: DSGClassifier(**DSG, **k), "clf3"),
    ("udsg-clf-hinge", lambda **k: DSGClassifier(solver="udsg", loss="hinge", **DSG, **k), "clf"),
    ("dsg-novelty", lambda **k: DSGOneClass(**DSG, **k), "reg"),
    ("rff-sgd", lambda **k: RFFSGDRegressor(**RFF, **k), "reg"),
    ("rff-svrg-clf", lambda **k: RFFSGDClassifier(solver="svrg", **RFF, **k), "clf"),
    ("eigenpro-rff", lambda **k: EigenProRFRegressor(**EP, **k), "reg"),
    ("eigenpro-rff-clf", lambda **k: EigenProRFClassifier(**EP, **k), "clf3"),
]
IDS = [c[0] for c in CASES]
FLOAT32 = ["dsg", "cdsg", "dsg-clf-newton", "rff-sgd", "eigenpro-rff"]  # as test_estimators_gpu


def _data(task):
    """The suite's problems with about half of X's entries zero, as CSR."""
    X, y = regression() if task == "reg" else classification(n_classes=3 if task == "clf3" else 2)
    return sp.csr_matrix(np.where(np.abs(X) > 0.7, X, 0.0)), y


def _output(est, X):
    f = getattr(est, "decision_function", None) or est.predict
    return np.asarray(f(X), dtype=np.float64).reshape(X.shape[0], -1)


def _close(a, b, tol):
    return np.max(np.abs(a - b)) <= tol * (1 + np.max(np.abs(b)))


def _fits(make, task, dtype):
    X, y = _data(task)
    eng = {"device": "gpu", "dtype": dtype}
    sparse = make(engine=eng, random_state=0).fit(X, y)
    dense = make(engine=eng, random_state=0).fit(X.toarray(), y)
    cpu = make(engine={"device": "cpu", "dtype": dtype}, random_state=0).fit(X, y)
    assert sparse.device_ == "gpu" and cpu.device_ == "cpu"
    return X, sparse, dense, cpu


@pytest.mark.parametrize("make, task", [c[1:] for c in CASES], ids=IDS)
def test_sparse_gpu_fit_matches_dense_gpu_and_sparse_cpu(make, task):
    X, sparse, dense, cpu = _fits(make, task, "float64")
    out, ref = _output(sparse, X), _output(dense, X.toarray())  # sparse rows predicted on the GPU
    assert _close(out, ref, 1e-6), np.max(np.abs(out - ref))
    assert _close(out, _output(cpu, X), 1e-6)
    assert _close(_output(dense, X), _output(dense, X.toarray()), 1e-10)  # a dense model, CSR rows
    if hasattr(sparse, "model_"):  # DSG: the row cache served the batches on the device
        cache = sparse.solver_.row_cache
        assert cache is not None and cache.xp.__name__ == "cupy" and (cache.seen >= 0).all()


@pytest.mark.parametrize("make, task", [c[1:] for c in CASES if c[0] in FLOAT32], ids=FLOAT32)
def test_float32_sparse_gpu_fit_matches_dense_gpu_and_sparse_cpu(make, task):
    X, sparse, dense, cpu = _fits(make, task, "float32")
    out = _output(sparse, X)
    assert _close(out, _output(dense, X.toarray()), 2e-3)
    assert _close(out, _output(cpu, X), 2e-3)


def test_backend_moves_sparse_rows_to_the_device_and_back(cp):
    import cupyx.scipy.sparse as cusp

    X, _ = _data("reg")
    dev = asarray(X, cp, np.float32)
    assert isinstance(dev, cusp.csr_matrix) and dev.dtype == np.float32 and is_sparse(dev)
    assert dev.nnz == X.nnz and is_sparse(X)
    host = to_numpy(dev)
    assert sp.issparse(host) and (host != X.astype(np.float32)).nnz == 0
    assert sp.issparse(asarray(dev, np)) and asarray(X, np) is X


def test_sparse_rows_are_never_densified_on_the_gpu(monkeypatch):
    import cupyx.scipy.sparse as cusp

    rng = np.random.default_rng(3)
    d = 37  # no batch, block or subsample has this many columns
    X = sp.random(400, d, density=0.2, format="csr", random_state=3)
    y = np.asarray(X.sum(axis=1)).ravel() + 0.1 * rng.standard_normal(400)
    widths = []
    real = cusp.csr_matrix.toarray

    def spy(self, *a, **k):
        widths.append(self.shape[1])
        return real(self, *a, **k)

    monkeypatch.setattr(cusp.csr_matrix, "toarray", spy)
    for est in (DSGRegressor(precondition="eigenpro", **DSG), RFFSGDRegressor(solver="svrg", **RFF),
                EigenProRFRegressor(**{**EP, "subsample_size": 200})):
        est.set_params(engine={"device": "gpu"}, random_state=0).fit(X, y).predict(X)
    assert d not in widths


def test_cupyx_input_is_accepted(cp):
    import cupyx.scipy.sparse as cusp

    X, y = _data("clf3")
    for make in (lambda: DSGClassifier(**DSG, engine={"device": "gpu"}, random_state=0),
                 lambda: RFFSGDClassifier(**RFF, engine={"device": "gpu"}, random_state=0),
                 lambda: EigenProRFClassifier(**EP, engine={"device": "gpu"}, random_state=0)):
        b = make().fit(X, y)
        for Xd in (cusp.csr_matrix(X), cusp.csc_matrix(X.tocsc())):
            a = make().fit(Xd, y)
            assert a.device_ == "gpu"
            # the same rows: equal, up to the order of cuSPARSE's sums (float32, DSG's "auto")
            assert _close(_output(a, Xd), _output(b, X), 2e-3)
            assert (a.predict(Xd) == b.predict(X)).mean() > 0.99


def test_auto_device_is_the_gpu_for_sparse_x():
    X, y = _data("reg")
    assert DSGRegressor(**DSG, random_state=0).fit(X, y).device_ == "gpu"
    assert RFFSGDRegressor(**RFF, random_state=0).fit(X, y).device_ == "gpu"
    # the estimators without a sparse GPU path keep "auto" on the CPU
    assert NystromRidgeClassifier(n_components=50, bandwidth=2.0, reg=1e-3).fit(
        X, y > np.median(y)).device_ == "cpu"


def test_warm_start_and_partial_fit_of_sparse_x_on_the_gpu():
    X, y = _data("reg")
    outs = []
    for rows in (X, X.toarray()):
        est = DSGRegressor(**DSG, engine={"device": "gpu", "dtype": "float64"}, random_state=0,
                           warm_start=True)
        est.fit(rows, y).fit(rows, y)
        est.partial_fit(rows[:300], y[:300])
        outs.append(_output(est, X))
    assert _close(outs[0], outs[1], 1e-6)


def test_csr_store_on_the_gpu(tmp_path):
    zarr = pytest.importorskip("zarr")
    from kernelscale.io import open_zarr, write_csr

    X, y = _data("reg")
    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    write_csr(group, "X", [X[:250], X[250:]], X.shape[1], chunk_rows=128, dtype="float64")
    store = open_zarr(tmp_path / "d.zarr", "X")
    for make in (lambda **k: DSGRegressor(**DSG, **k), lambda **k: RFFSGDRegressor(**RFF, **k)):
        gpu = make(engine={"device": "gpu", "dtype": "float64"}, random_state=0).fit(store, y)
        cpu = make(engine={"device": "cpu", "dtype": "float64"}, random_state=0).fit(store, y)
        assert gpu.device_ == "gpu"
        assert _close(_output(gpu, store), _output(cpu, store), 1e-6)


def test_estimators_without_a_sparse_gpu_path_refuse_in_one_line(cp):
    import cupyx.scipy.sparse as cusp

    X, y = _data("reg")
    for est in (NystromRidgeClassifier(n_components=50, engine={"device": "gpu"}),
                ExactKRRRegressor(engine={"device": "gpu"})):
        yy = y > np.median(y) if isinstance(est, NystromRidgeClassifier) else y
        for rows in (X, cusp.csr_matrix(X)):
            with pytest.raises(DeviceError, match="sparse X is computed on the CPU only") as e:
                est.fit(rows, yy)
            assert "\n" not in str(e.value)
    dense = ExactKRRRegressor(engine={"device": "gpu"}, bandwidth=2.0, reg=1e-3).fit(
        X.toarray(), y)
    with pytest.raises(DeviceError, match="the GPU that holds this model") as e:
        dense.predict(X)
    assert "\n" not in str(e.value)
