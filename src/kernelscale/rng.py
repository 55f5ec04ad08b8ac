"""Counter-based random streams: a random-feature block is a pure function of (seed, index).

We use numpy's Philox (a counter-based generator) keyed by the pair (model seed, block index), so
block ``i`` can be regenerated at any time, in any order, on any machine. Blocks are always drawn
on the host and moved to the device, which makes CPU and GPU models bit-identical in their
random parameters.
"""

from __future__ import annotations

import numpy as np

_MASK = (1 << 64) - 1


def block_generator(seed: int, index: int, stream: int = 0) -> np.random.Generator:
    """Independent generator for block ``index`` of model ``seed``.

    ``stream`` separates different uses of the same block index (e.g. frequencies vs. the
    coordinate sampler of UDSG), so they never share random numbers.
    """
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
