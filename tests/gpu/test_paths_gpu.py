"""GPU runs of results that the CPU suite checks too: accuracy, convergence, acceleration."""

import numpy as np
import pytest
from gpu_data import regression
from sklearn.datasets import load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelscale.estimators import DSGClassifier, DSGRegressor, EigenProRegressor
from kernelscale.kernels import FourierBlocks, make_kernel


def test_feature_blocks_and_kernel_equal_cpu(cp):
    k = make_kernel("gaussian", 1.0)
    X = np.random.default_rng(0).standard_normal((50, 6))
    cpu = FourierBlocks(k, 6, 128, seed=9).features(X, 0, 3)
    dev = FourierBlocks(k, 6, 128, seed=9, xp=cp).features(cp.asarray(X), 0, 3)
    assert np.allclose(dev.get(), cpu, atol=1e-10)
    assert np.allclose(k(cp.asarray(X)).get(), k(X), atol=1e-12)


def test_dsg_reaches_95_percent_on_digits_from_cupy_input(cp):
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(StandardScaler().fit_transform(X), y, random_state=0)
    clf = DSGClassifier(engine={"device": "gpu"}, bandwidth="median*0.5", n_iter=150, t0=1000, random_state=0)
    clf.fit(cp.asarray(Xtr), ytr)
    assert clf.score(Xte, yte) >= 0.95


def test_dsg_converges_to_exact_kernel_ridge_on_gpu():
    X, y = regression(2000)
    # of the centred targets, as DSG fits them (y_offset_ = their mean, added back)
    exact = KernelRidge(kernel="rbf", gamma=1 / 8, alpha=20.0).fit(X, y - y.mean()).predict(X) + y.mean()
    dsg = DSGRegressor(engine={"device": "gpu"}, bandwidth=2.0, reg=1e-2, batch_size=1000, block_size=256,
                       n_iter=150, t0=100, random_state=0).fit(X, y)
    assert np.linalg.norm(dsg.predict(X) - exact) / np.linalg.norm(exact) < 0.05


def _step_problem(n=600, seed=0):
    """A discontinuous target: where plain SGD on a smooth kernel is slow (paper 004 §2)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    return X, np.sign(np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]))


def test_eigenpro_accelerates_sgd_on_gpu():
    X, y = _step_problem()
    bw = 0.5
    krr = KernelRidge(alpha=0.1, kernel="rbf", gamma=1 / (2 * bw**2)).fit(X, y)
    target = float(np.mean((krr.predict(X) - y) ** 2))
    common = dict(bandwidth=bw, batch_size=64, n_iter="1 epochs", subsample_size=600, engine={"device": "gpu"},
                  random_state=0, warm_start=True)
    ep = EigenProRegressor(n_eigenvectors=100, **common)
    for epochs in range(1, 21):  # noqa: B007 (read after the loop)
        ep.fit(X, y)
        if np.mean((ep.predict(X) - y) ** 2) <= target:
            break
    else:
        raise AssertionError("EigenPro did not reach the ridge training error in 20 epochs")
    sgd = EigenProRegressor(n_eigenvectors=0, **{**common, "n_iter": f"{3 * epochs} epochs",
                                                   "warm_start": False}).fit(X, y)
    assert np.mean((sgd.predict(X) - y) ** 2) > target


def test_rowwise_csr_products_match_scipy_and_repeat_exactly(cp):
    import scipy.sparse as sp

    from kernelscale.solvers._rowwise_csr import RowwiseCSR

    rng = np.random.default_rng(0)
    A = sp.random(3000, 500, density=0.02, format="csr", random_state=1, dtype=np.float64)
    P = rng.standard_normal((500, 3))
    dA = RowwiseCSR.from_scipy(A, cp)
    if dA is None:
        pytest.skip("this cupy has no RawKernel (tests/gpu/fakecupy)")
    out = (dA @ cp.asarray(P)).get()
    np.testing.assert_allclose(out, A @ P, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal((dA @ cp.asarray(P)).get(), out)
    np.testing.assert_allclose((dA @ cp.asarray(P[:, 0])).get(), A @ P[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dA.sum(axis=1).get(), np.asarray(A.sum(axis=1)).ravel(), rtol=1e-12)


@pytest.mark.parametrize("dtype,C", [("float32", 1), ("float32", 3), ("float64", 2)])
def test_fused_feature_sum_equals_the_feature_matrix_product(cp, dtype, C, monkeypatch):
    """FourierBlocks.weighted_sum (one kernel, no feature matrix) against forming the features:
    whole-block sums (DSGModel.decision) and prefix-limited terms (the row cache's catch-up)."""
    from kernelscale.kernels import _fused

    if not hasattr(cp, "RawKernel"):
        pytest.skip("this cupy offers no RawKernel (tests/gpu/fakecupy)")
    rng = np.random.default_rng(0)
    n, d, F, m = 3000, 20, 256, 7
    X = cp.asarray(rng.standard_normal((n, d)), dtype=dtype)
    fb = FourierBlocks(make_kernel("gaussian", 3.0), d, F, seed=1, xp=cp, dtype=np.dtype(dtype))
    coefs = cp.asarray(rng.standard_normal((m, F, C)), dtype=dtype)
    ks = np.array([0, 3, 1, 6, 2, 3, 5])  # repeats and any order, as the change log has
    limits = np.array([n, 2500, 2500, 1800, 700, 700, 1])
    fused = cp.zeros((n, C), dtype=dtype)
    assert fb.weighted_sum(X, ks, coefs, limits, fused)
    want = cp.zeros((n, C), dtype=dtype)
    for k, c, r in zip(ks, coefs, limits, strict=True):
        want[:r] += fb.features(X[:r], int(k), scaled=False) @ c
    tol = 2e-4 if dtype == "float32" else 1e-10
    scale = float(cp.abs(want).max())
    assert float(cp.abs(fused - want).max()) <= tol * scale
    again = cp.zeros((n, C), dtype=dtype)
    fb.weighted_sum(X, ks, coefs, limits, again)
    assert bool((again == fused).all())  # no atomics: the same sums, bit for bit
    monkeypatch.setattr(_fused, "fourier_sum", lambda *a, **k: False)
    assert not fb.weighted_sum(X, ks, coefs, limits, cp.zeros((n, C), dtype=dtype))


def test_dsg_fused_and_unfused_decisions_agree_and_fit_the_same(cp, monkeypatch):
    """A DSG fit on the GPU with the fused sums (prediction and row-cache catch-up) against the
    same fit that forms every feature matrix: the same model up to float32 rounding."""
    from kernelscale.kernels import _fused

    if not hasattr(cp, "RawKernel"):
        pytest.skip("this cupy offers no RawKernel (tests/gpu/fakecupy)")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, 10)).astype(np.float32)
    y = (np.sin(X[:, :3].sum(axis=1)) > 0).astype(int)
    kw = dict(n_iter=40, batch_size=2048, block_size=512, random_state=0,
              engine={"dtype": "float32", "device": "gpu"})
    fused = DSGClassifier(**kw).fit(X, y)
    f1 = cp.asnumpy(fused.decision_function(X[:5000]))
    monkeypatch.setattr(_fused, "fourier_sum", lambda *a, **k: False)
    f0 = cp.asnumpy(fused.decision_function(X[:5000]))
    gap = np.abs(f1 - f0).max() / np.abs(f0).max()
    assert gap <= 1e-4, gap
    plain = DSGClassifier(**kw).fit(X, y)
    f2 = cp.asnumpy(plain.decision_function(X[:5000]))
    gap, agree = np.abs(f2 - f1).max() / np.abs(f1).max(), np.mean(np.sign(f2) == np.sign(f1))
    assert gap <= 2e-2 and agree > 0.99, (gap, agree)
