"""How the findings write numbers: seconds, counts and names, the same in every check."""

from __future__ import annotations

import math
from collections import Counter

__all__ = ["count_text", "nice_up", "seconds_text", "top_names"]


def seconds_text(seconds: float) -> str:
    """Seconds for prose: ``0.25 s``, ``12.5 min``, ``3.1 h``."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if abs(seconds) < 120:
        return f"{seconds:.3g} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def count_text(count: float) -> str:
    """A count for prose: ``12,400`` (whole), ``2.35`` (three significant digits otherwise)."""
    return f"{count:,.0f}" if float(count).is_integer() else f"{count:,.3g}"


def nice_up(x: float) -> float:
    """Round up to two significant digits (0.0123 -> 0.013, 47.1 -> 48)."""
    if not (x > 0 and math.isfinite(x)):
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / scale - 1e-9) * scale


def top_names(counts: Counter[str]) -> str:
    """The three most common names with their counts: ``"TimeoutError x12, KeyError x3"``."""
    return ", ".join(f"{name} x{count_text(k)}" for name, k in counts.most_common(3))
