"""RFF-SGD / RFF-SVRG and EigenPro-RF steps with each batch's rows spread over dask workers.

The model is a D x C weight matrix w over one fixed block of random Fourier features (Rahimi &
Recht, "Random Features for Large-Scale Kernel Machines", NIPS 2007); a step's row work is
Phi_b^T loss'(Phi_b w, Y_b) and the summed loss on each worker's share b of the batch. EigenPro-RF
(Ma & Belkin, "Diving into the Shallows: a Computational Perspective on Large-Scale Shallow
Learning", NIPS 2017) takes the residual r = Phi_b w - Y_b in place of loss' (``Residual``).
``SpreadRFF`` is the ``batches`` of ``solvers._common.run_loop`` for ``solvers.rff_sgd.RFFSGD``
and ``solvers.eigenpro.RFFEigenPro``: batch t gives ``(SpreadRFFRows,)``, which their ``step``
takes for the spread step.
"""

from __future__ import annotations

import numpy as np

from ..backend import to_numpy
from .cluster import add_in_order
from .workers import BatchShare, Spread

FULL_CHUNK_ROWS = 8192  # rows per chunk of SVRG's full pass (RFFSGD.full_gradient's default)


class Residual:
    """EigenPro's residual as the loss ``RFFPart`` uses: deriv = r = u - y (not a scaled
    gradient), value = r^2 (summed by the part: the batch's squared residuals)."""

    @staticmethod
    def deriv(u, Y):
        return u - Y

    @staticmethod
    def value(u, Y):
        r = u - Y
        return r * r


class RFFPart(BatchShare):
    """On a worker: its ``share`` of every batch (``workers.BatchShare``) and of X (SVRG's full
    pass), the random-feature block and the loss; no weights (they come with each call)."""

    def __init__(self, X, Y, stream_kw: dict, blocks, loss, share: tuple[int, int]):
        super().__init__(X, Y, stream_kw, share)
        self.blocks, self.loss, self.Y = blocks, loss, Y
        self.dtype = np.dtype(stream_kw["dtype"])

    def _sums(self, Phi, Y, w):
        u = Phi @ w
        return Phi.T @ self.loss.deriv(u, Y), u

    def gradient(self, t: int, w, w_snap):
        """On this part's rows of batch t: (sum of phi loss'(phi^T w), summed loss (float64),
        rows, sum of phi loss'(phi^T w_snap) or None)."""
        Xb, Yb = self.batch(t)
        if Xb.shape[0] == 0:
            return None, 0.0, 0, None
        Phi = self.blocks.features(Xb, 0)
        Y = np.asarray(Yb, dtype=self.dtype)
        G, u = self._sums(Phi, Y, w)
        loss = float(self.loss.value(u, Y).sum(dtype=np.float64))
        G_snap = None if w_snap is None else self._sums(Phi, Y, w_snap)[0]
        return G, loss, Xb.shape[0], G_snap

    def full_gradient(self, w, chunk_rows: int):
        """Sum of phi loss'(phi^T w) over this part's rows of X (SVRG's full pass)."""
        from ..stream import check_finite_rows, read_rows, unwrap_dask

        X = unwrap_dask(self.stream.X)
        lo, hi = self.span(int(X.shape[0]))
        g = np.zeros_like(w)
        for a in range(lo, hi, chunk_rows):
            b = min(hi, a + chunk_rows)
            block = read_rows(X, a, b)
            check_finite_rows(block, a, "X")
            Phi = self.blocks.features(np.asarray(block, dtype=self.dtype), 0)
            Yc = np.asarray(self.Y[a:b], dtype=self.dtype)
            g += self._sums(Phi, Yc, w)[0]
        return g


class SpreadRFFRows:
    """One step's row work over the parts (what ``RFFSGD.step`` and ``RFFEigenPro.step`` call
    for a spread batch)."""

    def __init__(self, driver: SpreadRFF, t: int):
        self.driver, self.t = driver, t

    def gradient(self, w, w_snap):
        parts = self.driver.gather("gradient", self.t, to_numpy(w),
                                   None if w_snap is None else to_numpy(w_snap))
        # in worker order: a fixed sum
        return (add_in_order(p[0] for p in parts), sum(p[1] for p in parts),
                sum(p[2] for p in parts), add_in_order(p[3] for p in parts))

    def full_gradient(self, w):
        d = self.driver
        return add_in_order(d.gather("full_gradient", to_numpy(w), FULL_CHUNK_ROWS)), \
            int(d.X.shape[0])


class SpreadRFF(Spread):
    """``batches(t)`` for ``run_loop`` over X's rows on the workers of ``client``: one
    ``RFFPart`` per worker, reading X itself (it must see the client's file system) through
    the stream ``stream_kw`` describes; Y: the encoded targets (n x C, sent once);
    ``residual``: EigenPro-RF's step (``Residual``) in place of ``solver.loss``. A lost worker:
    the call starts again on the workers left (one warning line)."""

    def __init__(self, client, X, Y, stream_kw: dict, solver, residual: bool = False):
        super().__init__(client, labels=np.asarray(Y), X=X)
        self.solver, self.stream_kw = solver, stream_kw
        self.loss = Residual() if residual else solver.loss
        self.name = "EigenPro-RF" if residual else f"RFF-{solver.solver.upper()}"
        self.launch(self.workers)

    def _part(self, i: int) -> tuple:
        return (RFFPart, self.X, self._probe, self.labels_remote, self.stream_kw,
                self.solver.blocks, self.loss, (i, self.W))

    def _recover(self, lost: list[str], method: str, args: tuple) -> tuple:
        """The parts hold no weights: the call again, with the same weights, on the workers
        left (only the split of each batch changes)."""
        self._restart(self._left(lost, self.solver.t))
        return args

    def __call__(self, t: int):
        return (SpreadRFFRows(self, t),)
