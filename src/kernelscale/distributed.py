"""Optional dask.distributed execution of chunked work.

``client_for(None)`` starts a ``LocalCluster`` (single-threaded workers: the chunk functions call
BLAS, which brings its own threads); ``client_for("tcp://host:8786")`` connects to a running
scheduler, e.g. one that dask-jobqueue started on Slurm. An unreachable or malformed address is a
one-line ``ConnectionError`` after a short timeout rather than a hang.

Chunked work that runs on such a client (or, with ``client=None``, on dask's threaded scheduler):

* ``predict_chunked``: evaluate a fitted estimator over a large (on-disk) test set, row block by
  row block, through ``dask.array.map_blocks``;
* ``sum_blocks``: sum of ``fn(X_block[, y_block])`` over row blocks, the shape of Nyström's
  ``K_nm^T K_nm`` / ``K_nm^T y`` and of a CG matrix-vector product ``Z^T (Z v)``.

Results do not depend on the scheduler: each block is computed by the same function on the same
rows, and ``sum_blocks`` adds block results in row order.
"""

from __future__ import annotations

import os

import numpy as np

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_CHUNK_ROWS = 65536


def client_for(address: str | None = None, *, n_workers: int | None = None,
               processes: bool = False, timeout: float = DEFAULT_TIMEOUT_S):
    """A ``distributed.Client``: a new LocalCluster when ``address`` is None, else a connection
    to the scheduler at ``address``.

    n_workers : LocalCluster workers (default: the config's ``kernelscale.n-workers`` in dask's
        config, else the CPU count); one thread each.
    processes : LocalCluster workers as processes (isolation, no GIL) or threads (fast start).
    timeout : seconds to wait for a remote scheduler before the one-line error.

    A LocalCluster outlives its client: close both (``client.close(); client.cluster.close()``).
    """
    import dask
    from distributed import Client, LocalCluster

    if address is None:
        if n_workers is None:
            n_workers = int(dask.config.get("kernelscale.n-workers", os.cpu_count() or 1))
        cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1,
                               processes=processes, dashboard_address=None)
        # set_as_default=False: work goes to this client only when passed explicitly, and dask's
        # global scheduler is left alone (a failed connect would otherwise leave it pointing at
        # a distributed client that does not exist)
        return Client(cluster, set_as_default=False)
    try:
        return Client(address, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, ValueError, TypeError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConnectionError(f"cannot reach dask scheduler {address!r} within {timeout:g} s "
                              f"({reason})") from None


def as_dask(X, chunk_rows: int | None = None):
    """X as a dask array in row blocks of ``chunk_rows`` (default: a dask array's or zarr array's
    own row chunks, else 65536) with whole rows per block; zarr stays lazy on disk."""
    import dask.array as da

    if isinstance(X, da.Array):
        arr = X
    elif type(X).__module__.split(".")[0] == "zarr":
        arr = da.from_zarr(X)
    else:  # numpy / h5py / memmap
        rows = chunk_rows or DEFAULT_CHUNK_ROWS
        arr = da.from_array(X, chunks=(rows,) + tuple(X.shape[1:]))
    spec = {0: int(chunk_rows)} if chunk_rows else {}
    if arr.ndim > 1:
        spec[1] = -1
    return arr.rechunk(spec) if spec else arr


def _compute(obj, client):
    """Compute on ``client`` when given, else dask's threaded scheduler."""
    if client is not None:
        return client.compute(obj).result()
    return obj.compute(scheduler="threads")


def predict_chunked(estimator, X, client=None, *, method: str = "predict",
                    chunk_rows: int | None = None) -> np.ndarray:
    """``estimator.<method>(X)`` computed row block by row block (numpy result in memory).

    X may be numpy, zarr or dask; each block is read, predicted and dropped, so the test set is
    never whole in memory (the predictions, n numbers per output, are).
    """
    fn = getattr(estimator, method, None)
    if fn is None:
        raise AttributeError(f"{type(estimator).__name__} has no method {method!r}")
    arr = as_dask(X, chunk_rows)
    probe = np.asarray(fn(np.asarray(arr[:1].compute())))  # output shape and dtype per row
    if probe.ndim == 1:
        out = arr.map_blocks(lambda b: np.asarray(fn(b)), drop_axis=1, dtype=probe.dtype,
                             meta=np.empty((0,), probe.dtype))
    else:
        out = arr.map_blocks(lambda b: np.asarray(fn(b)), chunks=(arr.chunks[0], (probe.shape[1],)),
                             dtype=probe.dtype, meta=np.empty((0, 0), probe.dtype))
    return np.asarray(_compute(out, client))


def sum_blocks(fn, X, y=None, client=None, *, chunk_rows: int | None = None) -> np.ndarray:
    """sum over row blocks b of ``fn(X_b)`` (or ``fn(X_b, y_b)``), e.g. Z_b^T Z_b or K_b^T y_b.

    Each block is one task; partial sums come back to the caller and are added in row order,
    so the result is the same on any scheduler.
    """
    import dask

    Xd = as_dask(X, chunk_rows)
    blocks = Xd.to_delayed().ravel()
    if y is None:
        parts = [dask.delayed(fn)(b) for b in blocks]
    else:
        yd = as_dask(y).rechunk({0: Xd.chunks[0]})
        parts = [dask.delayed(fn)(b, c) for b, c in zip(blocks, yd.to_delayed().ravel(), strict=True)]
    if client is not None:
        results = client.gather(client.compute(parts))
    else:
        results = dask.compute(*parts, scheduler="threads")
    total = np.array(results[0], dtype=np.float64, copy=True)
    for r in results[1:]:
        total += r
    return total
