"""Every explicit parameter is used as given or refused in one line (no silent drop).

For every exported estimator, every parameter and every setting of the switches that decide
which parameters a fit uses (solver, loss, schedule, preconditioner, ...), a
non-default valid value either changes the fitted model (its outputs on the training rows) or
is refused by ``fit`` with one line naming the parameter and the setting that ignores it
(``params.unused_errors``). The few parameters that by design do not change a model on a tiny
problem are listed in ``NO_CHANGE`` with the reason.
"""

import inspect
import warnings

import numpy as np
import pytest

import kernelscale
from kernelscale.params import _defaults, param_errors, same_value, unused_errors

PUBLIC = [getattr(kernelscale, n) for n in kernelscale.__all__ if n[0].isupper() and n != "Engine"]

FAST = dict(bandwidth=1.5, reg=1e-3, random_state=0)
DSG = dict(FAST, n_iter=3, batch_size=16, block_size=8)
EIGENPRO = dict(bandwidth=1.5, random_state=0, n_iter=3, subsample_size=30, n_eigenvectors=4,
                n_components=20)
# a fast fit of each family (explicit values, so that "auto" selections stay out of the way)
BASE = {
    "DSG": DSG, "EigenPro": EIGENPRO, "ExactKRR": FAST, "ExactSVM": dict(FAST, reg=1e-2),
    "NORMA": dict(FAST, n_iter=4, max_terms=20), "Nystrom": dict(FAST, n_components=12),
    "Pegasos": dict(FAST, n_iter=4), "RB": dict(FAST, n_components=4, n_iter=20),
    "RFFSGD": dict(FAST, n_components=12, n_iter=4),
}
# non-default candidate values of each parameter, tried in order (a value this estimator or this
# setting does not accept is skipped); every parameter of every estimator must be here
CANDIDATES = {
    "solver": ["cd", "cg", "svrg", "sgd", "udsg", "cdsg", "dsg"],
    "kernel": ["laplacian", "gaussian"],
    "loss": ["logistic", "hinge", "squared_hinge", "square", "softmax", "epsilon_insensitive",
             "huber", "quantile", "novelty"],
    "loss_params": [{"epsilon": 0.5}, {"delta": 0.2}, {"tau": 0.2}, {"nu_o": 0.4}],
    "step_schedule": ["constant", "inverse_sqrt", "theory", "inverse"],
    "schedule": ["invsqrt", "constant"], "precondition": [True, False, "eigenpro"],
    "n_eigenvectors": [0, 2], "bandwidth": [0.7], "reg": [0.05, 1e-3], "l1_reg": [0.05, 1e-3],
    "batch_size": [8, 24],
    "block_size": [4], "n_iter": [5], "eta0": [0.05, 0.3], "eta": [0.05], "t0": [2.0],
    "n_new": [2], "n_reuse": [2, 0], "max_step_ratio": [0.3, None], "subsample_size": [20],
    "tau": [0.5], "n_components": [7, 30], "eig_method": ["randomized", "eigh"],
    "average": [False, True], "max_n": [10, 10_000], "epsilon": [0.5], "tol": [0.3], "max_terms": [6],
    "rcond": [0.5], "cache_size": [50], "svrg_inner": [3], "random_state": [1],
    "warm_start": [True], "verbose": [0, 1], "engine": [{"dtype": "float32"}, {"dtype": "float64"}],
}
# parameters that choose which other parameters a fit uses: each value is a setting tried
SWITCHES = ("solver", "loss", "step_schedule", "schedule", "precondition", "n_eigenvectors")
# (class prefix, name) -> the setting where a value may leave the outputs bit-equal
NO_CHANGE_AT = {
    # n_eigenvectors=0 (kernel SGD) needs only lambda_1 for the step, which "eigh" and the
    # randomized range finder both give to rounding: bit-equal on some CPUs (AMD EPYC, AVX2)
    ("EigenPro", "eig_method"): {"n_eigenvectors": 0},
}
# (estimator name prefix, parameter): why a new value leaves this tiny fit's outputs unchanged
NO_CHANGE = {
    ("", "verbose"): "progress lines only (test_verbose)",
    ("", "warm_start"): "a first fit starts from scratch; continued fits: the warm-start tests",
    ("ExactKRR", "random_state"): "deterministic at an explicit bandwidth and reg (the "
                                  "'auto'/'median' selection's subsample uses it)",
    ("ExactSVM", "random_state"): "as for ExactKRR: LIBSVM draws no random numbers without "
                                  "probability estimates",
    ("DSGOneClass", "loss"): "'novelty', its only loss, is what None means (another loss is "
                             "refused in one line)",
    ("DSGOneClass", "max_step_ratio"): "CDSG's check draws a new block at every step of this "
                                       "tiny novelty fit; the cap bounds a reused block's step",
    ("ExactKRR", "max_n"): "a guard: a larger n is refused, a smaller one solved the same way",
    ("ExactSVM", "cache_size"): "LIBSVM's kernel cache size (MB): speed only",
    ("Nystrom", "tol"): "CG's stopping rule: solver 'auto' solves this tiny fit directly "
                        "(test_nystrom_cg checks it under 'cg')",
    ("Nystrom", "n_iter"): "as tol: CG's iteration cap (test_nystrom_cg)",
    ("ExactSVM", "engine"): "LIBSVM computes in float64 on the CPU whatever the engine",
    ("RB", "engine"): "binning and the solvers compute in float64 (the engine's dtype is a "
                      "precision it may use; kernelscale.engine: options a method has no use "
                      "for are ignored, as they may come from an engine_context)",
}


def _family(cls):
    name = cls.__name__
    return next(f for f in sorted(BASE, key=len, reverse=True) if name.startswith(f))


def _data(cls):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((48, 3))
    f = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]
    if cls.__name__.endswith("OneClass"):
        return X, None
    if "Classifier" in cls.__name__:
        return X, np.digitize(f, [-0.5, 0.5])  # three classes
    return X, f


def _outputs(est, X):
    for method in ("decision_function", "predict"):
        if hasattr(est, method):
            return np.asarray(getattr(est, method)(X), dtype=np.float64)


def _fit(cls, params, X, y):
    """Outputs on X, or the ValueError's message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = cls(**params).fit(X, y)
    except (ValueError, TypeError) as e:  # TypeError: loss_params the loss does not have
        return str(e)
    return _outputs(est, X)


def _with(cls, params, over):
    """``params`` with ``over``, less the other given parameters that ``over`` leaves unused
    (RB's reg under solver="cd"): those are refused, which the setting is not about."""
    merged = {**params, **over}
    drop = {n for n, _ in unused_errors(cls, merged) if n not in over}
    return {k: v for k, v in merged.items() if k not in drop}


def _refusal(msg, name):
    return isinstance(msg, str) and msg.startswith(f"{name}=") and "is only used" in msg


def _settings(cls, base, X, y):
    """The base fit and one fit per other value of each switch (the ones this class accepts)."""
    names = set(inspect.signature(cls.__init__).parameters) - {"self"}
    out = [({}, base, _fit(cls, base, X, y))]
    for s in SWITCHES:
        if s not in names:
            continue
        for v in CANDIDATES[s]:
            over = {s: v}
            if same_value(v, base.get(s, _defaults(cls)[s])) or param_errors(cls, over):
                continue
            params = _with(cls, base, over)
            ref = _fit(cls, params, X, y)
            if not isinstance(ref, str):
                out.append((over, params, ref))
    return out


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_every_parameter_is_used_or_refused(cls):
    names = sorted(set(inspect.signature(cls.__init__).parameters) - {"self"})
    assert set(names) <= set(CANDIDATES), set(names) - set(CANDIDATES)
    X, y = _data(cls)
    base = BASE[_family(cls)]
    base = {k: v for k, v in base.items() if k in names}  # kernel EigenPro: no n_components
    if cls.__name__.startswith("EigenProRF"):
        base = {**base, "average": False}  # the averaged iterate needs more steps
    settings = _settings(cls, base, X, y)
    assert not isinstance(settings[0][2], str), settings[0][2]
    silent = []
    for over, params, ref in settings:
        for name in names:
            if name in over or any(cls.__name__.startswith(p) and name == q for p, q in NO_CHANGE):
                continue
            if any(cls.__name__.startswith(p) and name == q and over == o
                   for (p, q), o in NO_CHANGE_AT.items()):
                continue
            current = params.get(name, _defaults(cls)[name])
            verdicts = []
            for v in CANDIDATES[name]:
                if same_value(v, current) or param_errors(cls, {name: v}):
                    continue
                out = _fit(cls, _with(cls, params, {name: v}), X, y)
                if _refusal(out, name):
                    assert "\n" not in out and f"{name}={v!r}" in out, out
                    verdicts.append("refused")
                elif not isinstance(out, str):
                    verdicts.append("changed" if not np.array_equal(out, ref) else "same")
            if verdicts and "refused" not in verdicts and "changed" not in verdicts:
                silent.append(f"{name} at {over or 'base'}")
    assert not silent, f"{cls.__name__}: no effect and no refusal: {silent}"


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_a_value_given_as_its_default_is_not_refused(cls):
    """Every parameter of ``_used_only`` set explicitly to its default where it is unused."""
    X, y = _data(cls)
    names = set(inspect.signature(cls.__init__).parameters)
    base = {k: v for k, v in BASE[_family(cls)].items() if k in names}
    defaults = _defaults(cls)
    explicit = {name: defaults[name] for name in cls._used_only}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls(**{**base, **explicit}).fit(X, y)  # no ValueError


def test_kernel_eigenpro_has_no_feature_count():
    """Kernel EigenPro's model is the training points: it has no ``n_components`` to ignore
    (the random-feature method is its own class, ``EigenProRFRegressor``)."""
    from kernelscale import EigenProRegressor, EigenProRFRegressor

    assert "n_components" not in EigenProRegressor().get_params()
    assert EigenProRFRegressor().get_params()["n_components"] == "auto"
    with pytest.raises(ValueError, match="Invalid parameter 'n_components'"):
        EigenProRegressor().set_params(n_components=77)


def test_dsg_loss_and_loss_params_are_used_or_refused():
    """DSGOneClass used to fit the novelty loss whatever ``loss`` said; loss_params of a loss
    without parameters was a TypeError from the loss's constructor."""
    from kernelscale import DSGOneClass, DSGRegressor

    X, y = _data(DSGRegressor)
    with pytest.raises(ValueError, match=r"^loss='hinge': DSGOneClass uses the 'novelty' loss$"):
        DSGOneClass(loss="hinge", **DSG).fit(X)
    with pytest.raises(ValueError) as e:
        DSGRegressor(loss_params={"delta": 0.2}, **DSG).fit(X, y)
    assert str(e.value).startswith("loss_params={'delta': 0.2} is only used by the losses that "
                                   "have parameters") and "(here loss=None)" in str(e.value)
    huber = DSGRegressor(loss="huber", loss_params={"delta": 0.2}, **DSG).fit(X, y)
    assert huber.loss_.delta == 0.2
