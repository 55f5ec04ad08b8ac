"""kernelscale: scalable kernel machines (DSG family, Random Binning, EigenPro, baselines).

Estimators are importable from the top level (``from kernelscale import DSGClassifier``); they are
loaded on first access so that ``import kernelscale`` (and the CLI) stays fast. Engine options
(device, dtype, memory budget, ...) are set per estimator (``engine=``) or for a block of code
(``kernelscale.engine_context``): see ``kernelscale.engine``.
"""

import importlib

__version__ = "0.1.0"

_ESTIMATORS = {
    "kernelscale.estimators.dsg": ("DSGClassifier", "DSGRegressor", "DSGOneClass"),
    "kernelscale.estimators.random_binning": ("RBClassifier", "RBRegressor"),
    "kernelscale.estimators.eigenpro": ("EigenProClassifier", "EigenProRegressor",
                                        "EigenProRFClassifier", "EigenProRFRegressor"),
    "kernelscale.estimators.rff_sgd": ("RFFSGDClassifier", "RFFSGDRegressor"),
    "kernelscale.estimators.nystrom": ("NystromRidgeClassifier", "NystromRidgeRegressor"),
    "kernelscale.estimators.exact": ("ExactKRRClassifier", "ExactKRRRegressor",
                                     "ExactSVMClassifier", "ExactSVMRegressor"),
    "kernelscale.estimators.pegasos": ("PegasosClassifier",),
    "kernelscale.estimators.norma": ("NORMAClassifier", "NORMARegressor"),
}
_WHERE = {name: module for module, names in _ESTIMATORS.items() for name in names}
_ENGINE = ("Engine", "engine_context", "get_engine", "set_engine")
__all__ = ["__version__", *_ENGINE, *sorted(_WHERE)]


def __getattr__(name):
    if name in _WHERE or name in _ENGINE:  # an estimator, or engine options (kernelscale.engine)
        return getattr(importlib.import_module(_WHERE.get(name, "kernelscale.engine")), name)
    raise AttributeError(f"module 'kernelscale' has no attribute {name!r}")


def __dir__():
    return __all__
