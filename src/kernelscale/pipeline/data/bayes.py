"""Generated binary classification whose Bayes error is known: generator ``bayes``.

With ``d = n_features`` (>= 4), ``sigma = noise`` and, from the seed,
``w1, w2 = default_rng(seed).standard_normal(d) / sqrt(d)`` (first w1, then w2)::

    x ~ N(0, I_d)                      (stored as float32; f is evaluated on the stored value)
    f(x) = sin(2 w1.x) + 0.5 cos(3 w2.x) + 0.4 x_0 x_1
    y = 1[f(x) + sigma e > 0],  e ~ N(0, 1)

so P(y = 1 | x) = Phi(f(x) / sigma), the Bayes classifier is 1[f(x) > 0] (:func:`bayes_predict`),
its error on a row is Phi(-|f(x)| / sigma) (:func:`conditional_error`) and the Bayes error is
E_x[Phi(-|f(x)| / sigma)] (:func:`bayes_error`; 0 when sigma = 0).

Computing the Bayes error: f depends on x only through (u, v, a, b) = (w1.x, w2.x, x_0, x_1),
jointly Gaussian; given (u, v, a), f is Gaussian N(mu, tau^2) and the conditional error is exact,
2 T(mu / sqrt(tau^2 + sigma^2), sigma / tau) (T: Owen's T function). The remaining integral over
(u, v, a) is taken by Gauss-Legendre in a (split at a = 0) and the trapezoid rule with step h in
whitened (u, v); :func:`bayes_error` returns the value at h = 0.05 and |I(0.05) - I(0.1)| as an
error estimate.

Rows: block ``b`` (rows ``b * BLOCK_ROWS`` onwards, 8192 rows as every generator) is drawn
whole from ``block_generator(seed, b, rng.DATA_BAYES)`` -- X (8192 x d, float64, rounded to
float32), then e (8192) -- and truncated after the last row: every row is a pure function of
(seed, its index), and rows past ``n_samples`` are the continuation (e.g. a held-out set).
Memory: one block (8192 x d float64) plus the caller's chunk, never n.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator

import numpy as np

from ...rng import DATA_BAYES, block_generator
from .errors import DataError
from .generators import GENERATOR_BLOCK_ROWS as BLOCK_ROWS
from .generators import blocks_of
from .readers import Block

DEFAULTS = {"seed": 0, "noise": 0.3}
MIN_FEATURES = 4  # x_0, x_1 and two projections: fewer, and b is a function of (u, v, a)
_KEYS = {"name", "n_samples", "n_features", "noise", "seed"}
# the numerical rule of bayes_error (see the module docstring)
_STEP, _RADIUS, _GL_POINTS, _A_SDS = 0.05, 8.0, 32, 9.0
_OUTER_BATCH = 4096  # outer nodes per vectorised piece: 4096 x 64 float64 temporaries, 2 MB each


def check_params(params: dict, where: str = "generator") -> dict:
    """``params`` with defaults filled in; a one-line :class:`DataError` naming the key (under
    ``where``) otherwise (for callers of this module; the pipeline's schema checks first)."""
    for key in params:
        if key not in _KEYS:
            raise DataError(f"{where}.{key}: not a parameter of generator bayes "
                            f"(it takes {', '.join(sorted(_KEYS - {'name'}))})")
    params = {"name": "bayes", **DEFAULTS, **params}
    for key in ("n_samples", "n_features", "seed"):
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise DataError(f"{where}.{key}: must be an integer, got {value!r}")
    if params["n_samples"] < 1:
        raise DataError(f"{where}.n_samples: {params['n_samples']} is less than the minimum of 1")
    if params["n_features"] < MIN_FEATURES:
        raise DataError(f"{where}.n_features: {params['n_features']} is less than the minimum "
                        f"of {MIN_FEATURES} for generator bayes (f uses x_0, x_1 and two "
                        "projections; its Bayes error needs one more dimension)")
    if params["seed"] < 0:
        raise DataError(f"{where}.seed: {params['seed']} is negative")
    noise = params["noise"]
    if isinstance(noise, bool) or not isinstance(noise, (int, float, np.number)) \
            or not math.isfinite(noise) or noise < 0:
        raise DataError(f"{where}.noise: must be a finite number >= 0, got {noise!r}")
    return params


def bayes_params(n_samples: int, n_features: int = 20, noise: float = 0.3,
                 seed: int = 0) -> dict:
    """Checked parameters of generator ``bayes`` (the defaults: benchmarks/gpu.py's problem)."""
    return check_params({"n_samples": n_samples, "n_features": n_features, "noise": noise,
                         "seed": seed})


@functools.lru_cache(maxsize=16)
def _weights(seed: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    # numpy's default generator, as benchmarks/gpu.py drew them: the same f for the same seed
    rng = np.random.default_rng(seed)
    w1, w2 = (rng.standard_normal(d) / math.sqrt(d) for _ in range(2))  # w1 first
    w1.setflags(write=False)
    w2.setflags(write=False)
    return w1, w2


def score(params: dict, X: np.ndarray) -> np.ndarray:
    """f(x) for the rows of X (float64): the label is 1[f(x) + noise * e > 0]."""
    w1, w2 = _weights(int(params["seed"]), int(params["n_features"]))
    X = np.asarray(X, dtype=np.float64)
    # (2 X) @ w1, written as benchmarks/gpu.py wrote it: the same f to the last bit
    return np.sin(2.0 * X @ w1) + 0.5 * np.cos(3.0 * X @ w2) + 0.4 * X[:, 0] * X[:, 1]


def bayes_predict(params: dict, X: np.ndarray) -> np.ndarray:
    """The Bayes classifier 1[f(x) > 0] (int8) of the rows of X."""
    return (score(params, X) > 0).astype(np.int8)


def conditional_error(params: dict, X: np.ndarray) -> np.ndarray:
    """P(y != Bayes prediction | x) = Phi(-|f(x)| / noise) per row: its mean over a test set is
    that set's Bayes error given its rows (less spread than the 0/1 errors')."""
    from scipy.special import ndtr

    f = score(params, X)
    if params["noise"] == 0:
        return np.zeros_like(f)
    return ndtr(-np.abs(f) / params["noise"])


def block(params: dict, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole block ``index`` (BLOCK_ROWS rows, whatever n_samples is): X float32, y float64."""
    rng = block_generator(params["seed"], index, DATA_BAYES)
    X = rng.standard_normal((BLOCK_ROWS, params["n_features"])).astype(np.float32)
    y = rng.standard_normal(BLOCK_ROWS) * params["noise"] + score(params, X) > 0
    return X, y.astype(np.float64)


def generate_bayes(params: dict, origin: str = "generator bayes",
                   blocks: Iterable[int] | None = None) -> Iterator[Block]:
    """Yield the blocks (all, or the indices ``blocks``) of the ``n_samples`` rows of checked
    ``params``, the last one cut at n_samples."""
    yield from blocks_of(params, lambda index, rows: block(params, index), origin, blocks)


def bayes_chunks(params: dict, chunk_rows: int, start: int = 0, stop: int | None = None
                 ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Rows ``start .. stop - 1`` (default: to n_samples; beyond it: the continuation) as
    ``(first_row, X float32, y int8)`` chunks of ``chunk_rows`` rows (the last one shorter),
    for writing a store chunk by chunk. Memory: one chunk and one block."""
    params = check_params(params)
    stop = params["n_samples"] if stop is None else stop
    if chunk_rows < 1 or not 0 <= start <= stop:
        raise ValueError(f"need chunk_rows >= 1 and 0 <= start <= stop, got {chunk_rows}, "
                         f"{start}, {stop}")
    cached, X_block, y_block = -1, None, None
    for lo in range(start, stop, chunk_rows):
        hi = min(stop, lo + chunk_rows)
        X = np.empty((hi - lo, params["n_features"]), dtype=np.float32)
        y = np.empty(hi - lo, dtype=np.int8)
        row = lo
        while row < hi:
            index = row // BLOCK_ROWS
            if index != cached:  # a block straddling two chunks is made once
                X_block, y_block = block(params, index)
                cached = index
            a, b = row - index * BLOCK_ROWS, min(BLOCK_ROWS, hi - index * BLOCK_ROWS)
            X[row - lo:row - lo + b - a] = X_block[a:b]
            y[row - lo:row - lo + b - a] = y_block[a:b]
            row += b - a
        yield lo, X, y


def bayes_rows(params: dict, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start .. stop - 1`` as one (X float32, y int8) pair: the same rows as any run."""
    for _, X, y in bayes_chunks(params, max(1, stop - start), start, stop):
        return X, y
    return np.empty((0, params["n_features"]), dtype=np.float32), np.empty(0, dtype=np.int8)


def orthant_error(mu: np.ndarray, tau: np.ndarray, sigma: float) -> np.ndarray:
    """E[Phi(-|F| / sigma)] for F ~ N(mu, tau^2): 2 T(mu / sqrt(tau^2 + sigma^2), sigma / tau),
    Phi(-|mu| / sigma) where tau = 0."""
    from scipy.special import ndtr, owens_t

    mu, tau = np.broadcast_arrays(np.asarray(mu, dtype=np.float64),
                                  np.asarray(tau, dtype=np.float64))
    out = np.atleast_1d(ndtr(-np.abs(mu) / sigma))
    pos = np.atleast_1d(tau > 0)
    m, t = np.atleast_1d(mu)[pos], np.atleast_1d(tau)[pos]
    out[pos] = 2.0 * owens_t(m / np.sqrt(t * t + sigma * sigma), sigma / t)
    return out.reshape(mu.shape)


def _integral(w1: np.ndarray, w2: np.ndarray, sigma: float, step: float) -> float:
    """The rule of the module docstring at trapezoid step ``step``."""
    d = len(w1)
    G = np.zeros((4, d))
    G[0], G[1], G[2, 0], G[3, 1] = w1, w2, 1.0, 1.0
    S = G @ G.T  # covariance of (u, v, a, b)
    L = np.linalg.cholesky(S[:2, :2])
    ca = np.linalg.solve(S[:2, :2], S[:2, 2])
    sa = math.sqrt(S[2, 2] - S[:2, 2] @ ca)  # a | (u, v)
    cb = np.linalg.solve(S[:3, :3], S[:3, 3])
    sb2 = S[3, 3] - S[:3, 3] @ cb  # b | (u, v, a)
    if not (sa > 1e-6 and sb2 > 1e-12):
        raise ValueError("degenerate weights: x_0 or x_1 is (nearly) a function of the others")
    k = np.arange(-math.floor(_RADIUS / step), math.floor(_RADIUS / step) + 1) * step
    t1, t2 = (a.ravel() for a in np.meshgrid(k, k, indexing="ij"))
    keep = t1 * t1 + t2 * t2 <= _RADIUS * _RADIUS
    t = np.stack([t1[keep], t2[keep]], axis=1)
    weights = step * step * np.exp(-0.5 * (t * t).sum(axis=1)) / (2 * math.pi)
    x, wx = np.polynomial.legendre.leggauss(_GL_POINTS)
    total = 0.0
    for lo in range(0, len(t), _OUTER_BATCH):
        uv = t[lo:lo + _OUTER_BATCH] @ L.T
        u, v = uv[:, :1], uv[:, 1:]
        ma = uv @ ca
        split = np.clip(-ma / sa, -_A_SDS, _A_SDS)  # a = 0 in standardised units
        inner = np.zeros(len(uv))
        for z_lo, z_hi in ((np.full_like(split, -_A_SDS), split),
                           (split, np.full_like(split, _A_SDS))):
            half, mid = (z_hi - z_lo) / 2, (z_hi + z_lo) / 2
            z = mid[:, None] + half[:, None] * x
            wz = half[:, None] * wx * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
            a = ma[:, None] + sa * z
            mb = cb[0] * u + cb[1] * v + cb[2] * a
            mu = np.sin(2.0 * u) + 0.5 * np.cos(3.0 * v) + 0.4 * a * mb
            inner += (wz * orthant_error(mu, 0.4 * np.abs(a) * math.sqrt(sb2), sigma)).sum(1)
        total += float(weights[lo:lo + _OUTER_BATCH] @ inner)
    return total


@functools.lru_cache(maxsize=16)
def _bayes_error(seed: int, d: int, noise: float) -> tuple[float, float]:
    if noise == 0:
        return 0.0, 0.0
    w1, w2 = _weights(seed, d)
    fine, coarse = _integral(w1, w2, noise, _STEP), _integral(w1, w2, noise, 2 * _STEP)
    return fine, abs(fine - coarse)


def bayes_error(params: dict) -> tuple[float, float]:
    """(Bayes error, estimate of its numerical error) of checked ``params``: the error rate of
    1[f(x) > 0] on rows of the generating distribution (the rule: the module docstring)."""
    return _bayes_error(int(params["seed"]), int(params["n_features"]), float(params["noise"]))


def bayes_meta(params: dict) -> dict:
    """What meta.json records: ``bayes_error`` and how it was computed."""
    value, estimate = bayes_error(params)
    return {"bayes_error": value, "bayes_error_info": {
        "abs_error_estimate": estimate,
        "of": "the generating distribution (the error of 1[f(x) > 0] on new rows); "
              "standardize keeps it, a PCA to fewer components can only raise it",
        "rule": f"Owen's T over (x_1, noise), {_GL_POINTS}-point Gauss-Legendre per side of "
                f"x_0 = 0, trapezoid step {_STEP} over (w1.x, w2.x); estimate |I(h) - I(2h)|"}}
