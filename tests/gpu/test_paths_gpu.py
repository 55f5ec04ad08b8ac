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
