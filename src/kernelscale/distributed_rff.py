"""RFF-SGD / RFF-SVRG with each batch's rows spread over dask workers (data-parallel steps).

The machinery of ``distributed_dsg`` (one ``RowWorker`` per dask worker, pinned tasks, answers
added in worker order, the fingerprint check, a lost worker) with a simpler step: the model is
the D x C weight matrix W over one fixed block of random features, so a step's row work is
Phi_b^T loss'(Phi_b W, Y_b) (D x C) and the summed loss on worker b's rows of the batch.

* every worker opens X itself and builds the in-process fit's ``stream.BatchStream`` (same seed,
  batch size and window), so batch t holds the same rows; worker w of W takes rows
  ``[w B / W, (w + 1) B / W)`` of it. X never passes through the client; the encoded targets
  (n x C, in memory) are sent once per fit;
* per step the client sends W (and SVRG's snapshot W~) to every worker, each returns its partial
  Z^T g (and Z^T g at W~), its loss sum and its row count; the client adds them in worker order
  and makes the step exactly as ``solvers.rff_sgd.RFFSGD.step`` does. The workers keep no model
  state besides the feature block (drawn from the seed), so a lost worker costs only a restart of
  the step's call on the workers left;
* SVRG's full gradient at a snapshot: worker w sums over rows ``[w n / W, (w + 1) n / W)`` of X
  (in 8,192-row chunks, as the in-process pass), the client adds the W sums in worker order.

Same model as in-process up to the order of additions inside the sums (float64: decision values
within 1e-9 relative, tests/test_distributed_rff.py); the same model on every run for the same
W. Traffic per step and worker: D C words out and back (twice that for SVRG).
"""

from __future__ import annotations

import uuid
import warnings

import numpy as np

from .backend import to_numpy
from .distributed_dsg import _WORKERS, RowWorker, SpreadDSG, _fingerprint

FULL_CHUNK_ROWS = 8192  # rows per chunk of SVRG's full pass (RFFSGD.full_gradient's default)


def _start(key: str, *args) -> None:
    _WORKERS[key] = RFFRowWorker(*args)


class RFFRowWorker(RowWorker):
    """In a dask worker: worker ``share[0]`` of ``share[1]``'s rows of every batch (and of X for
    SVRG's full pass); the random-feature block and the loss, no weights (they come per call)."""

    def __init__(self, X, Y, stream_kw: dict, blocks, loss, share: tuple[int, int],
                 probe: bytes):
        super().__init__(X, Y, None, stream_kw, None, loss, None, "rff", share, probe)
        self.blocks = blocks
        self.Y_all = Y
        self.dtype = np.dtype(stream_kw["dtype"])

    def _sums(self, Phi, Y, w):
        u = Phi @ w
        return Phi.T @ self.loss.deriv(u, Y), u

    def gradient(self, t: int, w, w_snap):
        """On this worker's rows of batch t: (sum of phi loss'(phi^T w), summed loss (float64),
        rows, sum of phi loss'(phi^T w_snap) or None)."""
        Xb, Yb = self.stream.batch(t)
        B = Xb.shape[0]
        lo, hi = self.w * B // self.W, (self.w + 1) * B // self.W
        if hi == lo:
            return None, 0.0, 0, None
        Phi = self.blocks.features(Xb[lo:hi], 0)
        Y = np.asarray(Yb[lo:hi], dtype=self.dtype)
        G, u = self._sums(Phi, Y, w)
        loss = float(self.loss.value(u, Y).sum(dtype=np.float64))
        G_snap = None if w_snap is None else self._sums(Phi, Y, w_snap)[0]
        return G, loss, hi - lo, G_snap

    def full_gradient(self, w, chunk_rows: int):
        """Sum of phi loss'(phi^T w) over this worker's rows of X (SVRG's full pass)."""
        from .stream import check_finite_rows, read_rows, unwrap_dask

        X = unwrap_dask(self.stream.X)
        n = int(X.shape[0])
        lo, hi = self.w * n // self.W, (self.w + 1) * n // self.W
        g = np.zeros_like(w)
        for a in range(lo, hi, chunk_rows):
            b = min(hi, a + chunk_rows)
            block = read_rows(X, a, b)
            check_finite_rows(block, a, "X")
            Phi = self.blocks.features(np.asarray(block, dtype=self.dtype), 0)
            Yc = np.asarray(self.Y_all[a:b], dtype=self.dtype)
            g += self._sums(Phi, Yc, w)[0]
        return g


class SpreadRFFRows:
    """One step's row work over the workers (what ``RFFSGD._step_spread`` calls)."""

    def __init__(self, driver: SpreadRFF, t: int):
        self.driver, self.t = driver, t

    def gradient(self, w, w_snap):
        d = self.driver
        parts = d.gather("gradient", self.t, to_numpy(w),
                         None if w_snap is None else to_numpy(w_snap))
        G = G_snap = None
        loss, m = 0.0, 0
        for pg, pl, pm, ps in parts:  # in worker order: a fixed sum
            loss += pl
            m += pm
            if pg is None:
                continue
            G = pg.copy() if G is None else G + pg
            if ps is not None:
                G_snap = ps.copy() if G_snap is None else G_snap + ps
        return G, loss, m, G_snap

    def full_gradient(self, w):
        d = self.driver
        parts = d.gather("full_gradient", to_numpy(w), FULL_CHUNK_ROWS)
        total = parts[0].copy()
        for p in parts[1:]:
            total += p
        return total, int(d.X.shape[0])


class SpreadRFF(SpreadDSG):
    """The client's side: one ``RFFRowWorker`` per dask worker; ``batches(t)`` for ``run_loop``
    gives ``(SpreadRFFRows,)``, which ``RFFSGD.step`` takes for the spread step."""

    def __init__(self, client, X, Y, stream_kw: dict, solver):
        self.client, self.solver = client, solver
        self.X, self.y, self.encode, self.stream_kw = X, Y, None, stream_kw
        self._probe = _fingerprint(X)
        # hash=False: a key of this fit's own (see SpreadDSG)
        self.y_remote = client.scatter(np.asarray(Y), broadcast=True, hash=False)
        self.key = None
        self.pending = None
        self.bytes_sent = self.bytes_received = self.round_trips = 0  # array payloads per fit
        self.lost: list[str] = []
        self._first = self._stream = self._step_start = None
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the dask cluster has no workers")
        self._launch(workers)

    def _launch(self, workers: list[str], model=None) -> None:
        self.workers, self.W = list(workers), len(workers)
        self.key = f"rff-{uuid.uuid4().hex}"
        futures = [self.client.submit(
            _start, self.key, self.X, self.y_remote, self.stream_kw, self.solver.blocks,
            self.solver.loss, (w, self.W), self._probe, workers=[addr],
            allow_other_workers=False, pure=False)
            for w, addr in enumerate(workers)]
        self._collect(futures)

    def _method_name(self) -> str:
        """The method as the lost-worker messages name it."""
        return f"RFF-{self.solver.solver.upper()}"

    def _recover(self, lost: list[str], redo_forward: bool) -> None:
        """The workers hold no weights: start again on the workers left (the call is retried
        with the same weights; only the split of each batch changes)."""
        left = [w for w in self.workers if w not in lost]
        self.lost += lost
        name = self._method_name()
        if not left:
            raise RuntimeError(f"{name} lost every dask worker ({', '.join(self.lost)}); "
                               "run the fit again")
        warnings.warn(f"{name} lost dask worker {', '.join(lost)} at "
                      f"iteration {self.solver.t}; continuing on {len(left)} worker(s)",
                      RuntimeWarning, stacklevel=2)
        old = self.key
        # the old fit's workers on the machines left; one lost meanwhile surfaces in the launch
        self._stop_on(left, old)
        # the targets again, to the workers left: the scheduler may count the broadcast copy as
        # lost with the worker ("computation on lost data"), cancelling the new start
        self.y_remote = self.client.scatter(np.asarray(self.y), broadcast=True, hash=False,
                                            workers=left)
        self._launch(left)

    def __call__(self, t: int):
        return (SpreadRFFRows(self, t),)


__all__ = ["RFFRowWorker", "SpreadRFF", "SpreadRFFRows"]
