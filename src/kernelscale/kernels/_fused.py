"""One-pass element-wise finishes of feature and kernel blocks on cupy (ElementwiseKernel).

Each function finishes a block in place in one pass and returns True; it returns False on numpy
or where the namespace has no ElementwiseKernel (tests/gpu/fakecupy): the caller then takes the
numpy-style path.
"""

from __future__ import annotations

import functools


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
    cos, gauss, sqdist = _kernels()
    xx, yy = xx.astype(G.dtype, copy=False), yy.astype(G.dtype, copy=False)
    if exp_scale is None:
        sqdist(xx[:, None], yy.reshape(1, -1), G)
    else:
        gauss(xx[:, None], yy.reshape(1, -1), G.dtype.type(exp_scale), G)
    return True
