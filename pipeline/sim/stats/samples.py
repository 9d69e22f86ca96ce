"""The checks every interval makes of its input: the values, and the confidence level."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline._validate import real

__all__ = ["confidence_level", "sample_array"]


def sample_array(samples: Sequence[float] | np.ndarray, minimum: int) -> np.ndarray:
    """``samples`` as a 1-D float array of at least ``minimum`` finite values, else ValueError."""
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"samples must be 1-D, got shape {x.shape}")
    if x.size < minimum:
        raise ValueError(f"samples must have at least {minimum} values, got {x.size}")
    if not np.isfinite(x).all():
        i = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"samples must be finite, got samples[{i}]={float(x[i])!r}")
    return x


def confidence_level(level: float) -> float:
    """``level`` checked to be a confidence in (0, 1), else ValueError."""
    level = real("level", level, "confidence in (0, 1)", above=0)
    if not level < 1:
        raise ValueError(f"level must be < 1 (confidence in (0, 1)), got {level!r}")
    return level
