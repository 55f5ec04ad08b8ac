"""Kernels: exact evaluation, random Fourier samplers, median-trick bandwidth, seeded blocks."""

from .bandwidth import median_bandwidth, resolve_bandwidth
from .fourier import FourierBlocks, fourier_features
from .shift_invariant import KERNELS, Cauchy, Gaussian, Kernel, Laplacian, Matern, make_kernel

__all__ = ["KERNELS", "Cauchy", "FourierBlocks", "Gaussian", "Kernel", "Laplacian", "Matern",
           "fourier_features", "make_kernel", "median_bandwidth", "resolve_bandwidth"]
