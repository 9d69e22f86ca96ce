"""The Kolmogorov-Smirnov test a fitted family (or Poisson arrivals) must pass.

A fitted family is kept only when the distance ``D = sup |F_n(x) - F(x)|``
between the samples and the family's CDF stays below the 5% critical value.
The family's parameters are estimated from the same samples, so the critical
values are Lilliefors', not Kolmogorov's: ``0.886 / sqrt(n)`` for a
log-normal, ``1.06 / sqrt(n)`` for an exponential. Below :data:`MIN_FIT`
samples no family is fitted: the samples themselves are replayed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["LILLIEFORS_5PCT", "MIN_FIT", "ks_distance"]

LILLIEFORS_5PCT = {"lognormal": 0.886, "exponential": 1.06}
"""Lilliefors' 5% critical values of ``D * sqrt(n)``, parameters estimated from the sample."""

MIN_FIT = 8
"""Fewer samples than this: no family is fitted, the samples are replayed."""


def ks_distance(samples: np.ndarray, cdf: Any) -> float:
    """Kolmogorov-Smirnov distance ``D = sup |F_n(x) - F(x)|`` of ``samples`` from ``cdf``."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = x.size
    if n == 0:
        return math.nan
    f = cdf(x)
    above = np.arange(1, n + 1) / n - f
    below = f - np.arange(0, n) / n
    return float(max(above.max(), below.max()))
