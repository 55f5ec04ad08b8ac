"""Nyström approximation + ridge regression (Williams, Seeger, Using the Nyström Method to Speed Up
Kernel Machines, NIPS 2001).

Landmarks Z (m rows sampled without replacement with the model seed); K_ZZ = U diag(s) U^T, keeping
eigenvalues s_j > rcond * s_1, gives the feature map phi(x) = T^T k(Z, x), T = U_r diag(s_r)^{-1/2},
whose inner products reproduce the Nyström kernel K_xZ K_ZZ^+ K_Zx. The ridge problem

    min_w ||Phi w - Y||^2 + ridge ||w||^2            (ridge = n nu, scikit-learn's KernelRidge alpha)

is solved through its r x r normal equations, accumulated over row chunks of X, so X is read
chunk by chunk and never held. With ``rows`` (numpy backend; e.g. ``spread.ClusterRows`` on a dask
client) the chunks' products are computed by ``rows.sum`` and added in row order: the same sums as
the local loop, bit for bit in float64. With m = n landmarks this is exact kernel ridge regression:
Phi Phi^T = K, so the fit equals K (K + ridge I)^{-1} Y.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import scipy.linalg

from ..backend import asarray, to_numpy
from ..stream import check_finite_rows, iter_row_chunks
from ._common import DeviceState, kernel_apply


class NystromRidge(DeviceState):
    """Nyström ridge over landmarks Z (module docstring); the constructor eigendecomposes K_ZZ,
    ``fit`` solves the ridge and keeps coefficients over Z."""

    _arrays = ("Z", "coef")

    def __init__(self, kernel, Z, xp: ModuleType, rcond: float = 1e-12):
        self.xp = xp
        self.kernel = kernel
        self.Z = Z
        s, U = xp.linalg.eigh(kernel(Z))
        keep = s > rcond * float(s.max())
        self.rank = int(keep.sum())
        self._T = U[:, keep] / xp.sqrt(s[keep])[None, :]
        self.coef = None

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_T", None)
        return state

    def fit(self, X, Y, ridge: float, dtype, chunk_rows: int = 8192, rows=None):
        """Accumulate Phi^T Phi and Phi^T Y over chunks, solve the ridge system on the host.
        ``rows``: runs the chunks' products (``rows.sum``; numpy backend), None: this process."""
        xp = self.xp
        r = self.rank
        if rows is not None and xp is np:
            AB = rows.sum(_NormalBlock(self.kernel, self.Z, self._T, dtype), X, Y,
                          chunk_rows=chunk_rows)
            A, B = AB[:, :r], AB[:, r:]
        else:
            A = xp.zeros((r, r), dtype=dtype)
            B = xp.zeros((r, Y.shape[1]), dtype=dtype)
            for lo, block in iter_row_chunks(X, chunk_rows):
                check_finite_rows(block, lo, "X")  # on-disk rows are first seen here
                Phi = self.kernel(asarray(block, xp, dtype), self.Z) @ self._T
                A += Phi.T @ Phi
                B += Phi.T @ xp.asarray(Y[lo:lo + block.shape[0]], dtype=dtype)
        A_h = to_numpy(A).astype(np.float64)
        A_h[np.diag_indices(r)] += ridge
        w = scipy.linalg.solve(A_h, to_numpy(B).astype(np.float64), assume_a="pos")
        # f = sum_j c_j k(z_j, .) with c = T w: prediction is one kernel product with Z
        self.coef = self._T @ xp.asarray(w, dtype=dtype)
        del self._T
        return self

    def decision(self, A):
        """f(A) = K(A, Z) coef, in bounded kernel blocks (``kernel_apply``)."""
        return kernel_apply(self.kernel, A, self.Z, self.coef, self.xp)


class _NormalBlock:
    """[Phi_b^T Phi_b | Phi_b^T Y_b] of one row block, as a picklable task for the dask cluster
    (the same products as the local loop, so the row-ordered sum is the same)."""

    def __init__(self, kernel, Z, T, dtype):
        self.kernel, self.Z, self.T, self.dtype = kernel, Z, T, dtype

    def __call__(self, block, Yb, lo):
        block = np.asarray(block)
        check_finite_rows(block, lo, "X")
        Phi = self.kernel(np.asarray(block, dtype=self.dtype), self.Z) @ self.T
        return np.concatenate([Phi.T @ Phi, Phi.T @ np.asarray(Yb, dtype=self.dtype)], axis=1)
