"""Intervals for a fraction: Wilson's two-sided interval and the exact one-sided bound.

- :func:`proportion_ci` -- Wilson interval for a fraction (shed, dead-lettered);
- :func:`proportion_bound` -- exact one-sided (Clopper-Pearson) bound on a
  fraction, the one that stays honest at 0 events ("the rule of three");
- :func:`paired_proportion_difference` -- the difference of two fractions
  observed on the same pairs (Newcombe's score interval).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from pipeline._validate import integer
from pipeline.sim.stats.samples import confidence_level
from pipeline.sim.stats.tdist import regularised_beta

__all__ = ["ProportionCI", "paired_proportion_difference", "proportion_bound", "proportion_ci"]


class ProportionCI(NamedTuple):
    """An observed fraction and its (asymmetric) interval ``[low, high]``."""

    estimate: float
    low: float
    high: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high


def proportion_ci(successes: int, n: int, level: float = 0.95) -> ProportionCI:
    """Wilson score interval for a fraction ``successes / n`` (e.g. shed items / offered).

    ``center = (p + z**2 / 2n) / (1 + z**2 / n)``, ``half = z / (1 + z**2 / n) *
    sqrt(p (1 - p) / n + z**2 / 4n**2)`` with ``z`` the normal
    ``(1 + level) / 2`` quantile. Unlike the normal approximation it behaves at
    0 and n successes.

    Raises:
        ValueError: ``n < 1``, ``successes`` not in ``[0, n]``, or ``level`` not in (0, 1).
    """
    n = integer("n", n, "trials", at_least=1)
    k = integer("successes", successes, "count", at_least=0)
    if k > n:
        raise ValueError(f"successes must be <= n={n}, got {k}")
    from statistics import NormalDist  # on first use: statistics costs start-up

    z = NormalDist().inv_cdf((1.0 + confidence_level(level)) / 2.0)
    p = k / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    # At 0 and n successes the Wilson bound is exactly 0 or 1; rounding may miss it.
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return ProportionCI(p, low, high)


def paired_proportion_difference(
    outcomes_a: Sequence[bool], outcomes_b: Sequence[bool], level: float = 0.95
) -> ProportionCI:
    """The fraction of ``b`` minus that of ``a``, over pairs, with Newcombe's score interval.

    Pair *i* holds two yes/no outcomes of one replication (run *i* of two
    configurations on the same random numbers: did each recover?). With
    ``n10`` pairs where only ``a`` is yes and ``n01`` where only ``b`` is, the
    difference is ``(n01 - n10) / n``. Its interval is Newcombe's (1998) method
    11: each fraction's continuity-corrected Wilson interval, combined through
    the pairs' correlation ``phi`` (its numerator ``ad - bc`` reduced by ``n / 2``
    when positive, 0 when a margin is constant). Unlike a t interval on the 0/1
    differences it stays inside [-1, 1] and keeps a width when every pair agrees;
    it errs on the safe side (coverage at or above ``level`` in the cases
    ``tests/sim/stats/test_paired_proportions.py`` measures), where the
    uncorrected method 10 fell to 0.89 at 8 pairs.

    Raises:
        ValueError: the two lengths differ, no pairs, or ``level`` not in (0, 1).
    """
    a = [bool(x) for x in outcomes_a]
    b = [bool(x) for x in outcomes_b]
    if len(a) != len(b) or not a:
        raise ValueError(
            f"outcomes_a and outcomes_b must pair up (one outcome per pair each, at least "
            f"one pair), got {len(a)} and {len(b)}"
        )
    from statistics import NormalDist  # on first use: statistics costs start-up

    z = NormalDist().inv_cdf((1.0 + confidence_level(level)) / 2.0)
    n = len(a)
    both = sum(x and y for x, y in zip(a, b, strict=True))
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    neither = n - both - only_a - only_b
    pa, low_a, high_a = _wilson_corrected(both + only_a, n, z)
    pb, low_b, high_b = _wilson_corrected(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    agree = both * neither - only_a * only_b
    if agree > 0:
        agree = max(agree - n / 2, 0.0)
    phi = agree / math.sqrt(margins) if margins else 0.0
    difference = pb - pa
    below = (pb - low_b) ** 2 - 2 * phi * (pb - low_b) * (high_a - pa) + (high_a - pa) ** 2
    above = (high_b - pb) ** 2 - 2 * phi * (high_b - pb) * (pa - low_a) + (pa - low_a) ** 2
    low = difference - math.sqrt(max(below, 0.0))
    high = difference + math.sqrt(max(above, 0.0))
    return ProportionCI(difference, max(low, -1.0), min(high, 1.0))


def _wilson_corrected(k: int, n: int, z: float) -> tuple[float, float, float]:
    """``k / n`` and its continuity-corrected Wilson interval (Newcombe 1998, method 4)."""
    p = k / n
    zz = z * z
    low = 0.0
    if k > 0:
        root = math.sqrt(max(zz - 2 - 1 / n + 4 * p * (n * (1 - p) + 1), 0.0))
        low = max(0.0, (2 * n * p + zz - 1 - z * root) / (2 * (n + zz)))
    high = 1.0
    if k < n:
        root = math.sqrt(max(zz + 2 - 1 / n + 4 * p * (n * (1 - p) - 1), 0.0))
        high = min(1.0, (2 * n * p + zz + 1 + z * root) / (2 * (n + zz)))
    return p, low, high


def proportion_bound(events: int, trials: int, level: float = 0.95, *, upper: bool = True) -> float:
    """Exact one-sided (Clopper-Pearson) bound on a fraction, from ``events`` in ``trials``.

    The upper bound is the largest fraction ``p`` under which seeing at most
    ``events`` still has probability ``1 - level``, ``P(B <= events) = 1 - level``
    with ``B ~ Binomial(trials, p)``; the lower bound is the smallest ``p`` under
    which seeing at least ``events`` does. With no events the upper bound is
    ``1 - (1 - level) ** (1 / trials)``, about ``3 / trials`` at 95% ("the rule
    of three"); with every trial an event the lower bound is
    ``(1 - level) ** (1 / trials)``. It assumes the trials are independent.

    Args:
        events: how many trials were events (e.g. items shed), 0 to ``trials``.
        trials: how many there were (e.g. items offered), >= 1.
        level: one-sided confidence, in (0, 1).
        upper: the upper bound (default) or the lower one.

    Returns:
        A fraction in [0, 1]: the upper bound is 1 when every trial was an
        event, the lower bound 0 when none was.

    Raises:
        ValueError: ``trials < 1``, ``events`` not in ``[0, trials]``, or ``level`` not in (0, 1).

    Example:
        >>> proportion_bound(0, 3000)        # 0.000998..., about 3 / 3000
    """
    n = integer("trials", trials, "count", at_least=1)
    k = integer("events", events, "count", at_least=0)
    if k > n:
        raise ValueError(f"events must be <= trials={n}, got {k}")
    level = confidence_level(level)
    alpha = 1.0 - level
    if upper and k == n:
        return 1.0
    if not upper and k == 0:
        return 0.0
    if upper and k == 0:
        return -math.expm1(math.log(alpha) / n)
    if not upper and k == n:
        return math.exp(math.log(alpha) / n)
    # P(B >= k; n, p) = I_p(k, n - k + 1), increasing in p: the upper bound solves
    # P(B >= k + 1) = level, the lower P(B >= k) = alpha. Bisection on p: 0 < p < 1.
    a, b, target = (k + 1.0, float(n - k), level) if upper else (float(k), n - k + 1.0, alpha)
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if regularised_beta(a, b, mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return hi if upper else lo
