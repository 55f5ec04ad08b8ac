"""Fused GPU kernels: one-pass element-wise finishes of feature and kernel blocks
(ElementwiseKernel), and weighted sums of Fourier feature blocks that never hold the feature
matrix (RawKernel). Each function does its work and returns True, or False (nothing done) on
numpy or where the namespace lacks the kernel type (tests/gpu/fakecupy)."""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def _kernels():
    import cupy

    cos = cupy.ElementwiseKernel("T b, T c", "T z", "z = c * cos(z + b)", "kernelscale_cos_features")
    gauss = cupy.ElementwiseKernel(
        "T xx, T yy, T c", "T g", "g = exp(c * fmax(xx + yy - 2 * g, (T)0))", "kernelscale_gauss")
    sqdist = cupy.ElementwiseKernel(
        "T xx, T yy", "T g", "g = fmax(xx + yy - 2 * g, (T)0)", "kernelscale_sqdist")
    return cos, gauss, sqdist


def _usable(xp) -> bool:
    return xp.__name__ == "cupy" and hasattr(xp, "ElementwiseKernel")


def cos_features(Z, b, c, xp) -> bool:
    """Z <- c cos(Z + b) in place (b broadcast over rows); False where not available."""
    if not _usable(xp):
        return False
    _kernels()[0](b.astype(Z.dtype, copy=False), Z.dtype.type(c), Z)
    return True


def sq_distances(G, xx, yy, xp, exp_scale=None) -> bool:
    """G <- max(xx_i + yy_j - 2 G_ij, 0), then exp(exp_scale * G) when exp_scale is given, in one
    pass in place; False where not available."""
    if not _usable(xp):
        return False
    _, gauss, sqdist = _kernels()
    xx, yy = xx.astype(G.dtype, copy=False)[:, None], yy.astype(G.dtype, copy=False).reshape(1, -1)
    gauss(xx, yy, G.dtype.type(exp_scale), G) if exp_scale is not None else sqdist(xx, yy, G)
    return True


# -- sums of Fourier feature blocks without their feature matrices: one CUDA thread per row sums
# the terms of its split (FT features' (w, b, coef) staged in shared memory); the splits' partial
# sums are added in a fixed order afterwards (no atomics).
FOURIER_SUM_MAX_D = 64  # x_i is held in registers
FOURIER_SUM_MAX_C = 16
_ROWS_PER_BLOCK = 256
_SHARED_BYTES = 32 * 1024
_TYPE_NAMES = {"float32": "float", "float64": "double"}

_FOURIER_SUM = r"""
typedef __T__ T;
#define COS __COS__
#define D __D__
#define C __C__
#define FT __FT__
extern "C" __global__ void fourier_sum(const T* __restrict__ X, const int n,
    const T* __restrict__ Wt, const T* __restrict__ b, const int F,
    const int* __restrict__ ks, const T* __restrict__ coefs, const int* __restrict__ limits,
    const int E, const int S, T* __restrict__ part)
{
    __shared__ T Ws[FT * D];
    __shared__ T bs[FT];
    __shared__ T cs[FT * C];
    const int row0 = blockIdx.x * blockDim.x;
    const int i = row0 + threadIdx.x;
    T x[D];
    T acc[C];
#pragma unroll
    for (int k = 0; k < D; ++k) x[k] = (i < n) ? X[(long long)i * D + k] : (T)0;
#pragma unroll
    for (int o = 0; o < C; ++o) acc[o] = (T)0;
    for (int e = blockIdx.y; e < E; e += S) {
        const int lim = limits[e];
        if (lim <= row0) continue;  /* the same for every thread of the block */
        const T* We = Wt + (long long)ks[e] * F * D;
        const T* be = b + (long long)ks[e] * F;
        const T* ce = coefs + (long long)e * F * C;
        const bool active = i < lim;
        T term[C];
#pragma unroll
        for (int o = 0; o < C; ++o) term[o] = (T)0;
        for (int f0 = 0; f0 < F; f0 += FT) {
            const int nf = min(FT, F - f0);
            __syncthreads();
            for (int t = threadIdx.x; t < nf * D; t += blockDim.x) Ws[t] = We[(long long)f0 * D + t];
            for (int t = threadIdx.x; t < nf; t += blockDim.x) bs[t] = be[f0 + t];
            for (int t = threadIdx.x; t < nf * C; t += blockDim.x) cs[t] = ce[(long long)f0 * C + t];
            __syncthreads();
            if (active) {
                for (int j = 0; j < nf; ++j) {
                    T z = (T)0;
#pragma unroll
                    for (int k = 0; k < D; ++k) z += x[k] * Ws[j * D + k];
                    const T cz = COS(z + bs[j]);
#pragma unroll
                    for (int o = 0; o < C; ++o) term[o] += cz * cs[j * C + o];
                }
            }
        }
#pragma unroll
        for (int o = 0; o < C; ++o) acc[o] += term[o];
    }
    if (i < n) {
#pragma unroll
        for (int o = 0; o < C; ++o) part[((long long)blockIdx.y * n + i) * C + o] = acc[o];
    }
}
"""


@functools.cache
def _fourier_sum_kernel(dtype_name: str, d: int, c: int):
    import cupy

    itemsize = 4 if dtype_name == "float" else 8
    ft = max(32, min(256, _SHARED_BYTES // ((d + 1 + c) * itemsize)) // 32 * 32)
    src = (_FOURIER_SUM.replace("__T__", dtype_name).replace("__D__", str(d))
           .replace("__COS__", "cosf" if dtype_name == "float" else "cos")
           .replace("__C__", str(c)).replace("__FT__", str(ft)))
    return cupy.RawKernel(src, "fourier_sum", options=("-std=c++14",))


def fourier_sum_applies(X, out, xp) -> bool:
    """Whether ``fourier_sum`` runs for rows X and outputs out: a cupy with ``RawKernel`` (not
    tests/gpu/fakecupy), dense float32 / float64 X of d <= 64 columns, out of the same dtype with
    C <= 16 columns."""
    return (xp.__name__ == "cupy" and hasattr(xp, "RawKernel") and isinstance(X, xp.ndarray)
            and X.ndim == 2 and str(X.dtype) in _TYPE_NAMES and out.dtype == X.dtype
            and X.shape[1] <= FOURIER_SUM_MAX_D and out.shape[1] <= FOURIER_SUM_MAX_C)


def fourier_sum(X, Wt, b, F: int, ks, coefs, limits, out, xp) -> bool:
    """out[i] += sum_e [i < limits[e]] sum_j coefs[e, j] cos(X[i] . Wt[ks[e] F + j] + b[ks[e] F + j])
    for dense rows X (n, d), a stack of blocks of F features (W transposed, (blocks F, d), and b,
    of X's dtype) and E terms (block index ``ks[e]``, (F, C) coefficients ``coefs[e]``, row
    limit), in one kernel; False (nothing done) where ``fourier_sum_applies`` does not hold."""
    if not fourier_sum_applies(X, out, xp) or Wt.dtype != X.dtype:
        return False
    n, d = X.shape
    E, C = len(ks), out.shape[1]
    if E == 0 or n == 0:
        return True
    X = xp.ascontiguousarray(X)
    coefs = xp.ascontiguousarray(xp.asarray(coefs, dtype=X.dtype).reshape(E, F, C))
    ks = xp.asarray(np.asarray(ks), dtype=xp.int32)
    limits = xp.asarray(np.asarray(limits), dtype=xp.int32)
    tiles = -(-n // _ROWS_PER_BLOCK)
    sms = xp.cuda.Device().attributes["MultiProcessorCount"]
    S = int(max(1, min(E, -(-8 * sms // tiles))))  # enough blocks of threads to fill the device
    part = xp.empty((S, n, C), dtype=X.dtype)
    _fourier_sum_kernel(_TYPE_NAMES[str(X.dtype)], int(d), int(C))(
        (tiles, S), (_ROWS_PER_BLOCK,),
        (X, np.int32(n), xp.ascontiguousarray(Wt), xp.ascontiguousarray(b), np.int32(F), ks,
         coefs, limits, np.int32(E), np.int32(S), part))
    out += part.sum(axis=0)
    return True
