"""The iterative baselines (``solvers._common.run_loop``) either learn something or stop with a
one-line FloatingPointError naming the setting to change: a sweep of bandwidth x penalty x step
on standardized data (issue 14, point 1). A run must never return a finite but useless model."""

import itertools

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_friedman1, make_regression
from sklearn.preprocessing import StandardScaler

from kernelscale import (
    NORMAClassifier,
    NORMARegressor,
    PegasosClassifier,
    RFFSGDClassifier,
    RFFSGDRegressor,
)
from kernelscale.estimators.eigenpro import EigenProRegressor
from kernelscale.solvers._common import DIVERGED, run_loop

N, D = 1000, 10
# RFF-SGD's set-up takes the top eigenvalue of an n x n feature Gram matrix (its "auto" step
# needs lambda_1 even when eta0 is given): ~2 s at n = 1000 on a loaded machine, so its fits use
# the first N_RFF rows to keep the sweep under a minute
N_RFF = 300


def _standardize(X, y=None):
    X = StandardScaler().fit_transform(X)
    return (X, None) if y is None else (X, (y - y.mean()) / y.std())


DATA = {
    "regression": _standardize(*make_regression(n_samples=N, n_features=D, n_informative=5,
                                                noise=10.0, random_state=0)),
    "friedman1": _standardize(*make_friedman1(n_samples=N, n_features=D, noise=0.5,
                                              random_state=0)),
}
XC, YC = make_classification(n_samples=N, n_features=D, n_informative=5, random_state=0)
XC = StandardScaler().fit_transform(XC)

# (sigma well under the median distance, ~4.5 here, leaves RFF with features that are noise on
# these data: R^2 ~ 0 at any step, a resolution problem, not a divergence)
BANDWIDTHS = (1.0, 4.0)
PENALTIES = (0.0, 1e-3, 1.0)
STEPS = (0.5, 5.0, 5e3)  # stable, large, far past the stability limit (~30 at m = 64)
# NORMA regression with a near-delta kernel (sigma 0.3 in 10 standardized dimensions) and a step
# past the per-point limit: the batch objective (on unseen points, where f ~ 0) cannot see it,
# the loss after the step on its own points does (test_norma_overshoot_..._is_caught).
NORMA_GAP = {(0.3, 1e-3, 5e3)}


def _ok_or_one_line(est, X, y, floor):
    """``est`` fitted on (X, y) scores above ``floor`` on them, or stops with the one line."""
    try:
        est.fit(X, y)
    except FloatingPointError as err:
        msg = str(err)
        assert "\n" not in msg and "diverged" in msg and "set a" in msg, msg
        return
    assert est.score(X, y) > floor, est


@pytest.mark.parametrize("data", sorted(DATA))
def test_regressors_learn_or_stop(data):
    X, y = DATA[data]
    for bw, pen, eta in itertools.product(BANDWIDTHS, PENALTIES, STEPS):
        if (bw, pen, eta) in NORMA_GAP:
            continue
        common = dict(bandwidth=bw, random_state=0, engine={"device": "cpu"})
        _ok_or_one_line(RFFSGDRegressor(reg=pen, eta0=eta, n_components=100, n_iter=30,
                                        **common), X[:N_RFF], y[:N_RFF], 0.0)
        _ok_or_one_line(NORMARegressor(reg=pen, eta0=eta, max_terms=200, n_iter=150, **common),
                        X, y, 0.0)
    for bw, eta in itertools.product(BANDWIDTHS, ("auto", 20.0)):
        _ok_or_one_line(EigenProRegressor(bandwidth=bw, eta=eta, n_iter="2 epochs", subsample_size=300,
                                          n_eigenvectors=20, random_state=0, engine={"device": "cpu"}),
                        X, y, 0.0)


def test_classifiers_learn_or_stop():
    majority = max(np.mean(YC), 1 - np.mean(YC))
    for bw, pen, eta in itertools.product(BANDWIDTHS, PENALTIES, STEPS):
        common = dict(bandwidth=bw, random_state=0, engine={"device": "cpu"})
        _ok_or_one_line(RFFSGDClassifier(reg=pen, eta0=eta, n_components=100, n_iter=30,
                                         **common), XC[:N_RFF], YC[:N_RFF],
                        max(np.mean(YC[:N_RFF]), 1 - np.mean(YC[:N_RFF])))
        _ok_or_one_line(NORMAClassifier(reg=pen, eta0=eta, max_terms=200, n_iter=150, **common),
                        XC, YC, majority)
        if pen > 0 and eta == STEPS[0]:  # (Pegasos has no step parameter)
            _ok_or_one_line(PegasosClassifier(reg=pen, n_iter="1 epochs", **common), XC, YC, majority)


class _Blowup:
    """A solver whose batch objective grows 10x per step (or stays 0)."""

    xp = np

    def __init__(self, start):
        self.t, self.obj = 0, start

    def step(self):
        self.obj *= 10.0
        return {"objective": self.obj}


def test_run_loop_stops_at_the_threshold_and_names_the_setting():
    solver, history = _Blowup(1.0), {}
    with pytest.raises(FloatingPointError, match=r"^X diverged at iteration 6 .*; set a smaller "
                                                 r"eta0$"):
        run_loop(solver, lambda t: (), 100, history, "X", hint="set a smaller eta0")
    # records up to the last one below DIVERGED x start (10 at iteration 1)
    assert max(history["objective"]) <= DIVERGED * 10.0
    zero = _Blowup(0.0)  # a zero first objective is not watched
    run_loop(zero, lambda t: (), 50, {}, "X")
    assert zero.t == 50


def test_norma_overshoot_on_a_near_delta_kernel_is_caught():
    """NORMA regression with a near-delta kernel (sigma 0.3 in 10 standardized dimensions) and a
    step far past the per-point limit: the batch objective (measured on points not seen yet,
    where f ~ 0) stays flat, and training R^2 was -48 without a word. The loss on the points a
    step has just learned from sees it: the one-line error naming eta0."""
    X, y = DATA["friedman1"]
    (bw, lam, eta), = NORMA_GAP
    est = NORMARegressor(reg=lam, eta0=eta, max_terms=200, n_iter=150, bandwidth=bw,
                         random_state=0, engine={"device": "cpu"})
    with pytest.raises(FloatingPointError, match=r"^NORMA diverged at iteration 1 \(the step "
                                                 r"overshoots.*; set a smaller eta0$"):
        est.fit(X, y)
    # the same kernel at a stable step learns
    _ok_or_one_line(NORMARegressor(reg=lam, eta0=0.5, max_terms=200, n_iter=150, bandwidth=bw,
                                   random_state=0, engine={"device": "cpu"}), X, y, 0.0)


def test_run_loop_watches_the_loss_after_the_step():
    class _Overshoot(_Blowup):
        def step(self):
            return {"objective": 1.0, "after": 50.0 if self.t == 3 else 0.5}

    with pytest.raises(FloatingPointError, match=r"^X diverged at iteration 4 \(the step "
                                                 r"overshoots: .* from 1 to 50 .*; set a"):
        run_loop(_Overshoot(1.0), lambda t: (), 10, {}, "X", hint="set a smaller eta0")
    history = {}
    run_loop(_Overshoot(1.0), lambda t: (), 3, history, "X")
    assert "after" not in history and len(history["objective"]) == 3


def test_smoothed_watch_stops_a_run_worse_than_predicting_nothing():
    """The one watch's smoothed check (DSG's): a batch objective that stays 3 x that of f = 0
    stops once WATCH_AFTER iterations have passed; 1.5 x runs on but fails at the end of the run;
    below f = 0 the run ends normally."""
    from kernelscale.solvers._common import WATCH_AFTER, DivergenceWatch

    class _Flat(_Blowup):
        def __init__(self, ratio):
            super().__init__(1.0)
            self.ratio, self.zero_objective = ratio, 1.0
            self.obj_avg = self.zero_avg = None

        def step(self):
            return {"objective": self.ratio}

    watch = DivergenceWatch("X", "set a smaller eta0", smoothed=True)
    with pytest.raises(FloatingPointError, match=rf"^X diverged at iteration {WATCH_AFTER + 1} "
                                                 r"\(average batch objective 3, 3 x that of f = 0\)"):
        run_loop(_Flat(3.0), lambda t: (), 100, {}, "X", watch=watch)
    with pytest.raises(FloatingPointError, match=r"^X diverged or learned nothing by iteration 30 "):
        run_loop(_Flat(1.5), lambda t: (), 30, {}, "X", watch=watch)
    ok = _Flat(0.5)
    run_loop(ok, lambda t: (), 30, {}, "X", watch=watch)
    assert ok.t == 30
