"""Parameter validation: the one way for every estimator to declare and check its parameters.

A low-level module, as scikit-learn's ``sklearn.utils._param_validation``: the rules
(:class:`Rule`, ``Int``, ``Real``, ``OneOf``, ``REG``, ...), the base class of every estimator
(:class:`KernelscaleEstimator`) and the checks the pipeline's config check shares with ``fit``.
Imported by ``kernelscale.estimators`` and ``kernelscale.pipeline``; imports neither.

* Each estimator class states its parameters' ranges once, in ``_rules`` (name -> :class:`Rule`);
  ``fit`` starts with ``self._validate_params()`` (a one-line ``ValueError``), and the pipeline's
  config check calls :func:`param_errors` with the same rules. A parameter that only some values
  of the others use is declared in ``_used_only``: set to anything but its default while unused,
  it is refused (:func:`unused_errors`). Checks that tie several parameters together
  (``solver="cg"`` needs ``loss="square"``) stay in the estimator.
* Parameter names mean one thing across estimators (``docs/architecture.md``, "One name, one
  meaning"): ``reg`` is nu of the averaged objective (nu/2)||f||^2 + (1/n) sum loss.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import re

from sklearn.base import BaseEstimator

from . import __version__
from . import engine as _engine
from .kernels.shift_invariant import KERNELS
from .validation import warn_if_constant


class Rule:
    """Allowed values of one parameter: a number kind with bounds, and/or named options."""

    def __init__(self, kind: str | None = None, low=None, high=None, strict: bool = False,
                 options: tuple = (), none: bool = False, unit: tuple | None = None):
        self.kind, self.low, self.high, self.strict = kind, low, high, strict
        self.options, self.none, self.unit = tuple(options), none, unit  # unit: (regex, example)

    def _positive(self) -> bool:
        """Whether the rule excludes 0 (then so does the number in a unit string)."""
        return self.low is not None and (self.low > 0 or self.strict)

    def ok(self, value) -> bool:
        """Whether ``value`` is allowed: an option, a matching unit string or a number in range."""
        if value is None:
            return self.none
        if any(value is o or (type(value) is type(o) and value == o) for o in self.options):
            return True
        if isinstance(value, str):
            if self.unit is None or re.fullmatch(self.unit[0], value) is None:
                return False
            # the number in "20 epochs", "0.01/n", "median*0.5" obeys the rule's bound on 0
            return not self._positive() or float(re.search(_NUMBER, value).group()) > 0
        if self.kind == "bool":
            return isinstance(value, bool) or type(value).__name__ == "bool_"
        if isinstance(value, bool) or self.kind is None:
            return False
        if not (isinstance(value, numbers.Integral) if self.kind == "int" else
                isinstance(value, numbers.Real) and math.isfinite(value)):
            return False
        if self.low is not None and (value <= self.low if self.strict else value < self.low):
            return False
        return self.high is None or value <= self.high

    def describe(self) -> str:
        """The allowed values in words, for the one-line error ("an integer >= 0, 'auto' or a
        string like '20 epochs'")."""
        parts = [repr(o) for o in self.options]
        if self.kind == "bool":
            parts.append("True or False")
        elif self.kind is not None:
            what = "an integer" if self.kind == "int" else "a finite number"
            if self.low is not None:
                what += f" {'>' if self.strict else '>='} {self.low:g}"
            if self.high is not None:
                what += f" and <= {self.high:g}"
            parts.append(what)
        if self.unit is not None:
            parts.append(f"a string like {self.unit[1]!r}"
                         + (" (number > 0)" if self._positive() else ""))
        if self.none:
            parts.append("None")
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def Int(low=1, *options, high=None, none=False) -> Rule:
    """Rule for an integer >= ``low`` (<= ``high`` if given), or one of ``options``."""
    return Rule("int", low=low, high=high, options=options, none=none)


def Real(low=0.0, *options, strict=False, high=None, none=False) -> Rule:
    """Rule for a finite number >= ``low`` (> with ``strict``), or one of ``options``."""
    return Rule("real", low=low, high=high, strict=strict, options=options, none=none)


def OneOf(*options, none=False) -> Rule:
    """Rule allowing only the named ``options`` (and None with ``none``)."""
    return Rule(None, options=options, none=none)


_NUMBER = r"\s*(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*"
PER_N = (_NUMBER + r"/\s*n\s*", "0.01/n")  # reg in the summed-loss scale: nu = x / n
EPOCHS = (_NUMBER + r"epochs?\s*", "20 epochs")  # n_iter in passes: ceil(k n / batch) steps

BOOL = Rule("bool")
BANDWIDTH = Rule("real", low=0.0, strict=True, options=("auto", "median"),
                 unit=(r"\s*median\s*\*" + _NUMBER, "median*0.5"))
# rules of parameters that several estimators share, under each class's own _rules
COMMON_RULES = {"bandwidth": BANDWIDTH, "warm_start": BOOL, "verbose": Int(0),
                "kernel": OneOf(*KERNELS)}
REG = Rule("real", low=0.0, options=("auto",), unit=PER_N)
REG_POSITIVE = Rule("real", low=0.0, strict=True, options=("auto",), unit=PER_N)
ITERS = Rule("int", low=1, options=("auto",), unit=EPOCHS)


def rules_of(cls) -> dict:
    """The rules that apply to estimator class ``cls``: the shared ones it has, then its own."""
    names = set(cls._get_param_names())
    return {**{k: r for k, r in COMMON_RULES.items() if k in names},
            **getattr(cls, "_rules", {})}


def reg_and_ridge(reg, n: int, alpha_sel: float | None = None,
                  scale: float = 1.0) -> tuple[float, float]:
    """(nu, n nu) for ``reg``: "auto" (nu = scale alpha_sel / n, alpha_sel from the held-out
    selection, scale the loss's ``losses.Loss.reg_scale``), a number (nu itself) or "x/n"
    (nu = x / n: x is the ridge of the summed loss, scikit-learn's KernelRidge alpha, a paper's
    lambda of (K + lambda I)). The ridge n nu is returned as given (scale alpha_sel or x, not
    n (x / n)), so it is the same bits either way."""
    if reg == "auto":
        return alpha_sel * scale / n, alpha_sel * scale
    if isinstance(reg, str):
        x = float(reg.split("/")[0])
        return x / n, x
    return float(reg), n * float(reg)


def _defaults(cls) -> dict:
    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
            if k != "self" and p.default is not inspect.Parameter.empty}


def same_value(a, b) -> bool:
    """Whether two parameter values are the same setting (True is not 1, "1" is not 1)."""
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool) or type(a) is str or type(b) is str:
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def unused_errors(cls, params: dict, given=None) -> list[tuple[str, str]]:
    """(name, one-line problem) for each parameter of ``given`` (default: every key of
    ``params``) set to a value other than its default although the other parameters' values
    (``params`` over the defaults) leave it unused: ``cls._used_only`` maps a name to (where it
    is used, in words; the parameters that decide it; ``used(params) -> bool``)."""
    rules = getattr(cls, "_used_only", {})
    if not rules:
        return []
    defaults = _defaults(cls)
    full = {**defaults, **params}
    out = []
    for name, (where, deciders, used) in rules.items():
        if name not in (params if given is None else given):
            continue
        value = full[name]
        if same_value(value, defaults.get(name)) or used(full):
            continue
        here = ", ".join(f"{d}={full[d]!r}" for d in deciders)
        out.append((name, f"{value!r} is only used {where}" + (f" (here {here})" if here else "")
                    + f"; leave it at its default {defaults.get(name)!r}"))
    return out


def param_errors(cls, params: dict) -> list[tuple[str, str]]:
    """(name, one-line problem) for ``params`` given to estimator class ``cls``: unknown names
    and values outside ``cls._rules``."""
    known = set(cls._get_param_names())
    rules = rules_of(cls)  # a registered third-party estimator declares none
    out = []
    for name, value in params.items():
        if name not in known:
            out.append((name, f"unknown parameter (known: {', '.join(sorted(known))})"))
        elif name in rules and not rules[name].ok(value):
            out.append((name, f"{value!r} must be {rules[name].describe()}"))
        elif name == "engine" and "engine" in known:
            try:
                _engine.as_options(value)
            except ValueError as e:
                out.append((name, str(e)))
    return out


def store_params(est, values: dict) -> None:
    """``__init__``'s body: keep every argument as given (``values``: its ``locals()``), as
    scikit-learn's estimators do, without checks or conversions."""
    vars(est).update({k: v for k, v in values.items() if k != "self"})


class KernelscaleEstimator(BaseEstimator):
    """Base of every kernelscale estimator: declared rules, the engine; every ``fit`` ends with
    ``validation.warn_if_constant``; a pickle records kernelscale's version and loads only in it."""

    _rules: dict[str, Rule] = {}
    _used_only: dict[str, tuple] = {}  # parameters only some settings of the others use
    _auto_dtype = "float64"  # what engine dtype "auto" means for this estimator
    _fitted_state = "solver_"  # the attribute a fit creates and a warm start continues from
    _sparse_refusal: str | None = None  # the one-line reason it refuses sparse X (None: takes it)
    _sparse_gpu = False  # True: sparse X is computed on the engine's device, as dense X

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fit = cls.__dict__.get("fit")
        if fit is not None:

            @functools.wraps(fit)
            def checked_fit(self, X, y=None, **params):
                out = fit(self, X, y, **params)
                if type(self).fit is checked_fit:  # the outermost fit: one check per call
                    warn_if_constant(self, X, y)
                return out

            cls.fit = checked_fit

    def __getstate__(self):
        return {**super().__getstate__(), "_kernelscale_version": __version__}

    def __setstate__(self, state):
        """Load a pickle of this version of kernelscale; one of another version is a one-line
        ValueError naming both (models are not converted between versions: fit again)."""
        version = state.pop("_kernelscale_version", None)
        if version != __version__:
            by = "an unknown version" if version is None else version
            raise ValueError(f"this {type(self).__name__} was pickled by kernelscale {by}; this "
                             f"is kernelscale {__version__}: fit it again with this version")
        super().__setstate__(state)

    def _validate_params(self) -> None:
        """One-line ValueError for the first parameter outside its rule, or set although the
        others leave it unused (called by ``fit``)."""
        for name, rule in rules_of(type(self)).items():
            value = getattr(self, name)
            if not rule.ok(value):
                raise ValueError(f"{name}={value!r} must be {rule.describe()}")
        for name, problem in unused_errors(type(self), self.get_params(deep=False))[:1]:
            raise ValueError(f"{name}={problem}")

    def _fresh(self) -> bool:
        """Whether this ``fit`` starts from scratch (not a warm start of a fitted model)."""
        return not (getattr(self, "warm_start", False) and hasattr(self, self._fitted_state))

    def _resolve_engine(self) -> _engine.Engine:
        """``engine_``: this estimator's ``engine`` over the context's (``kernelscale.engine``),
        with dtype "auto" replaced by the estimator's ``_auto_dtype`` and, for a fit of sparse X
        without ``_sparse_gpu`` (``validation.check_X``), device "auto" by "cpu"."""
        engine = _engine.resolve(getattr(self, "engine", None))
        if engine.dtype == "auto":
            engine = dataclasses.replace(engine, dtype=self._auto_dtype)
        if engine.device == "auto" and getattr(self, "_sparse_X", False):
            engine = dataclasses.replace(engine, device="cpu")
        self.engine_ = engine
        return self.engine_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._sparse_refusal is None
        return tags
