"""Uniforms drawn in blocks: what a random failure model's per-attempt check costs.

``check`` is on the hot path (100,000+ calls per run): random models pre-draw
uniforms in blocks of :data:`BLOCK` and keep them as a Python list, so a call
costs a list index and a comparison, not a numpy call.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK", "Uniforms"]

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
