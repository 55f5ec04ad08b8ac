"""Test-set evaluation in row chunks: the test matrix is never loaded whole.

Classification: accuracy and error (1 - accuracy). Regression: RMSE and R². The metrics are
accumulated chunk by chunk (counts, sums of squares), so memory depends on ``chunk_rows`` only.
Under ``spread.use_client`` the predictions are computed on the dask cluster
(``predict_chunked``, the same chunks) and the metrics accumulated here over the same chunks, so
the numbers do not change; a CSR store on disk is predicted in this process.
"""

from __future__ import annotations

import numpy as np

from ..backend import is_sparse
from ..spread.cluster import as_dask, current_client, predict_chunked
from ..stream import is_csr_store, read_rows, unwrap_dask

CLASSIFICATION_TASKS = ("binary", "multiclass", "classification")

# The headline metric per task kind (lower is better for both).
PRIMARY_METRIC = {"classification": "test_error", "regression": "test_rmse"}


def task_kind(task: str) -> str:
    if task in CLASSIFICATION_TASKS:
        return "classification"
    if task == "regression":
        return "regression"
    raise ValueError(f"unknown task {task!r}; expected binary, multiclass or regression")


def primary_metric(task: str) -> str:
    return PRIMARY_METRIC[task_kind(task)]


def _rows(A, lo: int, hi: int) -> np.ndarray:
    block = read_rows(A, lo, hi)  # dask: computed in this thread, like training's reads
    if type(block).__module__.split(".")[0] == "cupy":
        block = block.get()
    return block if is_sparse(block) else np.asarray(block)  # CSR rows (a CSR store) stay CSR


def default_chunk_rows(X, target_bytes: int = 64 << 20) -> int:
    """Rows per evaluation chunk: the array's own row chunking when it has one, else ~64 MB."""
    chunks = getattr(X, "chunks", None)
    if chunks and isinstance(chunks[0], int) and chunks[0] > 0:
        return int(chunks[0])
    d = int(X.shape[1]) if len(X.shape) > 1 else 1
    return max(1, target_bytes // (8 * max(d, 1)))


def evaluate(estimator, X, y, task: str, chunk_rows: int | None = None,
             max_rows: int | None = None) -> dict[str, float]:
    """Test metrics of a fitted estimator, predicting ``chunk_rows`` rows at a time; on the first
    ``max_rows`` rows only when given (intermediate evaluations of long runs)."""
    kind = task_kind(task)
    n = int(X.shape[0])
    if n == 0:
        raise ValueError("the test set is empty")
    if int(y.shape[0]) != n:
        raise ValueError(f"X_test has {n} rows but y_test has {y.shape[0]}")
    if max_rows:
        n = min(n, int(max_rows))
    if chunk_rows is not None and int(chunk_rows) < 1:
        raise ValueError(f"evaluation chunk rows must be >= 1, got {chunk_rows}")
    step = chunk_rows or default_chunk_rows(X)
    # a CSR store is predicted in this process, as it is fitted (``spread.rows_for``)
    client = None if is_csr_store(X) else current_client()
    if client is None:
        X, y = unwrap_dask(X), unwrap_dask(y)
    if client is not None:  # all n predictions come back (n numbers, not the test matrix)
        preds = predict_chunked(estimator, as_dask(X, step)[:n], client, chunk_rows=step)
    correct = 0
    sse = s = s2 = 0.0
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        if client is not None:
            pred = preds[lo:hi]
        else:
            pred = np.asarray(estimator.predict(_rows(X, lo, hi)))
        if type(pred).__module__.split(".")[0] == "cupy":  # pragma: no cover - GPU only
            pred = pred.get()
        truth = _rows(y, lo, hi)
        if kind == "classification":
            correct += int(np.sum(pred.reshape(-1) == truth.reshape(-1)))
        else:
            t = truth.astype(np.float64).reshape(len(truth), -1)
            p = pred.astype(np.float64).reshape(len(truth), -1)
            sse += float(np.sum((p - t) ** 2))
            s += float(np.sum(t))
            s2 += float(np.sum(t * t))
    if kind == "classification":
        acc = correct / n
        return {"test_accuracy": acc, "test_error": 1.0 - acc}
    m = n * (int(np.prod(y.shape[1:])) if len(y.shape) > 1 else 1)
    mse = sse / m
    var_sum = s2 - s * s / m
    r2 = 1.0 - sse / var_sum if var_sum > 0 else float("nan")
    return {"test_rmse": float(np.sqrt(mse)), "test_r2": float(r2)}
