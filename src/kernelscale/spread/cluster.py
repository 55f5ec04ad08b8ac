"""dask clients (``client_for``, ``slurm_client``, ``client_from_setting``), the one the library's
work runs on (``use_client``, ``current_client``), and row-block work on a client or, with None,
dask's threaded scheduler (``predict_chunked``, ``ClusterRows``).
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager

import numpy as np

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_CHUNK_ROWS = 65536
SCHEDULER_ENV, WORKERS_ENV, SLURM_ENV = ("KERNELSCALE_DASK_SCHEDULER", "KERNELSCALE_DASK_WORKERS",
                                          "KERNELSCALE_DASK_SLURM")
# dask-jobqueue worker jobs (config ``dask.slurm``): one worker process per Slurm job
SLURM_DEFAULTS = {"cores": 1, "memory": "2GB", "walltime": "01:00:00", "queue": None,
                  "account": None, "job_extra": [], "start_timeout_s": 300.0, "host": None,
                  "log_directory": None}
_CURRENT = None  # the client chunked work runs on; set by use_client
_READ_CHECKED: set = set()  # (client, store, path, workers) that check_workers_read_once passed


def client_for(address: str | None = None, *, n_workers: int | None = None,
               processes: bool = False, timeout: float = DEFAULT_TIMEOUT_S):
    """A ``distributed.Client``: a new LocalCluster of ``n_workers`` single-threaded workers
    (default: dask's config ``kernelscale.n-workers``, else the CPU count; ``processes``: worker
    processes, else threads) when ``address`` is None, else a connection to the scheduler at
    ``address`` (a one-line ``ConnectionError`` after ``timeout`` seconds). A LocalCluster
    outlives its client: close both (``client.close(); client.cluster.close()``)."""
    import dask
    from distributed import Client, LocalCluster

    if address is None:
        if n_workers is None:
            n_workers = int(dask.config.get("kernelscale.n-workers", os.cpu_count() or 1))
        cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1,
                               processes=processes, dashboard_address=":0")
        return Client(cluster, set_as_default=False)
    try:
        return Client(address, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, ValueError, TypeError) as e:
        raise ConnectionError(f"cannot reach dask scheduler {address!r} within {timeout:g} s "
                              f"({first_line(e)})") from None


def first_line(error: BaseException, empty: str | None = None) -> str:
    """The first line of ``error``'s message, else ``empty`` (default: the error's class)."""
    return (str(error).strip().splitlines() or [empty or type(error).__name__])[0]


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
    chunked work runs locally."""
    if _CURRENT is None:
        return None
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return _CURRENT
    return None


def slurm_client(n_workers: int, options: dict | None = None):
    """A client of a dask-jobqueue ``SLURMCluster`` with ``n_workers`` worker jobs (one worker
    process of ``cores`` threads each), started now; a one-line ``RuntimeError`` (every job
    cancelled) when they are not all running within ``start_timeout_s``. ``host``: the address
    the workers reach the scheduler at (default: this host's); ``log_directory``: the jobs'
    output files (default: Slurm's, the current directory)."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    opts = {**SLURM_DEFAULTS, **(options or {})}
    unknown = sorted(set(opts) - set(SLURM_DEFAULTS))
    if unknown:
        raise ValueError(f"dask.slurm: unknown option(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(SLURM_DEFAULTS))})")
    host = {"host": opts["host"]} if opts["host"] else {}
    cluster = SLURMCluster(cores=int(opts["cores"]), processes=1, memory=str(opts["memory"]),
                           walltime=str(opts["walltime"]), queue=opts["queue"],
                           account=opts["account"], job_extra_directives=list(opts["job_extra"]),
                           scheduler_options={"dashboard_address": ":0", **host},
                           log_directory=opts["log_directory"])
    client = None
    try:
        cluster.scale(jobs=int(n_workers))
        client = Client(cluster, set_as_default=False)
        client.wait_for_workers(int(n_workers), timeout=float(opts["start_timeout_s"]))
    except (TimeoutError, OSError) as e:  # TimeoutError: wait_for_workers ran out of time
        up = 0
        if client is not None:
            up = len(client.scheduler_info()["workers"])
            client.close()
        cluster.close()
        cause = "" if isinstance(e, TimeoutError) else \
            "; " + first_line(e, "cannot reach the cluster's scheduler")
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
        client = slurm_client(n_workers or 2, slurm if slurm is not None
                              else json.loads(os.environ.get(SLURM_ENV) or "{}"))
    else:
        client = client_for(scheduler)
    try:
        yield client
    finally:
        client.close()
        if scheduler in ("local", "slurm"):
            client.cluster.close()


def environment(setting: dict | None) -> dict[str, str | None]:
    """Environment for jobs from the config's ``dask`` section (None: unset the variable): the
    ``--dask-*`` defaults of ``kernelscale.pipeline.cli train/prepare``."""
    scheduler, workers, slurm = (
        (setting or {}).get(key) for key in ("scheduler", "n_workers", "slurm"))
    return {SCHEDULER_ENV: None if scheduler is None else str(scheduler),
            WORKERS_ENV: None if scheduler is None or workers is None else str(int(workers)),
            SLURM_ENV: json.dumps(slurm, sort_keys=True) if scheduler == "slurm" and slurm
            else None}


def fingerprint(X) -> bytes:
    """SHA-256 of X's first 64 rows as read here."""
    from ..stream import read_rows

    rows = np.ascontiguousarray(read_rows(X, 0, min(64, int(X.shape[0]))))
    return hashlib.sha256(rows.tobytes()).digest()


def fingerprint_or_reason(X, unreadable: str | None = None):
    """``fingerprint(X)``, or why X cannot be read (``first_line``, ``unreadable`` for an
    empty message)."""
    try:
        return fingerprint(X)
    except Exception as e:  # noqa: BLE001 - any read failure is reported the same way
        return first_line(e, unreadable)


def _digests(arrays: dict) -> dict:
    return {name: fingerprint_or_reason(a, "unreadable") for name, a in arrays.items()}


def store_of(X) -> str:
    """Where an array lives, for messages: its store's root or its path, else its type."""
    store = getattr(X, "store", None)
    return str(getattr(store, "root", None) or getattr(X, "path", None) or type(X).__name__)


def check_workers_read(client, arrays: dict) -> None:
    """A one-line ``OSError`` naming the worker, the array and its store when a worker of
    ``client`` does not read the same first rows of an on-disk (zarr) array of ``arrays`` (name
    -> array; others are skipped) as this process. One round trip to every worker present."""
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
                raise OSError(f"dask worker {addr} cannot read {name} ({store_of(on_disk[name])}): "
                              f"{reason}; the workers need this process's file system (a path "
                              "they can all read)")


def check_workers_read_once(client, X, name: str = "X") -> None:
    """``check_workers_read`` for one on-disk array, once per (client, store, workers present)."""
    if client is None or type(X).__module__.split(".")[0] != "zarr":
        return
    workers = frozenset(client.scheduler_info().get("workers", {}))
    key = (id(client), store_of(X), str(getattr(X, "path", "")), workers)
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


def predict_chunked(estimator, X, client=None, *, method: str = "predict",
                    chunk_rows: int | None = None) -> np.ndarray:
    """``estimator.<method>(X)`` (numpy, in memory) for X numpy, zarr or dask, computed on
    ``client`` (None: dask's threaded scheduler) row block by row block, each read, predicted
    and dropped."""
    fn = getattr(estimator, method, None)
    if fn is None:
        raise AttributeError(f"{type(estimator).__name__} has no method {method!r}")
    check_workers_read_once(client, X)
    arr = as_dask(X, chunk_rows)
    probe = np.asarray(fn(np.asarray(arr[:1].compute())))  # output shape and dtype per row
    shape = {"drop_axis": 1} if probe.ndim == 1 else {"chunks": (arr.chunks[0], (probe.shape[1],))}
    out = arr.map_blocks(lambda b: np.asarray(fn(b)), dtype=probe.dtype,
                         meta=np.empty((0,) * probe.ndim, probe.dtype), **shape)
    out = out.compute(scheduler="threads") if client is None else client.compute(out).result()
    return np.asarray(out)


def rows_for(X, make):
    """``make(client)`` where a fit on X spreads its rows over dask workers (a ``current_client``,
    and X neither in memory (numpy, cupy; X None: any) nor sparse (scipy.sparse, a CSR store on
    disk)), else None (the fit runs in this process)."""
    from ..stream import is_csr_store, is_in_memory

    client = current_client()
    if client is None or (X is not None and (is_in_memory(X) or is_csr_store(X))):
        return None
    return make(client)


class ClusterRows:
    """Row-block work on ``client`` (None: dask's threaded scheduler): the ``rows`` that
    ``solvers.nystrom`` and ``kernels.random_binning`` take. ``chunk_rows``: rows per block
    (``as_dask``)."""

    def __init__(self, client=None):
        self.client = client

    def map(self, fn, X, y=None, *, chunk_rows: int | None = None) -> list:
        """``[fn(X_b[, y_b], lo=first row of b) for row blocks b]``, in row order; when blocks
        fail, the error of the first failing block in row order."""
        import dask

        client = self.client
        check_workers_read_once(client, X)
        check_workers_read_once(client, y, "y")
        Xd = as_dask(X, chunk_rows)
        blocks = Xd.to_delayed().ravel()
        starts = np.concatenate([[0], np.cumsum(Xd.chunks[0])[:-1]]).astype(int).tolist()
        ys = [()] * len(blocks) if y is None else \
            [(c,) for c in as_dask(y).rechunk({0: Xd.chunks[0]}).to_delayed().ravel()]
        parts = [dask.delayed(fn)(b, *c, lo=lo) for b, c, lo in zip(blocks, ys, starts, strict=True)]
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

    def sum(self, fn, X, y=None, *, chunk_rows: int | None = None) -> np.ndarray:
        """The float64 sum of ``map``'s results, added in row order (on any scheduler)."""
        return add_in_order(self.map(fn, X, y, chunk_rows=chunk_rows), np.float64)


def add_in_order(parts, dtype=None):
    """The sum of the arrays ``parts`` (None ones skipped), added in order into a copy of the
    first (in ``dtype``, default its own); None if all are None."""
    total = None
    for p in parts:
        if p is not None and total is None:
            total = np.array(p, dtype=dtype, copy=True)
        elif p is not None:
            total += p
    return total


def cluster_rows() -> ClusterRows | None:
    """``ClusterRows`` on the ``use_client`` client, or None (no client: work in this process)."""
    client = current_client()
    return None if client is None else ClusterRows(client)
