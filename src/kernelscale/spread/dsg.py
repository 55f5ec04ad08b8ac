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
from ..solvers.dsg import block_products
from .cluster import add_in_order
from .workers import BatchShare, Spread, park, unpark


class DSGPart(BatchShare):
    """On a worker: its ``share`` of every batch (``workers.BatchShare``) and a replica of the
    model, kept equal to the client's by applying each step's update; ``keep_rows``: f of the
    rows it has served, by storage row, kept between their visits (``solvers.row_cache.RowCache``,
    taken back from the last fit in this process when that fit ended on exactly this model)."""

    def __init__(self, X, y, encode, stream_kw: dict, model, loss, kernel, variant: str,
                 share: tuple[int, int], keep_rows: bool = False):
        super().__init__(X, y, stream_kw, share)
        self.encode, self.model, self.loss, self.kernel = encode, model, loss, kernel
        self.variant = variant
        self.X = self.Y = self.u = self.g = self.Z = None
        self.cache = _row_cache(model, X) if keep_rows else None

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
        self.X, yb, ids = self.batch(t, with_ids=True)
        self.Y = self.encode(yb, np)
        if self.X.shape[0] == 0:
            return 0.0, 0.0, None, 0.0, 0
        u = self.u = (self.model.decision(self.X) if self.cache is None
                      else self.cache.decision(self.model, self.X, ids))
        g = self.g = self.loss.deriv(u, self.Y)
        obj = float(self.loss.value(u, self.Y).sum(dtype=np.float64))
        zero = float(self.loss.value(np.zeros_like(u), self.Y).sum(dtype=np.float64))
        g_sum = g.sum(axis=0, dtype=np.float64)
        g_max = float(abs(g).max()) if self.variant == "cdsg" else 0.0
        return obj, zero, g_sum, g_max, self.X.shape[0]

    def block_products(self, k: int, want_cov: bool, u_weight: float = 0.0):
        """``solvers.dsg.block_products`` of block k on this part's rows of the batch."""
        if self.X.shape[0] == 0:
            return None, None
        self.Z = self.model.blocks.features(self.X, k)
        return block_products(self.Z, self.g, self.u, u_weight, want_cov)

    def block_variance(self, k: int) -> float:
        """CDSG's sigma_k^2 on up to 64 of this part's rows (``DSGSolver._block_variance``)."""
        n = min(64, self.X.shape[0])
        return float((self.Z[:n] @ self.Z[:n].T - self.kernel(self.X[:n])).var(axis=1).mean())


def _row_cache(model, X):
    """The row cache parked in this process when it belongs to exactly this model (blocks,
    scale and coefficients bit for bit) and data size, else a new one."""
    from ..solvers.row_cache import RowCache

    n, d, m = int(X.shape[0]), int(X.shape[1]), model.n_blocks
    old, cache = unpark() or (None, None)
    if old is not None and (old.n_blocks == m and old.scale == model.scale
                            and old.blocks.F == model.blocks.F
                            and old.blocks.seed == model.blocks.seed
                            and np.array_equal(old.coef[:m], model.coef[:m])
                            and cache.fits(n, model.n_outputs, d, np, model.blocks.dtype)):
        return cache
    return RowCache(n, model.n_outputs, d, np, model.blocks.dtype, model.blocks.seed)


class SpreadRows:
    """One step's row work over the parts (the interface of ``solvers.dsg.LocalRows``)."""

    def __init__(self, driver: SpreadDSG, t: int):
        self.driver, self.t = driver, t
        self.n_rows = 0

    def first_batch(self):
        """Batch t read on the client (once per fit, for the step size)."""
        from ..stream import BatchStream

        d = self.driver
        if d._first is None:
            xp = d.solver.model.xp
            stream = d._stream or BatchStream(d.X, d.labels, xp=xp, **d.stream_kw)
            try:
                Xb, yb = stream.batch(self.t)
            finally:
                if stream is not d._stream:
                    stream.close()
            d._first = (Xb, d.encode(yb, xp))
        return d._first

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

    def block_products(self, k: int, want_cov: bool, u_weight: float = 0.0):
        parts = self.driver.gather("block_products", k, want_cov, u_weight)
        xp = self.driver.solver.model.xp
        grad, cov = add_in_order(p[0] for p in parts), add_in_order(p[1] for p in parts)
        return xp.asarray(grad), (None if cov is None else xp.asarray(cov))

    def block_variance(self, k: int) -> float:
        d, B = self.driver, self.driver.stream_kw["batch_size"]
        first = next(w for w in range(d.W) if (w + 1) * B // d.W > w * B // d.W)  # has rows
        return d.call(first, "block_variance", k).result()

    def updated(self, k: int, new: bool, factor: float) -> None:
        self.driver.pending = (k, new, factor, to_numpy(self.driver.solver.model.coef[k]).copy())


class SpreadDSG(Spread):
    """``batches(t)`` for ``DSGSolver.run`` over X's rows on the workers of ``client``: one
    ``DSGPart`` per worker, reading X itself through the stream ``stream_kw`` describes; ``y``:
    labels, ``encode`` their encoding; ``stream``: the client's own stream, for the first batch;
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
        super().__init__(client, labels=y, X=X)
        self.solver, self.encode, self.stream_kw = solver, encode, stream_kw
        self.keep_rows = bool(keep_rows)
        self.pending = None  # the client's last update, sent with the next forward call
        self._first, self._stream = None, stream
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

    def __call__(self, t: int) -> SpreadRows:
        return SpreadRows(self, t)

    def close(self) -> None:
        """Stop the parts on the workers still there; each applies the last update and parks
        its row cache."""
        super().close((self.pending,))
