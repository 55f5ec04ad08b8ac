"""Synthetic datasets generated block by block, so any size streams in bounded memory.

Every block of ``GENERATOR_BLOCK_ROWS`` rows is a pure function of (seed, block index) via the
counter-based streams of :mod:`kernelscale.rng`; the model (class centroids, mixing matrices,
the regression function) is a function of the seed alone. The data therefore do not depend on
``chunk_rows`` or on the order blocks are generated in, and a second pass regenerates exactly
the same rows.

* ``classification`` -- like ``sklearn.datasets.make_classification``: each class is a Gaussian
  cluster around a vertex of a hypercube (side ``2 * class_sep``) in the first ``n_informative``
  features, linearly mixed per class; the other features are N(0, 1) noise; a fraction
  ``flip_y`` of labels is replaced by random ones.
* ``regression`` -- x ~ N(0, I); y = f(x) + noise * N(0, 1) with f a smooth random function
  (a sum of 32 random cosines, i.e. a function of the Gaussian kernel's RKHS).
* ``blobs`` -- isotropic Gaussian blobs (``cluster_std``) around ``centers`` random centres.
* ``deformed`` -- elastic deformations and translations of IDX images, MNIST-8M's construction:
  :mod:`.deformed` (same block size, its own random stream).
* ``bayes`` -- binary labels 1[f(x) + noise * e > 0] with f known, so the Bayes error is known:
  :mod:`.bayes` (same block size, its own random stream).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...rng import DATA_MODEL, DATA_ROWS, block_generator
from .readers import Block

GENERATOR_BLOCK_ROWS = 8192
_N_COSINES = 32


def generate(params: dict, origin: str = "generator") -> Iterator[Block]:
    """Yield the blocks of the dataset described by validated generator ``params`` (one of
    classification, regression, blobs)."""
    model = _MODELS[params["name"]](params, block_generator(params["seed"], 0, DATA_MODEL))
    n = params["n_samples"]
    for index, start in enumerate(range(0, n, GENERATOR_BLOCK_ROWS)):
        rows = min(GENERATOR_BLOCK_ROWS, n - start)
        rng = block_generator(params["seed"], index, DATA_ROWS)
        X, y = model(rng, rows)
        yield Block(X.astype(np.float32), y.astype(np.float64), start, origin)


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
