"""Median trick for the kernel bandwidth (Dai, Xie, He, Liang, Raj, Balcan, Song, Scalable Kernel
Methods via Doubly Stochastic Gradients, NIPS 2014, experiments)."""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.spatial.distance import pdist

from ..backend import to_numpy
from ..stream import take_rows


def median_bandwidth(X, metric: str = "euclidean", n_sample: int = 1000, seed: int = 0,
                     scale: float = 1.0) -> float:
    """sigma = scale * median pairwise distance over a seeded sample of at most ``n_sample`` rows.

    ``X`` may be any row-indexable array (numpy, cupy, zarr, dask); only the sample is read.
    """
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"median bandwidth needs at least 2 samples, got {n} sample(s)")
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=min(n, n_sample), replace=False))
    sample = np.asarray(to_numpy(take_rows(X, idx)), dtype=np.float64)
    dists = pdist(sample, metric=metric)
    dists = dists[dists > 0]
    if dists.size == 0:
        raise ValueError("median bandwidth undefined: all sampled rows are identical")
    return float(scale * np.median(dists))


def resolve_bandwidth(bandwidth, X, metric: str, seed: int = 0) -> float:
    """``"median"`` (or ``"median*4"`` style multiples) -> median trick; a positive number as is."""
    if isinstance(bandwidth, str):
        head, _, mult = bandwidth.partition("*")
        if head.strip() != "median":
            raise ValueError(f"bandwidth={bandwidth!r} must be 'auto', 'median', 'median*<factor>' "
                             "or a number > 0")
        scale = float(mult) if mult else 1.0
        return median_bandwidth(X, metric=metric, seed=seed, scale=scale)
    if not isinstance(bandwidth, numbers.Real) or isinstance(bandwidth, bool) \
            or not math.isfinite(bandwidth) or bandwidth <= 0:
        raise ValueError(f"bandwidth={bandwidth!r} must be 'auto', 'median' or a number > 0")
    return float(bandwidth)
