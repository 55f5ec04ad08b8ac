"""One-pass statistics over row blocks: mean, variance, covariance; PCA from them.

Exact per-block moments (:func:`block_moments`, also on a dask worker) merged in row order in
float64 by the pairwise update of Chan, Golub & LeVeque, "Updating formulae and a pairwise
algorithm for computing sample variances", COMPSTAT 1982. Blocks may widen as they come (LIBSVM
without ``n_features``); earlier rows count as zeros in the new columns, which is exact.
"""

from __future__ import annotations

import numpy as np


class RunningMoments:
    """Count, mean, sum of squared deviations and (optionally) the full scatter matrix."""

    def __init__(self, width: int = 0, full: bool = False):
        self.n = 0
        self.full = full
        self.mean = np.zeros(width)
        self.m2 = np.zeros(width)
        self.scatter = np.zeros((width, width)) if full else None

    @property
    def width(self) -> int:
        return self.mean.shape[0]

    def widen(self, width: int) -> None:
        """Grow to ``width`` columns; earlier rows count as zeros in the new ones."""
        extra = width - self.width
        if extra <= 0:
            return
        self.mean = np.pad(self.mean, (0, extra))
        self.m2 = np.pad(self.m2, (0, extra))
        if self.full:
            self.scatter = np.pad(self.scatter, ((0, extra), (0, extra)))

    def update(self, X: np.ndarray) -> None:
        """Merge the rows of block ``X`` (rows, <= width after widening)."""
        if X.shape[0] == 0:
            return
        self.widen(X.shape[1])
        self.merge(block_moments(X, self.width, self.full))

    def merge(self, block: tuple) -> None:
        """Merge ``block_moments`` of a block (computed at this width, e.g. on a dask worker)."""
        rows, block_mean, block_m2, block_scatter = block
        if rows == 0:
            return
        self.widen(block_mean.shape[0])
        delta = block_mean - self.mean
        total = self.n + rows
        weight = self.n * rows / total
        self.mean += delta * (rows / total)
        self.m2 += block_m2 + delta**2 * weight
        if self.full:
            self.scatter += block_scatter + np.outer(delta, delta) * weight
        self.n = total

    def variance(self) -> np.ndarray:
        """Population variance per column (ddof=0, like StandardScaler)."""
        return self.m2 / max(self.n, 1)

    def covariance(self) -> np.ndarray:
        return self.scatter / max(self.n, 1)


def block_moments(X: np.ndarray, width: int, full: bool) -> tuple:
    """(rows, mean, sum of squared deviations, scatter matrix or None) of block ``X``, padded with
    zero columns to ``width``: the per-block part of ``RunningMoments.update``."""
    rows = X.shape[0]
    if hasattr(X, "tocsr"):  # scipy.sparse (mean and variance only: no PCA on sparse rows)
        Xs = X.tocsr().astype(np.float64)
        s1, s2 = np.zeros(width), np.zeros(width)
        s1[:Xs.shape[1]] = np.asarray(Xs.sum(axis=0)).ravel()
        s2[:Xs.shape[1]] = np.asarray(Xs.multiply(Xs).sum(axis=0)).ravel()
        block_mean = s1 / max(rows, 1)
        return rows, block_mean, np.maximum(s2 - rows * block_mean**2, 0.0), None
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1] < width:
        X = np.pad(X, ((0, 0), (0, width - X.shape[1])))
    block_mean = X.mean(axis=0)
    centered = X - block_mean
    m2 = np.einsum("ij,ij->j", centered, centered)
    return rows, block_mean, m2, (centered.T @ centered if full else None)


def standardizer(moments: RunningMoments) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) with scale = std, and 1 for constant columns (as StandardScaler)."""
    scale = np.sqrt(moments.variance())
    scale[scale < 10 * np.finfo(np.float64).eps * np.maximum(np.abs(moments.mean), 1)] = 1.0
    return moments.mean.copy(), scale


def pca_from_moments(moments: RunningMoments, shift: np.ndarray, scale: np.ndarray,
                     n_components: int, center: bool):
    """Principal axes of z = (x - shift) / scale from the moments of x: eigenvectors of Cov(z),
    projection (z - mean_z) @ V (sklearn ``PCA``), or uncentered of E[z z^T], projection z @ V
    (sklearn ``TruncatedSVD``); ratios are eigenvalues over the matrix's trace; signs as
    sklearn's ``svd_flip``. Returns (V (d, k), the centre (d,): mean_z or zeros, ratios (k,))."""
    mean_z = (moments.mean - shift) / scale
    matrix = moments.covariance() / np.outer(scale, scale)
    if not center:
        matrix = matrix + np.outer(mean_z, mean_z)
    eigenvalues, eigenvectors = np.linalg.eigh(matrix)
    order = np.argsort(eigenvalues)[::-1][:n_components]
    values = np.clip(eigenvalues[order], 0.0, None)
    axes = eigenvectors[:, order]
    biggest = np.argmax(np.abs(axes), axis=0)
    axes *= np.sign(axes[biggest, np.arange(axes.shape[1])])
    total = max(float(np.trace(matrix)), np.finfo(np.float64).tiny)
    centre = mean_z if center else np.zeros_like(mean_z)
    return axes, centre, values / total
