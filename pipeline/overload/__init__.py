"""Overload controls: configuration objects and the per-run state each keeps.

Each control is a small frozen, validated configuration (``AIMD``, ``Gradient2``,
``CoDel``) whose ``start(...)`` makes the state a run keeps. A state takes the
clock's ``now`` (seconds, from ``loop.time()``) or the samples the engine
measured on it, so the same code runs on the real and the virtual clock, and a
test can drive it with hand-computed times. Standard library only.
"""

from __future__ import annotations

from .codel import CoDel
from .limits import AIMD, Gradient2

__all__ = ["AIMD", "CoDel", "Gradient2"]
