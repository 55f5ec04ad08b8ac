"""Every loss derivative matches central finite differences of its value."""

import numpy as np
import pytest

from kernelscale.losses import LOSSES, make_loss

CASES = {
    "square": {}, "logistic": {}, "softmax": {}, "hinge": {}, "squared_hinge": {},
    "epsilon_insensitive": {"epsilon": 0.2}, "huber": {"delta": 0.7}, "quantile": {"tau": 0.3},
    "novelty": {"nu_o": 0.2},
}


def _targets(name, rng, n, C):
    if name in ("logistic", "hinge", "squared_hinge"):
        return rng.choice([-1.0, 1.0], size=(n, C))
    if name == "softmax":
        return np.eye(C)[rng.integers(C, size=n)]
    return rng.standard_normal((n, C))


def test_every_loss_is_covered():
    assert set(CASES) == set(LOSSES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_derivative_matches_finite_differences(name):
    rng = np.random.default_rng(0)
    n, C, h = 200, 3, 1e-6
    loss = make_loss(name, **CASES[name])
    if name == "novelty":
        loss.rho = 0.3
    u = rng.standard_normal((n, C)) * 2
    Y = _targets(name, rng, n, C)
    g = loss.deriv(u, Y)
    assert g.shape == (n, C)
    num = np.empty_like(u)
    for c in range(C):
        e = np.zeros_like(u)
        e[:, c] = h
        num[:, c] = (loss.value(u + e, Y) - loss.value(u - e, Y)) / (2 * h)
    # kinks (hinge, epsilon, quantile, novelty) are measure-zero: skip points within h of one
    assert np.mean(np.isclose(g, num, atol=1e-5)) > 0.995
    assert np.isclose(g, num, atol=1e-5).sum() >= n * C - 2


def test_values_at_known_points():
    assert make_loss("square").value(np.array([[3.0]]), np.array([[1.0]]))[0] == 2.0
    assert make_loss("hinge").value(np.array([[0.5]]), np.array([[1.0]]))[0] == 0.5
    assert make_loss("logistic").value(np.array([[0.0]]), np.array([[1.0]]))[0] == pytest.approx(np.log(2))
    sm = make_loss("softmax").value(np.zeros((1, 4)), np.eye(4)[[0]])[0]
    assert sm == pytest.approx(np.log(4))
    q = make_loss("quantile", tau=0.9)
    assert q.value(np.array([[0.0]]), np.array([[1.0]]))[0] == pytest.approx(0.9)
    assert q.value(np.array([[1.0]]), np.array([[0.0]]))[0] == pytest.approx(0.1)


def test_logistic_is_stable_at_large_margins():
    loss = make_loss("logistic")
    u = np.array([[800.0], [-800.0]])
    Y = np.array([[1.0], [1.0]])
    assert np.all(np.isfinite(loss.value(u, Y))) and np.all(np.isfinite(loss.deriv(u, Y)))
    assert loss.value(u, Y)[1] == pytest.approx(800.0)


def test_novelty_offset_moves_to_the_quantile():
    loss = make_loss("novelty", nu_o=0.25)
    u = np.random.default_rng(0).standard_normal((4000, 1))
    for t in range(4000):
        loss.update_offset(u, 0.5 / (1 + t / 50))
    assert np.mean(u < loss.rho) == pytest.approx(0.25, abs=0.02)


@pytest.mark.parametrize("bad", [("hinge2", {}), ("huber", {"delta": 0}), ("quantile", {"tau": 1.5}),
                                 ("epsilon_insensitive", {"epsilon": -1}), ("novelty", {"nu_o": 0})])
def test_bad_loss_is_one_line(bad):
    with pytest.raises(ValueError) as e:
        make_loss(bad[0], **bad[1])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name, C", [("square", 1), ("logistic", 1), ("logistic", 3),
                                     ("squared_hinge", 1), ("softmax", 2), ("softmax", 5)])
def test_reg_scale_is_the_curvature_at_zero(name, C):
    # finite differences of loss' at u = 0 along a direction the targets span (for softmax, one
    # orthogonal to the all-ones vector, the Hessian's null direction)
    loss, h = make_loss(name), 1e-5
    Y = _targets(name, np.random.default_rng(1), 1, C)
    e = np.zeros((1, C))
    e[0, 0] = 1.0
    if name == "softmax":
        e[0, 1] = -1.0
    num = ((loss.deriv(h * e, Y) - loss.deriv(-h * e, Y)) / (2 * h) @ e.T).item() / (e @ e.T).item()
    assert loss.reg_scale(C) == pytest.approx(num, rel=1e-4)


def test_reg_auto_scales_the_selected_nu_by_the_loss_curvature():
    from sklearn.datasets import make_classification

    from kernelscale.estimators.dsg import DSGClassifier
    from kernelscale.estimators.rff_sgd import RFFSGDClassifier

    X, y = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0,
                               n_classes=3, random_state=0)
    n = len(X)
    kw = dict(n_iter=1, random_state=0)
    softmax = DSGClassifier(**kw).fit(X, y)  # three classes: softmax, 1 / C
    assert softmax.reg_ == pytest.approx(softmax.alpha_sel_ / (3 * n), rel=1e-12)
    logistic = DSGClassifier(**kw).fit(X, y == 0)  # two classes: logistic, 1 / 4
    assert logistic.reg_ == pytest.approx(logistic.alpha_sel_ / (4 * n), rel=1e-12)
    hinge = RFFSGDClassifier(loss="hinge", **kw).fit(X, y)  # no curvature: the selected nu
    assert hinge.reg_ == pytest.approx(hinge.alpha_sel_ / n, rel=1e-12)
    explicit = DSGClassifier(reg=1e-3, **kw).fit(X, y)  # an explicit reg is the objective's
    assert explicit.reg_ == 1e-3
