"""A fit at an explicit bandwidth / reg that returns a constant model says so in one warning
(``validation.warn_if_constant``, called at the end of every estimator's ``fit``); a learnable
problem, and any fit at the "auto" settings, gives none."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import kernelscale
from kernelscale.kernels import make_kernel
from kernelscale.kernels.bandwidth import median_bandwidth

PUBLIC = [getattr(kernelscale, n) for n in kernelscale.__all__ if n[0].isupper() and n != "Engine"]
# fast settings of each family (None: its defaults)
FAST = {"DSG": dict(n_iter=20, batch_size=64, block_size=32), "EigenPro": dict(n_iter=20),
        "NORMA": dict(n_iter=60, max_terms=100), "Pegasos": dict(n_iter=40),
        "RFFSGD": dict(n_iter=40, n_components=100), "Nystrom": dict(n_components=50)}
# a bandwidth far from the data's scale (standardized rows: median distance ~ 2.7): random
# features of a tiny bandwidth are noise rather than constant, so those families get a huge one
EXTREME = {"DSG": 1e4, "RFFSGD": 1e4, "EigenProRF": 1e4}


def _fast(cls):
    return next((v for k, v in FAST.items() if cls.__name__.startswith(k)), {})


def _problem(cls, n=240, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 1 + 0.5 * X[:, 2]
    if "OneClass" in cls.__name__:
        return X, None
    if "Classifier" in cls.__name__:
        return X, (f > np.median(f)).astype(int)
    return X, f


def _fit(cls, X, y, **params):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est = cls(random_state=0, **_fast(cls), **params).fit(X, y)
    return est, [str(x.message) for x in w if issubclass(x.category, ConvergenceWarning)
                 and "is constant" in str(x.message)]


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_an_extreme_bandwidth_that_gives_a_constant_model_warns_once(cls):
    X, y = _problem(cls)
    sigma = next((v for k, v in EXTREME.items() if cls.__name__.startswith(k)), 1e-3)
    est, msgs = _fit(cls, X, y, bandwidth=sigma)
    # the model is constant away from its training rows (a fresh sample of the same law)
    Xt, yt = _problem(cls, seed=1)
    out = getattr(est, "decision_function", est.predict)(Xt)
    scale = 1.0 if y is None or "Classifier" in cls.__name__ else np.std(yt)
    assert np.std(out) < 1e-3 * scale or len(np.unique(est.predict(Xt))) == 1
    [msg] = msgs
    assert "\n" not in msg and msg.startswith(f"{cls.__name__}: the fitted model is constant")
    assert f" at bandwidth={sigma!r};" in msg  # reg was "auto": not named
    metric = make_kernel(est.kernel, 1.0).metric  # the data's scale (sampled: all 240 rows)
    assert f"median pairwise {metric} distance is {median_bandwidth(X, metric):.3g}:" in msg


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_a_learnable_problem_gives_no_warning(cls):
    X, y = _problem(cls)
    # at the defaults ("auto": never checked) and at an explicit bandwidth near the data's scale
    for params in ({}, {"bandwidth": 2.0}):
        est, msgs = _fit(cls, X, y, **params)
        assert msgs == [], (params, msgs)
    if y is not None:  # the explicit fit learned something: a constant has R^2 0, accuracy 1/2
        assert est.score(X, y) > (0.6 if "Classifier" in cls.__name__ else 0.1)


def test_a_huge_reg_is_named_and_auto_is_not_checked():
    from kernelscale import ExactKRRRegressor

    X, y = _problem(ExactKRRRegressor)
    _, msgs = _fit(ExactKRRRegressor, X, y, reg=1e6)
    [msg] = msgs
    assert " at reg=1000000.0;" in msg  # bandwidth was "auto": not named
    # pure noise at the "auto" settings: a near-mean model is the right answer, no warning
    noise = np.random.default_rng(3).standard_normal(len(y))
    assert _fit(ExactKRRRegressor, X, noise)[1] == []


def test_the_check_reads_an_on_disk_X_in_a_sample(tmp_path):
    zarr = pytest.importorskip("zarr")
    from kernelscale import DSGRegressor

    X, y = _problem(DSGRegressor, n=1500)
    Z = zarr.open_array(tmp_path / "x.zarr", mode="w", shape=X.shape, chunks=(256, 4),
                        dtype="f8")
    Z[:] = X
    _, msgs = _fit(DSGRegressor, Z, y, bandwidth=1e4)
    assert len(msgs) == 1 and "bandwidth=10000.0" in msgs[0]
