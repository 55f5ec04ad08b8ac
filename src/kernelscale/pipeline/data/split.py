"""Deterministic train/test split that streams: a seeded hash decides each row on its own.

Row ``i`` goes to the test set iff ``u(seed, i) < test_size``, where ``u`` is a splitmix64 hash
of the seed and the row's global index mapped to [0, 1). The decision needs no other row, so a
block can be split as it passes by; the split does not depend on block or chunk sizes; the same
seed always gives the same split. The test fraction is ``test_size`` in expectation (binomial),
not exactly.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def test_mask(seed: int, first_row: int, rows: int, test_size: float) -> np.ndarray:
    """Boolean mask (True = test) for global rows ``first_row .. first_row + rows - 1``."""
    key = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    index = np.arange(first_row, first_row + rows, dtype=np.uint64)
    u = (_splitmix64(index ^ key) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return u < test_size


test_mask.__test__ = False  # not a pytest test, despite the name
