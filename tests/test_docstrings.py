"""The estimators' docstring Examples run (~10 s) and every public iterative estimator documents
its parameters (numpydoc sections) and its ``fit``."""

import doctest
import inspect

import pytest

from kernelscale.estimators import baselines, dsg, eigenpro

ESTIMATORS = [dsg.DSGRegressor, dsg.DSGClassifier, dsg.DSGOneClass, eigenpro.EigenProRegressor,
              eigenpro.EigenProClassifier, baselines.RFFSGDClassifier, baselines.RFFSGDRegressor,
              baselines.PegasosClassifier, baselines.NORMAClassifier, baselines.NORMARegressor]


@pytest.mark.parametrize("module", [dsg, eigenpro, baselines], ids=lambda m: m.__name__)
def test_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_parameter_is_documented(cls):
    doc = inspect.getdoc(cls)
    for section in ("Parameters\n----------", "Attributes\n----------", "Examples\n--------"):
        assert section in doc, (cls.__name__, section)
    for name in inspect.signature(cls.__init__).parameters:
        if name != "self":
            assert f"\n{name} :" in doc or f", {name} :" in doc or f"\n{name}," in doc, name
    assert "Parameters" in inspect.getdoc(cls.fit)
