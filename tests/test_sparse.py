"""scipy.sparse X: the estimators whose method needs only inner products with feature maps or
squared distances fit and predict on CSR / CSC without densifying X, with the same model as on
the densified copy (up to rounding); random binning refuses sparse X in one line; y is never
sparse; sparse X runs on the CPU (but for the random-feature estimators on a GPU:
tests/gpu/test_sparse_gpu.py)."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale.backend import DeviceError
from kernelscale.estimators import (
    DSGClassifier,
    DSGOneClass,
    DSGRegressor,
    EigenProClassifier,
    EigenProRegressor,
    EigenProRFClassifier,
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
from kernelscale.kernels import make_kernel
from kernelscale.stream import BatchStream

# a kernel sees little of a target spread over 500 sparse features in 2,000 rows: some models
# here are constant (the warning of ``validation.warn_if_constant``); the tests compare the fits
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

N, D = 2000, 500
F64 = {"dtype": "float64"}  # DSG's / kernel EigenPro's float32 rounds more than the tests compare
DSG = dict(n_iter=40, batch_size=128, block_size=64, bandwidth=1.5, reg=1e-3, engine=F64)

# (class, parameters): small, explicit settings (the "auto" selection has its own test)
CASES = [
    (DSGClassifier, DSG),
    (DSGClassifier, {**DSG, "solver": "udsg"}),
    (DSGClassifier, {**DSG, "solver": "cdsg"}),
    (DSGRegressor, DSG),  # B >= 128: the "eigenpro" block step (its subsample rows)
    (DSGOneClass, {**DSG, "reg": "auto"}),
    (RFFSGDClassifier, dict(n_iter=30, n_components=200, bandwidth=1.5, reg=1e-3)),
    (RFFSGDRegressor, dict(solver="svrg", n_iter=30, n_components=200, bandwidth=1.5, reg=1e-3)),
    (EigenProRFClassifier, dict(n_iter=10, n_components=200, subsample_size=300,
                                n_eigenvectors=20, bandwidth=1.5)),
    (EigenProRFRegressor, dict(n_iter=10, n_components=200, subsample_size=300,
                               n_eigenvectors=20, bandwidth=1.5)),
    (EigenProClassifier, dict(n_iter=10, subsample_size=300, n_eigenvectors=20, bandwidth=1.5,
                              engine=F64)),
    (EigenProRegressor, dict(n_iter=10, subsample_size=300, n_eigenvectors=20, bandwidth=1.5,
                             engine=F64)),
    (NystromRidgeClassifier, dict(n_components=200, bandwidth=1.5, reg=1e-3)),
    (NystromRidgeRegressor, dict(n_components=200, kernel="matern32", bandwidth=1.5, reg=1e-3)),
    (ExactKRRClassifier, dict(bandwidth=1.5, reg=1e-3)),
    (ExactKRRRegressor, dict(bandwidth=1.5, reg=1e-3)),
    (ExactSVMClassifier, dict(bandwidth=1.5, reg=1e-3)),
    (ExactSVMRegressor, dict(kernel="matern32", bandwidth=1.5, reg=1e-3)),  # a callable kernel
    (PegasosClassifier, dict(n_iter=30, bandwidth=1.5, reg=1e-3)),
    (NORMAClassifier, dict(n_iter=30, bandwidth=1.5, reg=1e-3)),
    (NORMARegressor, dict(n_iter=30, bandwidth=1.5, reg=1e-3)),
]


def _id(case):
    cls, kw = case
    return cls.__name__ + "".join(f"-{kw[k]}" for k in ("solver", "kernel") if k in kw)


@pytest.fixture(scope="module")
def data():
    """Text-like data: 1 % non-zeros, positive values, a linear-ish target."""
    rng = np.random.default_rng(0)
    X = sp.random(N, D, density=0.01, format="csr", random_state=1,
                  data_rvs=lambda k: rng.random(k))
    s = X @ rng.standard_normal(D)
    return X, (s > np.median(s)).astype(int), s / s.std()


def _target(cls, data):
    _, yc, yr = data
    return yr if "Regressor" in cls.__name__ else yc


def _outputs(est, X):
    return np.asarray(getattr(est, "decision_function", est.predict)(X))


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8 * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_sparse_fit_is_the_dense_fit(case, data):
    """CSR and CSC fits give the model of the densified copy (same seed); sparse and dense rows
    predict the same."""
    cls, kw = case
    X = data[0]
    y = _target(cls, data)
    Xd = X.toarray()
    dense = cls(random_state=0, **kw).fit(Xd, y)
    csr = cls(random_state=0, **kw).fit(X, y)
    csc = cls(random_state=0, **kw).fit(X.tocsc(), y)
    want = _outputs(dense, Xd)
    _close(_outputs(csr, X), want)
    _close(_outputs(csr, Xd), want)
    _close(_outputs(csc, X), want)
    _close(_outputs(dense, X), want)  # a model fitted on dense rows predicts sparse ones
    assert csr.n_features_in_ == D
    if hasattr(csr, "classes_"):
        assert np.array_equal(csr.predict(X[:50]), csr.predict(X[:50].toarray()))


# the per-coordinate kernels densify row chunks (O(n m d) either way): a smaller set
SMALL = [(EigenProRegressor, dict(n_iter=10, subsample_size=100, n_eigenvectors=10,
                                  kernel="laplacian", bandwidth=3.0, engine=F64)),
         (ExactKRRRegressor, dict(kernel="cauchy", bandwidth=1.5, reg=1e-3)),
         (ExactSVMRegressor, dict(kernel="laplacian", bandwidth=3.0, reg=1e-3)),
         (NystromRidgeClassifier, dict(n_components=100, kernel="laplacian", bandwidth=3.0,
                                       reg=1e-3))]


@pytest.mark.parametrize("case", SMALL, ids=[_id(c) for c in SMALL])
def test_sparse_per_coordinate_kernels(case, data):
    cls, kw = case
    X, y = data[0][:300], _target(cls, data)[:300]
    dense = cls(random_state=0, **kw).fit(X.toarray(), y)
    csr = cls(random_state=0, **kw).fit(X, y)
    _close(_outputs(csr, X), _outputs(dense, X.toarray()))


def test_sparse_stream_batches_are_csr_rows():
    """``BatchStream`` over CSR X serves CSR batches holding the dense stream's rows."""
    X = sp.random(300, 40, density=0.05, format="csr", random_state=0)
    Xd = X.toarray()
    y = np.arange(300)
    s = BatchStream(X, y, batch_size=64, seed=3, dtype=np.float32)
    d = BatchStream(Xd, y, batch_size=64, seed=3, dtype=np.float32)
    for t in range(7):
        (xs, ys, ids), (xd, yd, _) = s.batch(t, with_ids=True), d.batch(t, with_ids=True)
        assert sp.issparse(xs) and xs.format == "csr" and xs.dtype == np.float32
        assert np.array_equal(xs.toarray(), xd) and np.array_equal(ys, yd)
        assert np.array_equal(xs.toarray(), Xd[ids].astype(np.float32))
    windowed = BatchStream(X, y, batch_size=32, seed=3, window_rows=96)
    xs, _, ids = windowed.batch(11, with_ids=True)
    assert sp.issparse(xs) and np.array_equal(xs.toarray(), Xd[ids])


@pytest.mark.parametrize("name", ["gaussian", "laplacian", "cauchy", "matern52"])
def test_sparse_kernel_matrices(name):
    """Kernel matrices of sparse rows (either or both arguments) are those of the dense rows."""
    A = sp.random(70, 30, density=0.1, format="csr", random_state=0)
    B = sp.random(50, 30, density=0.1, format="csr", random_state=1)
    k = make_kernel(name, 0.7)
    want = k(A.toarray(), B.toarray())
    for a, b in [(A, B), (A, B.toarray()), (A.toarray(), B), (B, A)]:
        got = k(a, b)
        assert isinstance(got, np.ndarray) and got.flags.c_contiguous
        np.testing.assert_allclose(got, want if a is not B else want.T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls", [DSGClassifier, RFFSGDRegressor, NystromRidgeClassifier])
def test_sparse_auto_bandwidth_and_reg(cls, data):
    """The "auto" bandwidth / reg selection on sparse rows picks what it picks on the densified
    rows, and the fits agree."""
    X = data[0]
    y = _target(cls, data)
    kw = dict(n_iter=20, batch_size=128, block_size=64, engine=F64) if cls is DSGClassifier \
        else dict(n_iter=20, n_components=100) if cls is RFFSGDRegressor \
        else dict(n_components=100)
    dense = cls(random_state=0, **kw).fit(X.toarray(), y)
    csr = cls(random_state=0, **kw).fit(X, y)
    assert csr.bandwidth_ == pytest.approx(dense.bandwidth_, rel=1e-12)
    assert csr.reg_ == pytest.approx(dense.reg_, rel=1e-12)
    _close(_outputs(csr, X), _outputs(dense, X.toarray()))


def test_sparse_median_bandwidth(data):
    X = data[0]
    a = DSGClassifier(bandwidth="median", reg=1e-3, n_iter=2, random_state=0).fit(X, data[1])
    b = DSGClassifier(bandwidth="median", reg=1e-3, n_iter=2, random_state=0).fit(X.toarray(),
                                                                                   data[1])
    assert a.bandwidth_ == pytest.approx(b.bandwidth_, rel=1e-12)


def test_sparse_formats_and_dtype(data):
    """COO (and the other formats) are taken as CSR; float32 CSR stays float32 in a float32
    model (the DSG family's default dtype)."""
    X, yc, _ = data
    Xd = X.toarray()
    est = DSGClassifier(**{**DSG, "engine": None}, random_state=0)
    f32 = est.fit(X.astype(np.float32), yc).decision_function(Xd)
    coo = DSGClassifier(**{**DSG, "engine": None}, random_state=0).fit(X.tocoo(), yc)
    np.testing.assert_allclose(coo.decision_function(Xd), f32, rtol=1e-4, atol=1e-4)
    dense = DSGClassifier(**{**DSG, "engine": None}, random_state=0).fit(Xd, yc)
    np.testing.assert_allclose(dense.decision_function(Xd), f32, rtol=1e-3, atol=1e-3)


def test_sparse_partial_fit_warm_start_and_pickle(data):
    X, yc, yr = data
    Xd = X.toarray()
    a = DSGRegressor(**DSG, random_state=0)
    b = DSGRegressor(**DSG, random_state=0)
    for lo in (0, 1000):
        a.partial_fit(X[lo:lo + 1000], yr[lo:lo + 1000])
        b.partial_fit(Xd[lo:lo + 1000], yr[lo:lo + 1000])
    _close(a.predict(X), b.predict(Xd))
    w = RFFSGDClassifier(n_iter=10, n_components=100, bandwidth=1.5, reg=1e-3, warm_start=True,
                         random_state=0)
    w.fit(X, yc).fit(X, yc)
    one = RFFSGDClassifier(n_iter=20, n_components=100, bandwidth=1.5, reg=1e-3, random_state=0)
    _close(w.decision_function(X), one.fit(X, yc).decision_function(X))
    # a model that holds its sparse training rows pickles with them
    krr = ExactKRRRegressor(bandwidth=1.5, reg=1e-3, random_state=0).fit(X, yr)
    assert sp.issparse(krr.solver_.X)
    again = pickle.loads(pickle.dumps(krr))
    np.testing.assert_array_equal(again.predict(X[:100]), krr.predict(X[:100]))


NYSTROM = dict(n_components=50, bandwidth=1.5, reg=1e-3)


def test_sparse_runs_on_the_cpu(data, monkeypatch):
    """Device "auto" means the CPU for sparse X (``engine_`` says so) for the estimators
    without ``_sparse_gpu``, also where a GPU is found; "gpu", or predicting sparse X with
    such a model on a GPU, is one line (the others' GPU path: tests/gpu/test_sparse_gpu.py)."""
    import kernelscale.backend

    X, yc, _ = data
    dense = NystromRidgeClassifier(**NYSTROM).fit(X.toarray(), yc)
    assert dense.engine_.device == "auto"
    monkeypatch.setattr(kernelscale.backend, "gpu_available", lambda: True)  # cupy is not used
    est = NystromRidgeClassifier(**NYSTROM).fit(X, yc)
    assert est.engine_.device == "cpu" and est.device_ == "cpu"
    est.predict(X)
    with pytest.raises(DeviceError, match="sparse X is computed on the CPU only") as e:
        dense.predict(X)  # its "auto" is the GPU here
    assert "\n" not in str(e.value)
    for cls in (EigenProClassifier, NystromRidgeClassifier, ExactSVMClassifier):
        with pytest.raises(DeviceError, match="sparse X is computed on the CPU only") as e:
            cls(engine={"device": "gpu"}).fit(X, yc)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("cls", [RBClassifier, RBRegressor])
def test_random_binning_refuses_sparse_in_one_line(cls, data):
    X = data[0]
    y = _target(cls, data)
    with pytest.raises(TypeError, match="does not take sparse X") as e:
        cls(n_components=8, bandwidth=3.0, reg=1e-3).fit(X, y)
    assert "\n" not in str(e.value) and "toarray" in str(e.value)
    est = cls(n_components=8, bandwidth=3.0, reg=1e-3, random_state=0).fit(X.toarray(), y)
    with pytest.raises(TypeError, match="does not take sparse X"):
        est.predict(X)
    assert not est.__sklearn_tags__().input_tags.sparse
    assert DSGClassifier().__sklearn_tags__().input_tags.sparse


@pytest.mark.parametrize("cls", [DSGClassifier, DSGRegressor, RFFSGDRegressor,
                                 ExactSVMRegressor, NystromRidgeClassifier])
def test_sparse_y_is_refused_in_one_line(cls, data):
    X, yc, yr = data
    y = yr if "Regressor" in cls.__name__ else yc
    for Y in (sp.csr_matrix(y.reshape(-1, 1)), sp.csr_matrix(y.reshape(1, -1)).T):
        with pytest.raises((TypeError, ValueError), match="sparse") as e:
            cls().fit(X, Y)
        assert "\n" not in str(e.value)


def test_fourier_blocks_row_major_cache_holds_the_same_draws():
    """Sparse rows read W from the row-major cache: the same numbers as the dense cache's, so
    their features are those of the dense rows (up to the products' rounding)."""
    from kernelscale.kernels import FourierBlocks

    blocks = FourierBlocks(make_kernel("gaussian", 0.8), 30, 16, seed=4, dtype=np.float32)
    W, b = blocks.params(1, 4)
    Wr, br = blocks.params(1, 4, rows=True)
    assert np.array_equal(W, Wr) and np.array_equal(b, br)
    assert Wr.strides[1] == Wr.itemsize  # rows are contiguous runs of features
    X = sp.random(40, 30, density=0.2, format="csr", random_state=0, dtype=np.float32)
    np.testing.assert_allclose(blocks.features(X, 1, 4), blocks.features(X.toarray(), 1, 4),
                               rtol=1e-5, atol=1e-6)
    small = FourierBlocks(make_kernel("gaussian", 0.8), 30, 16, seed=4, dtype=np.float32,
                          cache_bytes=1)  # beyond the cache: drawn, C-ordered
    assert np.array_equal(small.params(1, 4, rows=True)[0], blocks.params(1, 4)[0])


# -- a CSR matrix on disk (kernelscale.io.CSRStore) ---------------------------------------------

# 64-row pointer chunks, 1,024-entry index / value chunks: a window spans several of each
CHUNK_ROWS, CHUNK_NNZ = 64, 1024
# the two fits of a comparison read the same windows (engine.window_rows is honoured for rows
# in memory too): 512-row windows of 16-row pieces from all over the rows
WINDOW = 512

def _write_store(path, X):
    import zarr

    from kernelscale.io import write_csr

    group = zarr.open_group(str(path), mode="w")
    blocks = [X[lo:lo + 300] for lo in range(0, X.shape[0], 300)]
    return write_csr(group, "X", blocks, X.shape[1], chunk_rows=CHUNK_ROWS, chunk_nnz=CHUNK_NNZ,
                     dtype=X.dtype)


@pytest.fixture(scope="module")
def store(data, tmp_path_factory):
    """The rows of ``data`` as a float64 CSR store (as the in-memory CSR: same values)."""
    return _write_store(tmp_path_factory.mktemp("csr") / "x.zarr", data[0])


def _with_window(kw, **engine):
    return {**kw, "engine": {**(kw.get("engine") or {}), "window_rows": WINDOW, **engine}}


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_csr_store_fit_is_the_in_memory_fit(case, data, store):
    """A fit on a CSR store equals the fit on the same rows as in-memory CSR (same seed, same
    windows), bit for bit: streamed estimators read the same CSR rows window by window, the
    others load the same CSR matrix; predict / score on the store equal those on the CSR."""
    cls, kw = case
    X = data[0]
    y = _target(cls, data)
    kw = _with_window(kw)
    mem = cls(random_state=0, **kw).fit(X, y)
    disk = cls(random_state=0, **kw).fit(store, y)
    want = _outputs(mem, X)
    np.testing.assert_array_equal(_outputs(disk, store), want)
    np.testing.assert_array_equal(_outputs(disk, X), want)
    np.testing.assert_array_equal(_outputs(mem, store), want)
    assert disk.n_features_in_ == D
    if hasattr(disk, "window_rows_"):  # streamed: window by window from disk
        assert disk.window_rows_ == mem.window_rows_ < N
    if not cls.__name__.startswith("DSGOneClass"):
        assert disk.score(store, y) == mem.score(X, y)


@pytest.mark.parametrize("case", SMALL, ids=[_id(c) for c in SMALL])
def test_csr_store_per_coordinate_kernels(case, data, tmp_path):
    cls, kw = case
    X, y = data[0][:300], _target(cls, data)[:300]
    small = _write_store(tmp_path / "x.zarr", X)
    mem = cls(random_state=0, **kw).fit(X, y)
    disk = cls(random_state=0, **kw).fit(small, y)
    np.testing.assert_array_equal(_outputs(disk, small), _outputs(mem, X))


def test_csr_store_rows_and_stream(data, store):
    """Rows of a store (ranges, any-order and boolean indices, ``take_rows``) are those of the
    CSR; its stream serves the in-memory CSR stream's batches."""
    from kernelscale.stream import read_csr_runs, take_rows

    X, yc, _ = data
    idx = np.array([1999, 3, 64, 65, 3, 700, -1])
    for got, want in [(store[100:300], X[100:300]), (store[idx], X[idx]),
                      (store[np.arange(N) % 7 == 0], X[np.arange(N) % 7 == 0]),
                      (store[idx, :], X[idx]), (take_rows(store, np.arange(0, N, 9)),
                                                X[np.arange(0, N, 9)])]:
        assert sp.isspmatrix_csr(got) and (got != want).nnz == 0
    runs = np.array([[5, 70], [128, 129], [1000, 1300]])
    got = read_csr_runs(store, runs)
    assert (got != sp.vstack([X[a:b] for a, b in runs])).nnz == 0
    with pytest.raises(IndexError):
        store[N]
    s = BatchStream(store, yc, batch_size=32, seed=3, window_rows=96)
    m = BatchStream(X, yc, batch_size=32, seed=3, window_rows=96)
    for t in (0, 5, 11, 70):
        (xs, ys, ids), (xm, ym, idm) = s.batch(t, with_ids=True), m.batch(t, with_ids=True)
        assert sp.issparse(xs) and (xs != xm).nnz == 0
        assert np.array_equal(ys, ym) and np.array_equal(ids, idm)
    s.close()


def test_csr_store_streams_under_a_memory_budget(data, store):
    """Under a memory budget the window is planned from the store's CSR bytes a row
    (``row_nbytes``): a budget with room for about 600 such rows besides the step's working set
    streams the store in windows (``window_rows_ < n``) where dense planning of its 500 columns
    would not fit one batch. The fit equals the in-memory CSR fit at the same window, bit for
    bit: a batch is a function of (seed, t, n, window_rows, batch_size) only, and its rows are
    the same CSR rows."""
    from kernelscale.budget import (
        CHUNKS_IN_FLIGHT,
        MB,
        csr_chunk_bytes,
        csr_row_bytes,
        csr_width,
        plan_window,
    )

    X, yc, _ = data
    ref = DSGClassifier(random_state=0, **DSG).fit(X, yc)
    work = ref.solver_.work_bytes(128, N, csr_width(store, np.float64)) \
        + ref.solver_.row_state_bytes(N)
    budget = (work + CHUNKS_IN_FLIGHT * csr_chunk_bytes(store)
              + 2 * 600 * csr_row_bytes(store.row_nbytes, store.dtype)) / MB
    disk = DSGClassifier(random_state=0, **{**DSG, "engine": {**F64, "memory_budget": budget}})
    disk.fit(store, yc)
    assert 128 <= disk.window_rows_ < N
    with pytest.raises(ValueError, match="too small for one batch"):
        plan_window(budget, D, np.float64, 128, 64, work_bytes=work, chunk_rows=CHUNK_ROWS)
    mem = DSGClassifier(random_state=0,
                        **{**DSG, "engine": {**F64, "window_rows": disk.window_rows_}}).fit(X, yc)
    np.testing.assert_array_equal(disk.decision_function(store), mem.decision_function(X))


@pytest.mark.parametrize("cls", [RBClassifier, RBRegressor])
def test_random_binning_refuses_a_csr_store_in_one_line(cls, data, store):
    y = _target(cls, data)
    with pytest.raises(TypeError, match="does not take sparse X") as e:
        cls(n_components=8, bandwidth=3.0, reg=1e-3).fit(store, y)
    assert "\n" not in str(e.value)
    est = cls(n_components=8, bandwidth=3.0, reg=1e-3, random_state=0).fit(
        data[0][:200].toarray(), y[:200])
    with pytest.raises(TypeError, match="does not take sparse X"):
        est.predict(store)


def test_csr_store_runs_on_the_cpu(data, store, monkeypatch):
    """Device "auto" is the CPU for a CSR store (estimators without ``_sparse_gpu``), also
    where a GPU is found; "gpu", or predicting a store with such a model on a GPU, is one
    line."""
    import kernelscale.backend

    X, yc, _ = data
    dense = NystromRidgeClassifier(**NYSTROM).fit(X.toarray(), yc)
    monkeypatch.setattr(kernelscale.backend, "gpu_available", lambda: True)  # cupy is not used
    est = NystromRidgeClassifier(**NYSTROM).fit(store, yc)
    assert est.engine_.device == "cpu" and est.device_ == "cpu"
    est.predict(store)
    with pytest.raises(DeviceError, match="sparse X is computed on the CPU only") as e:
        dense.predict(store)
    assert "\n" not in str(e.value)
    for cls in (EigenProClassifier, NystromRidgeClassifier, ExactKRRClassifier):
        with pytest.raises(DeviceError, match="sparse X is computed on the CPU only") as e:
            cls(engine={"device": "gpu"}).fit(store, yc)
        assert "\n" not in str(e.value) and "toarray" not in str(e.value)


def test_open_zarr_opens_a_csr_store(data, tmp_path):
    """``io.open_zarr(path, name)`` returns the CSR store ``name`` of the group at ``path``
    (``write_csr``'s arrays), the array ``name`` where there is one, else one line."""
    import zarr

    from kernelscale.io import CSRStore, open_zarr, write_csr

    X, yc, _ = data
    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    write_csr(group, "X", [X[:500], X[500:]], D, chunk_rows=CHUNK_ROWS, dtype="float32")
    group.create_array("y", data=yc)
    got = open_zarr(tmp_path / "d.zarr", "X")
    assert isinstance(got, CSRStore) and got.shape == (N, D) and got.dtype == np.float32
    assert got.nnz == X.nnz and (got[0:N] != X.astype(np.float32)).nnz == 0
    assert np.array_equal(open_zarr(tmp_path / "d.zarr", "y")[:], yc)
    with pytest.raises(FileNotFoundError, match="has no array 'Z'") as e:
        open_zarr(tmp_path / "d.zarr", "Z")
    assert "\n" not in str(e.value)


def _store_files(path):
    from pathlib import Path

    return {str(f.relative_to(path)): f.read_bytes() for f in Path(path).rglob("*")
            if f.is_file()}


def _one_piece_store(path, X, chunk_rows, chunk_nnz):
    """A CSR store as ``CSRWriter`` wrote it when it kept the row pointers until ``close()``:
    each array created empty, then resized and written in one assignment."""
    import zarr

    group = zarr.open_group(str(path), mode="w")
    X = X.tocsr()
    for part, values, chunk, dtype in (("indptr", X.indptr, chunk_rows, "int64"),
                                       ("indices", X.indices, chunk_nnz, "int32"),
                                       ("data", X.data, chunk_nnz, "float32")):
        arr = group.create_array(f"X.{part}", shape=(0,), chunks=(chunk,), dtype=dtype)
        arr.resize((len(values),))
        arr[:] = values.astype(dtype)
    group.attrs["X.shape"] = list(X.shape)


@pytest.mark.parametrize("chunk_rows, chunk_nnz", [(64, 1024), (7, 16), (1, 1), (1000, 1024)])
def test_csr_writer_store_is_the_same_however_the_rows_arrive(tmp_path, chunk_rows, chunk_nnz):
    """Rows appended in many small blocks (empty ones, single rows, blocks across pointer and
    value chunk boundaries, empty rows) give the store written in one go, file for file."""
    import zarr

    from kernelscale.io import CSRWriter, open_csr, write_csr

    rng = np.random.default_rng(chunk_rows)
    X = sp.random(700, 40, density=0.05, format="csr", random_state=1, dtype=np.float64)
    keep = np.ones(700)
    keep[rng.choice(700, 30, replace=False)] = 0
    X = (sp.diags(keep) @ X).tocsr()  # some empty rows
    X.eliminate_zeros()
    X.sort_indices()
    edges = [0, *np.sort(rng.integers(0, 701, size=60)).tolist(), 700]
    group = zarr.open_group(str(tmp_path / "many.zarr"), mode="w")
    writer = CSRWriter(group, "X", 40, chunk_rows=chunk_rows, chunk_nnz=chunk_nnz)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        writer.append(X[lo:hi])
    many = writer.close()
    once = write_csr(zarr.open_group(str(tmp_path / "once.zarr"), mode="w"), "X", [X], 40,
                     chunk_rows=chunk_rows, chunk_nnz=chunk_nnz)
    _one_piece_store(tmp_path / "old.zarr", X, chunk_rows, chunk_nnz)
    old = open_csr(zarr.open_group(str(tmp_path / "old.zarr"), mode="r"), "X")
    for store in (many, once):
        assert store.shape == old.shape and store.chunks == old.chunks
        for part in ("indptr", "indices", "data"):
            a, b = getattr(store, part), getattr(old, part)
            assert a.chunks == b.chunks and a.shape == b.shape and a.dtype == b.dtype
            assert np.array_equal(a[:], b[:])
    assert (many[:] != X.astype(np.float32)).nnz == 0
    files = _store_files(tmp_path / "old.zarr")
    assert _store_files(tmp_path / "many.zarr") == files == _store_files(tmp_path / "once.zarr")


def test_csr_writer_holds_at_most_a_chunk_of_row_pointers(tmp_path):
    """While 10 pointer chunks are written in blocks of 1..40 rows, the pointers held in memory
    never exceed a chunk (+ 1) and the ones before them are on disk already."""
    import zarr

    from kernelscale.io import CSRWriter

    chunk = 64
    X = sp.random(10 * chunk, 30, density=0.1, format="csr", random_state=2, dtype=np.float32)
    writer = CSRWriter(zarr.open_group(str(tmp_path / "w.zarr"), mode="w"), "X", 30,
                       chunk_rows=chunk, chunk_nnz=256)
    rng = np.random.default_rng(0)
    lo = 0
    while lo < X.shape[0]:
        hi = min(X.shape[0], lo + int(rng.integers(1, 41)))
        writer.append(X[lo:hi])
        lo = hi
        held = len(writer._ptrs)
        assert held <= chunk + 1 and writer.indptr.shape[0] + held == hi + 1
        assert writer.indptr.shape[0] % chunk == 0
        if writer.indptr.shape[0]:
            assert np.array_equal(writer.indptr[:], X.indptr[:writer.indptr.shape[0]])
    store = writer.close()
    assert np.array_equal(store.indptr[:], X.indptr) and (store[:] != X).nnz == 0
