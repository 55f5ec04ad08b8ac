"""A CSR matrix on the GPU whose products are the same bit for bit on every run.

One thread sums one output entry over its row's nonzeros in storage order. Used by ``rb_cg`` on
cupy; ``from_scipy`` returns ``None`` where the namespace has no RawKernel (tests/gpu/fakecupy).
"""

from __future__ import annotations

import functools

_SOURCE = r"""
extern "C" __global__ void csr_rows(const long long n_rows, const int C,
                                    const long long* indptr, const int* indices,
                                    const double* data, const double* P, double* out) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows * C) return;
    long long row = t / C;
    int c = (int)(t % C);
    double s = 0.0;
    for (long long k = indptr[row]; k < indptr[row + 1]; ++k)
        s += data[k] * P[(long long)indices[k] * C + c];
    out[t] = s;
}
"""


@functools.cache
def _kernel():
    import cupy

    return cupy.RawKernel(_SOURCE, "csr_rows")


class RowwiseCSR:
    """float64 CSR matrix on the device: ``A @ P`` for dense (n,) or (n, C) P, ``sum(axis=1)``,
    ``copy()`` and a writable ``data`` (what ``ridge_cg`` uses)."""

    def __init__(self, data, indices, indptr, shape, xp):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = tuple(shape)
        self.xp = xp

    @classmethod
    def from_scipy(cls, m, xp):
        """A scipy sparse matrix copied to the device as float64 CSR; None where ``xp`` has no
        RawKernel (the caller then falls back to cupyx's matrices)."""
        if not hasattr(xp, "RawKernel"):
            return None
        m = m.tocsr()
        return cls(xp.asarray(m.data, dtype=xp.float64), xp.asarray(m.indices, dtype=xp.int32),
                   xp.asarray(m.indptr, dtype=xp.int64), m.shape, xp)

    def copy(self):
        """Copy with its own ``data`` (indices and indptr shared: only ``data`` is written)."""
        return RowwiseCSR(self.data.copy(), self.indices, self.indptr, self.shape, self.xp)

    def __matmul__(self, P):
        xp = self.xp
        vec = P.ndim == 1
        P = xp.ascontiguousarray(P.reshape(-1, 1) if vec else P, dtype=xp.float64)
        n, C = self.shape[0], P.shape[1]
        out = xp.empty((n, C), dtype=xp.float64)
        threads = 256
        _kernel()((-(-n * C // threads),), (threads,),
                  (xp.int64(n), xp.int32(C), self.indptr, self.indices, self.data, P, out))
        return out.ravel() if vec else out

    def sum(self, axis=None):
        """Row sums (axis=1 only), as a product with ones: deterministic like ``@``."""
        if axis != 1:
            raise ValueError("RowwiseCSR.sum supports axis=1 only")
        return self @ self.xp.ones(self.shape[1], dtype=self.xp.float64)
