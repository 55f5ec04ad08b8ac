"""scikit-learn's estimator contract for every EigenPro and baseline estimator (small settings)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelscale.estimators.baselines import (
    ExactKRRClassifier,
    ExactKRRRegressor,
    ExactSVMClassifier,
    ExactSVMRegressor,
    NORMAClassifier,
    NORMARegressor,
    NystromRidgeClassifier,
    NystromRidgeRegressor,
    PegasosClassifier,
    RFFSGDClassifier,
    RFFSGDRegressor,
)
from kernelscale.estimators.eigenpro import EigenProClassifier, EigenProRegressor

CPU = dict(device="cpu", random_state=0)

ESTIMATORS = [
    EigenProRegressor(n_eigenvectors=20, subsample_size=100, n_epochs=5, **CPU),
    EigenProClassifier(n_eigenvectors=20, subsample_size=100, n_epochs=5, **CPU),
    EigenProRegressor(method="rff", n_components=200, n_eigenvectors=20, subsample_size=100,
                      n_epochs=5, **CPU),
    EigenProClassifier(method="rff", n_components=200, n_eigenvectors=20, subsample_size=100,
                       n_epochs=5, **CPU),
    RFFSGDClassifier(n_components=200, n_epochs=5, **CPU),
    RFFSGDRegressor(n_components=200, n_epochs=20, solver="svrg", **CPU),
    NystromRidgeClassifier(n_components=50, alpha=1e-2, **CPU),
    NystromRidgeRegressor(n_components=50, alpha=1e-2, **CPU),
    ExactKRRClassifier(alpha=1e-2, **CPU),
    ExactKRRRegressor(alpha=1e-2, **CPU),
    ExactSVMClassifier(random_state=0),
    ExactSVMRegressor(random_state=0),
    PegasosClassifier(lam=1e-3, n_epochs=5, **CPU),
    NORMAClassifier(budget=100, n_epochs=5, **CPU),
    NORMARegressor(budget=100, n_epochs=5, **CPU),
]


@pytest.mark.filterwarnings("ignore")
@parametrize_with_checks(ESTIMATORS)
def test_sklearn_contract(estimator, check):
    check(estimator)
