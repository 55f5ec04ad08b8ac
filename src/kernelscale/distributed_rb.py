"""Random Binning features built and kept on the dask workers, for RB-CG (paper 002, §3.1).

Under ``distributed.use_client`` an RB-CG fit never holds X or its features Z on the client:

1. each row block of X is read and hashed by a task on a worker (``kernels.random_binning
   ._block_hashes``; on-disk X is read there, from the workers' file system), and stays there;
2. the client gathers only each block's per-grid unique bins and merges them into the sorted
   vocabulary (the same as the in-process ``fit_transform``'s: sorted unique bins per grid);
3. each block's CSR rows Z_b are built from its hashes and the vocabulary, and stacked into
   one row block per worker (consecutive row blocks, placed on that worker while it lives);
4. CG's products Z^T (Z P) are sums of the workers' Z_w^T (Z_w P) (``solvers.rb_cg
   ._normal_block``), added on the client in row order, as are Z^T Y and Jacobi's diagonal.

Per CG iteration the client sends P (D x C float64) to each of the W workers and gets D x C
back from each: 16 W D C bytes, the same as the one-machine ``_ClusterNormal`` with its
client-built Z; the set-up sends each worker its part of the vocabulary's bins (one pass) and
gets back each block's unique bins.

Every block is a task with its lineage (read -> hashes -> Z_b), not scattered data, so a worker
lost mid-fit costs only time: dask recomputes its blocks on the workers left (reading X again)
and the iteration's products wait for them. The fit says so in one warning line. The model is
the same as the in-process fit's up to the order of floating-point additions (``ridge_cg``).
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["SpreadRB"]


def _grid_uniques(H: np.ndarray) -> list[np.ndarray]:
    """Sorted unique bin hashes of each grid (column) of one block's (rows, R) hashes."""
    return [np.unique(H[:, r]) for r in range(H.shape[1])]


def _vocabulary(keys: np.ndarray, offsets: np.ndarray):
    """The fitted vocabulary, as a task result: blocks depend on it like on any task (a lost
    copy is recomputed, unlike scattered data)."""
    return keys, offsets


def _block_csr(H: np.ndarray, vocabulary, n_grids: int):
    """Z_b, the CSR rows of one block, from its hashes and the vocabulary."""
    from .kernels.random_binning import _lookup, columns_csr

    keys, offsets = vocabulary
    return columns_csr(_lookup(H, keys, offsets), n_grids, int(offsets[-1]))


def _stack(*blocks):
    import scipy.sparse as sp

    return sp.vstack(blocks, format="csr") if len(blocks) > 1 else blocks[0]


def _block_zty(Zb, Yb: np.ndarray) -> np.ndarray:
    return Zb.T @ Yb


def _block_diag(Zb) -> np.ndarray:
    """diag(Z_b^T Z_b): the squared entries summed per column."""
    Z2 = Zb.copy()
    Z2.data **= 2
    return np.asarray(Z2.sum(axis=0)).ravel()


class SpreadRB:
    """RB features of X on the workers of ``client``: fits ``features``' vocabulary (as
    ``RandomBinning.fit_transform`` does) and keeps Z's row blocks there."""

    def __init__(self, client, features, X, chunk_rows: int, check_finite: bool = True):
        import dask

        from .distributed import as_dask, check_workers_read_once
        from .kernels.random_binning import _block_hashes

        self.client = client
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the dask cluster has no workers")
        self.workers = set(workers)
        self.warned = False
        self.bytes_sent = self.bytes_received = self.round_trips = 0  # CG products' payloads
        check_workers_read_once(client, X)  # zarr would read a missing store as zeros
        Xd = as_dask(X, chunk_rows)
        n, d = int(X.shape[0]), int(X.shape[1])
        sizes = [int(c) for c in Xd.chunks[0]]
        self.bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        delta, u, hseed = features.grids(d)
        hashes = [dask.delayed(_block_hashes, pure=False)(b, lo=int(lo), delta=delta, u=u,
                                                          hseed=hseed, check_finite=check_finite)
                  for b, lo in zip(Xd.to_delayed().ravel(), self.bounds[:-1], strict=True)]
        H = client.compute(hashes)
        uniques = self._gather([client.submit(_grid_uniques, h, pure=False) for h in H])
        R = features.n_grids
        per_grid = [np.unique(np.concatenate([u_b[r] for u_b in uniques])) for r in range(R)]
        features.offsets_ = np.zeros(R + 1, dtype=np.int64)
        features.offsets_[1:] = np.cumsum([len(k) for k in per_grid])
        features.keys_ = np.concatenate(per_grid)
        features.n_features_out_ = int(features.offsets_[-1])
        features.kappa_ = features.n_features_out_ / R
        features.n_features_in_ = d
        self.n_rows, self.n_features_out = n, features.n_features_out_
        vocab = client.submit(_vocabulary, features.keys_, features.offsets_, pure=False)
        Zb = [client.submit(_block_csr, h, vocab, R, pure=False) for h in H]
        # consecutive row blocks per worker, first placed there (a lost worker's share moves)
        share = np.linspace(0, len(Zb), min(len(workers), len(Zb)) + 1).astype(int)
        self.bounds = self.bounds[share]
        self.blocks = [client.submit(_stack, *Zb[a:b], workers=[w], allow_other_workers=True,
                                     pure=False)
                       for w, a, b in zip(workers, share[:-1], share[1:], strict=False)]
        del H, vocab, Zb  # the blocks keep their lineage: the scheduler recomputes a lost one
        self._gather(self.blocks[:1])  # one block built: the set-up's errors surface here

    def _gather(self, futures) -> list:
        """The futures' results in order (the first failure in row-block order is raised), with
        one warning the first time a worker of the fit has left the cluster."""
        try:
            out = self.client.gather(futures)
        except Exception:
            for f in futures:
                if f.status == "error":
                    f.result()
            raise
        alive = set(self.client.scheduler_info()["workers"])
        lost = sorted(self.workers - alive)
        if lost and not self.warned:
            self.warned = True
            warnings.warn(f"RB-CG lost dask worker {', '.join(lost)}; its row blocks were "
                          f"read and built again on the {len(alive)} worker(s) left",
                          RuntimeWarning, stacklevel=3)
        return out

    def _sum(self, fn, *args) -> np.ndarray:
        """sum over row blocks b of fn(Z_b, *args_b), added in block order."""
        parts = self._gather([self.client.submit(fn, b, *[a[i] for a in args], pure=False)
                              for i, b in enumerate(self.blocks)])
        total = np.array(parts[0], copy=True)
        for part in parts[1:]:
            total += part
        return total

    def zty(self, Y: np.ndarray) -> np.ndarray:
        """Z^T Y (D x C): each block's rows of Y go with its task."""
        Y = np.asarray(Y, dtype=np.float64)
        pieces = [Y[lo:hi] for lo, hi in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        return self._sum(_block_zty, pieces)

    def diag(self) -> np.ndarray:
        """diag(Z^T Z) (Jacobi's preconditioner)."""
        return self._sum(_block_diag)

    def normal(self, P: np.ndarray) -> np.ndarray:
        """Z^T (Z P)."""
        from .solvers.rb_cg import _normal_block

        self.bytes_sent += len(self.blocks) * P.nbytes
        self.bytes_received += len(self.blocks) * P.nbytes
        self.round_trips += 1
        return self._sum(_normal_block, [P] * len(self.blocks))

    def close(self) -> None:
        """Release the blocks on the workers."""
        self.client.cancel(self.blocks)
        self.blocks = []
