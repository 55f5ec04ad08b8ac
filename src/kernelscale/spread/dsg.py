"""DSG / UDSG / CDSG steps with each batch's rows spread over dask workers.

DSG: Dai, Xie, He, Liang, Raj, Balcan, Song, "Scalable Kernel Methods via Doubly Stochastic
Gradients", NIPS 2014 (Alg. 1 and 2); UDSG / CDSG: "Fast Doubly Stochastic Kernel Machines".
``SpreadDSG`` is the ``batches`` of ``solvers.dsg.DSGSolver.run``: batch t gives a ``SpreadRows``,
the step's row work (f on the batch (Alg. 2), the loss derivative, the chosen block's products)
done by one ``DSGPart`` per worker on its share of the batch and added in worker order; the
choices and the update stay with the solver. Not spread: the one-class loss.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np

from ..backend import to_numpy
from .cluster import fingerprint
from .workers import BatchShare, Spread, add_in_order, park, unpark


class DSGPart:
    """On a worker: its ``share`` of every batch (``workers.BatchShare``) and a replica of the
    model, kept equal to the client's by applying each step's update; ``keep_rows``: f of the
    rows it has served, kept between their visits (``solvers.row_cache.RowCache``, taken back
    from the last fit in this process when that fit ended on exactly this model)."""

    def __init__(self, X, y, encode, stream_kw: dict, model, loss, kernel, variant: str,
                 share: tuple[int, int], keep_rows: bool = False):
        from ..solvers.row_cache import RowCache

        self.rows = BatchShare(X, y, stream_kw, share)
        self.encode, self.model, self.loss, self.kernel = encode, model, loss, kernel
        self.variant = variant
        self.X = self.Y = self.g = self.Z = None
        # indexed by storage row, so a share that changes after a lost worker still finds them
        self.cache = None
        if keep_rows:
            self.cache = _parked_cache(model, X)
            if self.cache is None:
                self.cache = RowCache(int(X.shape[0]), model.n_outputs, int(X.shape[1]), np,
                                      model.blocks.dtype, model.blocks.seed)

    def stop(self, update) -> None:
        """The fit's end: apply the client's last update and ``park`` (model, row cache) for a
        warm-started fit of the same model."""
        if self.cache is not None:
            self._apply(update)
            park((self.model, self.cache))
        self.close()

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
        """Apply the client's last update, then f and loss' on this part's rows of batch t:
        (loss sum, loss-at-zero sum, g summed over rows (float64), max |g|, rows)."""
        self._apply(update)
        Xb, yb, ids = self.rows.stream.batch(t, with_ids=True)
        lo, hi = self.rows.span(Xb.shape[0])
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
        """(phi_k^T g, phi_k^T phi_k or None) on this part's rows of the batch."""
        if self.X.shape[0] == 0:
            return None, None
        Z = self.Z = self.model.blocks.features(self.X, k)
        return Z.T @ self.g, (Z.T @ Z if want_cov else None)

    def block_variance(self, k: int) -> float:
        """CDSG's sigma_k^2 on up to 64 of this part's rows (``DSGSolver._block_variance``)."""
        n = min(64, self.X.shape[0])
        Zs, Xs = self.Z[:n], self.X[:n]
        err = Zs @ Zs.T - self.kernel(Xs)
        return float(err.var(axis=1).mean())

    def close(self) -> None:
        self.rows.close()


def _parked_cache(model, X):
    """The row cache parked in this process when it belongs to exactly this model (blocks,
    scale and coefficients bit for bit) and data size; else None."""
    parked = unpark()
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


class SpreadRows:
    """One step's row work over the parts (the interface of ``solvers.dsg.LocalRows``)."""

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
        g_sum = add_in_order(p[2] for p in parts)
        return obj, zero, g_sum / B, max(p[3] for p in parts)

    def block_products(self, k: int, want_cov: bool):
        d = self.driver
        parts = d.gather("block_products", k, want_cov)
        grad, cov = add_in_order(p[0] for p in parts), add_in_order(p[1] for p in parts)
        xp = d.solver.model.xp
        return xp.asarray(grad), (None if cov is None else xp.asarray(cov))

    def block_variance(self, k: int) -> float:
        d = self.driver
        first = next(w for w in range(d.W) if d.rows_of(w))
        return d.call(first, "block_variance", k).result()

    def updated(self, k: int, new: bool, factor: float) -> None:
        model = self.driver.solver.model
        self.driver.pending = (k, new, factor, to_numpy(model.coef[k]).copy())


class SpreadDSG(Spread):
    """``batches(t)`` for ``DSGSolver.run`` over X's rows on the workers of ``client``: one
    ``DSGPart`` per worker, reading X itself (it must see the client's file system) through
    the stream ``stream_kw`` describes; ``y``: labels (sent once when in memory), ``encode``
    their encoding; ``stream``: the client's own stream, for the first batch (the step size);
    ``keep_rows``: the parts keep their rows' f. A lost worker: the step starts again on the
    workers left, from the model as the step began (one warning line)."""

    name = "DSG"
    again = "run the fit again (the pipeline resumes from its last checkpoint)"

    def __init__(self, client, X, y, encode, stream_kw: dict, solver, stream=None,
                 keep_rows: bool = False):
        if hasattr(solver.loss, "update_offset"):
            raise ValueError("DSG with the one-class loss cannot spread its batches over dask "
                             "workers (its offset needs the whole batch's f values); fit it "
                             "without a dask client")
        probe = fingerprint(X)
        super().__init__(client, labels=y)
        self.solver, self.X, self.encode, self.stream_kw = solver, X, encode, stream_kw
        self.keep_rows = bool(keep_rows)
        self._probe = probe
        self.pending = None  # the client's last update, sent with the next forward call
        self._first = None
        self._stream = stream
        self._step_start = None  # (n_blocks, scale) of the model when the step began
        self._model = solver.model  # what the parts start from
        self.launch(self.workers)

    def _part(self, i: int) -> tuple:
        s, replica = self.solver, pickle.loads(pickle.dumps(self._model))
        replica.to(np)
        return (DSGPart, self.X, self._probe, self.labels_remote, self.encode, self.stream_kw,
                replica, s.loss, s.kernel, s.config.variant, (i, self.W), self.keep_rows)

    def _recover(self, lost: list[str], method: str, args: tuple) -> tuple:
        left = self._left(lost, self.solver.t)
        model = self.solver.model
        n_blocks, scale = self._step_start
        redo_forward = method != "forward"
        if redo_forward:  # the client has begun the step: the replicas start from before it
            if model.scale == 1.0 and scale != 1.0:
                raise RuntimeError("DSG lost a dask worker in the step where the model's scale "
                                   "was renormalised; run the fit again")
            model = copy.copy(model)
            model.n_blocks, model.scale = n_blocks, scale
        self.pending, self._model = None, model
        self._restart(left)
        if not redo_forward:
            return args[:1] + (None,)  # the replicas start from the updated model
        # the parts' rows and loss derivatives for this step
        self._collect([self.call(w, "forward", self.solver.t - 1, None) for w in range(self.W)])
        return args

    def rows_of(self, w: int) -> bool:
        B = self.stream_kw["batch_size"]
        return (w + 1) * B // self.W > w * B // self.W

    def first_batch(self, t: int):
        """Batch t read here (once per fit, for the step size)."""
        from ..stream import BatchStream

        if self._first is None:
            xp = self.solver.model.xp
            stream = self._stream or BatchStream(self.X, self.labels, xp=xp, **self.stream_kw)
            try:
                Xb, yb = stream.batch(t)
            finally:
                if stream is not self._stream:
                    stream.close()
            self._first = (Xb, self.encode(yb, xp))
        return self._first

    def __call__(self, t: int) -> SpreadRows:
        return SpreadRows(self, t)

    def close(self) -> None:
        """Stop the parts on the workers still there; each applies the last update and parks
        its row cache."""
        super().close((self.pending,))
