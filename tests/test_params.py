"""One name, one meaning (docs/architecture.md): ``reg`` is the same nu everywhere, ``n_iter`` and
``n_components`` mean one thing, engine options live in ``engine``, former names fail in one line,
and one rule table per estimator serves ``fit`` and the pipeline's config check."""

import inspect
import math

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.kernel_ridge import KernelRidge
from sklearn.svm import SVC

import kernelscale
from kernelscale.engine import Engine, engine_context, get_engine, set_engine
from kernelscale.estimators._params import RENAMED, param_errors, reg_and_ridge, steps

PUBLIC = [getattr(kernelscale, n) for n in kernelscale.__all__ if n[0].isupper() and n != "Engine"]


def _params(cls):
    return set(inspect.signature(cls.__init__).parameters) - {"self"}


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_every_estimator_speaks_the_shared_names(cls):
    names = _params(cls)
    assert "engine" in names
    assert not names & set(RENAMED), names & set(RENAMED)
    if cls.__name__.startswith("EigenPro"):
        assert "reg" not in names  # interpolation: no regulariser (documented)
    else:
        assert "reg" in names
    # every declared rule belongs to a parameter (a typo in _rules would never check anything)
    assert set(cls._rules) <= names


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_former_names_fail_in_one_line_naming_the_new_one(cls):
    for old, (new, _) in RENAMED.items():
        with pytest.raises(TypeError) as e:
            cls(**{old: 1})
        msg = str(e.value)
        assert "\n" not in msg and f"'{old}' is now '{new}'" in msg and cls.__name__ in msg
    with pytest.raises(ValueError, match="'n_epochs' is now 'n_iter'"):
        cls().set_params(n_epochs=3)


def test_rules_answer_the_same_in_fit_and_in_the_config_check():
    from kernelscale import RFFSGDRegressor

    X, y = make_regression(n_samples=60, n_features=3, random_state=0)
    for bad in ({"reg": -1.0}, {"n_iter": "three"}, {"n_components": 0}, {"solver": "adam"}):
        [(name, problem)] = param_errors(RFFSGDRegressor, bad)
        with pytest.raises(ValueError) as e:
            RFFSGDRegressor(**bad).fit(X, y)
        assert str(e.value) == f"{name}={bad[name]!r} {problem.split(' ', 1)[1]}"
    assert param_errors(RFFSGDRegressor, {"alpha": 1.0}) == [
        ("alpha", "is now 'reg' (" + RENAMED["alpha"][1] + ")")]
    assert param_errors(RFFSGDRegressor, {"reg": "0.5/n", "n_iter": "2 epochs"}) == []


def test_reg_units_and_epochs():
    assert reg_and_ridge(1e-3, 200) == (1e-3, 200 * 1e-3)
    assert reg_and_ridge("0.5/n", 200) == (0.5 / 200, 0.5)  # the ridge exactly as written
    assert reg_and_ridge("auto", 200, alpha_sel=2.0) == (0.01, 2.0)
    assert steps(7, 10, 3) == 7 and steps("auto", 10, 3) == 30 and steps("2.5 epochs", 4, 1) == 10


def test_same_reg_is_the_same_problem_exact_krr_and_libsvm():
    """reg = nu: exact KRR solves KernelRidge with alpha = n nu; LIBSVM runs with C = 1/(n nu)."""
    from kernelscale import ExactKRRRegressor, ExactSVMClassifier

    X, y = make_regression(n_samples=150, n_features=4, noise=0.5, random_state=1)
    y = y / y.std()
    nu, sigma, n = 2e-3, 3.0, len(y)
    ours = ExactKRRRegressor(reg=nu, bandwidth=sigma).fit(X, y)
    ref = KernelRidge(alpha=n * nu, kernel="rbf", gamma=1 / (2 * sigma**2)).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-8, atol=1e-8)
    assert ours.reg_ == nu

    Xc, yc = make_classification(n_samples=150, n_features=4, random_state=1)
    svm = ExactSVMClassifier(reg=nu, bandwidth=sigma).fit(Xc, yc)
    assert math.isclose(svm.C_, 1 / (len(yc) * nu)) and svm.reg_ == nu
    ref = SVC(C=1 / (len(yc) * nu), gamma=1 / (2 * sigma**2)).fit(Xc, yc)
    np.testing.assert_allclose(svm.decision_function(Xc), ref.decision_function(Xc), atol=1e-8)


def test_same_reg_nystrom_with_all_centres_is_exact_krr_and_rb_cg_ridge():
    from kernelscale import ExactKRRRegressor, NystromRidgeRegressor, RBRegressor

    X, y = make_regression(n_samples=120, n_features=3, noise=0.5, random_state=2)
    y = y / y.std()
    common = dict(reg="0.3/n", bandwidth=2.0, random_state=0)
    exact = ExactKRRRegressor(**common).fit(X, y).predict(X)
    nys = NystromRidgeRegressor(n_components=120, **common).fit(X, y).predict(X)
    np.testing.assert_allclose(nys, exact, atol=1e-6)
    rb = RBRegressor(n_components=16, tol=1e-10, **common).fit(X, y)
    assert rb.ridge_ == 0.3 and rb.reg_ == 0.3 / 120


def test_n_iter_in_epochs():
    from kernelscale import DSGRegressor, RFFSGDRegressor

    X, y = make_regression(n_samples=100, n_features=3, random_state=0)
    rff = RFFSGDRegressor(n_components=20, batch_size=16, n_iter="2 epochs").fit(X, y)
    assert rff.n_iter_ == 2 * math.ceil(100 / 16)
    dsg = DSGRegressor(batch_size=32, block_size=8, n_iter="1 epochs").fit(X, y)
    assert dsg.n_iter_ == math.ceil(100 / 32)


def test_engine_precedence_and_errors():
    from kernelscale import RFFSGDRegressor

    X, y = make_regression(n_samples=50, n_features=3, random_state=0)
    fit = dict(n_components=10, n_iter=3, bandwidth=1.0, reg=1e-3)
    assert get_engine() == Engine(device="auto", dtype="float64", n_jobs=1)
    with engine_context(dtype="float32"):
        assert RFFSGDRegressor(**fit).fit(X, y).engine_.dtype == "float32"
        # the estimator's own option wins over the block's
        est = RFFSGDRegressor(**fit, engine={"dtype": "float64"}).fit(X, y)
        assert est.engine_.dtype == "float64" and est.solver_.w.dtype == np.float64
        with engine_context(device="cpu"):
            assert get_engine().dtype == "float32" and get_engine().device == "cpu"
    assert get_engine().dtype == "float64"
    try:
        set_engine(dtype="float32")
        assert RFFSGDRegressor(**fit).fit(X, y).engine_.dtype == "float32"
    finally:
        set_engine(dtype=None)
    assert get_engine().dtype == "float64"
    for bad, msg in (({"devise": "gpu"}, "unknown option 'devise'"),
                     ({"dtype": "float16"}, "engine.dtype='float16' must be"),
                     ({"memory_budget": -1}, "engine.memory_budget=-1 must be")):
        with pytest.raises(ValueError, match=msg):
            RFFSGDRegressor(**fit, engine=bad).fit(X, y)
