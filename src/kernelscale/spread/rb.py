"""Random Binning features built and kept on dask workers, for RB-CG (Wu, Chen, Yen, Yan,
"Revisiting Random Binning Features: Fast Convergence and Strong Parallelizability", KDD 2016,
Algorithm 1 and §3.1): ``SpreadRB`` fits the vocabulary of a ``kernels.random_binning.RandomBinning``
on X as its ``fit_transform`` does, each ``RBPart`` hashing consecutive row blocks of X, keeps Z's
rows in those parts and gives ``solvers.rb_cg.ridge_cg`` the sums over them in row order."""

from __future__ import annotations

import warnings

import numpy as np

from .cluster import add_in_order, as_dask, check_workers_read_once
from .workers import Spread


class RBPart:
    """On a worker: row blocks ``bounds`` (consecutive; the rows of X, which holds rows from
    ``offset`` on) hashed by ``features`` (``RandomBinning.hashes``; a bad row is named by its
    row in the whole X), then their features Z (CSR, the blocks stacked; ``build``)."""

    def __init__(self, X, offset: int, bounds, features, check_finite: bool):
        from ..stream import check_finite_rows, read_rows

        self.H = []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            block = np.asarray(read_rows(X, int(lo) - offset, int(hi) - offset))
            if check_finite:
                check_finite_rows(block, int(lo), "X")
            self.H.append(features.hashes(block))
        self.Z = None

    def uniques(self) -> list[np.ndarray]:
        """Sorted unique bin hashes of each grid over this part's rows."""
        return [np.unique(np.concatenate([H[:, r] for H in self.H]))
                for r in range(self.H[0].shape[1])]

    def build(self, features) -> None:
        """Z of this part's rows with the fitted vocabulary of ``features`` (the hashes are
        dropped)."""
        if self.Z is None:
            self.Z, self.H = features.transform_hashes(self.H), None

    def zty(self, Y: np.ndarray) -> np.ndarray:
        return self.Z.T @ Y

    def diag(self) -> np.ndarray:
        """diag(Z^T Z) of this part's rows: the squared entries summed per column."""
        Z2 = self.Z.copy()
        Z2.data **= 2
        return np.asarray(Z2.sum(axis=0)).ravel()

    def normal(self, P: np.ndarray) -> np.ndarray:
        return self.Z.T @ (self.Z @ P)

    def close(self) -> None:
        self.H = self.Z = None


class SpreadRB(Spread):
    """RB features of X on the workers of ``client``: fits the vocabulary of ``features`` and
    keeps Z in one ``RBPart`` per worker, each holding consecutive row blocks of X (of
    ``chunk_rows`` rows, default: X's own chunks); the products are sums over the parts, in row
    order (the traffic counts ``normal`` only). A lost worker: its parts are read and built again
    on the workers left, with the same row blocks (one warning line)."""

    name = "RB-CG"

    def __init__(self, client, features, X, chunk_rows: int, check_finite: bool = True):
        super().__init__(client)
        check_workers_read_once(client, X)  # zarr would read a missing store as zeros
        sizes = [int(c) for c in as_dask(X, chunk_rows).chunks[0]]
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        share = np.linspace(0, len(sizes), min(self.W, len(sizes)) + 1).astype(int)
        self.blocks = [bounds[a:b + 1] for a, b in zip(share[:-1], share[1:], strict=True)]
        self.bounds = bounds[share]  # the parts' first rows, and n
        self.X, self.features, self.check_finite = X, features, check_finite
        self.n_rows, d = int(X.shape[0]), int(X.shape[1])
        self.launch(self.workers[:len(self.blocks)])
        uniques = self.gather("uniques", count=False)
        features.fit_vocabulary([np.unique(np.concatenate([u[r] for u in uniques]))
                                 for r in range(features.n_grids)], d)
        self.n_features_out = features.n_features_out_
        self.gather("build", features, count=False)

    def _part(self, i: int) -> tuple:
        lo, hi = int(self.bounds[i]), int(self.bounds[i + 1])
        held = isinstance(self.X, np.ndarray)  # in memory: the part's rows only go with it
        X, offset = (self.X[lo:hi], lo) if held else (self.X, 0)
        return RBPart, X, None, offset, self.blocks[i], self.features, self.check_finite

    def _recover(self, lost: list[str], method: str, args: tuple) -> tuple:
        left = self._left(lost)
        moved = [i for i, w in enumerate(self.workers) if w in lost]
        for j, i in enumerate(moved):
            self.workers[i] = left[j % len(left)]
        self._start(moved)
        if hasattr(self.features, "keys_"):  # the vocabulary is fitted: Z again
            self._collect([self.call(i, "build", self.features) for i in moved])
        warnings.warn(f"RB-CG lost dask worker {', '.join(lost)}; its row blocks were read and "
                      f"built again on the {len(left)} worker(s) left", RuntimeWarning,
                      stacklevel=3)
        return args

    def zty(self, Y: np.ndarray) -> np.ndarray:
        """Z^T Y (D x C): each part gets its rows of Y."""
        Y = np.asarray(Y, dtype=np.float64)
        pieces = [(Y[lo:hi],) for lo, hi in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        return add_in_order(self.gather("zty", each=pieces, count=False))

    def diag(self) -> np.ndarray:
        """diag(Z^T Z) (Jacobi's preconditioner)."""
        return add_in_order(self.gather("diag", count=False))

    def normal(self, P: np.ndarray) -> np.ndarray:
        """Z^T (Z P)."""
        return add_in_order(self.gather("normal", P))
