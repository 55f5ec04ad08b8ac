"""Array-backend selection: numpy on CPU, cupy on a usable CUDA GPU.

Solvers are written once against the array namespace ``xp`` returned here; only host/device
transfers go through the helpers below. ``device="auto"`` picks cupy when a GPU is usable.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import numpy as np
import scipy.sparse

DEVICES = ("auto", "cpu", "gpu")


class DeviceError(ValueError):
    """Raised when a requested device cannot be used."""


@functools.cache
def gpu_available() -> bool:
    """True when cupy imports, sees a CUDA device and runs a tiny allocation and kernel on it."""
    try:
        import cupy

        if not cupy.cuda.is_available() or cupy.cuda.runtime.getDeviceCount() < 1:
            return False
        (cupy.arange(4, dtype=cupy.float32) * 2).sum().item()
        return True
    except Exception:
        return False


def resolve_device(device: str | None) -> str:
    """Map ``"auto" | "cpu" | "gpu"`` to ``"cpu"`` or ``"gpu"``; one-line error otherwise."""
    device = "auto" if device is None else device
    if device not in DEVICES:
        raise DeviceError(f"device={device!r} is not one of {DEVICES}")
    if device == "auto":
        return "gpu" if gpu_available() else "cpu"
    if device == "gpu" and not gpu_available():
        raise DeviceError("device='gpu' but no usable CUDA GPU was found (install "
                          "kernelscale[gpu] on a GPU host)")
    return device


def predict_device(device: str | None) -> str:
    """Device to predict on: the requested one where usable, else the CPU (a model fitted on a
    GPU predicts on a host without one; only fitting refuses ``device="gpu"`` there)."""
    try:
        return resolve_device(device)
    except DeviceError:
        if device not in DEVICES:
            raise
        return "cpu"


def namespace(device: str) -> ModuleType:
    """The array module for a resolved device."""
    return importlib.import_module("cupy") if resolve_device(device) == "gpu" else np


def is_cupy(x) -> bool:
    """Whether ``x`` is a cupy array (by module name, so cupy need not be installed)."""
    return type(x).__module__.split(".")[0] == "cupy"


def _is_device_sparse(x) -> bool:
    return type(x).__module__.startswith("cupyx.scipy.sparse")


def array_namespace(*arrays) -> ModuleType:
    """numpy or cupy, by the type of the given arrays (numpy when none is a cupy array or a
    cupyx.scipy.sparse matrix)."""
    on_device = any(is_cupy(a) or _is_device_sparse(a) for a in arrays)
    return importlib.import_module("cupy") if on_device else np


def is_sparse(x) -> bool:
    """Whether ``x`` is a scipy.sparse matrix or array, or a cupyx.scipy.sparse matrix."""
    return scipy.sparse.issparse(x) or _is_device_sparse(x)


def asarray(x, xp: ModuleType, dtype=None):
    """Move ``x`` (numpy, cupy, or anything numpy can read) to namespace ``xp``. A sparse ``x``
    stays sparse, in ``dtype``: scipy.sparse for numpy, a cupyx.scipy.sparse CSR matrix for
    cupy."""
    if is_sparse(x):
        if xp is not np:
            return importlib.import_module("cupyx.scipy.sparse").csr_matrix(x, dtype=dtype)
        x = to_numpy(x)
        return x if dtype is None or x.dtype == np.dtype(dtype) else x.astype(dtype)
    return np.asarray(to_numpy(x), dtype=dtype) if xp is np else xp.asarray(x, dtype=dtype)


def to_numpy(x) -> np.ndarray:
    """Host copy of a numpy or cupy array, or of a cupyx.scipy.sparse matrix (as scipy.sparse);
    numpy arrays and scipy.sparse matrices pass through untouched."""
    if is_cupy(x) or _is_device_sparse(x):
        return x.get()
    return x if is_sparse(x) else np.asarray(x)


def synchronize(xp: ModuleType) -> None:
    """Wait for queued GPU work (for honest wall times); no-op on numpy."""
    if xp is not np:
        xp.cuda.Device().synchronize()


def check_dtype(dtype) -> np.dtype:
    """``dtype`` as a numpy dtype if float32 or float64, else a one-line ValueError."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype={dtype!r} must be float32 or float64")
    return dt
