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

Inside a job the library finds its client through ``use_client(client)`` / ``current_client()``
(like joblib's ``parallel_backend``), so estimators stay picklable and clonable: Nyström's normal
equations, RB's bin hashes, RB-CG's products, PCA moments in ``prepare`` and test-set evaluation
run on it. With no client set, every code path is the plain in-process loop.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

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
        # dashboard/HTTP port ":0" (any free one): jobs sharing a node each start a cluster
        cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1,
                               processes=processes, dashboard_address=":0")
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


_CURRENT = None  # the client chunked work runs on; set by use_client


@contextmanager
def use_client(client):
    """Run the library's chunked work on ``client`` inside the block (None: in-process loops)."""
    global _CURRENT
    previous, _CURRENT = _CURRENT, client
    try:
        yield client
    finally:
        _CURRENT = previous


def current_client():
    """The client set by ``use_client``, or None; also None inside a task on a worker, where
    chunked work runs locally (a task that waits on tasks of its own cluster can deadlock it)."""
    if _CURRENT is None:
        return None
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return _CURRENT
    return None


# dask-jobqueue worker jobs (config ``dask.slurm``): one worker process per Slurm job
SLURM_DEFAULTS = {"cores": 1, "memory": "2GB", "walltime": "01:00:00", "queue": None,
                  "account": None, "job_extra": [], "start_timeout_s": 300.0, "host": None,
                  "log_directory": None}


def slurm_client(n_workers: int, options: dict | None = None):
    """A client of a dask-jobqueue ``SLURMCluster`` with ``n_workers`` worker jobs (one worker
    process of ``cores`` threads each), started now; a one-line ``RuntimeError`` (and every job
    cancelled) when they are not all running within ``start_timeout_s`` (a stuck queue, jobs that
    fail at start). ``host``: the address the workers reach the scheduler at (default: this
    host's); ``log_directory``: the worker jobs' output files (default: Slurm's, the current
    directory)."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    opts = {**SLURM_DEFAULTS, **(options or {})}
    unknown = sorted(set(opts) - set(SLURM_DEFAULTS))
    if unknown:
        raise ValueError(f"dask.slurm: unknown option(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(SLURM_DEFAULTS))})")
    scheduler_options = {"dashboard_address": ":0"}
    if opts["host"]:
        scheduler_options["host"] = opts["host"]
    cluster = SLURMCluster(cores=int(opts["cores"]), processes=1, memory=str(opts["memory"]),
                           walltime=str(opts["walltime"]), queue=opts["queue"],
                           account=opts["account"],
                           job_extra_directives=list(opts["job_extra"]),
                           scheduler_options=scheduler_options,
                           log_directory=opts["log_directory"])
    client = None
    try:
        cluster.scale(jobs=int(n_workers))
        client = Client(cluster, set_as_default=False)
        client.wait_for_workers(int(n_workers), timeout=float(opts["start_timeout_s"]))
    except (TimeoutError, OSError) as e:  # TimeoutError: wait_for_workers ran out of time
        up = len(client.scheduler_info()["workers"]) if client is not None else 0
        if client is not None:
            client.close()
        cluster.close()
        # the cause in words (a Python class name tells a user nothing)
        cause = "" if isinstance(e, TimeoutError) else \
            "; " + ((str(e).strip().splitlines() or ["cannot reach the cluster's scheduler"])[0])
        raise RuntimeError(f"dask on Slurm: {up} of {n_workers} worker jobs running after "
                           f"{float(opts['start_timeout_s']):g} s (dask.slurm.start_timeout_s; "
                           "queue stuck or jobs failing at start: see squeue and the jobs' "
                           f"output{cause})") from None
    return client


@contextmanager
def client_from_setting(scheduler: str | None, n_workers: int | None = None,
                        slurm: dict | None = None):
    """Client for the config's ``dask.scheduler``: None -> None (no cluster), ``"local"`` -> a
    LocalCluster of ``n_workers`` single-threaded worker processes, ``"slurm"`` -> ``n_workers``
    dask-jobqueue worker jobs with the options ``slurm`` (default: from the environment, as the
    pipeline passes them), else the scheduler address. Closed on exit (worker jobs cancelled)."""
    if scheduler is None:
        yield None
        return
    if scheduler == "local":
        client = client_for(None, n_workers=n_workers, processes=True)
    elif scheduler == "slurm":
        if slurm is None:
            slurm = json.loads(os.environ.get(SLURM_ENV) or "{}")
        client = slurm_client(n_workers or 2, slurm)
    else:
        client = client_for(scheduler)
    try:
        yield client
    finally:
        client.close()
        if scheduler in ("local", "slurm"):
            client.cluster.close()


SCHEDULER_ENV, WORKERS_ENV = "KERNELSCALE_DASK_SCHEDULER", "KERNELSCALE_DASK_WORKERS"
SLURM_ENV = "KERNELSCALE_DASK_SLURM"


def environment(setting: dict | None) -> dict[str, str | None]:
    """Environment for jobs from the config's ``dask`` section (None: unset the variable).

    The pipeline passes the setting to ``kernelscale.pipeline.cli train/prepare`` through the environment
    (their ``--dask-*`` defaults) rather than the command line: results do not depend on it, so
    changing it must not make Snakemake re-run finished jobs, as a changed ``params`` would.
    """
    setting = setting or {}
    scheduler = setting.get("scheduler")
    workers = setting.get("n_workers")
    slurm = setting.get("slurm")
    return {SCHEDULER_ENV: None if scheduler is None else str(scheduler),
            WORKERS_ENV: None if scheduler is None or workers is None else str(int(workers)),
            SLURM_ENV: json.dumps(slurm, sort_keys=True) if scheduler == "slurm" and slurm
            else None}


def _digest_or_reason(X):
    """SHA-256 of X's first 64 rows as read in this process, or the first line of the read's
    error."""
    import hashlib

    try:
        rows = np.ascontiguousarray(np.asarray(X[:min(64, int(X.shape[0]))]))
    except Exception as e:  # noqa: BLE001 - any read failure is reported the same way
        return (str(e).strip().splitlines() or ["unreadable"])[0]
    return hashlib.sha256(rows.tobytes()).digest()


def _digests(arrays: dict) -> dict:
    return {name: _digest_or_reason(a) for name, a in arrays.items()}


def _store_of(X) -> str:
    store = getattr(X, "store", None)
    return str(getattr(store, "root", None) or getattr(X, "path", None) or type(X).__name__)


def check_workers_read(client, arrays: dict) -> None:
    """A one-line ``OSError`` naming the worker, the array and its store when a worker of
    ``client`` does not read the same first rows of an on-disk (zarr) array as this process: a
    worker without this process's file system (zarr reads a store that is not there as its fill
    value, so opening it proves nothing). ``arrays``: name -> array; arrays in memory are skipped.
    One round trip to every worker present now; call it once, when the client is up."""
    on_disk = {name: a for name, a in arrays.items()
               if type(a).__module__.split(".")[0] == "zarr"}
    if client is None or not on_disk:
        return
    here = {name: d for name, d in _digests(on_disk).items() if isinstance(d, bytes)}
    seen = client.run(_digests, {name: on_disk[name] for name in here})
    for addr in sorted(seen):
        for name in sorted(here):
            got = seen[addr][name]
            if got != here[name]:
                reason = got if isinstance(got, str) else "its first rows differ from this process's"
                raise OSError(f"dask worker {addr} cannot read {name} ({_store_of(on_disk[name])}): "
                              f"{reason}; the workers need this process's file system (a path "
                              "they can all read)")


_READ_CHECKED: set = set()


def check_workers_read_once(client, X, name: str = "X") -> None:
    """``check_workers_read`` for one on-disk array, once per (client, store, workers present):
    the library's chunked work (``map_blocks_ordered``, RB-CG's blocks) calls it before its
    workers read X, so a caller's ``use_client`` on workers without the file system is a one-line
    error, not zarr's fill values read as data."""
    if client is None or type(X).__module__.split(".")[0] != "zarr":
        return
    workers = frozenset(client.scheduler_info().get("workers", {}))
    key = (id(client), _store_of(X), str(getattr(X, "path", "")), workers)
    if key in _READ_CHECKED:
        return
    check_workers_read(client, {name: X})
    _READ_CHECKED.add(key)


def n_threads(client) -> int:
    """Worker threads of a client's cluster (at least 1)."""
    workers = client.scheduler_info().get("workers", {}).values()
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers))


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
    check_workers_read_once(client, X)
    arr = as_dask(X, chunk_rows)
    probe = np.asarray(fn(np.asarray(arr[:1].compute())))  # output shape and dtype per row
    if probe.ndim == 1:
        out = arr.map_blocks(lambda b: np.asarray(fn(b)), drop_axis=1, dtype=probe.dtype,
                             meta=np.empty((0,), probe.dtype))
    else:
        out = arr.map_blocks(lambda b: np.asarray(fn(b)), chunks=(arr.chunks[0], (probe.shape[1],)),
                             dtype=probe.dtype, meta=np.empty((0, 0), probe.dtype))
    return np.asarray(_compute(out, client))


def map_blocks_ordered(fn, X, y=None, client=None, *, chunk_rows: int | None = None,
                       row_offset: bool = False) -> list:
    """``[fn(X_b[, y_b][, lo=first row of b]) for row blocks b]``, in row order.

    On ``client`` when given, else dask's threaded scheduler. When blocks fail, the error raised
    is that of the first failing block in row order (so "first at row N" messages stay true).
    """
    import dask

    check_workers_read_once(client, X)
    check_workers_read_once(client, y, "y")
    Xd = as_dask(X, chunk_rows)
    blocks = Xd.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(Xd.chunks[0])[:-1]]).astype(int).tolist()
    kw = [{"lo": lo} if row_offset else {} for lo in starts]
    if y is None:
        parts = [dask.delayed(fn)(b, **k) for b, k in zip(blocks, kw, strict=True)]
    else:
        yd = as_dask(y).rechunk({0: Xd.chunks[0]})
        parts = [dask.delayed(fn)(b, c, **k)
                 for b, c, k in zip(blocks, yd.to_delayed().ravel(), kw, strict=True)]
    if client is None:
        return list(dask.compute(*parts, scheduler="threads"))
    futures = client.compute(parts)
    try:
        return client.gather(futures)
    except Exception:
        # gather raises the first failure to arrive; report the first in row order instead
        for f in futures:
            if f.exception() is not None:
                f.result()
        raise


def sum_blocks(fn, X, y=None, client=None, *, chunk_rows: int | None = None,
               row_offset: bool = False) -> np.ndarray:
    """sum over row blocks b of ``fn(X_b)`` (or ``fn(X_b, y_b)``), e.g. Z_b^T Z_b or K_b^T y_b.

    Each block is one task; partial sums come back to the caller and are added in row order,
    so the result is the same on any scheduler. ``row_offset``: fn also gets ``lo=`` (b's first
    row), e.g. for error messages naming a global row.
    """
    results = map_blocks_ordered(fn, X, y, client, chunk_rows=chunk_rows, row_offset=row_offset)
    total = np.array(results[0], dtype=np.float64, copy=True)
    for r in results[1:]:
        total += r
    return total
