"""Median trick for the kernel bandwidth (Dai, Xie, He, Liang, Raj, Balcan, Song, Scalable Kernel
Methods via Doubly Stochastic Gradients, NIPS 2014, experiments)."""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.spatial.distance import pdist

from ..backend import is_sparse, to_numpy
from ..stream import take_rows


def median_bandwidth(X, metric: str = "euclidean", n_sample: int = 1000, seed: int = 0,
                     scale: float = 1.0) -> float:
    """sigma = scale * median pairwise distance over a seeded sample of at most ``n_sample`` rows.

    ``X`` may be any row-indexable array (numpy, cupy, zarr, dask, scipy.sparse); only the
    sample is read (sparse rows stay sparse: ``sparse_pdist``).
    """
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"median bandwidth needs at least 2 samples, got {n} sample(s)")
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=min(n, n_sample), replace=False))
    sample = take_rows(X, idx)
    if is_sparse(sample):
        dists = sparse_pdist(sample.astype(np.float64), metric)
    else:
        dists = pdist(np.asarray(to_numpy(sample), dtype=np.float64), metric=metric)
    dists = dists[dists > 0]
    if dists.size == 0:
        raise ValueError("median bandwidth undefined: all sampled rows are identical")
    return float(scale * np.median(dists))


def sparse_pdist(S, metric: str) -> np.ndarray:
    """``pdist``'s condensed distances (pairs i < j in its order) of the rows of scipy.sparse S,
    without densifying them: "euclidean" from ||x||^2 + ||y||^2 - 2 x.y, "cityblock" by
    scikit-learn's sparse Manhattan distances."""
    from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances

    pairwise = {"euclidean": euclidean_distances, "cityblock": manhattan_distances}.get(metric)
    if pairwise is None:
        raise ValueError(f"metric={metric!r}: sparse rows take 'euclidean' or 'cityblock'")
    return pairwise(S.tocsr())[np.triu_indices(S.shape[0], k=1)]


def resolve_bandwidth(bandwidth, X, metric: str, seed: int = 0) -> float:
    """``"median"`` (or ``"median*4"`` style multiples) -> median trick; a positive number as is."""
    if isinstance(bandwidth, str):
        head, _, mult = bandwidth.partition("*")
        if head.strip() != "median":
            raise ValueError(f"bandwidth={bandwidth!r} must be 'auto', 'median', 'median*<factor>' "
                             "or a number > 0")
        return median_bandwidth(X, metric=metric, seed=seed, scale=float(mult) if mult else 1.0)
    if not isinstance(bandwidth, numbers.Real) or isinstance(bandwidth, bool) \
            or not math.isfinite(bandwidth) or bandwidth <= 0:
        raise ValueError(f"bandwidth={bandwidth!r} must be 'auto', 'median' or a number > 0")
    return float(bandwidth)
