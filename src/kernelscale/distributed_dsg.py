"""DSG / UDSG / CDSG with each batch's rows spread over dask workers (data-parallel steps).

A DSG step's cost is in its rows: f over every block so far on the batch (Alg. 2), the loss
derivative, and the chosen block's products phi_k^T g (and phi_k^T phi_k for the block Newton
step). Those are sums over rows, so W workers can each do 1/W of the batch and the client adds
their partial sums; what is left on the client is O(F^2) per step (the choice of block, the
preconditioner, the update), independent of B and of the number of blocks.

How it runs (``DSGClassifier(...).fit(X, y)`` inside ``distributed.use_client(client)`` with an
on-disk X, e.g. a zarr array):

* one ``RowWorker`` per dask worker, kept in that worker process and called by pinned tasks,
  opens X itself (the array pickles as its store's
  path: every worker must see the same file system) and builds the same ``stream.BatchStream`` as
  an in-process fit, so batch t holds the same rows in the same order; worker w takes rows
  ``[w B_t / W, (w + 1) B_t / W)`` of it. X never passes through the client; labels held in
  memory are sent once per fit;
* each worker keeps a replica of the model and applies, before every step, the update the
  client made after the last one (the block index, whether it was new, the shrink factor, the
  block's new coefficients): the same operations on the same numbers, so the replicas stay
  equal to the client's model bit for bit;
* per step the client sends one forward call (sums of the loss, of the loss at f = 0 and of g;
  max |g|) and one block call (phi_k^T g, phi_k^T phi_k) to every worker and adds the answers in
  worker order, so a fit is a fixed function of (seed, data, W).

Same model as in-process? The batches, blocks, choices and update rules are the same; only the
order of additions inside the sums differs (W partial sums instead of one product), so the model
matches the in-process fit to rounding, not to the bit: tests/test_distributed_dsg.py bounds the
difference of the decision values. The first step reads its batch on the client once, to set the
step size (eta0, on one batch); EigenPro's subsample (2,000 rows) is read there too.

Not spread: the one-class loss (its offset is updated from the whole batch's f values) and
in-memory X (nothing to gain from shipping it to workers; use ``engine`` threads instead).
Memory per worker: the stream's window (the same window as in-process: each worker keeps only
its share of every batch, but reads whole chunks).
"""

from __future__ import annotations

import time
import uuid
import warnings

import numpy as np

from .backend import to_numpy

LIVENESS_POLL_S = 2.0  # how often a waiting step checks that its workers are still there
# how long a failed task waits for the scheduler to report its worker gone before its error
# is taken as the task's own (a killed worker's tasks may fail before it is dropped)
LOST_GRACE_S = 30.0
_WORKERS: dict[str, RowWorker] = {}  # in each worker process: the fits' row workers, by key


def _start(key: str, *args) -> None:
    _WORKERS[key] = RowWorker(*args)


def _call(key: str, method: str, *args):
    return getattr(_WORKERS[key], method)(*args)


def _stop(key: str, update=None) -> None:
    worker = _WORKERS.pop(key, None)
    if worker is not None:
        worker.park(update)
        worker.close()


# (replica model, row cache) of the last fit that ended in this worker process: a warm-started
# fit of the same model takes the cache back (one entry: a fit of another model replaces it)
_PARKED: dict[str, tuple] = {}


def _fingerprint(X) -> bytes:
    """SHA-256 of the first 64 rows as read (what the client and every worker must agree on)."""
    import hashlib

    from .stream import read_rows

    rows = np.ascontiguousarray(read_rows(X, 0, min(64, int(X.shape[0]))))
    return hashlib.sha256(rows.tobytes()).digest()


def _where(X) -> str:
    store = getattr(X, "store", None)
    return str(getattr(store, "root", None) or getattr(X, "path", None) or type(X).__name__)


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "(not in a worker)"


class RowWorker:
    """In a dask worker: worker ``share[0]`` of ``share[1]``'s rows of every batch, and a replica of
    the model."""

    def __init__(self, X, y, encode, stream_kw: dict, model, loss, kernel, variant: str,
                 share: tuple[int, int], probe: bytes, keep_rows: bool = False):
        from .solvers.row_cache import RowCache
        from .stream import BatchStream

        # a worker without the client's file system fails here, in one line, not mid-step
        # (zarr reads a missing store as its fill value: the rows must match, not just open)
        try:
            seen = _fingerprint(X)
        except Exception as e:  # noqa: BLE001 - any read failure gets the same one line
            seen = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if seen != probe:
            reason = seen if isinstance(seen, str) else "its first rows differ from the client's"
            raise OSError(f"dask worker {_worker_address()} cannot read the training data "
                          f"({_where(X)}): {reason}; the workers need the client's file "
                          "system") from None
        self.stream = BatchStream(X, y, xp=np, **stream_kw)
        self.encode, self.model, self.loss, self.kernel = encode, model, loss, kernel
        self.variant = variant
        self.w, self.W = share
        self.X = self.Y = self.g = self.Z = None
        # f of the rows this worker has served, kept between their visits (solvers.row_cache):
        # indexed by storage row, so a share that changes after a lost worker still finds them
        self.cache = None
        if keep_rows:
            self.cache = _parked_cache(model, X)
            if self.cache is None:
                self.cache = RowCache(int(X.shape[0]), model.n_outputs, int(X.shape[1]), np,
                                      model.blocks.dtype, model.blocks.seed)

    def park(self, update) -> None:
        """At the end of a fit: apply the client's last update and keep (model, cache) for a
        warm-started fit of the same model (``_parked_cache``)."""
        if self.cache is None:
            return
        self._apply(update)
        _PARKED.clear()
        _PARKED["last"] = (self.model, self.cache)

    def _apply(self, update) -> None:
        if update is None:
            return
        k, new, factor, coef = update
        if new:
            self.model.new_block()
        renorm = self.model.shrink(factor)
        if self.cache is not None:
            if renorm != 1.0:
                self.cache.rescale(renorm)
            self.cache.record(k, coef - self.model.coef[k])
        self.model.coef[k] = coef

    def forward(self, t: int, update):
        """Apply the client's last update, then f and loss' on this worker's rows of batch t:
        (loss sum, loss-at-zero sum, g summed over rows (float64), max |g|, rows)."""
        self._apply(update)
        Xb, yb, ids = self.stream.batch(t, with_ids=True)
        B = Xb.shape[0]
        lo, hi = self.w * B // self.W, (self.w + 1) * B // self.W
        self.X = Xb[lo:hi]
        self.Y = self.encode(None if yb is None else yb[lo:hi], np)
        if hi == lo:
            return 0.0, 0.0, None, 0.0, 0
        u = (self.model.decision(self.X) if self.cache is None
             else self.cache.decision(self.model, self.X, ids[lo:hi]))
        g = self.g = self.loss.deriv(u, self.Y)
        obj = float(self.loss.value(u, self.Y).sum(dtype=np.float64))
        zero = float(self.loss.value(np.zeros_like(u), self.Y).sum(dtype=np.float64))
        g_sum = g.sum(axis=0, dtype=np.float64)
        g_max = float(abs(g).max()) if self.variant == "cdsg" else 0.0
        return obj, zero, g_sum, g_max, hi - lo

    def block_products(self, k: int, want_cov: bool):
        if self.X.shape[0] == 0:
            return None, None
        Z = self.Z = self.model.blocks.features(self.X, k)
        return Z.T @ self.g, (Z.T @ Z if want_cov else None)

    def block_variance(self, k: int) -> float:
        """CDSG's sigma_k^2 on up to 64 of this worker's rows (``DSGSolver._block_variance``)."""
        n = min(64, self.X.shape[0])
        Zs, Xs = self.Z[:n], self.X[:n]
        err = Zs @ Zs.T - self.kernel(Xs)
        return float(err.var(axis=1).mean())

    def close(self) -> None:
        self.stream.close()


def _parked_cache(model, X):
    """The row cache parked by the last fit in this process when it belongs to exactly this
    model (blocks, scale and coefficients bit for bit) and data size; else None."""
    parked = _PARKED.pop("last", None)
    if parked is None:
        return None
    old, cache = parked
    m = model.n_blocks
    same = (old.n_blocks == m and old.scale == model.scale and old.blocks.F == model.blocks.F
            and old.blocks.seed == model.blocks.seed
            and np.array_equal(old.coef[:m], model.coef[:m])
            and cache.fits(int(X.shape[0]), model.n_outputs, int(X.shape[1]), np,
                           model.blocks.dtype))
    return cache if same else None


class _WorkerLost(Exception):
    def __init__(self, workers: list[str]):
        super().__init__(", ".join(workers))
        self.workers = workers


def _nbytes(obj) -> int:
    """Bytes of the arrays in a message (tuples / lists of arrays, numbers and None)."""
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return int(getattr(obj, "nbytes", 0))


class SpreadRows:
    """One step's row work over the workers (the interface of ``solvers.dsg.LocalRows``)."""

    def __init__(self, driver: SpreadDSG, t: int):
        self.driver, self.t = driver, t
        self.n_rows = 0
        self.u = None

    def first_batch(self):
        return self.driver.first_batch(self.t)

    def forward(self):
        d = self.driver
        d._step_start = (d.solver.model.n_blocks, d.solver.model.scale)
        parts = d.gather("forward", self.t, d.pending)
        d.pending = None
        self.n_rows = B = sum(p[4] for p in parts)
        obj = sum(p[0] for p in parts) / B  # in worker order: a fixed sum
        zero = sum(p[1] for p in parts) / B
        g_sum = None
        for p in parts:
            if p[2] is not None:
                g_sum = p[2].copy() if g_sum is None else g_sum + p[2]
        return obj, zero, g_sum / B, max(p[3] for p in parts)

    def block_products(self, k: int, want_cov: bool):
        d = self.driver
        parts = d.gather("block_products", k, want_cov)
        grad = cov = None
        for pg, pc in parts:
            if pg is None:
                continue
            grad = pg.copy() if grad is None else grad + pg
            if want_cov:
                cov = pc.copy() if cov is None else cov + pc
        xp = d.solver.model.xp
        return xp.asarray(grad), (None if cov is None else xp.asarray(cov))

    def block_variance(self, k: int) -> float:
        d = self.driver
        first = next(w for w in range(d.W) if d.rows_of(w))
        return d.call(first, "block_variance", k).result()

    def updated(self, k: int, new: bool, factor: float) -> None:
        model = self.driver.solver.model
        self.driver.pending = (k, new, factor, to_numpy(model.coef[k]).copy())


def _with_its_worker(error: BaseException) -> bool:
    """Whether a task's error is how dask reports a task lost with its worker (cancelled,
    killed, or its connection closed) rather than the task's own failure."""
    from concurrent.futures import CancelledError

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return isinstance(error, (CancelledError, KilledWorker, CommClosedError))


class SpreadDSG:
    """The client's side: starts one ``RowWorker`` per dask worker and hands the solver a
    ``SpreadRows`` per step (``batches(t)`` of ``DSGSolver.run``)."""

    def __init__(self, client, X, y, encode, stream_kw: dict, solver, stream=None,
                 keep_rows: bool = False):
        if hasattr(solver.loss, "update_offset"):
            raise ValueError("DSG with the one-class loss cannot spread its batches over dask "
                             "workers (its offset needs the whole batch's f values); fit it "
                             "without a dask client")
        self.client, self.solver = client, solver
        self.X, self.y, self.encode, self.stream_kw = X, y, encode, stream_kw
        self.keep_rows = bool(keep_rows)  # each worker keeps f of its rows (solvers.row_cache)
        self._probe = _fingerprint(X)
        # hash=False: a key of this fit's own (equal labels of an earlier fit would share its
        # key, and that fit's release could drop them under this one)
        self.y_remote = (client.scatter(y, broadcast=True, hash=False)
                         if isinstance(y, np.ndarray) else y)
        self.key = None
        self.pending = None
        self.bytes_sent = self.bytes_received = self.round_trips = 0  # array payloads per fit
        self.lost: list[str] = []
        self._first = None
        self._stream = stream  # the client's own stream (same batches), for the first batch
        self._step_start = None  # (n_blocks, scale) of the model when the step began
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the dask cluster has no workers")
        self._launch(workers, solver.model)

    def _launch(self, workers: list[str], model) -> None:
        """A ``RowWorker`` with a host replica of ``model`` on each of ``workers``."""
        import pickle

        self.workers, self.W = list(workers), len(workers)
        replica = pickle.loads(pickle.dumps(model))
        replica.to(np)
        self.key = f"dsg-{uuid.uuid4().hex}"
        futures = [self.client.submit(
            _start, self.key, self.X, self.y_remote, self.encode, self.stream_kw, replica,
            self.solver.loss, self.solver.kernel, self.solver.config.variant, (w, self.W),
            self._probe, self.keep_rows, workers=[addr], allow_other_workers=False, pure=False)
            for w, addr in enumerate(workers)]
        self._collect(futures)

    def _lost(self, wait_s: float = 0.0, watch: list[str] | None = None) -> list[str]:
        """The workers of ``watch`` (default: this fit's) that have left the cluster, waiting
        up to ``wait_s`` for the scheduler to notice one."""
        deadline = time.monotonic() + wait_s
        while True:
            alive = set(self.client.scheduler_info()["workers"])
            lost = [w for w in (self.workers if watch is None else watch) if w not in alive]
            if lost or time.monotonic() >= deadline:
                return lost
            time.sleep(0.1)

    def _collect(self, futures, watch: list[str] | None = None) -> list:
        """The futures' results in order; ``_WorkerLost`` as soon as one of this fit's workers
        (or of ``watch``) has left the cluster (its pinned tasks would otherwise wait for it forever), or when a
        task fails while one has: a task cancelled or killed with its worker can surface as
        its own error (FutureCancelledError, KilledWorker) before the scheduler drops the
        worker, so such errors wait up to ``LOST_GRACE_S`` for that. Any other error, or one
        whose workers all stay, is raised as it is."""
        results = []
        for future in futures:
            while True:
                try:
                    # kept as fetched: gathering again would fetch each result a second time,
                    # and wait forever for one whose worker left in between (its pinned task
                    # cannot run anywhere else)
                    results.append(future.result(timeout=LIVENESS_POLL_S))
                    break
                except TimeoutError:
                    lost = self._lost(watch=watch)
                except Exception as e:
                    lost = self._lost(wait_s=LOST_GRACE_S if _with_its_worker(e) else 0.0,
                                      watch=watch)
                    if not lost:
                        raise
                if lost:
                    for f in futures:
                        f.cancel()
                    raise _WorkerLost(lost) from None
        return results

    def call(self, w: int, method: str, *args):
        """Future of ``RowWorker.method(*args)`` on worker w (a task pinned to it)."""
        return self.client.submit(_call, self.key, method, *args, workers=[self.workers[w]],
                                  allow_other_workers=False, pure=False)

    def gather(self, method: str, *args) -> list:
        """``method(*args)`` on every worker, the answers in worker order. A lost worker: the
        step's row work starts again on the workers left, from the model as the step began
        (one warning line; the batches do not change, only the split of each batch)."""
        while True:
            try:
                parts = self._collect([self.call(w, method, *args) for w in range(self.W)])
                break
            except _WorkerLost as e:
                self._recover(e.workers, redo_forward=method != "forward")
                if method == "forward":
                    args = args[:1] + (None,)  # the replicas start from the updated model
        self.bytes_sent += self.W * _nbytes(args)
        self.bytes_received += _nbytes(parts)
        self.round_trips += 1
        return parts

    def _recover(self, lost: list[str], redo_forward: bool) -> None:
        import copy

        left = [w for w in self.workers if w not in lost]
        self.lost += lost
        if not left:
            raise RuntimeError(f"DSG lost every dask worker ({', '.join(self.lost)}); run the "
                               "fit again (the pipeline resumes from its last checkpoint)")
        warnings.warn(f"DSG lost dask worker {', '.join(lost)} at iteration {self.solver.t}; "
                      f"continuing on {len(left)} worker(s)", RuntimeWarning, stacklevel=2)
        model = self.solver.model
        n_blocks, scale = self._step_start
        if redo_forward:  # the client has begun the step: the replicas start from before it
            if model.scale == 1.0 and scale != 1.0:
                raise RuntimeError("DSG lost a dask worker in the step where the model's scale "
                                   "was renormalised; run the fit again")
            model = copy.copy(model)
            model.n_blocks, model.scale = n_blocks, scale
        self.pending = None
        if isinstance(self.y, np.ndarray):
            # the labels again, to the workers left: the scheduler may count the broadcast copy
            # as lost with the worker ("computation on lost data"), cancelling the new start
            self.y_remote = self.client.scatter(self.y, broadcast=True, hash=False, workers=left)
        self._launch(left, model)
        if redo_forward:  # the workers' rows and loss derivatives for this step
            self._collect([self.call(w, "forward", self.solver.t - 1, None)
                           for w in range(self.W)])

    def rows_of(self, w: int) -> bool:
        B = self.stream_kw["batch_size"]
        return (w + 1) * B // self.W > w * B // self.W

    def first_batch(self, t: int):
        """Batch t read here (once per fit, for the step size)."""
        from .stream import BatchStream

        if self._first is None:
            xp = self.solver.model.xp
            stream = self._stream or BatchStream(self.X, self.y, xp=xp, **self.stream_kw)
            try:
                Xb, yb = stream.batch(t)
            finally:
                if stream is not self._stream:
                    stream.close()
            self._first = (Xb, self.encode(yb, xp))
        return self._first

    def __call__(self, t: int) -> SpreadRows:
        return SpreadRows(self, t)

    def _stop_on(self, workers: list[str], key: str, update=None) -> list[str]:
        """Stop fit ``key``'s worker state on ``workers`` (best effort); returns those still
        there. A task pinned to a worker that has left would wait for it forever (a worker job
        can end between the last step and the close), so the stops are collected as the steps
        are: a lost worker is dropped and the others are asked again."""
        while workers:
            futures = [self.client.submit(_stop, key, update, workers=[a],
                                          allow_other_workers=False, pure=False)
                       for a in workers]
            try:
                self._collect(futures, watch=workers)
                break
            except _WorkerLost as e:  # a lost worker has nothing left to stop
                workers = [w for w in workers if w not in e.workers]
            except Exception:  # noqa: BLE001 - stopping must not hide the fit's own outcome
                break
        return workers

    def close(self) -> None:
        """Stop the fit's ``RowWorker`` on each worker still there."""
        self._stop_on(list(self.workers), self.key, self.pending)
        self.y_remote = None
