"""Quantiles of independent values: a distribution-free interval, and percentiles fast.

- :func:`quantile_ci` -- distribution-free order-statistic interval for a
  quantile of independent values (e.g. one p95 per replication, or measured
  service times);
- :func:`percentiles` and :func:`quantiles` -- ``np.percentile`` and ``np.quantile``
  without their start-up cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from pipeline._validate import real
from pipeline.sim.stats.samples import confidence_level, sample_array

__all__ = ["QuantileCI", "percentiles", "quantile_ci", "quantiles"]


class QuantileCI(NamedTuple):
    """A sample quantile and its distribution-free interval ``[low, high]``.

    ``low`` is ``-inf`` (``high`` is ``+inf``) when the sample is too small to
    bound that side at the level asked.
    """

    estimate: float
    low: float
    high: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high


def _binomial_cdf(n: int, p: float) -> np.ndarray:
    """``P(B <= k)`` for ``k = 0..n``, ``B ~ Binomial(n, p)``, ``0 < p < 1`` (log-space pmf)."""
    k = np.arange(1, n + 1, dtype=np.float64)
    log_pmf = np.empty(n + 1)
    log_pmf[0] = n * math.log1p(-p)
    # pmf(k) / pmf(k-1) = (n - k + 1) / k * p / (1 - p)
    np.cumsum(np.log((n - k + 1.0) / k) + (math.log(p) - math.log1p(-p)), out=log_pmf[1:])
    log_pmf[1:] += log_pmf[0]
    return np.cumsum(np.exp(log_pmf - log_pmf.max())) * math.exp(log_pmf.max())


def quantile_ci(
    samples: Sequence[float] | np.ndarray, q: float = 0.5, level: float = 0.95
) -> QuantileCI:
    """The ``q``-quantile of independent samples, with an order-statistic interval.

    Distribution-free: with ``B ~ Binomial(n, q)`` the number of samples below
    the true quantile, ``[X_(j), X_(k)]`` (1-based order statistics) covers it
    with probability ``P(j <= B < k)``; ``j`` and ``k`` are the tightest with at
    most ``(1 - level) / 2`` in each tail, so coverage is at least ``level``
    (exactly, not asymptotically). The estimate is ``np.quantile(samples, q)``
    (linear interpolation, as the summary's percentiles).

    Valid only for *independent* values: one value per replication (e.g. each
    run's ``latency_p95_s``: ``q=0.5`` then bounds the median run), or measured
    service times. The items of one run are correlated (a slow item delays
    the next), and this interval would be far too narrow for them.

    Raises:
        ValueError: no samples, a non-finite one, ``q`` not in (0, 1) or
            ``level`` not in (0, 1).

    Example:
        >>> quantile_ci(np.random.default_rng(1).exponential(1.0, 1000), 0.95)
        QuantileCI(estimate=2.93..., low=2.68..., high=3.35...)   # true: ln 20 = 2.996
    """
    x = np.sort(sample_array(samples, 1))
    q = real("q", q, "probability in (0, 1)", above=0)
    if not q < 1:
        raise ValueError(f"q must be < 1 (probability in (0, 1)), got {q!r}")
    tail = (1.0 - confidence_level(level)) / 2.0
    n = x.size
    cdf = _binomial_cdf(n, q)
    # j: the largest with P(B <= j - 1) <= tail; k: the smallest with P(B >= k) <= tail.
    j = int(np.searchsorted(cdf, tail, side="right"))  # count of cdf[i] <= tail
    k = int(np.searchsorted(cdf, 1.0 - tail, side="left")) + 1
    low = float(x[j - 1]) if j >= 1 else -math.inf
    high = float(x[k - 1]) if k <= n else math.inf
    return QuantileCI(float(np.quantile(x, q)), low, high)


def percentiles(values: np.ndarray, qs: Sequence[float], *, overwrite: bool = False) -> list[float]:
    """``np.percentile(values, qs)`` (its default, linear method), bit for bit, as floats.

    numpy's own function imports ``numpy.ma`` on first use (about 6 ms of a
    command line's start-up) to find the partition points; this one computes
    the same two neighbours and the same interpolation without it.

    Args:
        values: a 1-D float array (not modified unless ``overwrite``).
        qs: percentiles, each in [0, 100].
        overwrite: partition ``values`` in place (its order is lost) instead of a
            copy: the same result without a second array as long as ``values``.

    Returns:
        One value per entry of ``qs``: NaN if ``values`` is empty or holds a NaN.
    """
    return quantiles(
        values, np.true_divide(np.asarray(qs, dtype=np.float64), 100), overwrite=overwrite
    )


def quantiles(values: np.ndarray, qs: Sequence[float], *, overwrite: bool = False) -> list[float]:
    """``np.quantile(values, qs)`` (its default, linear method), bit for bit, as floats.

    As :func:`percentiles` (without ``numpy.ma``), with each of ``qs`` a fraction in [0, 1].
    """
    n = len(values)
    if n == 0:
        return [math.nan] * len(qs)
    q = np.asarray(qs, dtype=np.float64)
    virtual = (n - 1) * q
    below = np.floor(virtual)
    above = below + 1
    # Past the last index both neighbours are the largest value, as in numpy.
    last = virtual >= n - 1
    below[last] = -1
    above[last] = -1
    below = below.astype(np.intp)
    above = above.astype(np.intp)
    kth = np.concatenate(([0, -1], below, above))
    if overwrite:
        values.partition(kth)
        ordered = values
    else:
        ordered = np.partition(values, kth)
    if np.isnan(ordered[-1]):
        return [math.nan] * len(qs)
    a, b = ordered[below], ordered[above]
    gamma = virtual - below
    # numpy's _lerp: from the nearer neighbour, so the result stays within [a, b].
    diff = b - a
    result = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=result, where=gamma >= 0.5)
    return result.tolist()
