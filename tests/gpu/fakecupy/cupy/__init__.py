"""A numpy-backed stand-in for cupy that enforces cupy's host/device rules.

For checking the GPU code paths on a machine without a GPU (``make test-gpu-sim``): arrays of
this module refuse implicit conversion to numpy (``np.asarray(x)`` raises, as with cupy), and its
functions and ufuncs refuse numpy arrays mixed with device arrays. It is not a GPU: timings and
memory figures mean nothing, and kernels cupy compiles (ElementwiseKernel, ...) are not offered.
"""

from __future__ import annotations

import numpy as _np
from numpy.lib.mixins import NDArrayOperatorsMixin as _Ops

from . import cuda, linalg  # noqa: F401

float32, float64, int32, int64, uint8, bool_ = (_np.float32, _np.float64, _np.int32, _np.int64,
                                                _np.uint8, _np.bool_)
dtype, finfo, iinfo, newaxis, inf, nan, pi = (_np.dtype, _np.finfo, _np.iinfo, _np.newaxis,
                                              _np.inf, _np.nan, _np.pi)


def _host_error(x):
    return TypeError(f"Unsupported type {type(x)}")


def _check(args):
    """cupy rejects numpy arrays (other than 0-d) mixed into device operations."""
    for a in args:
        if isinstance(a, _np.ndarray) and a.ndim > 0:
            raise _host_error(a)
        if isinstance(a, (list, tuple)):
            _check(a)


def _unwrap(x):
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, tuple):
        return tuple(_unwrap(v) for v in x)
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(r):
    if isinstance(r, _np.ndarray):
        return ndarray(r)
    if isinstance(r, _np.generic):  # cupy reductions give 0-d device arrays, not host scalars
        return ndarray(_np.asarray(r))
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    if isinstance(r, list):
        return [_wrap(v) for v in r]
    return r


def _device_fn(f):
    def g(*args, **kwargs):
        _check(args)
        _check(list(kwargs.values()))
        return _wrap(f(*_unwrap(args), **_unwrap(kwargs)))

    g.__name__ = getattr(f, "__name__", "f")
    return g


class ndarray(_Ops):
    __array_priority__ = 100

    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _check(inputs)
        return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs)))

    def __array_function__(self, func, types, args, kwargs):
        _check(args)
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    def get(self, stream=None, out=None):
        return self._a.copy()

    def set(self, arr):
        self._a[...] = arr

    def __getattr__(self, name):
        if name.startswith("__"):  # no __array_interface__ & co.: numpy must not read device memory
            raise AttributeError(name)
        v = getattr(self._a, name)
        return _device_fn(v) if callable(v) else _wrap(v)

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key, value):
        self._a[_unwrap(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (_wrap(v) for v in self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return int(self._a)

    def __bool__(self):
        return bool(self._a)

    def __repr__(self):
        return "fakecupy." + repr(self._a)

    def __reduce__(self):
        return (ndarray, (self._a,))

    # shape, dtype, ndim, size, nbytes, T ... come through __getattr__ (arrays wrapped)


def asarray(a, dtype=None, order=None):
    return ndarray(_np.array(_unwrap(a), dtype=dtype, order=order or "K", copy=None))


def array(a, dtype=None, copy=True, order="K", ndmin=0):
    return ndarray(_np.array(_unwrap(a), dtype=dtype, copy=copy, order=order, ndmin=ndmin))


def asnumpy(a, stream=None):
    return a.get() if isinstance(a, ndarray) else _np.asarray(a)


def get_array_module(*args):
    import sys

    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else _np


def __getattr__(name):
    f = getattr(_np, name)
    return _device_fn(f) if callable(f) else f


def get_default_memory_pool():
    return cuda.get_default_memory_pool()
