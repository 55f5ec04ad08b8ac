"""Exact kernel ridge regression by a direct solve (the reference solution of the random binning,
DSG and EigenPro papers).

    min_f  sum_i ||f(x_i) - y_i||^2 + ridge ||f||_H^2   =>   f = sum_i c_i k(x_i, .),
    (K + ridge I) c = Y,

with ridge = n nu, scikit-learn's ``KernelRidge(alpha)``, for DSG's nu of the averaged objective
(nu/2)||f||^2 + (1/2n) sum (f - y)^2. Needs the n x n kernel matrix: O(n^2)
memory, O(n^3) time.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import scipy.linalg

from ._common import DeviceState, kernel_apply

BLOCK = 1024  # rows per panel of the blocked Cholesky: GEMM-sized, panels of n x 1024


def cholesky_solve_inplace(A: np.ndarray, Y: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Solve A c = Y for symmetric positive definite A by a blocked right-looking Cholesky that
    overwrites A's lower triangle with L (A = L L^T), then two blocked triangular solves. Extra
    memory: one block x n panel. Raises LinAlgError when A is not positive definite.
    """
    n = A.shape[0]
    Y = np.array(Y, dtype=np.result_type(A.dtype, Y.dtype), copy=True)
    squeeze = Y.ndim == 1
    if squeeze:
        Y = Y[:, None]
    for k in range(0, n, block):
        e = min(k + block, n)
        try:
            A[k:e, k:e] = scipy.linalg.cholesky(A[k:e, k:e], lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            raise np.linalg.LinAlgError(
                f"kernel matrix + ridge I is not positive definite (rows {k}-{e}); "
                "increase reg") from None
        if e == n:
            break
        L11 = A[k:e, k:e]
        # panel: A[e:, k:e] <- A[e:, k:e] L11^-T
        A[e:, k:e] = scipy.linalg.solve_triangular(L11, A[e:, k:e].T, lower=True,
                                                   check_finite=False).T
        P = A[e:, k:e]
        # trailing lower triangle: A[e:, e:] -= P P^T, one row band at a time (GEMM-sized
        # temporaries, never the (n - e)^2 product)
        for r in range(e, n, block):
            r2 = min(r + block, n)
            A[r:r2, e:r2] -= P[r - e:r2 - e] @ P[: r2 - e].T
    # forward: L z = Y
    for k in range(0, n, block):
        e = min(k + block, n)
        rhs = Y[k:e] - A[k:e, :k] @ Y[:k] if k else Y[k:e]
        Y[k:e] = scipy.linalg.solve_triangular(A[k:e, k:e], rhs, lower=True, check_finite=False)
    # backward: L^T c = z
    for k in reversed(range(0, n, block)):
        e = min(k + block, n)
        rhs = Y[k:e] - A[e:, k:e].T @ Y[e:] if e < n else Y[k:e]
        Y[k:e] = scipy.linalg.solve_triangular(A[k:e, k:e], rhs, lower=True, trans="T",
                                               check_finite=False)
    return Y[:, 0] if squeeze else Y


class ExactKRR(DeviceState):
    """Exact kernel ridge regression on the rows X held on the device: (K + alpha I) c = Y
    (module docstring); ``fit`` then ``decision``."""

    _arrays = ("X", "coef")

    def __init__(self, kernel, X, xp: ModuleType):
        self.xp, self.kernel, self.X, self.coef = xp, kernel, X, None

    def fit(self, Y, ridge: float):
        """Solve (K + ridge I) c = Y for ``coef``: blocked in-place Cholesky on the CPU (one n x n
        matrix in memory), ``xp.linalg.solve`` on the GPU."""
        xp = self.xp
        K = self.kernel(self.X)
        K[xp.diag_indices(K.shape[0])] += ridge
        if xp is np:
            self.coef = cholesky_solve_inplace(K, np.asarray(Y))
        else:
            self.coef = xp.linalg.solve(K, Y)
        return self

    def decision(self, A):
        """f(A) = K(A, X) c, in bounded kernel blocks (``kernel_apply``)."""
        return kernel_apply(self.kernel, A, self.X, self.coef, self.xp)
