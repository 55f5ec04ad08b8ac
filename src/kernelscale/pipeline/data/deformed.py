"""Elastically deformed, translated copies of a set of byte images, generated block by block:
the construction of MNIST-8M applied to any IDX image set.

Follows

* Simard, Steinkraus & Platt, "Best practices for convolutional neural networks applied to visual
  document analysis", ICDAR 2003, section 2 (elastic distortions): per pixel a displacement drawn
  uniform in (-1, 1) along each axis, convolved with a Gaussian of standard deviation ``sigma``
  pixels, scaled by ``alpha`` pixels; the image is resampled at the displaced positions by
  bilinear interpolation. Their MNIST values, sigma = 4 and alpha = 34, are the defaults.
* Loosli, Canu & Bottou, "Training invariant support vector machines using selective sampling"
  (2007), and its generator infimnist ("formerly known as MNIST8M",
  https://leon.bottou.org/projects/infimnist): row i is a copy of training image i mod N; the
  first N rows are the originals; every later row is a pseudo-random smooth deformation followed
  by a translation of -1, 0 or +1 pixel along each axis, stored as bytes; the test set is the
  original one, undeformed. Here every row draws its own field and the image is resampled.

Beyond those, ``max_shift`` (whole pixels per axis, default 1 as infimnist) and ``max_rotation``
(degrees about the image centre, uniform in +-max_rotation; default 0, i.e. none).

Outside the image the source is 0 (background), as ``map_coordinates(mode="grid-constant")``;
the field is smoothed with zero padding (``gaussian_filter(mode="constant")``). Pixels are rounded
to integers (bytes in float32).

Block ``b`` (rows ``b * BLOCK_ROWS`` onwards) is a pure function of (seed, b), the source images
and the parameters (``rng.block_generator(seed, b, rng.DATA_DEFORMED)``). Memory: one block plus
the source set, never the output. :func:`deform_reference` is :func:`deform` written with
``scipy.ndimage``, the definition it is tested against.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ...rng import DATA_DEFORMED, block_generator
from .generators import GENERATOR_BLOCK_ROWS as BLOCK_ROWS
from .generators import blocks_of, n_blocks
from .readers import Block
from .readers.idx import load_idx_images

DEFAULTS = {"seed": 0, "alpha": 34.0, "sigma": 4.0, "max_shift": 1, "max_rotation": 0.0}
FILE_KEYS = ("path", "labels_path", "test_path", "test_labels_path")
_SUB_ROWS = 128  # rows deformed together (their float64 temporaries stay in cache)


@functools.lru_cache(maxsize=1)
def _blas():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@functools.lru_cache(maxsize=16)
def smoothing_matrix(size: int, sigma: float) -> np.ndarray:
    """S with ``S @ v == gaussian_filter1d(v, sigma, mode="constant")`` for v of length ``size``:
    the Gaussian filter of one image axis as a matrix."""
    from scipy.ndimage import gaussian_filter1d

    S = gaussian_filter1d(np.eye(size), sigma, axis=0, mode="constant")
    S.setflags(write=False)
    return S


def _draw_pose(rng: np.random.Generator, rows: int, params: dict):
    """Whole-pixel shifts (rows, 2) and rotation angles (rows,) in radians: drawn first, always
    (also when max_rotation is 0), so the noise that follows does not depend on them."""
    s = int(params["max_shift"])
    shifts = rng.integers(-s, s + 1, size=(rows, 2)).astype(np.float64)
    angles = np.deg2rad(params["max_rotation"] * rng.uniform(-1.0, 1.0, size=rows))
    return shifts, angles


def _noise(rng: np.random.Generator, rows: int, shape: tuple[int, int]) -> np.ndarray:
    """Uniform(-1, 1) displacement noise (rows, 2, h, w); float32 draws (half the random bits)
    made exact in float64. Drawing rows in pieces gives the same numbers as drawing them at once."""
    return rng.random((rows, 2, *shape), dtype=np.float32).astype(np.float64) * 2.0 - 1.0


def _base_coordinates(shape: tuple[int, int], shifts: np.ndarray, angles: np.ndarray):
    """Source positions (y, x), each (rows, h, w), of every output pixel before the elastic field:
    rotated about the image centre, then shifted."""
    h, w = shape
    cy, cx = (h - 1) / 2.0, (w - 1) / 2.0
    yy = np.arange(h, dtype=np.float64)[:, None] - cy
    xx = np.arange(w, dtype=np.float64)[None, :] - cx
    cos, sin = np.cos(angles)[:, None, None], np.sin(angles)[:, None, None]
    y = (cy + shifts[:, 0, None, None]) + (cos * yy - sin * xx)
    x = (cx + shifts[:, 1, None, None]) + (sin * yy + cos * xx)
    return y, x


def _bilinear(padded: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bilinear samples of images zero-padded by 1 before and 2 after each axis, at (y, x) in
    unpadded coordinates; 0 outside. Overwrites y and x."""
    n, H, W = padded.shape
    h, w = H - 3, W - 3
    # beyond one pixel outside, both neighbours are background: clipping changes nothing there
    np.clip(y, -1.0, h, out=y)
    np.clip(x, -1.0, w, out=x)
    y0, x0 = np.floor(y), np.floor(x)
    y -= y0
    x -= x0
    idx = (np.arange(n, dtype=np.intp) * (H * W))[:, None, None] \
        + (y0.astype(np.intp) + 1) * W + (x0.astype(np.intp) + 1)
    flat = padded.ravel()
    a, b = flat.take(idx), flat.take(idx + 1)
    c, d = flat.take(idx + W), flat.take(idx + W + 1)
    b -= a
    b *= x
    a += b  # upper row
    d -= c
    d *= x
    c += d  # lower row
    c -= a
    c *= y
    a += c
    return a


def deform(images: np.ndarray, rng: np.random.Generator, params: dict, *,
           rounded: bool = True, out: np.ndarray | None = None) -> np.ndarray:
    """Deformed copies of ``images`` (m, h, w) as rows (m, h * w): float32 integers 0..255
    (``rounded``), else the float64 interpolated values; written into ``out`` when given.
    Random numbers from ``rng``: :func:`_draw_pose` for all rows, then the noise row by row."""
    m, h, w = images.shape
    shifts, angles = _draw_pose(rng, m, params)
    along_x = smoothing_matrix(w, float(params["sigma"])).T
    along_y = params["alpha"] * smoothing_matrix(h, float(params["sigma"])).T
    if out is None:
        out = np.empty((m, h * w), dtype=np.float32 if rounded else np.float64)
    padded = np.zeros((min(m, _SUB_ROWS), h + 3, w + 3))
    for start in range(0, m, _SUB_ROWS):
        stop = min(m, start + _SUB_ROWS)
        k = stop - start
        fields = (_noise(rng, k, (h, w)).reshape(-1, w) @ along_x).reshape(2 * k, h, w)
        fields = (fields.swapaxes(1, 2).reshape(-1, h) @ along_y).reshape(k, 2, w, h)
        fields = fields.swapaxes(2, 3)  # (k, 2, h, w): smoothed along x, then along y
        y, x = _base_coordinates((h, w), shifts[start:stop], angles[start:stop])
        y += fields[:, 0]
        x += fields[:, 1]
        padded[:k, 1:h + 1, 1:w + 1] = images[start:stop]
        values = _bilinear(padded[:k], y, x).reshape(k, -1)
        out[start:stop] = np.rint(values) if rounded else values
    return out


def deform_reference(images: np.ndarray, rng: np.random.Generator, params: dict, *,
                     rounded: bool = True) -> np.ndarray:
    """:func:`deform` written with ``scipy.ndimage`` (``gaussian_filter`` on the fields,
    ``map_coordinates`` order 1 on the whole stack), with the same draws."""
    from scipy.ndimage import gaussian_filter, map_coordinates

    m, h, w = images.shape
    shifts, angles = _draw_pose(rng, m, params)
    sigma = float(params["sigma"])
    fields = params["alpha"] * gaussian_filter(_noise(rng, m, (h, w)), (0, 0, sigma, sigma),
                                               mode="constant")
    y, x = _base_coordinates((h, w), shifts, angles)
    rows = np.broadcast_to(np.arange(m, dtype=np.float64)[:, None, None], y.shape)
    values = map_coordinates(images.astype(np.float64), [rows, y + fields[:, 0], x + fields[:, 1]],
                             order=1, mode="grid-constant").reshape(m, -1)
    return np.rint(values).astype(np.float32) if rounded else values


def deformed_block(params: dict, index: int, images: np.ndarray, labels: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Block ``index`` of the training set: X (rows, h * w) float32 and y (rows,) float64. Row i
    is source image ``i mod N`` (N = len(images)); rows below N are the originals, the others
    deformed with the random numbers of ``block_generator(seed, index, DATA_DEFORMED)``."""
    n_source = len(images)
    start = index * BLOCK_ROWS
    stop = min(params["n_samples"], start + BLOCK_ROWS)
    if not 0 <= start < stop:
        raise IndexError(f"block {index} is outside the {n_blocks(params)} blocks")
    source = np.arange(start, stop) % n_source
    width = images.shape[1] * images.shape[2]
    X = np.empty((stop - start, width), dtype=np.float32)
    originals = max(0, min(stop, n_source) - start)  # the originals are a prefix of the rows
    X[:originals] = images[source[:originals]].reshape(originals, width)
    if originals < len(X):
        rng = block_generator(params["seed"], index, DATA_DEFORMED)
        # one BLAS thread: the products are 28 wide
        with _blas().limit(limits=1, user_api="blas"):
            deform(images[source[originals:]], rng, params, out=X[originals:])
    return X, labels[source]


def generate_deformed(params: dict, origin: str = "generator deformed",
                      blocks: Iterable[int] | None = None) -> Iterator[Block]:
    """Yield the training blocks (all, or the indices ``blocks``) of validated ``params``."""
    images, labels = load_idx_images(Path(params["path"]).expanduser(),
                                     Path(params["labels_path"]).expanduser())
    yield from blocks_of(params, lambda index, rows: deformed_block(params, index, images, labels),
                         origin, blocks)
