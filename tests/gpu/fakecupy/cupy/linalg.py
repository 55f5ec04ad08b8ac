"""numpy.linalg behind cupy's host/device rules (see cupy/__init__.py)."""
import numpy as _np


def __getattr__(name):
    from . import _device_fn

    return _device_fn(getattr(_np.linalg, name))
