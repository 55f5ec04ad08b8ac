"""EigenPro-RF (``EigenPro*(method="rff")``) with each batch's rows spread over dask workers.

The machinery of ``distributed_rff`` (one ``RFFRowWorker`` per dask worker, pinned tasks, answers
added in worker order, the fingerprint check, a lost worker) with EigenPro's step: the model is
the D x C weight matrix w over one fixed block of random features, and a step is

    r = Phi_B w - Y_B,   g = Phi_B^T r / m,   w -= eta(m) P g

(``solvers.eigenpro.RFFEigenPro.step``). Its row work is Phi_b^T r_b (D x C) and sum r_b^2 on
worker b's rows of the batch: ``RFFRowWorker`` with the residual as the "loss derivative".

* every worker opens X itself and builds the in-process fit's ``stream.BatchStream`` (same seed,
  batch size and window), so batch t holds the same rows; worker w of W takes rows
  ``[w B / W, (w + 1) B / W)`` of it. X never passes through the client; the encoded targets
  (n x C, in memory) are sent once per fit;
* per step the client sends w to every worker, each returns its partial Phi_b^T r_b, its sum of
  squared residuals and its row count; the client adds them in worker order, divides by m and
  applies the preconditioner P and the step eta(m) exactly as in-process
  (``RFFEigenPro._step_spread``). The workers keep no model state besides the feature block
  (drawn from the seed), so a lost worker costs only a restart of the step's call on the workers
  left;
* set-up stays on the client: the preconditioner's subsample eigensystem (M rows, O(M D^2)) and
  beta's probe rows are read and computed there once per fresh fit, as DSG's EigenPro subsample.

Same model as in-process up to the order of additions inside the sums (float64: decision values
within 1e-9 relative, tests/test_distributed_eigenpro.py); the same model on every run for the
same W. Traffic per step and worker: D C words out and back. Kernel EigenPro
(``method="kernel"``) is not spread: its model holds every training point.
"""

from __future__ import annotations

import uuid

from .distributed_rff import SpreadRFF, _start


class Residual:
    """The square loss as ``RFFRowWorker`` uses it: deriv = r = u - y (EigenPro's residual, not
    a scaled gradient), value = r^2 (summed by the worker: the batch's squared residuals)."""

    name = "residual"

    @staticmethod
    def deriv(u, Y):
        return u - Y

    @staticmethod
    def value(u, Y):
        r = u - Y
        return r * r


class SpreadEigenProRF(SpreadRFF):
    """The client's side: one ``RFFRowWorker`` (residual loss) per dask worker; ``batches(t)``
    for ``run_loop`` gives ``(SpreadRFFRows,)``, which ``RFFEigenPro.step`` takes for the spread
    step."""

    def _launch(self, workers: list[str], model=None) -> None:
        self.workers, self.W = list(workers), len(workers)
        self.key = f"eigenpro-rf-{uuid.uuid4().hex}"
        futures = [self.client.submit(
            _start, self.key, self.X, self.y_remote, self.stream_kw, self.solver.blocks,
            Residual(), (w, self.W), self._probe, workers=[addr], allow_other_workers=False,
            pure=False)
            for w, addr in enumerate(workers)]
        self._collect(futures)

    def _method_name(self) -> str:
        return "EigenPro-RF"


__all__ = ["Residual", "SpreadEigenProRF"]
