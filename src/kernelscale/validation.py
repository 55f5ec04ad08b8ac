"""Input validation for kernelscale's scikit-learn estimators: X, y, targets and labels.

A low-level module, as scikit-learn's ``sklearn.utils.validation``: ``check_X`` / ``check_X_y``,
the sparse-input checks, ``LabelCoder`` / ``find_classes``, ``OnDevice`` / ``device_and_dtype``
and the constant-model check ``warn_if_constant``. Imported by ``kernelscale.estimators`` (and
``kernelscale.params``); imports neither the estimators nor the pipeline.

In-memory inputs (numpy, lists, pandas) go through scikit-learn's ``validate_data``. Out-of-core
(zarr, dask, h5py, memmap) and cupy X are only checked for shape here; their values are checked
for NaN/inf chunk by chunk as solvers read them (``kernelscale.stream``).

Sparse X, scipy.sparse (converted to CSR; a cupyx.scipy.sparse X is copied to the host first)
or a CSR store (``io.CSRStore``, read chunk by chunk), is taken by every estimator without a
``_sparse_refusal``. Estimators with ``_sparse_gpu`` compute it on the engine's device as dense
X; the others on the CPU: engine device "auto" means the CPU for it, "gpu" (or a model held on a
GPU) is a one-line ``DeviceError``. y is never sparse.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import validate_data

from . import engine as _engine
from .backend import (
    DeviceError,
    check_dtype,
    is_cupy,
    is_sparse,
    namespace,
    predict_device,
    resolve_device,
    to_numpy,
)
from .stream import check_finite_rows, chunk_rows_of, is_csr_store, is_in_memory, iter_row_chunks


def is_lazy(X) -> bool:
    """Row arrays that should be read chunk by chunk rather than converted whole (zarr, dask,
    h5py, memmap). Sparse matrices and pandas frames are not: sklearn's validation handles them."""
    module = type(X).__module__.split(".")[0]
    return hasattr(X, "shape") and hasattr(X, "__getitem__") and not is_in_memory(X) \
        and not isinstance(X, (list, tuple)) and module not in ("pandas", "scipy")


def is_sparse_X(X) -> bool:
    """Whether X is sparse rows: a scipy.sparse or cupyx.scipy.sparse matrix or a CSR store
    (``io.CSRStore``)."""
    return is_sparse(X) or is_csr_store(X)


def load_csr_store(X):
    """A CSR store (``io.CSRStore``) read whole into one scipy.sparse CSR matrix, its rows
    checked for NaN/inf as they are read; a cupyx.scipy.sparse X copied to the host (scipy);
    any other X unchanged."""
    from .solvers._common import load_rows

    return load_rows(X, np, None) if is_csr_store(X) else to_numpy(X) if is_sparse(X) else X


def _sparse_device(est, fitting: bool, store: bool = False) -> None:
    """Sparse X runs on the CPU unless ``est`` sets ``_sparse_gpu``: a one-line DeviceError
    where this call would compute on a GPU (a fresh fit with engine device "gpu"; a warm start or
    a prediction of a model on a GPU). A fresh fit marks the estimator so that
    ``_resolve_engine`` takes "auto" as the CPU."""
    if getattr(est, "_sparse_gpu", False):
        return
    if fitting and getattr(est, "_fresh", lambda: True)():
        on_gpu = _engine.resolve(getattr(est, "engine", None)).device == "gpu"
        where = "engine device 'gpu'"
        est._sparse_X = True
    else:
        engine = getattr(est, "engine_", None)
        device = "cpu" if engine is None else engine.device
        on_gpu = (resolve_device if fitting else predict_device)(device) == "gpu"
        where = "the GPU that holds this model"
    if on_gpu:
        dense = "" if store else "pass X.toarray() (dense), or "
        raise DeviceError(f"{type(est).__name__}: sparse X is computed on the CPU only, not on "
                          f"{where}: {dense}fit with engine={{'device': 'cpu'}}")


def _sparse_checks(est, X, reset: bool, fitting: bool):
    """Sparse X (``is_sparse_X``): a one-line TypeError giving the reason where ``est`` sets
    ``_sparse_refusal``, then ``_sparse_device``; a fresh fit of dense X clears the CPU mark of
    an earlier sparse fit."""
    if is_sparse_X(X):
        if getattr(est, "_sparse_refusal", None):
            raise TypeError(f"{type(est).__name__} does not take sparse X: {est._sparse_refusal}")
        _sparse_device(est, fitting, store=is_csr_store(X))
    elif reset and fitting:
        est._sparse_X = False


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


def _check_warm_width(est, X):
    """A warm start (``est._fresh()`` False) continues the fitted model: X must have its
    ``n_features_in_`` columns (one line, before any product with the fitted state)."""
    if getattr(est, "_fresh", lambda: True)() or not hasattr(est, "n_features_in_"):
        return
    shape = X.shape if hasattr(X, "shape") else np.shape(X)
    if len(shape) == 2 and shape[1] != est.n_features_in_:
        raise ValueError(f"X has {shape[1]} features, but the warm-started model was fitted on "
                         f"{est.n_features_in_}")


def check_X(est, X, *, reset: bool, fitting: bool | None = None):
    """Validate X for fit (reset=True) or predict; lazy and cupy arrays keep their type, sparse
    X comes back as CSR (module docstring). ``fitting``: whether X is trained on (default
    ``reset``; a ``partial_fit`` after the first trains without resetting)."""
    fitting = reset if fitting is None else fitting
    X = to_numpy(X) if is_sparse(X) else X
    _sparse_checks(est, X, reset, fitting)
    if reset:
        _check_warm_width(est, X)
    if is_cupy(X) or is_lazy(X):
        _check_shape(est, X, reset)
        if is_cupy(X):
            check_finite_rows(X, 0, "X")
        return X
    return _one_line(validate_data, est, X, reset=reset, dtype=[np.float64, np.float32],
                     accept_sparse="csr")


def _reject_sparse_y(y) -> None:
    if scipy.sparse.issparse(y):
        raise TypeError("y is a sparse matrix: pass the targets / labels as a dense array "
                        "(only X may be sparse)")


def check_X_y(est, X, y, *, regression: bool, lazy_labels: bool = False):
    """Validate (X, y) for fit. y is loaded into memory (n numbers), X stays lazy if it is.

    ``lazy_labels``: class labels on disk (zarr, dask, h5py) stay there, for a ``LabelCoder``
    that reads them chunk by chunk (only their length is checked here)."""
    _reject_sparse_y(y)
    if is_cupy(X) or is_lazy(X):
        X = check_X(est, X, reset=True)
        if not (lazy_labels and not regression and is_lazy(y) and len(y.shape) in (1, 2)):
            y = load_targets(y, np.float64 if regression else None)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        if regression:
            check_finite_rows(y, 0, "y")
        return X, y
    X = to_numpy(X) if is_sparse(X) else X
    _sparse_checks(est, X, True, True)
    _check_warm_width(est, X)
    return _one_line(validate_data, est, X, y, reset=True, dtype=[np.float64, np.float32],
                     multi_output=regression, y_numeric=regression, accept_sparse="csr")


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
    out = np.empty((int(y.shape[0]),) + tuple(y.shape[1:]), dtype=dtype or np.dtype(y.dtype))
    for lo, block in _chunks(y):
        out[lo:lo + block.shape[0]] = np.asarray(block.get() if is_cupy(block) else block)
    return out.ravel() if out.ndim == 2 and out.shape[1] == 1 else out


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


LABEL_CHUNK = 1 << 16  # rows of labels / targets without on-disk chunks read at a time


def index_dtype(n_classes: int) -> np.dtype:
    """Smallest unsigned integer dtype that holds class indices 0 .. n_classes - 1."""
    fits = [t for t in (np.uint8, np.uint16, np.uint32) if n_classes <= int(np.iinfo(t).max) + 1]
    return np.dtype(fits[0] if fits else np.int64)


def _chunks(y):
    """(lo, block) over labels or targets ``y``: numpy views, or on-disk rows chunk by chunk."""
    if not hasattr(y, "shape"):
        y = np.asarray(y)
    return iter_row_chunks(y, chunk_rows_of(y) or LABEL_CHUNK)


def find_classes(y) -> np.ndarray:
    """Sorted distinct labels of ``y`` (np.unique's), validated and collected chunk by chunk (no
    copy of the whole y)."""
    parts = []
    for _, block in _chunks(y):
        check_classification_targets(block)
        if (kind := type_of_target(block)) not in ("binary", "multiclass"):
            raise ValueError(f"y must hold class labels (binary or multiclass), got {kind}")
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
        for lo, block in _chunks(y):
            block = np.asarray(block).reshape(len(block))
            idx = np.searchsorted(self.classes_, block)
            np.clip(idx, 0, k - 1, out=idx)
            if not np.all(self.classes_[idx] == block):
                raise ValueError("y holds labels that were not seen when the classes were fixed")
            out[lo:lo + len(idx)] = idx
        return out


CONSTANT_PROBE_ROWS = 1000  # training rows the constant-model check reads (one sorted sample)
CONSTANT_RTOL = 1e-3  # outputs spread below this share of the targets': a constant model


def warn_if_constant(est, X, y) -> None:
    """One ``ConvergenceWarning`` when a fit at an explicit ``bandwidth`` / ``reg`` (not "auto")
    returned a constant model: its outputs (predictions, or class / novelty scores) at the
    midpoints of ``CONSTANT_PROBE_ROWS`` random pairs of training rows vary by at most
    ``CONSTANT_RTOL`` times the targets' standard deviation (1 for scores, whose targets are
    +-1 or one-hot), or a classifier predicts one class at all of them. The message names the
    explicit settings and the data's median pairwise distance. A fit at "auto" alone is not
    checked (reasons: ``docs/design.md``)."""
    named = [f"{p}={getattr(est, p)!r}" for p in ("bandwidth", "reg")
             if getattr(est, p, "auto") != "auto"]
    X = X if hasattr(X, "shape") else np.asarray(X)  # lists, scikit-learn's _NotAnArray
    if not named or X.shape[0] < 2:
        return
    n = int(X.shape[0])
    from .kernels import make_kernel
    from .kernels.bandwidth import median_bandwidth
    from .stream import take_rows

    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(n, size=min(n, CONSTANT_PROBE_ROWS), replace=False))
    if is_sparse_X(X):  # sparse rows stay sparse (as CSR)
        indexable = is_csr_store(X) or X.format in ("csr", "csc", "lil", "dok")
        rows = scipy.sparse.csr_matrix(to_numpy(take_rows(X if indexable else X.tocsr(), idx)),
                                       dtype=np.float64)
    elif is_lazy(X) or is_cupy(X):  # at most one of the fit's windows at a time (memory budget)
        step = int(getattr(est, "window_rows_", 0) or n)
        rows = np.concatenate([np.asarray(to_numpy(take_rows(X, idx[i:i + step])), np.float64)
                               for i in range(0, len(idx), step)])
    else:
        rows = np.asarray(np.asarray(X)[idx], np.float64)
    order = rng.permutation(len(idx))  # pairs of distinct rows: each with the next in order
    mid = 0.5 * (rows[order] + rows[np.roll(order, 1)])
    with warnings.catch_warnings():  # e.g. feature names: the probe is a numpy array
        warnings.simplefilter("ignore")
        out = getattr(est, "decision_function", est.predict)(mid)
        one_class = hasattr(est, "classes_") and len(np.unique(est.predict(mid))) == 1
    out = np.asarray(to_numpy(out), np.float64).reshape(mid.shape[0], -1)
    scale = 1.0
    if y is not None and not hasattr(est, "classes_"):  # regression: the targets' spread
        Y = np.asarray(to_numpy(take_rows(y, idx)) if is_lazy(y) else np.asarray(y)[idx], float)
        scale = Y.reshape(len(idx), -1).std(axis=0)
    spread = (out.std(axis=0) / np.where(scale > 0, scale, np.inf)).max()
    if np.all(scale == 0) or not (one_class or spread <= CONSTANT_RTOL):
        return
    metric = make_kernel(getattr(est, "kernel", "gaussian"), 1.0).metric
    what = "one class" if one_class else f"outputs that vary by {spread:.1e} of the targets'"
    warnings.warn(f"{type(est).__name__}: the fitted model is constant (between training rows "
                  f"it predicts {what}) at {', '.join(named)}; the data's median pairwise "
                  f"{metric} distance is {median_bandwidth(rows, metric):.3g}: unless y holds "
                  "no signal, try bandwidth='auto' (or near that distance) and reg='auto'",
                  ConvergenceWarning, stacklevel=3)
