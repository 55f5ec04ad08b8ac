"""Every public estimator documents itself the numpydoc way: Parameters (exactly the ``__init__``
signature), Attributes and Examples on the class, Parameters on ``fit``; the Examples run as
doctests (~15 s). The list of estimators is ``kernelscale.estimators.__all__``, checked against
the registry and the estimator modules, so a new estimator cannot go undocumented."""

import doctest
import importlib
import inspect

import pytest
from sklearn.base import BaseEstimator

import kernelscale.estimators as estimators
from kernelscale.pipeline import registry

PUBLIC = [getattr(estimators, name) for name in estimators.__all__]
MODULES = [importlib.import_module(m) for m in sorted({cls.__module__ for cls in PUBLIC})]


def _section(doc: str, title: str) -> list[str]:
    """The lines of numpydoc section ``title`` (up to the next underlined heading)."""
    lines = doc.splitlines()
    start = next(i for i in range(len(lines) - 1)
                 if lines[i] == title and set(lines[i + 1]) == {"-"})
    out = []
    for i in range(start + 2, len(lines)):
        if i + 1 < len(lines) and lines[i] and set(lines[i + 1]) == {"-"}:
            break
        out.append(lines[i])
    return out


def _documented_names(doc: str, title: str = "Parameters") -> set[str]:
    """Names of the entries of a section: unindented ``name : type`` / ``a, b : type`` lines."""
    names = set()
    for line in _section(doc, title):
        if line and not line[0].isspace():
            names.update(n.strip() for n in line.split(" : ")[0].split(","))
    return names


def test_the_list_is_complete():
    """Every registered kernelscale estimator and every public estimator class of the
    estimator modules is in ``kernelscale.estimators.__all__``, and nothing else is."""
    registered = {registry.estimator_class(name, kind)
                  for name, kinds in registry.ALGORITHMS.items() for kind, where in kinds.items()
                  if where.startswith("kernelscale.estimators.")}
    assert registered <= set(PUBLIC)
    defined = {obj for m in MODULES for obj in vars(m).values()
               if isinstance(obj, type) and issubclass(obj, BaseEstimator)
               and obj.__module__ == m.__name__ and not obj.__name__.startswith("_")}
    assert defined == set(PUBLIC)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_every_parameter_is_documented(cls):
    doc = inspect.getdoc(cls)
    for section in ("Parameters\n----------", "Attributes\n----------", "Examples\n--------"):
        assert section in doc, (cls.__name__, section)
    assert ">>> " in "\n".join(_section(doc, "Examples"))
    signature = {name for name in inspect.signature(cls.__init__).parameters if name != "self"}
    assert _documented_names(doc) == signature
    assert _documented_names(doc, "Attributes")  # at least one, each as "name : ..."
    fit_doc = inspect.getdoc(cls.fit)
    assert fit_doc and {"X", "y"} <= _documented_names(fit_doc), cls.__name__
    assert "Returns\n-------" in fit_doc


def test_the_parser_sees_a_missing_or_extra_parameter():
    doc = "Summary.\n\nParameters\n----------\na : int\n    A.\nb, c : str\n\nReturns\n-------\nx"
    assert _documented_names(doc) == {"a", "b", "c"}


SMALL = {"n_iter": 5, "n_components": 50, "subsample_size": 50, "n_eigenvectors": 5,
         "batch_size": 32, "block_size": 32, "max_terms": 50, "bandwidth": "median"}


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_documented_attributes_exist_after_fit(cls):
    import numpy as np
    from sklearn.base import is_classifier, is_regressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int) if is_classifier(cls()) else X[:, 0] - X[:, 1] ** 2
    params = inspect.signature(cls.__init__).parameters
    small = {k: v for k, v in SMALL.items() if k in params}
    # EigenPro's default kernel solver refuses n_components
    if "solver" in params and params["solver"].default == "kernel":
        del small["n_components"]
    est = cls(**small, random_state=0)
    est.fit(X, y) if is_classifier(est) or is_regressor(est) else est.fit(X)
    missing = [a for a in _documented_names(inspect.getdoc(cls), "Attributes")
               if not hasattr(est, a)]
    assert not missing, missing
