"""EigenPro (paper 004): acceleration over plain SGD, warm starts, determinism, errors, GPU."""

import pickle

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge

from kernelscale.backend import DeviceError, gpu_available
from kernelscale.estimators.eigenpro import (
    EigenProClassifier,
    EigenProRegressor,
    EigenProRFRegressor,
)
from kernelscale.solvers.preconditioners import KernelPreconditioner, step_size, top_eigh

BW = 0.5


def _problem(n=600, seed=0):
    """A discontinuous target: the case where plain SGD on a smooth kernel is slow (paper 004 §2)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.sign(np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]))
    return X, y


def _mse(est, X, y):
    return float(np.mean((est.predict(X) - y) ** 2))


def _epochs_to(est, X, y, target, max_epochs):
    """Epochs (one warm-started fit each) until the training MSE <= target; None if never."""
    for epoch in range(1, max_epochs + 1):
        est.fit(X, y)
        if _mse(est, X, y) <= target:
            return epoch
    return None


ESTIMATOR = {"kernel": EigenProRegressor, "rff": EigenProRFRegressor}


def RF_ONLY(method, n_components):  # noqa: N802
    return {"n_components": n_components} if method == "rff" else {}


def _ridge_target(method, X, y, common):
    """Training MSE of the ridge solution (alpha = 0.1, KernelRidge scaling) of the same model:
    exact kernel ridge for "kernel", ridge on the same random features for "rff"."""
    if method == "kernel":
        krr = KernelRidge(alpha=0.1, kernel="rbf", gamma=1 / (2 * BW**2)).fit(X, y)
        return float(np.mean((krr.predict(X) - y) ** 2))
    probe = EigenProRFRegressor(**{**common, "n_iter": 1}).fit(X, y)  # its features only
    Phi = probe.solver_.blocks.features(X, 0)
    w = np.linalg.solve(Phi.T @ Phi + 0.1 * np.eye(Phi.shape[1]), Phi.T @ y)
    return float(np.mean((Phi @ w - y) ** 2))


@pytest.mark.parametrize("method", ["kernel", "rff"])
def test_eigenpro_reaches_ridge_fit_3x_faster_than_sgd(method):
    X, y = _problem()
    Est = ESTIMATOR[method]
    common = dict(bandwidth=BW, batch_size=64, n_iter="1 epochs", subsample_size=600,
                  engine={"device": "cpu"}, random_state=0, **RF_ONLY(method, 600))
    target = _ridge_target(method, X, y, common)
    ep = _epochs_to(Est(n_eigenvectors=100, warm_start=True, **common), X, y, target, 20)
    assert ep is not None, "EigenPro did not reach the ridge training fit in 20 epochs"
    # the same loop without the preconditioner (k = 0, step from lambda_1) must still be short of
    # the target after 3x as many epochs
    sgd = Est(n_eigenvectors=0, **{**common, "n_iter": f"{3 * ep} epochs"}).fit(X, y)
    assert _mse(sgd, X, y) > target, f"plain SGD reached the target within 3 x {ep} epochs"


def test_step_size_formulas():
    # eta(1) = 1/beta; eta(m) -> 1/lambda_{k+1} for large m (paper 004 §4)
    assert step_size(2.0, 0.01, 1) == pytest.approx(0.5)
    assert step_size(2.0, 0.01, 10**9) == pytest.approx(100.0, rel=1e-6)


def test_preconditioner_flattens_top_eigenvalues():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200, 5))
    K = np.exp(-((A[:, None] - A[None]) ** 2).sum(-1) / 8)
    p = KernelPreconditioner(K, 10, 1.0, np, method="eigh")
    vals, vecs = top_eigh(K, 11, np, method="eigh")
    # P K restricted to the sample: eigenvalue sigma_i -> sigma_{k+1} along the top k directions
    PK = K - p.U @ (p.d[:, None] * (p.U.T @ (K @ K)))
    assert np.allclose(PK @ vecs[:, 0], vals[10] * vecs[:, 0], atol=1e-8)
    rvals, _ = top_eigh(K, 11, np, method="randomized", n_power_iter=6)
    assert np.allclose(rvals[:5], vals[:5], rtol=1e-6)


def test_classifier_multiclass_accuracy():
    rng = np.random.default_rng(1)
    centers = np.array([[0, 0], [3, 0], [0, 3]])
    X = np.concatenate([c + rng.standard_normal((150, 2)) for c in centers])
    y = np.repeat(["a", "b", "c"], 150)
    clf = EigenProClassifier(n_iter="5 epochs", subsample_size=300, engine={"device": "cpu"}, random_state=0).fit(X, y)
    assert clf.decision_function(X).shape == (450, 3)
    assert (clf.predict(X) == y).mean() > 0.9


@pytest.mark.parametrize("method", ["kernel", "rff"])
def test_warm_start_segments_equal_one_run(method):
    X, y = _problem(300)
    kw = dict(n_eigenvectors=20, subsample_size=200, batch_size=32, engine={"device": "cpu"},
              random_state=3, **RF_ONLY(method, 200))
    one = ESTIMATOR[method](n_iter=30, **kw).fit(X, y)
    seg = ESTIMATOR[method](n_iter=10, warm_start=True, **kw)
    for _ in range(3):
        seg.fit(X, y)
    assert seg.n_iter_ == 30 and len(seg.history_["iter"]) == 30
    assert np.array_equal(one.predict(X), seg.predict(X))
    assert set(one.history_) >= {"iter", "time", "objective"}


@pytest.mark.parametrize("method", ["kernel", "rff"])
def test_same_seed_same_model_and_pickle(method):
    X, y = _problem(200)
    kw = dict(n_eigenvectors=10, n_iter="2 epochs", engine={"device": "cpu"},
              **RF_ONLY(method, 100))
    a = ESTIMATOR[method](random_state=7, **kw).fit(X, y)
    b = ESTIMATOR[method](random_state=7, **kw).fit(X, y)
    assert np.array_equal(a.predict(X), b.predict(X))
    c = pickle.loads(pickle.dumps(a))
    assert np.array_equal(a.predict(X), c.predict(X))


def test_rff_trains_from_zarr_like_numpy(tmp_path):
    zarr = pytest.importorskip("zarr")
    X, y = _problem(300)
    Z = zarr.create_array(store=str(tmp_path / "x.zarr"), shape=X.shape, chunks=(64, 3),
                          dtype="float64")
    Z[:] = X
    kw = dict(n_eigenvectors=10, n_components=100, n_iter="2 epochs", batch_size=32,
              bandwidth=BW, engine={"device": "cpu", "window_rows": 64}, random_state=0)
    a = EigenProRFRegressor(**kw).fit(X, y)
    b = EigenProRFRegressor(**kw).fit(Z, y)
    assert np.allclose(a.predict(X), b.predict(X))


@pytest.mark.parametrize("kwargs, match", [
    (dict(bandwidth=0.0), "bandwidth"),
    (dict(bandwidth=-1.0), "bandwidth"),
    (dict(kernel="nope"), "kernel='nope' must be"),
    (dict(eig_method="nope"), "eig_method="),
    (dict(tau=2.0), "tau"),
    (dict(n_eigenvectors=-1), "n_eigenvectors"),
])
def test_bad_parameters_one_line_errors(kwargs, match):
    X, y = _problem(50)
    with pytest.raises(ValueError, match=match) as e:
        EigenProRegressor(engine={"device": "cpu"}, **kwargs).fit(X, y)
    assert "\n" not in str(e.value)


def test_bad_data_errors():
    X, y = _problem(50)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN|infinity"):
        EigenProRegressor(engine={"device": "cpu"}).fit(Xn, y)
    with pytest.raises(ValueError, match="Unknown label type|continuous"):
        EigenProClassifier(engine={"device": "cpu"}).fit(X, X[:, 0])


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_gpu_requested_without_gpu():
    X, y = _problem(50)
    with pytest.raises(DeviceError):
        EigenProRegressor(engine={"device": "gpu"}).fit(X, y)


def _digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    return train_test_split(StandardScaler().fit_transform(X), y, random_state=0)


def test_default_kernel_eigenpro_converges_on_digits():
    """Defaults on standardized digits (n = 1347 <= M, so the subsample is the training set):
    the auto batch used to be m* = 1346, leaving a 1-row remainder batch per epoch that got the
    step of a 1346-row batch (673x the stable step) and diverged (objective 1e28, accuracy 0.10)."""
    Xtr, Xte, ytr, yte = _digits()
    est = EigenProClassifier(n_iter="5 epochs", engine={"device": "cpu"}, random_state=0).fit(Xtr, ytr)
    obj = np.asarray(est.history_["objective"])
    assert np.all(np.isfinite(obj))
    assert np.all(obj[1:] <= 2.0 * obj[:-1]), obj
    assert est.score(Xte, yte) >= 0.95
    # the batches of one epoch are evened out: no short remainder batch
    m, n = est.batch_size_, len(Xtr)
    assert n - (-(-n // m) - 1) * m >= m // 2


def test_short_batch_gets_its_own_step():
    """A batch shorter than the nominal one uses eta(m') from (S1), not eta(m)."""
    from kernelscale.solvers.eigenpro import batch_step, choose_batch_and_step

    beta, lam = 1.0, 1 / 1346.5  # digits: m* = beta / lambda_{k+1} ~ 1346.5
    m, eta = choose_batch_and_step(beta, lam, 1347, 1346, "auto", 10**6)
    assert batch_step(eta, beta, lam, m, 1) == pytest.approx(step_size(beta, lam, 1))
    assert batch_step(eta, beta, lam, m, m) == eta
    # auto batch: m* = 1347 capped by n and evened out -> two batches of 674
    m_auto, _ = choose_batch_and_step(beta, lam, 1347, "auto", "auto", 10**6)
    assert m_auto == 674
    # plain SGD (m* ~ 1.7) gets the paper's m = 256 (evened out), not 1
    m_sgd, eta_sgd = choose_batch_and_step(1.0, 0.6, 1347, "auto", "auto", 10**6)
    assert m_sgd == 225 and eta_sgd == pytest.approx(step_size(1.0, 0.6, 225))


def test_kernel_sgd_auto_batch_learns_digits():
    """n_eigenvectors=0 with batch_size="auto": m = 256-ish (paper 004 §6), not m* ~ 2."""
    Xtr, Xte, ytr, yte = _digits()
    est = EigenProClassifier(n_eigenvectors=0, n_iter="20 epochs", engine={"device": "cpu"},
                             random_state=0).fit(Xtr, ytr)
    assert est.batch_size_ >= 128
    assert est.score(Xte, yte) >= 0.9


def test_rff_feature_count_grows_with_n():
    """n_components="auto": max(2000, ceil(sqrt(n) ln n)) random features, so that the ridge
    fit EigenPro-RF converges to is not capped by a fixed D as n grows; an int is kept as given;
    the kernel method has none."""
    import math

    rng = np.random.default_rng(0)
    for n, want in ((3000, 2000), (50_000, math.ceil(math.sqrt(50_000) * math.log(50_000)))):
        X = rng.standard_normal((n, 2))
        y = np.sin(X[:, 0])
        est = EigenProRFRegressor(bandwidth=1.0, n_iter=1, subsample_size=500,
                                  n_eigenvectors=20, random_state=0).fit(X, y)
        assert est.n_components_ == want and est.solver_.w.shape[0] == want
    assert want > 2000
    est = EigenProRFRegressor(n_components=64, bandwidth=1.0, n_iter=1,
                              random_state=0).fit(X[:500], y[:500])
    assert est.n_components_ == 64
    assert not hasattr(EigenProRegressor(bandwidth=1.0, n_iter=1).fit(X[:300], y[:300]),
                       "n_components_")


def test_rff_average_is_the_mean_of_the_last_half_to_three_quarters_of_the_iterates():
    """average=True: after step t, 2^k <= t < 2^(k+1), the model predicts with the mean of the
    iterates of steps 2^(k-1) .. t, kept across warm-started fits; average=False with the last
    iterate."""
    X, y = _problem(400)
    kw = dict(n_eigenvectors=20, subsample_size=200, n_components=150,
              batch_size=40, engine={"device": "cpu"}, random_state=1)
    seg = EigenProRFRegressor(n_iter=1, warm_start=True, **kw)
    iterates = []
    for t in range(1, 26):  # 2.5 epochs of 10 steps, one step a fit
        seg.fit(X, y)
        iterates.append(seg.solver_.w.copy())
        k = t.bit_length() - 1
        first = 2 ** (k - 1) if k else 1  # step numbers are 1-based
        np.testing.assert_allclose(seg.solver_.w_model, np.mean(iterates[first - 1:], axis=0),
                                   rtol=1e-10, atol=1e-14)
    s = seg.solver_
    assert s.n_averaged == 25 - 8 + 1  # steps 8 .. 25
    np.testing.assert_allclose(seg.predict(X),
                               (s.blocks.features(X, 0) @ s.w_model)[:, 0] + seg.y_offset_[0],
                               rtol=1e-12, atol=1e-12)
    one = EigenProRFRegressor(n_iter=25, **kw).fit(X, y)
    assert np.array_equal(one.predict(X), seg.predict(X))  # segments = one run, average included
    last = EigenProRFRegressor(n_iter=25, average=False, **kw).fit(X, y)
    assert last.solver_.n_averaged == 0 and np.array_equal(last.solver_.w_model, iterates[-1])
    assert not np.allclose(last.predict(X), one.predict(X))


def test_rff_average_lands_nearer_the_least_squares_fit_than_the_last_iterate():
    """With D << n features the least-squares fit on them leaves a residual, and EigenPro's
    constant step keeps the last iterate in a noise ball around it; the tail average converges
    to it (Bach & Moulines 2013). Reference: the exact least-squares w on the same features."""
    from kernelscale.solvers.eigenpro import RFFEigenPro

    X, y = _problem(3000, seed=4)
    y = y + 0.5 * np.random.default_rng(5).standard_normal(len(y))  # noisy: no interpolation
    est = EigenProRFRegressor(bandwidth=BW, n_components=100, n_iter=1,
                            subsample_size=1000, n_eigenvectors=20, random_state=0).fit(X, y)
    blocks = est.solver_.blocks
    Y = y[:, None]
    solver = RFFEigenPro(blocks, X, 1, n_eigenvectors=20, tau=1.0, subsample_size=1000,
                         batch_size=30, eta="auto", seed=0, xp=np, average=True)
    rng = np.random.default_rng(0)
    for _ in range(8):  # epochs
        for idx in np.array_split(rng.permutation(len(X)), len(X) // 30):
            solver.step(X[idx], Y[idx])
            solver.t += 1
    Phi = blocks.features(X, 0)
    w_ls = np.linalg.lstsq(Phi, Y, rcond=None)[0]
    # excess training loss over the least-squares fit: ||Phi (w - w_ls)||^2 / n (the residual of
    # w_ls is orthogonal to Phi's columns)
    excess_last = np.sum((Phi @ (solver.w - w_ls)) ** 2) / len(X)
    excess_avg = np.sum((Phi @ (solver.w_model - w_ls)) ** 2) / len(X)
    assert excess_avg < 0.5 * excess_last, (excess_avg, excess_last)  # 0.032 vs 0.108


def test_kernel_eigenpro_is_float32_at_auto_and_subset_invariant_to_rounding():
    """Engine dtype "auto" is float32 for kernel EigenPro; predicting rows alone, in small groups
    or all together gives the same values up to float32 rounding (scikit-learn's
    check_methods_subset_invariance at float32's tolerance); float64 stays on request."""
    X, y = _problem()
    for est in (EigenProRegressor(bandwidth=BW, random_state=0).fit(X, y),
                EigenProClassifier(bandwidth=BW, random_state=0).fit(X, y > 0)):
        assert est.dtype_ == "float32" and est.solver_.alpha.dtype == np.float32
        method = getattr(est, "decision_function", est.predict)
        whole = method(X)
        parts = np.concatenate([method(X[i:i + 7]) for i in range(0, len(X), 7)])
        single = np.array([method(X[i:i + 1])[0] for i in range(0, 60)])
        tol = 1e-4 * float(np.abs(whole).max())  # a sum over n kernel terms in float32
        np.testing.assert_allclose(parts, whole, rtol=0, atol=tol)
        np.testing.assert_allclose(single, whole[:60], rtol=0, atol=tol)
    f64 = EigenProRegressor(bandwidth=BW, random_state=0, engine={"dtype": "float64"}).fit(X, y)
    assert f64.solver_.alpha.dtype == np.float64
