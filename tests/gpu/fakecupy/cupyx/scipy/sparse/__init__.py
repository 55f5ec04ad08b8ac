"""cupyx.scipy.sparse stand-in: scipy CSR / CSC matrices behind cupyx's rules.

What kernelscale uses of the real module, no more: construction from a scipy matrix (a copy, as
to the device), a cupyx matrix or a dense device array; ``get()`` (the scipy matrix, a host copy);
products with device arrays (``@``, ``*``, ``dot``; numpy operands refused, as by cupy; a
sparse-dense product comes column-major, as cuSPARSE's SpMM writes it) and with sparse matrices;
``multiply``, ``sum``, ``toarray``, ``T``, ``tocsr`` / ``tocsc``, ``astype``, ``copy``, row
selection (slices, numpy or device index arrays) and the ``data`` / ``indices`` / ``indptr``
arrays as device arrays (``data`` writable).
"""
import cupy as _cp
import numpy as _np
import scipy.sparse as _sp


def _refuse(x):
    return TypeError(f"Unsupported type {type(x)}")


def _wrap(m):
    return (csc_matrix if m.format == "csc" else csr_matrix)(m)


class spmatrix:
    format = None
    ndim = 2

    def __init__(self, arg1, shape=None, dtype=None, copy=False):
        if isinstance(arg1, spmatrix):
            m = arg1._m.asformat(self.format, copy=copy)
        elif _sp.issparse(arg1):  # to the device: always a copy
            m = arg1.asformat(self.format, copy=True)
        elif isinstance(arg1, _cp.ndarray) and arg1.ndim == 2:
            m = _sp.csr_matrix(arg1._a).asformat(self.format)
        else:
            raise ValueError("Unsupported initializer format")
        if dtype is not None:
            m = m.astype(dtype, copy=False)
        if m.dtype.char not in "?fdFD":
            raise ValueError("Only bool, float32, float64, complex64 and complex128 are supported")
        self._m = m

    def get(self, stream=None):
        return self._m.copy()

    @property
    def shape(self):
        return self._m.shape

    @property
    def dtype(self):
        return self._m.dtype

    @property
    def nnz(self):
        return self._m.nnz

    @property
    def data(self):
        return _cp.ndarray(self._m.data)

    @data.setter
    def data(self, v):
        if not isinstance(v, _cp.ndarray):
            raise _refuse(v)
        self._m.data = v._a

    @property
    def indices(self):
        return _cp.ndarray(self._m.indices)

    @property
    def indptr(self):
        return _cp.ndarray(self._m.indptr)

    def __len__(self):
        raise TypeError("sparse matrix length is ambiguous; use getnnz() or shape[0]")

    def __repr__(self):
        return f"fakecupyx.{self.format}_matrix{self.shape}"

    def __mul__(self, other):
        if _np.isscalar(other):
            return _wrap(self._m * other)
        if isinstance(other, spmatrix):
            return csr_matrix(self._m @ other._m)
        if isinstance(other, _cp.ndarray):
            if other.ndim == 0:
                return _wrap(self._m * other._a)
            out = _np.asarray(self._m @ other._a)
            return _cp.ndarray(_np.asfortranarray(out) if out.ndim == 2 else out)
        raise _refuse(other)

    def __matmul__(self, other):
        if _np.isscalar(other):
            raise ValueError("Scalar operands are not allowed, use '*' instead")
        return self.__mul__(other)

    def dot(self, other):
        return self * other if _np.isscalar(other) else self @ other

    def multiply(self, other):
        if _np.isscalar(other):
            return _wrap(self._m * other)
        if isinstance(other, spmatrix):
            return csr_matrix(self._m.multiply(other._m))
        if isinstance(other, _cp.ndarray):
            return csr_matrix(_sp.csr_matrix(self._m.multiply(other._a)))
        raise TypeError("expected scalar, dense matrix/vector or csr matrix")

    def sum(self, axis=None, dtype=None):
        return _cp.ndarray(_np.asarray(self._m.sum(axis=axis, dtype=dtype)))

    def toarray(self, order=None, out=None):
        return _cp.ndarray(self._m.toarray(order=order))

    def transpose(self):
        return _wrap(self._m.T)

    @property
    def T(self):
        return self.transpose()

    def tocsr(self, copy=False):
        return csr_matrix(self, copy=copy)

    def tocsc(self, copy=False):
        return csc_matrix(self, copy=copy)

    def asformat(self, format):
        return self if format in (None, self.format) else getattr(self, "to" + format)()

    def astype(self, t):
        return _wrap(self._m.astype(t))

    def copy(self):
        return _wrap(self._m.copy())

    def __getitem__(self, key):
        if isinstance(key, tuple):
            key = tuple(k._a if isinstance(k, _cp.ndarray) else k for k in key)
        elif isinstance(key, _cp.ndarray):
            key = key._a
        return _wrap(self._m[key])


class csr_matrix(spmatrix):
    format = "csr"


class csc_matrix(spmatrix):
    format = "csc"


def issparse(x):
    return isinstance(x, spmatrix)


isspmatrix = issparse


def isspmatrix_csr(x):
    return isinstance(x, csr_matrix)


def isspmatrix_csc(x):
    return isinstance(x, csc_matrix)
