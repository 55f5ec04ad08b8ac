"""The row-worker protocol: a fit keeps one part of its rows in each dask worker's process, from
its start to its close; ``Spread`` is the client's side. A part is any object built as
``make(X, *args)`` (once X's first rows read as on the client), whose methods are its fit's calls,
with ``close()`` and optionally ``stop(*args)`` (the fit's end, e.g. to ``park`` state for a
warm-started fit in the same process)."""

from __future__ import annotations

import time
import uuid
import warnings

import numpy as np

from .cluster import fingerprint, fingerprint_or_reason, store_of

LIVENESS_POLL_S = 2.0  # how often a waiting call checks that its workers are still there
LOST_GRACE_S = 30.0  # how long a failed task waits for the scheduler to drop its worker
NO_WORKERS_WAIT_S = 30.0  # how long a fit waits for a cluster without workers to get one
_PARTS: dict = {}  # in each worker process: the fits' parts, by key
_PARKED: dict = {}  # in each worker process: what the last fit to end parked


def park(state) -> None:
    """Keep ``state`` in this process for a later fit (the next park replaces it)."""
    _PARKED["last"] = state


def unpark():
    """The state parked in this process, taken (None when there is none)."""
    return _PARKED.pop("last", None)


def _start(key: str, make, X, probe, *args) -> None:
    """Part ``make(X, *args)`` under ``key``; first a one-line ``OSError`` when X's
    ``fingerprint`` here is not ``probe`` (None: no check)."""
    seen = None if probe is None else fingerprint_or_reason(X)
    if seen != probe:
        reason = seen if isinstance(seen, str) else "its first rows differ from the client's"
        from distributed import get_worker

        raise OSError(f"dask worker {get_worker().address} cannot read the training data "
                      f"({store_of(X)}): {reason}; the workers need the client's file "
                      "system") from None
    _PARTS[key] = make(X, *args)


def _call(key: str, method: str, *args):
    return getattr(_PARTS[key], method)(*args)


def _stop(key: str, args: tuple | None = None) -> None:
    """Drop part ``key``: ``stop(*args)`` when given and the part has one, else ``close()``."""
    part = _PARTS.pop(key, None)
    if part is not None:
        part.stop(*args) if args is not None and hasattr(part, "stop") else part.close()


class BatchShare:
    """A part holding share ``share[0]`` of ``share[1]`` of every batch of the in-process fit's
    ``stream.BatchStream`` over (X, y) (``stream_kw``: its seed, batch size, dtype, window)."""

    def __init__(self, X, y, stream_kw: dict, share: tuple[int, int]):
        from ..stream import BatchStream

        self.stream = BatchStream(X, y, xp=np, **stream_kw)
        self.w, self.W = share

    def span(self, n: int) -> tuple[int, int]:
        """This part's rows [w n / W, (w + 1) n / W) of n rows."""
        return self.w * n // self.W, (self.w + 1) * n // self.W

    def batch(self, t: int, with_ids: bool = False) -> tuple:
        """This part's rows of batch t: ``BatchStream.batch``'s (X, y[, ids]), y None kept."""
        parts = self.stream.batch(t, with_ids=with_ids)
        lo, hi = self.span(parts[0].shape[0])
        return tuple(None if a is None else a[lo:hi] for a in parts)

    def close(self) -> None:
        self.stream.close()


class _WorkerLost(Exception):
    def __init__(self, workers: list[str]):
        super().__init__(", ".join(workers))
        self.workers = workers


def _nbytes(obj) -> int:
    """Bytes of the arrays in a message (tuples / lists of arrays, numbers and None)."""
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return int(getattr(obj, "nbytes", 0))


def _with_its_worker(error: BaseException) -> bool:
    """Whether a task's error is how dask reports a task lost with its worker."""
    from concurrent.futures import CancelledError

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return isinstance(error, (CancelledError, KilledWorker, CommClosedError))


class Spread:
    """Client side of a fit's ``W`` parts: part i on worker ``workers[i]`` of ``client``.
    ``labels``: sent once to every worker when an ndarray (``labels_remote``); ``X``: the data
    the parts read, its ``fingerprint`` (``_probe``) taken first. A subclass gives ``_part(i)`` =
    (class, data, its fingerprint or None, other arguments) and ``_recover(lost, method, args)``
    -> the arguments to call ``method`` again with after workers ``lost`` left. ``bytes_sent`` /
    ``bytes_received`` / ``round_trips``: the counted calls' array payloads."""

    name = "the fit"  # as messages name it
    again = "run the fit again"  # the advice when every worker is lost

    def __init__(self, client, labels=None, X=None):
        self.X, self._probe = X, None if X is None else fingerprint(X)
        self.client = client
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:  # a nanny may be restarting them: wait a little before giving up
            try:
                client.wait_for_workers(1, timeout=NO_WORKERS_WAIT_S)
            except TimeoutError:
                raise RuntimeError("the dask cluster has no workers") from None
            workers = sorted(client.scheduler_info()["workers"])
        self.workers, self.key, self.lost = workers, None, []
        self.bytes_sent = self.bytes_received = self.round_trips = 0
        self.labels = labels
        self.labels_remote = self._send_labels()

    @property
    def W(self) -> int:
        return len(self.workers)

    def _send_labels(self, workers: list[str] | None = None):
        if not isinstance(self.labels, np.ndarray):
            return self.labels
        return self.client.scatter(self.labels, broadcast=True, hash=False, workers=workers)

    def _submit(self, fn, i: int, what: str, *args):
        return self.client.submit(fn, f"{self.key}/{i}", *args, key=f"{what}-{uuid.uuid4().hex}",
                                  workers=[self.workers[i]], allow_other_workers=False,
                                  pure=False)

    def launch(self, workers: list[str]) -> None:
        """Part i on ``workers[i]``, for every i, under a new key."""
        self.workers = list(workers)
        self.key = f"{type(self).__name__}-{uuid.uuid4().hex}"
        self._start(list(range(self.W)))

    def _start(self, parts: list[int]) -> None:
        """Start ``parts`` (indices) on their workers; when one fails, the others are stopped."""
        futures = [self._submit(_start, i, "start", *self._part(i)) for i in parts]
        try:
            self._collect(futures)
        except BaseException:
            self._stop_on(parts)
            raise

    def call(self, i: int, method: str, *args):
        """Future of ``method(*args)`` of part i (a task pinned to its worker)."""
        return self._submit(_call, i, method, method, *args)

    def gather(self, method: str, *args, each: list | None = None, count: bool = True) -> list:
        """``method(*args, *each[i])`` of every part i, the answers in part order (``count``:
        add the payloads to the traffic). A lost worker: ``_recover``, then the call again."""
        while True:
            try:
                parts = self._collect([self.call(i, method, *args, *(each[i] if each else ()))
                                       for i in range(self.W)])
                break
            except _WorkerLost as e:
                args = self._recover(e.workers, method, args)
        if count:
            self.bytes_sent += self.W * _nbytes(args)
            self.bytes_received += _nbytes(parts)
            self.round_trips += 1
        return parts

    def _lost(self, wait_s: float = 0.0, watch: list[str] | None = None) -> list[str]:
        """The workers of ``watch`` (default: this fit's) that have left the cluster, waiting
        up to ``wait_s`` for the scheduler to notice one."""
        deadline = time.monotonic() + wait_s
        while True:
            alive = set(self.client.scheduler_info()["workers"])
            lost = [w for w in dict.fromkeys(self.workers if watch is None else watch)
                    if w not in alive]
            if lost or time.monotonic() >= deadline:
                return lost
            time.sleep(0.1)

    def _collect(self, futures, watch: list[str] | None = None) -> list:
        """The futures' results in order; ``_WorkerLost`` as soon as one of this fit's workers
        (or of ``watch``) has left the cluster, or when a task fails while one has (up to
        ``LOST_GRACE_S`` after an error a worker's death gives). Other errors are raised."""
        results = []
        for future in futures:
            while True:
                try:
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

    def _left(self, lost: list[str], t: int | None = None) -> list[str]:
        """Note ``lost``; the fit's workers left (a one-line RuntimeError when none is). ``t``:
        warn, in one line, that they were lost at iteration t."""
        left = [w for w in dict.fromkeys(self.workers) if w not in lost]
        self.lost += lost
        if not left:
            raise RuntimeError(f"{self.name} lost every dask worker ({', '.join(self.lost)}); "
                               f"{self.again}")
        if t is not None:
            warnings.warn(f"{self.name} lost dask worker {', '.join(lost)} at iteration {t}; "
                          f"continuing on {len(left)} worker(s)", RuntimeWarning, stacklevel=4)
        return left

    def _restart(self, left: list[str]) -> None:
        """A new split over the workers ``left``: the fit's parts there stopped, the labels sent
        to them again, a part on each."""
        self._stop_on([i for i, w in enumerate(self.workers) if w in left])
        self.labels_remote = self._send_labels(left)
        self.launch(left)

    def _stop_on(self, parts: list[int], args: tuple | None = None) -> None:
        """Stop ``parts`` (best effort; ``args``: for their ``stop``) but those whose worker
        has left."""
        while parts:
            futures = [self._submit(_stop, i, "stop", args) for i in parts]
            try:
                self._collect(futures, watch=[self.workers[i] for i in parts])
                break
            except _WorkerLost as e:  # a lost worker has nothing left to stop
                parts = [i for i in parts if self.workers[i] not in e.workers]
            except Exception:  # noqa: BLE001 - stopping must not hide the fit's own outcome
                break

    def close(self, args: tuple | None = None) -> None:
        """Stop the fit's parts on the workers still there (``args``: for their ``stop``)."""
        self._stop_on(list(range(self.W)), args)
        self.labels_remote = None
