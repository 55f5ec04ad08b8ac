"""A pickled estimator records kernelscale's version (``kernelscale.params.KernelscaleEstimator``):
it loads, and predicts the same, in that version only; a pickle of another version, or of one
from before the record, fails in one line naming both versions."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_regression

import kernelscale
from kernelscale import NystromRidgeRegressor


def _fitted():
    X, y = make_regression(n_samples=80, n_features=3, random_state=0)
    est = NystromRidgeRegressor(n_components=20, bandwidth=2.0, reg=1e-3, random_state=0)
    return est.fit(X, y), X


def test_same_version_round_trips():
    est, X = _fitted()
    assert est.__getstate__()["_kernelscale_version"] == kernelscale.__version__
    back = pickle.loads(pickle.dumps(est))
    assert "_kernelscale_version" not in vars(back)
    assert np.array_equal(back.predict(X), est.predict(X))


@pytest.mark.parametrize("version,named", [("0.0.9", "kernelscale 0.0.9"),
                                           (None, "kernelscale an unknown version")])
def test_another_version_fails_in_one_line_naming_both(version, named):
    est, _ = _fitted()
    state = est.__getstate__()
    if version is None:  # a pickle from before the version was recorded
        del state["_kernelscale_version"]
    else:
        state["_kernelscale_version"] = version
    with pytest.raises(ValueError) as e:
        NystromRidgeRegressor.__new__(NystromRidgeRegressor).__setstate__(state)
    msg = str(e.value)
    assert msg == (f"this NystromRidgeRegressor was pickled by {named}; this is kernelscale "
                   f"{kernelscale.__version__}: fit it again with this version")
