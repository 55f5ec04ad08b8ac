"""Synthetic datasets generated block by block, so any size streams in bounded memory.

Every block of ``GENERATOR_BLOCK_ROWS`` rows is a pure function of (seed, block index) via the
counter-based streams of :mod:`kernelscale.rng`, and the model (centroids, mixing matrices, the
regression function) of the seed alone: the rows depend neither on ``chunk_rows`` nor on the
order blocks are made in.

* ``classification`` -- like ``sklearn.datasets.make_classification``: each class is a Gaussian
  cluster around a vertex of a hypercube (side ``2 * class_sep``) in the first ``n_informative``
  features, linearly mixed per class; the other features are N(0, 1) noise; a fraction
  ``flip_y`` of labels is replaced by random ones.
* ``regression`` -- x ~ N(0, I); y = f(x) + noise * N(0, 1) with f a smooth random function
  (a sum of 32 random cosines, i.e. a function of the Gaussian kernel's RKHS).
* ``blobs`` -- isotropic Gaussian blobs (``cluster_std``) around ``centers`` random centres.
* ``deformed`` (MNIST-8M's construction on IDX images) and ``bayes`` (a known Bayes error):
  :mod:`.deformed` and :mod:`.bayes`, with the same block size and their own random streams.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

from ...rng import DATA_MODEL, DATA_ROWS, block_generator
from .readers import Block

GENERATOR_BLOCK_ROWS = 8192
_N_COSINES = 32


def n_blocks(params: dict) -> int:
    """Number of blocks of the ``n_samples`` rows."""
    return math.ceil(params["n_samples"] / GENERATOR_BLOCK_ROWS)


def blocks_of(params: dict, make, origin: str, blocks: Iterable[int] | None = None
              ) -> Iterator[Block]:
    """The blocks (all, or the indices ``blocks`` in their order) of the ``n_samples`` rows of
    ``params``: ``make(index, rows)`` gives block ``index`` as (X, y), cut here to its ``rows``
    rows (the last block is shorter); an index past the rows is an IndexError."""
    n = params["n_samples"]
    for index in range(n_blocks(params)) if blocks is None else blocks:
        start = index * GENERATOR_BLOCK_ROWS
        if not 0 <= start < n:
            raise IndexError(f"block {index} is outside the {n_blocks(params)} blocks")
        rows = min(GENERATOR_BLOCK_ROWS, n - start)
        X, y = make(index, rows)
        yield Block(X[:rows], y[:rows], start, origin)


def generate(params: dict, origin: str = "generator") -> Iterator[Block]:
    """Yield the blocks of the dataset described by validated generator ``params`` (one of
    classification, regression, blobs)."""
    model = _MODELS[params["name"]](params, block_generator(params["seed"], 0, DATA_MODEL))

    def make(index: int, rows: int):
        X, y = model(block_generator(params["seed"], index, DATA_ROWS), rows)
        return X.astype(np.float32), y.astype(np.float64)

    yield from blocks_of(params, make, origin)


def _classification(params: dict, rng: np.random.Generator):
    d, k, n_classes = params["n_features"], params["n_informative"], params["n_classes"]
    if k < 63 and 2 ** k >= n_classes:  # distinct hypercube vertices, as make_classification
        corners = rng.choice(2 ** k, size=n_classes, replace=False)
        signs = ((corners[:, None] >> np.arange(k)) & 1) * 2.0 - 1.0
    else:
        signs = np.sign(rng.standard_normal((n_classes, k)))
    centroids = signs * params["class_sep"]
    mixing = rng.uniform(-1.0, 1.0, size=(n_classes, k, k))

    def sample(g: np.random.Generator, rows: int):
        y = g.integers(0, n_classes, size=rows)
        X = g.standard_normal((rows, d))
        informative = X[:, :k]
        for c in range(n_classes):  # per-class linear mixing of the informative features
            members = y == c
            informative[members] = informative[members] @ mixing[c] + centroids[c]
        flip = g.random(rows) < params["flip_y"]
        y[flip] = g.integers(0, n_classes, size=int(flip.sum()))
        return X, y

    return sample


def _regression(params: dict, rng: np.random.Generator):
    d = params["n_features"]
    frequencies = rng.standard_normal((d, _N_COSINES)) / np.sqrt(d)
    phases = rng.uniform(0.0, 2 * np.pi, _N_COSINES)
    weights = rng.standard_normal(_N_COSINES) * np.sqrt(2.0 / _N_COSINES)

    def sample(g: np.random.Generator, rows: int):
        X = g.standard_normal((rows, d))
        y = np.cos(X @ frequencies + phases) @ weights
        return X, y + params["noise"] * g.standard_normal(rows)

    return sample


def _blobs(params: dict, rng: np.random.Generator):
    centers = rng.uniform(-10.0, 10.0, size=(params["centers"], params["n_features"]))

    def sample(g: np.random.Generator, rows: int):
        y = g.integers(0, len(centers), size=rows)
        X = centers[y] + params["cluster_std"] * g.standard_normal((rows, centers.shape[1]))
        return X, y

    return sample


_MODELS = {"classification": _classification, "regression": _regression, "blobs": _blobs}
