"""cupyx.scipy.sparse stand-in: a scipy CSR matrix whose products take and give fake device arrays."""
import cupy as _cp
import numpy as _np
import scipy.sparse as _sp


class csr_matrix:
    def __init__(self, m):
        if isinstance(m, csr_matrix):
            m = m._m
        if not _sp.issparse(m):
            raise TypeError(f"Unsupported type {type(m)}")
        self._m = m

    def _mul(self, other):
        if isinstance(other, _np.ndarray):
            raise TypeError(f"Unsupported type {type(other)}")
        if isinstance(other, _cp.ndarray):
            return _cp.ndarray(_np.asarray(self._m @ other._a))
        return csr_matrix(self._m @ other)

    __matmul__ = _mul
    dot = _mul

    @property
    def T(self):
        return csr_matrix(self._m.T)

    @property
    def shape(self):
        return self._m.shape

    @property
    def nnz(self):
        return self._m.nnz

    @property
    def data(self):
        return _cp.ndarray(self._m.data)

    @data.setter
    def data(self, v):
        self._m.data = v._a

    def tocsr(self):
        return csr_matrix(self._m.tocsr())

    def copy(self):
        return csr_matrix(self._m.copy())

    def sum(self, axis=None):
        return _cp.ndarray(_np.asarray(self._m.sum(axis=axis)))

    def __getitem__(self, key):
        return csr_matrix(self._m[key])
