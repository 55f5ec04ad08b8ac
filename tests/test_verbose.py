"""``verbose``: progress lines on stderr with verbose=1, none with 0, and the same model."""

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from kernelscale import (
    NORMAClassifier,
    NORMARegressor,
    PegasosClassifier,
    RFFSGDClassifier,
    RFFSGDRegressor,
)
from kernelscale.estimators.dsg import DSGClassifier, DSGOneClass, DSGRegressor
from kernelscale.estimators.eigenpro import EigenProClassifier, EigenProRegressor

COMMON = dict(bandwidth=2.0, random_state=0, engine={"device": "cpu"})
CASES = [
    (DSGRegressor, dict(n_iter=20, batch_size=32, block_size=32, reg=1e-3), "reg"),
    (DSGClassifier, dict(n_iter=20, batch_size=32, block_size=32, reg=1e-3), "clf"),
    (DSGOneClass, dict(n_iter=20, batch_size=32, block_size=32, reg=1e-3), "one"),
    (EigenProRegressor, dict(n_iter=20, subsample_size=100, n_eigenvectors=10), "reg"),
    (EigenProClassifier, dict(n_iter=20, subsample_size=100, n_eigenvectors=10), "clf"),
    (RFFSGDRegressor, dict(n_iter=20, n_components=64, reg=1e-3), "reg"),
    (RFFSGDClassifier, dict(n_iter=20, n_components=64, reg=1e-3), "clf"),
    (PegasosClassifier, dict(n_iter=20, reg=1e-3), "clf"),
    (NORMARegressor, dict(n_iter=20, reg=1e-3, max_terms=100), "reg"),
    (NORMAClassifier, dict(n_iter=20, reg=1e-3, max_terms=100), "clf"),
]


def _data(kind):
    if kind == "reg":
        X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
        return X, (y - y.mean()) / y.std()
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    return X, (None if kind == "one" else y)


@pytest.mark.parametrize("cls, params, kind", CASES, ids=[c[0].__name__ for c in CASES])
def test_verbose_prints_and_keeps_the_model(cls, params, kind, capsys):
    X, y = _data(kind)
    quiet = cls(**COMMON, **params, verbose=0).fit(X, y)
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""
    loud = cls(**COMMON, **params, verbose=1).fit(X, y)
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert out.out == ""
    # every ~10 % of 20 iterations (every 2nd) and the end
    assert 5 <= len(lines) <= 11, lines
    assert "iteration 20" in lines[-1] and "batch objective" in lines[-1]
    np.testing.assert_array_equal(quiet.predict(X), loud.predict(X))
    assert loud.get_params()["verbose"] == 1
