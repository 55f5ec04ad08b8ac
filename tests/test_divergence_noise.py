"""A fit that ends no better than f = 0 because y holds no signal is a result, not a divergence:
the end-of-run judgement of the smoothed watch (``solvers._common.DivergenceWatch.end``) stops a
run only when its batch objective ends above that of f = 0 by more than the objective's noise."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from kernelscale.estimators.dsg import DSGRegressor
from kernelscale.solvers._common import DivergenceWatch, run_loop


def test_dsg_at_its_defaults_on_a_pure_noise_target_returns_the_mean_predictor():
    """40,000 x 3 standard normal X, y = 0.1 + 0.29 N(0, 1) independent of X: the fit returns a
    model whose test RMSE is that of the mean, with at most the ConvergenceWarning that it learned
    nothing better than f = 0 (on this draw the fit used to stop with "diverged or learned
    nothing": its batch objective ended a hair above that of f = 0)."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40000, 3))
    y = 0.1 + 0.29 * rng.standard_normal(40000)
    Xt, yt = rng.standard_normal((5000, 3)), 0.1 + 0.29 * rng.standard_normal(5000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = DSGRegressor(random_state=0).fit(X, y)
    rmse = np.sqrt(np.mean((est.predict(Xt) - yt) ** 2))
    mean_rmse = np.sqrt(np.mean((y.mean() - yt) ** 2))
    assert rmse < 1.01 * mean_rmse, (rmse, mean_rmse)
    for w in caught:
        if "f = 0" in str(w.message):
            assert issubclass(w.category, ConvergenceWarning) and "\n" not in str(w.message)


class _Noisy:
    """A solver whose batch objective is that of f = 0 (1) times ``ratio`` plus N(0, sd) noise."""

    xp = np

    def __init__(self, ratio, sd):
        self.t, self.zero_objective = 0, 1.0
        self.ratio, self.sd, self.rng = ratio, sd, np.random.default_rng(0)

    def step(self):
        return {"objective": self.ratio + self.sd * self.rng.standard_normal()}


def _run(ratio, sd):
    run_loop(_Noisy(ratio, sd), lambda t: (), 40, {}, "X",
             watch=DivergenceWatch("X", "set a smaller eta0", smoothed=True))


def test_the_end_of_run_tolerance_is_the_noise_of_the_batch_objective():
    """1.002 x the objective of f = 0 with a batch-to-batch noise of 0.02: no better than f = 0,
    a warning; the same excess without noise, or 1.1 x with that noise, stops the run."""
    with pytest.warns(ConvergenceWarning, match=r"^X learned nothing better than f = 0 by "
                                                r"iteration 40 \(.*\): .*; else set a smaller"):
        _run(1.002, 0.02)
    for ratio, sd in ((1.002, 0.0), (1.1, 0.02)):
        with pytest.raises(FloatingPointError, match=r"^X diverged or learned nothing by "
                                                     r"iteration 40 "):
            _run(ratio, sd)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(0.99, 0.02)  # below f = 0: a model, no word
