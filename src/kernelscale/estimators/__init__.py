"""scikit-learn estimators over kernelscale's solvers: ``__all__`` (the top-level package's
list), each imported from its module on first access."""

import importlib

from .. import _WHERE

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'kernelscale.estimators' has no attribute {name!r}")


def __dir__():
    return __all__
