"""f of every training row as of its last visit: a DSG step evaluates only what changed since.

Step t of DSG evaluates f on its batch over all blocks so far (Dai, Xie, He, Liang, Raj, Balcan,
Song, Scalable Kernel Methods via Doubly Stochastic Gradients, NIPS 2014, Alg. 2). Between two
visits of a row f changes only by the steps in between, each a coefficient change (k, Delta
alpha_k): a new block (DSG) or an old block's update (UDSG, CDSG). ``RowCache`` keeps, for every
training row, f as of its last visit in the model's coefficient units (f = scale * sqrt(2 / F) *
value, ``DSGModel.decision``) and the log of the changes since the oldest visit still cached. A
revisited row adds phi_k(x) Delta for the changes made after its visit; a row seen for the first
time, or whose fingerprint x . w (w a fixed seeded Gaussian vector) differs from its visit's, is
evaluated over all blocks. Memory: n (C + 2) numbers for n rows and C outputs, and the logged
changes, F C numbers each, from the oldest visit on. The sum equals ``DSGModel.decision``'s in exact
arithmetic, not bit for bit. Batch rows may be sparse (CSR, scipy or cupyx): the fingerprint and
the features are then sparse products.
"""

from __future__ import annotations

import numpy as np

from ..backend import is_sparse, to_numpy
from ..kernels.fourier import fourier_features
from ..rng import ROW_FINGERPRINT, block_generator

GPU_PIECE_BYTES = 64 * 2**20  # a block's catch-up features on a GPU, per piece (one buffer)


def piece_rows(xp, F: int, itemsize: int) -> int | None:
    """Rows per catch-up feature piece: None (whole prefix) for numpy, else
    ``GPU_PIECE_BYTES`` worth of (rows, F) features, at least one row."""
    return None if xp is np else max(1, GPU_PIECE_BYTES // (int(F) * int(itemsize)))


class RowCache:
    """Per-row f (coefficient units), the visit it dates from, and the change log since."""

    def __init__(self, n_rows: int, n_outputs: int, n_features: int, xp, dtype, seed: int):
        self.xp = xp
        self.n_rows = int(n_rows)
        self.value = xp.zeros((self.n_rows, int(n_outputs)), dtype=dtype)
        # changes included in value (the log position at the visit); -1: never visited
        self.seen = np.full(self.n_rows, -1, dtype=np.int32)
        # the row's fingerprint at its visit (float32: it only tells a changed row, 4 bytes a row)
        self.check = np.zeros(self.n_rows, dtype=np.float32)
        w = block_generator(int(seed), 0, ROW_FINGERPRINT).standard_normal(int(n_features))
        self.w = xp.asarray(w, dtype=dtype)  # in X's dtype: no float64 copy of the batch
        self.log: list[tuple[int, object]] = []  # changes log_start, log_start + 1, ...
        self.log_start = 0
        # visit position -> rows whose last visit it is: the oldest visit without a pass over n
        self.visits: dict[int, int] = {}

    @staticmethod
    def nbytes(n_rows: int, n_outputs: int, itemsize: int) -> int:
        """Memory of the per-row arrays (the change log is at most the model's size)."""
        return int(n_rows) * (int(n_outputs) * int(itemsize) + 8)

    def fits(self, n_rows: int, n_outputs: int, n_features: int, xp, dtype) -> bool:
        """Whether this cache belongs to data and a model of these sizes and namespace."""
        return (self.n_rows == int(n_rows) and self.value.shape[1] == int(n_outputs)
                and self.w.shape[0] == int(n_features) and self.xp is xp
                and self.value.dtype == np.dtype(dtype))

    @property
    def n_changes(self) -> int:
        return self.log_start + len(self.log)

    def values(self, model, X, ids) -> object:
        """f(X) / (scale * sqrt(2 / F)) for the batch rows X whose storage indices are ``ids``,
        from the cache where the row is known, else from all blocks; stores the result as the
        rows' new visit."""
        xp = self.xp
        ids = np.asarray(ids, dtype=np.int64)
        fingerprint = np.asarray(to_numpy(X @ self.w), dtype=np.float32)
        seen = self.seen[ids]
        known = (seen >= 0) & (self.check[ids] == fingerprint)
        out = xp.empty((X.shape[0], self.value.shape[1]), dtype=self.value.dtype)
        fresh = np.flatnonzero(~known)
        if fresh.size:
            at = xp.asarray(fresh)
            out[at] = model.decision(X[at], coefficient_units=True)
        old = np.flatnonzero(known)
        if old.size:
            order = old[np.argsort(seen[old], kind="stable")]
            at = xp.asarray(order)
            u = self.value[xp.asarray(ids[order])]  # a copy (advanced indexing)
            self._catch_up(model, X[at], seen[order], u)
            out[at] = u
        self.value[xp.asarray(ids)] = out
        rows, first = np.unique(ids, return_index=True)
        before, counts = np.unique(seen[first], return_counts=True)
        for p, c in zip(before.tolist(), counts.tolist(), strict=True):
            if p >= 0:
                left = self.visits.pop(p) - c
                if left:
                    self.visits[p] = left
        self.visits[self.n_changes] = self.visits.get(self.n_changes, 0) + len(rows)
        self.seen[ids] = self.n_changes
        self.check[ids] = fingerprint
        return out

    def decision(self, model, X, ids):
        """f(X) for the batch rows ``ids`` (``values`` in the model's units)."""
        u = self.values(model, X, ids)
        u *= model.scale * model.blocks.scale
        return u

    def _catch_up(self, model, X, seen, u) -> None:
        """u += sum of phi_k(x) Delta over the changes e >= seen_i of each row i; rows sorted by
        ``seen`` ascending, so change e concerns a prefix of them (those with seen_i <= e).
        On a GPU one fused kernel where it applies (``FourierBlocks.weighted_sum``); else each
        block's features are computed once, on the rows of its latest change (the most)."""
        first, end = int(seen[0]), self.n_changes
        if first >= end:
            return
        changes = self.log[first - self.log_start:]
        rows = np.searchsorted(seen, np.arange(first, end), side="right")
        by_block: dict[int, list[int]] = {}
        for j, (k, _) in enumerate(changes):
            by_block.setdefault(k, []).append(j)
        blocks, xp = model.blocks, self.xp
        if blocks.weighted_sum(X, [k for k, _ in changes], [c for _, c in changes], rows, u):
            return
        piece = piece_rows(xp, blocks.F, blocks.dtype.itemsize)
        if piece:  # two buffers reused by every piece: no allocation in the loop
            Zbuf = xp.empty((piece, blocks.F), dtype=blocks.dtype)
            Pbuf = xp.empty((piece, u.shape[1]), dtype=u.dtype)
        for k, js in by_block.items():
            top = int(rows[js[-1]])
            # once per block: beyond the cache it is drawn again (sparse rows: row-major W)
            W, b = blocks.params(k, k + 1, rows=is_sparse(X))
            for lo in range(0, top, piece or top):
                hi = min(top, lo + (piece or top))
                Z = fourier_features(X[lo:hi], W, b, blocks.F, scaled=False,
                                     out=Zbuf[: hi - lo] if piece else None)
                for j in js:
                    r = min(int(rows[j]), hi)
                    if r > lo:
                        u[lo:r] += (xp.matmul(Z[: r - lo], changes[j][1], out=Pbuf[: r - lo])
                                    if piece else Z[: r - lo] @ changes[j][1])

    def record(self, k: int, delta) -> None:
        """Block k changed by ``delta`` (coefficient units; a copy is kept). Drops the changes
        every visited row already includes."""
        self.log.append((int(k), delta.copy()))
        oldest = min(self.visits) if self.visits else self.n_changes
        if oldest > self.log_start:
            del self.log[: oldest - self.log_start]
            self.log_start = oldest

    def rescale(self, factor: float) -> None:
        """The model multiplied its coefficients by ``factor`` (renormalising its lazy scale):
        the cached values and the logged changes are in those units too."""
        self.value *= factor
        self.log = [(k, d * factor) for k, d in self.log]
