"""Uniforms drawn in blocks: what a random failure model's per-attempt check costs.

``check`` is on the hot path (100,000+ calls per run): random models pre-draw
uniforms in blocks of :data:`BLOCK` and keep them as a Python list, so a call
costs a list index and a comparison, not a numpy call. :func:`randoms` draws a
block of a :class:`random.Random` stream's (the backoff jitter's) at once.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = ["BLOCK", "Uniforms", "randoms"]

BLOCK = 4096
"""Uniforms (or per-item decisions) drawn per numpy call by bound models."""


class Uniforms:
    """Block-buffered uniforms on [0, 1); ``next()`` costs a list index."""

    __slots__ = ("_buf", "_i", "_rng")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._buf: list[float] = []
        self._i = 0

    def next(self) -> float:
        i = self._i
        if i >= len(self._buf):
            self._buf = self._rng.random(BLOCK).tolist()
            i = 0
        self._i = i + 1
        return self._buf[i]

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` uniforms, exactly those ``count`` calls of :meth:`next` return."""
        rest = self._buf[self._i :]
        if len(rest) >= count:
            self._i += count
            return np.array(rest[:count], dtype=np.float64)
        blocks = -(-(count - len(rest)) // BLOCK)
        fresh = self._rng.random(blocks * BLOCK)  # the same numbers as `blocks` calls of BLOCK
        used = count - len(rest)
        left = len(fresh) - used  # of the last block, what next() returns next
        self._buf, self._i = (fresh[-BLOCK:].tolist(), BLOCK - left) if left else ([], 0)
        return (
            np.concatenate([np.array(rest, dtype=np.float64), fresh[:used]])
            if rest
            else fresh[:used]
        )


def randoms(rng: random.Random, count: int) -> np.ndarray:
    """The next ``count`` values of ``rng.random()``, bit for bit; ``rng`` left as they leave it.

    ``random()`` builds a value from two 32-bit outputs of the Mersenne Twister, the first's
    top 27 bits above the second's top 26; ``getrandbits(64 * count)`` returns those outputs
    in one int, the first in the lowest bits: a numpy pass instead of ``count`` calls.
    """
    words = np.frombuffer(rng.getrandbits(64 * count).to_bytes(8 * count, "little"), "<u4")
    return ((words[0::2] >> 5) * 67108864.0 + (words[1::2] >> 6)) / 9007199254740992.0
