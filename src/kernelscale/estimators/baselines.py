"""The baseline estimators' former module, kept so that code and pickled models that name it still
work. Each baseline has its own module now, as its solver does (ALGORITHMS.md, "Baselines"):

* ``rff_sgd``: ``RFFSGDClassifier`` / ``RFFSGDRegressor`` (random Fourier features + SGD or SVRG);
* ``nystrom``: ``NystromRidgeClassifier`` / ``NystromRidgeRegressor``;
* ``exact``: ``ExactKRRClassifier`` / ``ExactKRRRegressor`` (direct solve) and
  ``ExactSVMClassifier`` / ``ExactSVMRegressor`` (LIBSVM);
* ``pegasos``: ``PegasosClassifier``;
* ``norma``: ``NORMAClassifier`` / ``NORMARegressor``.
"""

from .exact import ExactKRRClassifier, ExactKRRRegressor, ExactSVMClassifier, ExactSVMRegressor
from .norma import NORMAClassifier, NORMARegressor
from .nystrom import NystromRidgeClassifier, NystromRidgeRegressor
from .pegasos import PegasosClassifier
from .rff_sgd import RFFSGDClassifier, RFFSGDRegressor

__all__ = ["ExactKRRClassifier", "ExactKRRRegressor", "ExactSVMClassifier", "ExactSVMRegressor",
           "NORMAClassifier", "NORMARegressor", "NystromRidgeClassifier", "NystromRidgeRegressor",
           "PegasosClassifier", "RFFSGDClassifier", "RFFSGDRegressor"]
