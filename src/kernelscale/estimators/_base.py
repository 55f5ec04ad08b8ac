"""Shared input handling for kernelscale's scikit-learn estimators.

In-memory inputs (numpy, lists, pandas) go through scikit-learn's ``validate_data`` so error
messages and ``n_features_in_`` follow the library's conventions. Out-of-core inputs (zarr, dask,
h5py, memmap) and cupy arrays are only checked for shape here; their values are checked for NaN/inf
chunk by chunk as solvers read them (``kernelscale.stream``), so nothing is loaded whole.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import validate_data

from ..backend import check_dtype, namespace, predict_device, resolve_device
from ..stream import check_finite_rows, chunk_rows_of, is_in_memory, iter_row_chunks


def is_cupy(X) -> bool:
    """Whether X is a cupy array (by module name, so cupy need not be installed)."""
    return type(X).__module__.split(".")[0] == "cupy"


def is_lazy(X) -> bool:
    """Row arrays that should be read chunk by chunk rather than converted whole (zarr, dask,
    h5py, memmap). Sparse matrices and pandas frames are not: sklearn's validation handles them."""
    module = type(X).__module__.split(".")[0]
    return hasattr(X, "shape") and hasattr(X, "__getitem__") and not is_in_memory(X) \
        and not isinstance(X, (list, tuple)) and module not in ("pandas", "scipy")


def reject_sparse(X):
    """X itself, or a one-line error for scipy.sparse input (``is_lazy`` would otherwise accept
    it; scikit-learn's own error is several lines)."""
    if scipy.sparse.issparse(X):
        raise TypeError("sparse input is not supported: pass a dense array (numpy, cupy, zarr, dask)")
    return X


def _one_line(fn, *args, **kwargs):
    """Call a scikit-learn validator; its multi-line advice is cut to the first line."""
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
        keep = [lines[0]] + [ln for ln in lines[1:] if ln.startswith("Reshape your data")]
        raise ValueError(" ".join(keep)) from None


def _check_shape(est, X, reset: bool):
    if len(X.shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {tuple(X.shape)}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X has shape {tuple(X.shape)}: need at least 1 sample and 1 feature")
    if reset:
        est.n_features_in_ = int(X.shape[1])
    elif X.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(est).__name__} "
                         f"is expecting {est.n_features_in_} features as input")


def check_X(est, X, *, reset: bool):
    """Validate X for fit (reset=True) or predict; lazy and cupy arrays keep their type."""
    if is_cupy(X):
        _check_shape(est, X, reset)
        check_finite_rows(X, 0, "X")
        return X
    if is_lazy(X):
        _check_shape(est, X, reset)
        return X
    return _one_line(validate_data, est, X, reset=reset, dtype=[np.float64, np.float32])


def check_X_y(est, X, y, *, regression: bool, lazy_labels: bool = False):
    """Validate (X, y) for fit. y is loaded into memory (n numbers), X stays lazy if it is.

    ``lazy_labels``: class labels on disk (zarr, dask, h5py) stay there, for a ``LabelCoder``
    that reads them chunk by chunk (only their length is checked here)."""
    if is_cupy(X) or is_lazy(X):
        X = check_X(est, X, reset=True)
        if lazy_labels and not regression and is_lazy(y) and len(y.shape) in (1, 2):
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
            return X, y
        y = load_targets(y, np.float64 if regression else None)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        if regression:
            check_finite_rows(y, 0, "y")
        return X, y
    X, y = _one_line(validate_data, est, X, y, reset=True, dtype=[np.float64, np.float32],
                     multi_output=regression, y_numeric=regression)
    return X, y


def load_targets(y, dtype=None) -> np.ndarray:
    """y (n numbers, or n x k) in host memory, in ``dtype`` (default its own), read one on-disk
    chunk at a time into the output: no whole-y temporary besides the result. A numpy y already
    in ``dtype`` is returned as it is (a view for an (n, 1) column), not copied."""
    if not hasattr(y, "shape") or not hasattr(y, "dtype"):
        y = np.asarray(y)
    if is_cupy(y):
        y = y.get()
    if is_in_memory(y) and (dtype is None or y.dtype == np.dtype(dtype)):
        return y.ravel() if y.ndim == 2 and y.shape[1] == 1 else y
    n = int(y.shape[0])
    out = np.empty((n,) + tuple(y.shape[1:]), dtype=dtype or np.dtype(y.dtype))
    step = chunk_rows_of(y) or (1 << 16)
    for lo, block in iter_row_chunks(y, step):
        out[lo:lo + block.shape[0]] = np.asarray(block.get() if is_cupy(block) else block)
    if out.ndim == 2 and out.shape[1] == 1:
        out = out.ravel()
    return out


def device_and_dtype(device, dtype):
    """Resolve ``device`` ("auto"/"cpu"/"gpu") and ``dtype``; returns (device, xp, numpy dtype)."""
    dev = resolve_device(device)
    return dev, namespace(dev), check_dtype(dtype)


class OnDevice:
    """Mixin for estimators whose fitted state is one object with device arrays, named by
    ``_fitted_state`` and moved by its ``to(xp)`` (a no-op where it already is)."""

    def _xp(self, fitting=True):
        """Namespace to compute in; moves a model loaded on another machine to a usable device
        (to predict, the CPU where ``device`` is "gpu" but this host has none)."""
        dev = (resolve_device if fitting else predict_device)(self.engine_.device)
        xp = namespace(dev)
        getattr(self, self._fitted_state).to(xp)
        self.device_ = dev
        return xp


LABEL_CHUNK = 1 << 16  # labels validated and encoded this many at a time


def index_dtype(n_classes: int) -> np.dtype:
    """Smallest unsigned integer dtype that holds class indices 0 .. n_classes - 1."""
    for t in (np.uint8, np.uint16, np.uint32):
        if n_classes <= int(np.iinfo(t).max) + 1:
            return np.dtype(t)
    return np.dtype(np.int64)


def _label_chunks(y):
    """(lo, block) over labels ``y`` (numpy views, or rows read from disk one chunk at a time)."""
    if not hasattr(y, "shape"):
        y = np.asarray(y)
    return iter_row_chunks(y, chunk_rows_of(y) or LABEL_CHUNK)


def _check_labels(block) -> None:
    check_classification_targets(block)
    kind = type_of_target(block)
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"y must hold class labels (binary or multiclass), got {kind}")


def find_classes(y) -> np.ndarray:
    """Sorted distinct labels of ``y`` (np.unique's), validated and collected chunk by chunk:
    scikit-learn's checks and np.unique over a whole y would each copy and sort n labels."""
    parts = []
    for _, block in _label_chunks(y):
        _check_labels(block)
        parts.append(np.unique(block))
    if len(parts) == 1:
        return parts[0]
    try:
        return np.unique(np.concatenate(parts))
    except TypeError:  # chunks of strings and chunks of numbers
        raise ValueError("Mix of label input types (string and number)") from None


class LabelCoder:
    """Classes <-> encoded targets for a classification loss.

    ``margin`` losses get {-1, +1} targets (one column for 2 classes, one-vs-all columns for more);
    ``softmax`` gets one-hot columns. ``loss_name`` may be a function of the number of classes.
    ``y`` (numpy, or on disk: zarr, dask, h5py) is read chunk by chunk; ``y_index`` holds its class
    indices in the smallest integer dtype (``index_dtype``: 1 byte a row up to 256 classes).
    """

    def __init__(self, y, loss_name):
        self.classes_ = find_classes(y)
        if len(self.classes_) < 2:
            raise ValueError(f"y has only one class ({self.classes_[0]!r}); need at least 2 classes")
        k = len(self.classes_)
        self.loss_name = loss_name(k) if callable(loss_name) else loss_name
        self.n_outputs = 1 if (k == 2 and self.loss_name != "softmax") else k
        self.y_index = self.index_of(y)

    def encode_index(self, idx, xp, dtype):
        """Encoded targets (n, n_outputs) from class indices ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.n_outputs == 1:
            Y = (2.0 * idx - 1.0)[:, None]
        else:
            Y = np.eye(self.n_outputs)[idx]
            if self.loss_name != "softmax":
                Y = 2.0 * Y - 1.0
        return xp.asarray(Y, dtype=dtype)

    def index_of(self, y) -> np.ndarray:
        """Class indices of raw labels (labels unseen in fit -> error), chunk by chunk into the
        smallest integer dtype."""
        if not hasattr(y, "shape"):
            y = np.asarray(y)
        k = len(self.classes_)
        out = np.empty(int(y.shape[0]), dtype=index_dtype(k))
        for lo, block in _label_chunks(y):
            block = np.asarray(block).reshape(len(block))
            idx = np.searchsorted(self.classes_, block)
            np.clip(idx, 0, k - 1, out=idx)
            if not np.all(self.classes_[idx] == block):
                raise ValueError("y holds labels that were not seen when the classes were fixed")
            out[lo:lo + len(idx)] = idx
        return out
