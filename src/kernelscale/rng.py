"""Counter-based random streams: a random-feature block is a pure function of (seed, index).

numpy's Philox keyed by (model seed, stream, block index): block ``i`` can be regenerated at any
time, in any order, on any machine. Blocks are drawn on the host, so CPU and GPU models have
bit-identical random parameters.
"""

from __future__ import annotations

import numpy as np

_MASK = (1 << 64) - 1

# Every random stream of the library, ``block_generator(seed, index, stream)``, in one place.
# Model streams, keyed by the model's seed:
FOURIER = 0  # random Fourier feature blocks (kernels.fourier), index = block
UDSG_REUSE = 1  # UDSG's choice of the old block to update, index = iteration
BATCH_PIECES = 2  # the batch stream's order of strata pieces (stream), index = epoch
BATCH_ROWS = 3  # the batch stream's row order in a window (stream), index = epoch, window
RB_GRIDS = 11  # random binning grids (kernels.random_binning), index = grid
RB_CD_ORDER = 12  # RB-CD's coordinate permutations (solvers.rb_cd), index = class, epoch
ROW_FINGERPRINT = 13  # the row cache's fingerprint vector (solvers.row_cache), index 0
# The preconditioners' subsample (index 0, 1) and SVD sketch (index 0) share RB's ids (design.md)
PRECONDITIONER_SUBSAMPLE = RB_GRIDS
PRECONDITIONER_SKETCH = RB_CD_ORDER
# Data streams, keyed by a generated dataset's seed (pipeline.data):
DATA_MODEL = 1  # a generator's model (weights of the function to learn), index 0
DATA_ROWS = 2  # a generator's rows, index = block
DATA_DEFORMED = 3  # generator ``deformed``: displacement fields and shifts, index = block
DATA_BAYES = 4  # generator ``bayes``: rows and labels, index = block


def block_generator(seed: int, index: int, stream: int = 0) -> np.random.Generator:
    """Independent generator for block ``index`` of model ``seed`` in ``stream`` (one of the ids
    above: different uses of one block index never share random numbers)."""
    key = np.array([int(seed) & _MASK, ((int(stream) & 0xFFFF) << 48) ^ (int(index) & _MASK)],
                   dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key))


def seed_from(random_state) -> int:
    """A 63-bit integer seed from ``None | int | RandomState | Generator`` (sklearn convention)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] >> 1)
    if isinstance(random_state, (int, np.integer)):
        if random_state < 0:
            raise ValueError(f"random_state={random_state} must be non-negative")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    raise ValueError(f"random_state={random_state!r} must be None, an int or a numpy generator")


# splitmix64's finalizer constants: a bijective, well-mixing map of 64-bit words
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    # numpy uint64 array arithmetic wraps modulo 2**64 (no overflow check on arrays)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _feistel(x: np.ndarray, half_bits: int, keys: np.ndarray, inverse: bool) -> np.ndarray:
    """Balanced Feistel network on [0, 4**half_bits), one round per column of ``keys``."""
    h, mask = np.uint64(half_bits), np.uint64((1 << half_bits) - 1)
    left, right = x >> h, x & mask
    if not inverse:
        for i in range(keys.shape[1]):
            left, right = right, left ^ (_mix(right ^ keys[:, i]) & mask)
    else:
        for i in reversed(range(keys.shape[1])):
            left, right = right ^ (_mix(left ^ keys[:, i]) & mask), left
    return (left << h) | right


def keyed_permutation(x, m, keys: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Element ``x`` of a pseudo-random permutation of ``range(m)``, evaluated pointwise.

    A Feistel network over the smallest power of 4 >= m, walked along its cycle until it lands
    below m (cycle walking; fewer than 4 steps expected). The permutation is given by ``keys``
    (uint64, shape (len(x), rounds): each element may use its own permutation and its own
    ``m``); ``inverse=True`` evaluates the inverse permutation. Cost O(len(x)) whatever m: a
    stream can shuffle n items without holding a permutation of n.
    """
    x = np.asarray(x, dtype=np.uint64).reshape(-1)
    m = np.broadcast_to(np.asarray(m, dtype=np.uint64), x.shape)
    keys = np.asarray(keys, dtype=np.uint64).reshape(len(x), -1)
    if len(x) == 0:
        return x
    if np.any(x >= m):
        raise ValueError("keyed_permutation: x must be below m")
    out = np.empty_like(x)
    for size in np.unique(m):  # the network's width is the element's own m's, not the call's
        at = np.flatnonzero(m == size)
        half_bits = max(1, (int(size - 1).bit_length() + 1) // 2)
        y = _feistel(x[at], half_bits, keys[at], inverse)
        walk = np.flatnonzero(y >= size)
        while len(walk):
            y[walk] = _feistel(y[walk], half_bits, keys[at[walk]], inverse)
            walk = walk[y[walk] >= size]
        out[at] = y
    return out
