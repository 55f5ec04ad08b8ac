"""Nyström approximation + ridge regression (Williams, Seeger, Using the Nyström Method to Speed Up
Kernel Machines, NIPS 2001).

Landmarks Z (m rows sampled without replacement with the model seed). The ridge problem over
f = sum_j c_j k(z_j, .),

    min_c ||K_nZ c - Y||^2 + ridge c^T K_ZZ c      (ridge = n nu, scikit-learn's KernelRidge alpha),

is solved in one of two ways, X read chunk by chunk and never held:

* ``method="direct"``: K_ZZ = U diag(s) U^T, keeping eigenvalues s_j > rcond * s_1, gives the
  feature map phi(x) = T^T k(Z, x), T = U_r diag(s_r)^{-1/2}, whose inner products reproduce the
  Nyström kernel K_xZ K_ZZ^+ K_Zx; the r x r normal equations (Phi^T Phi + ridge I) w = Phi^T Y
  are accumulated over row chunks and solved once (c = T w): one pass, O(n m (d + r)) flops;
* ``method="cg"``: FALKON (Rudi, Carratino, Rosasco, "FALKON: An Optimal Large Scale Kernel
  Method", NIPS 2017, Alg. 1): conjugate gradients on (K_nZ^T K_nZ + ridge K_ZZ) c = K_nZ^T Y
  preconditioned by B = T^-1 A^-1, T^T T = K_ZZ + m eps I and A^T A = (n / m) T T^T + ridge I
  (Cholesky factors), for which B^T (n / m K_ZZ^2 + ridge K_ZZ) B = I; each step is one pass
  K_nZ^T (K_nZ V), O(n m (d + C)) flops for C right-hand sides, the normal equations never
  formed. CG stops when every column's relative residual is below ``tol``.

``auto_method`` picks the one that costs less. With ``rows`` (numpy backend; e.g.
``spread.ClusterRows`` on a dask client) the chunks' products are computed by ``rows.sum`` and
added in row order: the same sums as the local loop, bit for bit in float64. With m = n
landmarks this is exact kernel ridge regression: the fit equals K (K + ridge I)^{-1} Y.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import scipy.linalg

from ..backend import asarray, is_sparse, to_numpy
from ..budget import kernel_matrix_bytes
from ..parallel import blockwise
from ..stream import check_finite_rows, iter_row_chunks
from ._common import DeviceState, kernel_apply
from .rb_cg import conjugate_gradients

METHODS = ("direct", "cg")
HOST_PIECE_BYTES = 4 << 20  # kernel values per piece of a CG pass on the host (docs/design.md)
GROUP_PIECES = 8  # pieces per thread's share of a CG pass on the host
KERNEL_VALUE_FLOPS = 250  # a kernel value's exp and memory traffic, in GEMM flops (docs/design.md)
STORED_VALUE_FLOPS = 16  # a kept kernel value's two memory-bound products, per output (docs/design.md)


def auto_method(d_eff: float, m: int, n_outputs: int, max_iter: int, host: bool = True) -> str:
    """"cg" when its ``max_iter`` passes beyond the first cost less than what the direct solve
    adds to one pass, the products K T and Phi^T Phi (3 m flops per kernel value, plus 8 m^2 / n
    for the eigendecomposition against CG's two Cholesky factors: omitted, n >> m); else
    "direct". Costs per kernel value, in GEMM flops: on the host (``host``) CG keeps K_nZ from
    its first pass and a later pass reads it, ``STORED_VALUE_FLOPS`` per output; on a GPU a pass
    forms K_nZ again, ``KERNEL_VALUE_FLOPS`` for its evaluation and memory traffic, 2 ``d_eff``
    for the distances and 4 C for K V and K^T U (C = ``n_outputs``). ``d_eff``: features per
    row (non-zeros per row for sparse X). The choice assumes the kept K_nZ on the host even where
    memory or dask rows make CG form it again (slower, the same model)."""
    per_pass = (STORED_VALUE_FLOPS * n_outputs if host
                else KERNEL_VALUE_FLOPS + 2 * d_eff + 4 * n_outputs)
    return "cg" if max_iter * per_pass < 3 * m else "direct"


class NystromRidge(DeviceState):
    """Nyström ridge over landmarks Z (module docstring): ``fit`` solves the ridge and keeps
    coefficients ``coef`` over Z."""

    _arrays = ("Z", "coef")

    def __init__(self, kernel, Z, xp: ModuleType, rcond: float = 1e-12):
        self.xp, self.kernel, self.Z, self.rcond, self.coef = xp, kernel, Z, rcond, None

    def fit(self, X, Y, ridge: float, dtype, chunk_rows: int = 8192, rows=None,
            method: str = "direct", tol: float = 1e-3, max_iter: int = 30,
            memory_budget: float | None = None):
        """Solve the ridge system by ``method`` (module docstring); ``tol`` and ``max_iter`` are
        CG's. ``rows``: runs the chunks' products (``rows.sum``; numpy backend), None: this
        process. CG on the host with local rows keeps K_nZ from its first pass, instead of
        forming it in every pass, when its n x m values fit
        ``budget.kernel_matrix_bytes(memory_budget)`` (as FALKON's implementation does where
        memory allows): the same iterates. Sets ``coef``, ``method``, ``rank`` (eigenvalues
        kept; m for "cg"), ``n_iter`` (CG iterations; 0 for "direct") and ``history`` (CG's
        residual per iteration)."""
        self.method, self.n_iter, self.history = method, 0, {}
        xp, rows = self.xp, rows if self.xp is np else None
        if method == "cg":
            return self._fit_cg(X, Y, ridge, dtype, chunk_rows, rows, tol, max_iter,
                                memory_budget)
        s, U = xp.linalg.eigh(self.kernel(self.Z))
        keep = s > self.rcond * float(s.max())
        r = self.rank = int(keep.sum())
        T = U[:, keep] / xp.sqrt(s[keep])[None, :]
        del s, U
        AB = _chunk_sum(_NormalBlock(self.kernel, self.Z, T, dtype, xp), X, Y, chunk_rows, rows)
        A_h = np.ascontiguousarray(AB[:, :r])
        A_h[np.diag_indices(r)] += ridge
        w = scipy.linalg.solve(A_h, AB[:, r:], assume_a="pos")
        # f = sum_j c_j k(z_j, .) with c = T w: prediction is one kernel product with Z
        self.coef = T @ xp.asarray(w, dtype=dtype)
        return self

    def _fit_cg(self, X, Y, ridge, dtype, chunk_rows, rows, tol, max_iter, memory_budget):
        xp, Z = self.xp, self.Z
        n, m = int(X.shape[0]), int(Z.shape[0])
        self.rank = m

        fits = (xp is np and rows is None
                and n * m * np.dtype(dtype).itemsize <= kernel_matrix_bytes(memory_budget))
        store = np.empty((n, m), dtype=dtype) if fits else None

        def gram(V):
            """K_nZ^T (K_nZ V), or K_nZ^T Y for V None, summed over row chunks (host float64);
            with ``store``, the first (V None) fills it and the others read it instead of X."""
            task = _KernelProducts(self.kernel, Z, V, dtype, xp, store)
            return _chunk_sum(task, store if task.stored else X, Y if V is None else None,
                              chunk_rows, rows)

        # the preconditioner on the host in float64, whatever the device and dtype
        Kzz = np.asarray(to_numpy(self.kernel(Z)), dtype=np.float64)
        Kzz[np.diag_indices(m)] += m * np.finfo(np.float64).eps
        T = scipy.linalg.cholesky(Kzz, lower=False, overwrite_a=True)  # T^T T = K_ZZ + m eps I
        A = T @ T.T
        A *= n / m
        A[np.diag_indices(m)] += ridge
        A = scipy.linalg.cholesky(A, lower=False, overwrite_a=True)  # A^T A = n/m T T^T + ridge

        solve = scipy.linalg.solve_triangular

        def Bt(v):  # A^-T T^-T v
            return solve(A, solve(T, v, trans="T"), trans="T")

        def apply(u):  # B^T (K_nZ^T K_nZ + ridge K_ZZ) B u, B = T^-1 A^-1, T^T T for K_ZZ
            Ainv_u = solve(A, u)
            K_part = Bt(gram(xp.asarray(solve(T, Ainv_u), dtype=dtype)))
            return K_part + ridge * solve(A, Ainv_u, trans="T")

        beta, self.history, _ = conjugate_gradients(apply, Bt(gram(None)), tol=tol,
                                                    max_iter=max_iter)
        self.n_iter = len(self.history["iter"]) - 1
        self.coef = xp.asarray(solve(T, solve(A, beta)), dtype=dtype)
        return self

    def decision(self, A):
        """f(A) = K(A, Z) coef, in bounded kernel blocks (``kernel_apply``)."""
        return kernel_apply(self.kernel, A, self.Z, self.coef, self.xp)


def _chunk_sum(task, X, Y, chunk_rows: int, rows=None) -> np.ndarray:
    """The sum over row chunks b of X of ``task(X_b, Y_b, lo=first row)`` as host float64:
    ``rows.sum`` (a dask cluster, float64 in row order) or this process's loop (in the task's
    dtype, the same order)."""
    if rows is not None:
        return rows.sum(task, X, Y, chunk_rows=chunk_rows)
    total = None
    for lo, block in iter_row_chunks(X, chunk_rows):
        part = task(block, None if Y is None else Y[lo:lo + block.shape[0]], lo=lo)
        total = part if total is None else total + part
    return to_numpy(total).astype(np.float64)


class _NormalBlock:
    """[Phi_b^T Phi_b | Phi_b^T Y_b] of one row block, Phi_b = k(X_b, Z) T: a picklable task for
    the dask cluster and the local loop alike."""

    def __init__(self, kernel, Z, T, dtype, xp):
        self.kernel, self.Z, self.T, self.dtype, self.xp = kernel, Z, T, dtype, xp

    def __call__(self, block, Yb, lo=0):
        check_finite_rows(block, lo, "X")  # on-disk rows are first seen here
        xp = self.xp
        Phi = self.kernel(asarray(block, xp, self.dtype), self.Z) @ self.T
        return xp.concatenate([Phi.T @ Phi, Phi.T @ xp.asarray(Yb, dtype=self.dtype)], axis=1)


class _KernelProducts:
    """K_b^T (K_b V), or K_b^T Y_b for V None, of one row block b, K_b = k(X_b, Z): a picklable
    task for the dask cluster and the local loop alike. A GPU takes the block whole; the host
    takes it in pieces of ``HOST_PIECE_BYTES`` of kernel values (dense rows: ``Kernel.tile``),
    groups of ``GROUP_PIECES`` pieces shared out over the ``parallel`` threads and their sums
    added in group order (the same bits at any thread count). ``store``: an (n, m) host array
    of K_nZ, filled by the pass with V None; the passes with V then take its row blocks as
    their blocks (``stored``) instead of X's, the same values in the same order."""

    def __init__(self, kernel, Z, V, dtype, xp, store=None):
        self.kernel, self.Z, self.V, self.dtype, self.xp = kernel, Z, V, dtype, xp
        self.store, self.stored = store, store is not None and V is not None

    def _piece(self, rows, Yb, at):
        xp = self.xp
        if self.stored:
            K = rows
        elif xp is np and not is_sparse(rows):
            K = self.kernel.tile(self.kernel.tile_rows(asarray(rows, np, self.dtype)), self.Z)
        else:
            K = self.kernel(asarray(rows, xp, self.dtype), self.Z)
        if self.store is not None and self.V is None:
            self.store[at:at + K.shape[0]] = K
        return K.T @ (K @ self.V if self.V is not None else xp.asarray(Yb, dtype=self.dtype))

    def __call__(self, block, Yb=None, lo=0):
        if not self.stored:
            check_finite_rows(block, lo, "X")
        if self.xp is not np:
            return self._piece(block, Yb, lo)
        n, m = int(block.shape[0]), int(self.Z.shape[0])
        step = max(1, HOST_PIECE_BYTES // (m * np.dtype(self.dtype).itemsize))
        starts = range(0, n, step)
        groups = range(0, len(starts), GROUP_PIECES)
        cols = self.V.shape[1] if self.V is not None else Yb.shape[1]
        sums = np.zeros((max(1, len(groups)), m, cols), dtype=self.dtype)

        def run(g0, g1):
            for g in range(g0, g1):
                for a in starts[groups[g]:groups[g] + GROUP_PIECES]:
                    sums[g] += self._piece(block[a:a + step],
                                           None if Yb is None else Yb[a:a + step], lo + a)

        blockwise(run, len(groups), 1)
        return sums.sum(axis=0)  # in group order
