"""Exact kernel ridge regression by a direct solve (the reference solution of papers 002-004).

    min_f  sum_i ||f(x_i) - y_i||^2 + alpha ||f||_H^2   =>   f = sum_i c_i k(x_i, .),
    (K + alpha I) c = Y,

the convention of scikit-learn's ``KernelRidge(alpha)`` (equivalently DSG's nu = alpha / n for the
averaged objective (nu/2)||f||^2 + (1/2n) sum (f - y)^2). Needs the n x n kernel matrix: O(n^2)
memory, O(n^3) time.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import scipy.linalg

from ._common import DeviceState, kernel_apply


class ExactKRR(DeviceState):
    _arrays = ("X", "coef")

    def __init__(self, kernel, X, xp: ModuleType):
        self.xp = xp
        self.kernel = kernel
        self.X = X
        self.coef = None

    def fit(self, Y, alpha: float):
        xp = self.xp
        K = self.kernel(self.X)
        K[xp.diag_indices(K.shape[0])] += alpha
        if xp is np:
            # K is symmetric, so its transpose is the same matrix in Fortran order: LAPACK's
            # Cholesky then works in place (solve() on the C-ordered K copied the n x n matrix,
            # which ran out of memory at n = 36,000 on 24 GB)
            factor = scipy.linalg.cho_factor(K.T, lower=False, overwrite_a=True,
                                             check_finite=False)
            self.coef = scipy.linalg.cho_solve(factor, np.asarray(Y), check_finite=False)
        else:
            self.coef = xp.linalg.solve(K, Y)
        return self

    def decision(self, A):
        return kernel_apply(self.kernel, A, self.X, self.coef, self.xp)
