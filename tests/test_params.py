"""One name, one meaning (docs/architecture.md): ``reg`` is the same nu everywhere, ``n_iter`` and
``n_components`` mean one thing, engine options live in ``engine``, and one rule table per estimator serves ``fit`` and the pipeline's config check."""

import inspect
import math

import numpy as np
import pytest
from sklearn.base import is_regressor
from sklearn.datasets import make_classification, make_regression
from sklearn.kernel_ridge import KernelRidge
from sklearn.svm import SVC

import kernelscale
from kernelscale.engine import Engine, engine_context, get_engine, set_engine
from kernelscale.params import param_errors, reg_and_ridge
from kernelscale.solvers._common import steps

PUBLIC = [getattr(kernelscale, n) for n in kernelscale.__all__ if n[0].isupper() and n != "Engine"]


def _params(cls):
    return set(inspect.signature(cls.__init__).parameters) - {"self"}


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_every_estimator_speaks_the_shared_names(cls):
    names = _params(cls)
    assert "engine" in names
    if cls.__name__.startswith("EigenPro"):
        assert "reg" not in names  # interpolation: no regulariser (documented)
    else:
        assert "reg" in names
    # every declared rule belongs to a parameter (a typo in _rules would never check anything)
    assert set(cls._rules) <= names
    for name, (_, deciders, *_) in cls._used_only.items():
        assert {name, *deciders} <= names, (name, deciders)


def test_rules_answer_the_same_in_fit_and_in_the_config_check():
    from kernelscale import RFFSGDRegressor

    X, y = make_regression(n_samples=60, n_features=3, random_state=0)
    for bad in ({"reg": -1.0}, {"n_iter": "three"}, {"n_components": 0}, {"solver": "adam"}):
        [(name, problem)] = param_errors(RFFSGDRegressor, bad)
        with pytest.raises(ValueError) as e:
            RFFSGDRegressor(**bad).fit(X, y)
        assert str(e.value) == f"{name}={bad[name]!r} {problem.split(' ', 1)[1]}"
    [(name, problem)] = param_errors(RFFSGDRegressor, {"alpha": 1.0})
    assert name == "alpha" and problem.startswith("unknown parameter (known: ")
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
    # of the centred targets: every regressor fits y - y_offset_ (its mean) and adds it back
    ref = KernelRidge(alpha=n * nu, kernel="rbf", gamma=1 / (2 * sigma**2)).fit(X, y - y.mean())
    np.testing.assert_allclose(ours.predict(X), ref.predict(X) + y.mean(), rtol=1e-8, atol=1e-8)
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
    assert get_engine() == Engine(device="auto", dtype="auto", n_jobs=1)
    # dtype "auto" is each estimator's own precision: float64, float32 for the DSG family
    assert RFFSGDRegressor(**fit).fit(X, y).engine_.dtype == "float64"
    from kernelscale import DSGRegressor
    dsg = DSGRegressor(n_iter=2, batch_size=16, block_size=8).fit(X, y)
    assert dsg.engine_.dtype == "float32" and dsg.model_.coef.dtype == np.float32
    assert DSGRegressor(n_iter=2, batch_size=16, block_size=8, engine={"dtype": "float64"}).fit(
        X, y).model_.coef.dtype == np.float64
    with engine_context(dtype="float32"):
        assert RFFSGDRegressor(**fit).fit(X, y).engine_.dtype == "float32"
        # the estimator's own option wins over the block's
        est = RFFSGDRegressor(**fit, engine={"dtype": "float64"}).fit(X, y)
        assert est.engine_.dtype == "float64" and est.solver_.w.dtype == np.float64
        with engine_context(device="cpu"):
            assert get_engine().dtype == "float32" and get_engine().device == "cpu"
    assert get_engine().dtype == "auto"
    try:
        set_engine(dtype="float32")
        assert RFFSGDRegressor(**fit).fit(X, y).engine_.dtype == "float32"
    finally:
        set_engine(dtype=None)
    assert get_engine().dtype == "auto"
    for bad, msg in (({"devise": "gpu"}, "unknown option 'devise'"),
                     ({"dtype": "float16"}, "engine.dtype='float16' must be"),
                     ({"memory_budget": -1}, "engine.memory_budget=-1 must be")):
        with pytest.raises(ValueError, match=msg):
            RFFSGDRegressor(**fit, engine=bad).fit(X, y)


# ------------------------------------------------------------------- what was asked is what ran
def _data(kind, n=40):
    if kind == "clf":
        return make_classification(n_samples=n, n_features=3, n_informative=2, n_redundant=0,
                                   random_state=0)
    return make_regression(n_samples=n, n_features=3, random_state=0)


def _iterative():
    from kernelscale import (
        DSGClassifier,
        EigenProRegressor,
        NORMARegressor,
        PegasosClassifier,
        RFFSGDRegressor,
    )

    return [(DSGClassifier, "clf"), (EigenProRegressor, "reg"), (NORMARegressor, "reg"),
            (PegasosClassifier, "clf"), (RFFSGDRegressor, "reg")]


@pytest.mark.parametrize("cls,kind", _iterative(), ids=[c.__name__ for c, _ in _iterative()])
def test_zero_iterations_are_refused_in_the_library_as_in_the_config(cls, kind):
    """n_iter=0 (or "0 epochs") fitted nothing and predicted a constant without a word; the
    config check refused it while the Python API did not."""
    X, y = _data(kind)
    for bad in (0, "0 epochs", "0.0 epoch"):
        with pytest.raises(ValueError) as e:
            cls(n_iter=bad, bandwidth=1.0).fit(X, y)
        assert str(e.value).startswith(f"n_iter={bad!r} must be 'auto', an integer >= 1")
        assert "\n" not in str(e.value)
        [(name, problem)] = param_errors(cls, {"n_iter": bad})
        assert name == "n_iter" and str(e.value) == f"n_iter={problem}"
    assert param_errors(cls, {"n_iter": "0.5 epochs"}) == []  # half a pass is a real run


def test_a_zero_in_a_unit_string_is_refused_where_the_number_must_be_positive():
    from kernelscale import DSGRegressor, ExactKRRRegressor, ExactSVMClassifier, PegasosClassifier

    for cls in (ExactKRRRegressor, ExactSVMClassifier, PegasosClassifier):  # reg > 0
        [(_, problem)] = param_errors(cls, {"reg": "0/n"})
        assert problem.startswith("'0/n' must be 'auto', a finite number > 0")
        assert param_errors(cls, {"reg": "0.5/n"}) == []
    X, y = _data("reg")
    with pytest.raises(ValueError, match=r"^reg='0/n' must be"):
        ExactKRRRegressor(reg="0/n", bandwidth=1.0).fit(X, y)  # was the unregularised solve
    assert param_errors(DSGRegressor, {"reg": "0/n"}) == []  # DSG allows nu = 0
    with pytest.raises(ValueError, match=r"^bandwidth='median\*0' must be"):
        DSGRegressor(bandwidth="median*0", n_iter=1).fit(X, y)


def _unused_cases():
    from kernelscale import (
        EigenProClassifier,
        ExactSVMClassifier,
        RBClassifier,
        RBRegressor,
        RFFSGDClassifier,
    )

    # (class, task, parameters, the one it ignored, the setting that would use it)
    return [
        (RFFSGDClassifier, "clf", {"solver": "sgd", "svrg_inner": 5}, "svrg_inner",
         {"solver": "svrg"}),
        (EigenProClassifier, "clf", {"n_eigenvectors": 0, "tau": 0.5}, "tau",
         {"n_eigenvectors": 5}),
        (ExactSVMClassifier, "clf", {"epsilon": 0.3}, "epsilon", None),
        (RBRegressor, "reg", {"solver": "cd", "precondition": True},
         "precondition", {"solver": "cg"}),
        (RBClassifier, "clf", {"solver": "cd", "precondition": True},
         "precondition", {"solver": "cg"}),
        # reg is CG's ridge nu, l1_reg CD's L1 weight: each refused with the other solver
        (RBRegressor, "reg", {"solver": "cd", "reg": 1e-3}, "reg", {"solver": "cg"}),
        (RBClassifier, "clf", {"solver": "cg", "l1_reg": 1e-3}, "l1_reg", {"solver": "cd"}),
    ]


@pytest.mark.parametrize("cls,kind,params,name,using", _unused_cases(),
                         ids=[f"{c[0].__name__}-{c[3]}" for c in _unused_cases()])
def test_a_parameter_the_others_leave_unused_is_refused(cls, kind, params, name, using):
    """svrg_inner with solver="sgd", tau without a preconditioner, epsilon for the SVM
    classifier, Jacobi CG for coordinate descent: each was silently ignored; now a one-line
    ValueError naming it and its default."""
    from kernelscale.params import unused_errors

    X, y = _data(kind)
    with pytest.raises(ValueError) as e:
        cls(**params, bandwidth=1.0).fit(X, y)
    msg = str(e.value)
    assert msg.startswith(f"{name}={params[name]!r} is only used ") and "\n" not in msg, msg
    default = inspect.signature(cls.__init__).parameters[name].default
    assert msg.endswith(f"leave it at its default {default!r}"), msg
    assert unused_errors(cls, params) == [(name, msg.split("=", 1)[1])]  # config check too
    assert unused_errors(cls, {**params, name: default}) == []  # the default is no setting
    if using is not None:
        assert unused_errors(cls, {**params, **using}) == []


def test_capped_sizes_are_recorded_in_fitted_attributes():
    """A size above n is capped (one config serves datasets of every size); the fitted
    attribute says what ran."""
    from kernelscale import (
        EigenProRegressor,
        NORMARegressor,
        NystromRidgeRegressor,
        PegasosClassifier,
        RFFSGDRegressor,
    )

    X, y = _data("reg", n=40)
    Xc, yc = _data("clf", n=40)
    common = dict(bandwidth=1.0, random_state=0)
    assert RFFSGDRegressor(batch_size=500, n_components=20, n_iter=2, **common).fit(
        X, y).batch_size_ == 40
    assert RFFSGDRegressor(batch_size=16, n_components=20, n_iter=2, **common).fit(
        X, y).batch_size_ == 16
    assert NORMARegressor(batch_size=500, n_iter=2, **common).fit(X, y).batch_size_ == 40
    assert PegasosClassifier(batch_size=500, n_iter=2, **common).fit(Xc, yc).batch_size_ == 40
    ep = EigenProRegressor(batch_size=500, subsample_size=4800, n_eigenvectors=5, n_iter=2,
                           **common).fit(X, y)
    assert ep.batch_size_ == 40 and ep.subsample_size_ == 40
    assert EigenProRegressor(subsample_size=30, n_eigenvectors=5, n_iter=2, **common).fit(
        X, y).subsample_size_ == 30
    assert NystromRidgeRegressor(n_components=500, reg=1e-3, **common).fit(
        X, y).n_components_ == 40


def test_config_refuses_what_the_algorithm_name_contradicts_or_leaves_unused():
    """A parameter that contradicts the algorithm's name (``rff_sgd`` with ``solver: svrg``
    ran SVRG reported as rff_sgd) or that its preset leaves unused is a config error naming
    the key; rb_cd's preset l1_reg stays adjustable."""
    from kernelscale.pipeline.checks import config_errors, spec_errors

    def errors(est, **params):
        return spec_errors(f"algorithms.{est}", {"estimator": est, "params": params})

    assert errors("rff_sgd", solver="svrg") == [
        "algorithms.rff_sgd.params.solver: 'svrg' contradicts the algorithm rff_sgd "
        "(solver='sgd' is what its name means); use estimator: rff_svrg"]
    assert errors("kernel_sgd", n_eigenvectors=100)[0].endswith("use estimator: eigenpro")
    assert errors("dsg", solver="cdsg")[0].endswith("use estimator: cdsg")
    assert errors("rff_sgd", solver="sgd") == [] and errors("rb_cd", l1_reg=1e-3) == []
    # rb_cd's L1 weight is l1_reg; reg (CG's ridge) is refused there, as on EigenPro
    assert errors("rb_cd", reg=1e-3) == [
        "algorithms.rb_cd.params.reg: 0.001 is only used with solver='cg' (here solver='cd'); "
        "leave it at its default 'auto'"]
    assert errors("eigenpro", reg=1e-3)[0].startswith(
        "algorithms.eigenpro.params.reg: unknown parameter for eigenpro")
    assert errors("kernel_sgd", tau=0.5) == [
        "algorithms.kernel_sgd.params.tau: 0.5 is only used with n_eigenvectors >= 1, to damp "
        "the preconditioner (here n_eigenvectors=0); leave it at its default 'auto'"]
    assert errors("eigenpro", n_components=1000)[0].startswith(
        "algorithms.eigenpro.params.n_components: unknown parameter for eigenpro")
    assert errors("eigenpro_rf", n_components=1000) == []
    # epsilon is the regressor's: refused once the entry runs on a classification dataset
    config = {"datasets": {"c": {"task": "binary"}, "r": {"task": "regression"}},
              "algorithms": {"libsvm": {"estimator": "libsvm", "params": {"epsilon": 0.2}}},
              "experiments": [{"datasets": ["r"], "algorithms": ["libsvm"]}]}
    assert config_errors(config) == []
    config["experiments"][0]["datasets"].append("c")
    assert config_errors(config) == [
        "config.yaml: algorithms.libsvm.params.epsilon: 0.2 is only used by ExactSVMRegressor "
        "(the half-width of SVR's tube); leave it at its default 0.1"]



WARM = [(cls, {}) for cls in PUBLIC if "warm_start" in _params(cls)] + [
    (kernelscale.EigenProRFRegressor, {"n_components": 50})]


@pytest.mark.parametrize("cls,extra", WARM, ids=lambda c: getattr(c, "__name__", ""))
def test_warm_start_on_another_width_is_one_line(cls, extra):
    """A warm start continues the fitted model: X of another width is refused in one line before
    any product with the fitted state (not numpy's matmul mismatch)."""
    rng = np.random.default_rng(0)
    X5, X7 = rng.standard_normal((120, 5)), rng.standard_normal((120, 7))
    y = X5[:, 0] if is_regressor(cls()) else (X5[:, 0] > 0).astype(int)
    est = cls(warm_start=True, n_iter=2, engine={"device": "cpu"}, random_state=0, **extra)
    one_class = cls.__name__ == "DSGOneClass"
    est.fit(X5) if one_class else est.fit(X5, y)
    with pytest.raises(ValueError) as e:
        est.fit(X7) if one_class else est.fit(X7, y)
    assert str(e.value) == "X has 7 features, but the warm-started model was fitted on 5"
    assert est.n_features_in_ == 5
    est.set_params(warm_start=False).fit(X7) if one_class else est.set_params(
        warm_start=False).fit(X7, y)  # a fresh fit may change the width
    assert est.n_features_in_ == 7


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_nan_in_X_is_the_same_one_line_everywhere(cls):
    """NaN in X: every estimator says so in the same one line (scikit-learn's advice cut off)."""
    rng = np.random.default_rng(0)
    X, y = rng.random((40, 3)), rng.random(40)
    X[3, 1] = np.nan
    est = cls(engine={"device": "cpu"})
    with pytest.raises(ValueError) as e:
        est.fit(X, y) if is_regressor(est) else est.fit(X, (y > 0.5).astype(int))
    assert str(e.value) == "Input X contains NaN."
