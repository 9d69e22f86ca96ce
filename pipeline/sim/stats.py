"""Estimation helpers for simulation output (tests and notebooks).

- :func:`mean_ci` -- Student t interval across independent replications;
- :func:`batch_means_ci` -- the same for one long, autocorrelated run;
- :func:`proportion_ci` -- Wilson interval for a fraction (shed, dead-lettered);
- :func:`summarise_values` -- mean and half-width of per-replication values that
  may be missing (NaN), without warnings: the one rule the CLI, ``sweep`` and
  ``Replications`` share;
- :func:`time_weighted_mean`, :func:`time_weighted_quantile` -- exact averages
  and percentiles of a step function (queue depth, in flight, memory);
- :func:`t_quantile` -- Student t quantiles without scipy.

Statistical tests in this project take their tolerance from these intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from pipeline.sim.workloads.distributions import _integer, _number

__all__ = [
    "MeanCI",
    "ProportionCI",
    "batch_means_ci",
    "mean_ci",
    "proportion_ci",
    "summarise_values",
    "t_quantile",
    "time_weighted_mean",
    "time_weighted_quantile",
]


class MeanCI(NamedTuple):
    """A mean and the half-width of its confidence interval (unpacks as a pair)."""

    mean: float
    half_width: float

    @property
    def low(self) -> float:
        """Lower end of the interval."""
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        """Upper end of the interval."""
        return self.mean + self.half_width

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high


class ProportionCI(NamedTuple):
    """An observed fraction and its (asymmetric) interval ``[low, high]``."""

    estimate: float
    low: float
    high: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high


# -- Student t quantile ------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta, modified Lentz (Numerical Recipes 6.4).
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((a - 1.0 + m2) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: ``I_x(df/2, 1/2) / 2`` with ``x = df / (df + t**2)``."""
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        ix = math.exp(log_front) * _betacf(a, b, x) / a
    else:
        ix = 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b
    return ix / 2.0


def _cornish_fisher(z: float, df: float) -> float:
    # Hill (1970) / Abramowitz & Stegun 26.7.5: t in powers of 1/df around the normal z.
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_quantile(p: float, df: float) -> float:
    """The ``p``-quantile of Student's t with ``df`` degrees of freedom.

    Exact forms for df = 1 and 2; the Cornish-Fisher expansion for df > 200
    (error below 1e-9); otherwise Newton/bisection on the t CDF computed from
    the regularised incomplete beta (about 1e-12). Example:
    ``t_quantile(0.975, 9)`` is 2.2622.

    Raises:
        ValueError: ``p`` not in (0, 1) or ``df <= 0``.
    """
    p = _number("p", p, "probability in (0, 1)", above=0)
    if not p < 1:
        raise ValueError(f"p must be < 1 (probability in (0, 1)), got {p!r}")
    df = _number("df", df, "degrees of freedom", above=0)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    z = NormalDist().inv_cdf(p)
    guess = _cornish_fisher(z, df)
    if df > 200:
        return guess
    tail = 1.0 - p
    lo, hi = 0.0, max(guess, 1.0)
    while _t_upper_tail(hi, df) > tail:
        lo, hi = hi, 2.0 * hi
    t = min(max(guess, lo), hi)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(100):
        excess = _t_upper_tail(t, df) - tail  # > 0 means t is too small
        if excess > 0:
            lo = t
        else:
            hi = t
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = t + excess / density
        t = step if lo < step < hi else (lo + hi) / 2
        if hi - lo < 1e-13 * max(1.0, t) or abs(excess) < 1e-16:
            break
    return t


# -- intervals ---------------------------------------------------------------------------


def _samples(samples: Sequence[float] | np.ndarray, minimum: int) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"samples must be 1-D, got shape {x.shape}")
    if x.size < minimum:
        raise ValueError(f"samples must have at least {minimum} values, got {x.size}")
    if not np.isfinite(x).all():
        i = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"samples must be finite, got samples[{i}]={float(x[i])!r}")
    return x


def _level(level: float) -> float:
    level = _number("level", level, "confidence in (0, 1)", above=0)
    if not level < 1:
        raise ValueError(f"level must be < 1 (confidence in (0, 1)), got {level!r}")
    return level


def mean_ci(samples: Sequence[float] | np.ndarray, level: float = 0.95) -> MeanCI:
    """Mean and Student t half-width over independent replications.

    ``half_width = t_{(1+level)/2, n-1} * s / sqrt(n)`` with ``s`` the sample
    standard deviation (ddof=1). Use one value per independent run (e.g. the
    mean wait of each seed), not the correlated values inside one run.

    Raises:
        ValueError: fewer than 2 samples, a non-finite one, or ``level`` not in (0, 1).
    """
    x = _samples(samples, 2)
    level = _level(level)
    half = t_quantile((1.0 + level) / 2.0, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return MeanCI(float(x.mean()), half)


def summarise_values(values: Sequence[float] | np.ndarray, level: float = 0.95) -> MeanCI:
    """Mean and Student t half-width of per-replication values, some possibly missing.

    The one rule for "mean +- CI" of a summary key across replications, where a
    run may have no value (NaN, e.g. no item completed):

    - non-finite values (NaN, +-inf) are left out of the mean;
    - the mean is over the finite values, NaN when there is none;
    - the half-width is :func:`mean_ci`'s when there are at least 2 values and
      every one is finite, otherwise NaN: with one value there is no spread to
      measure, and an interval over the surviving runs only would look more
      certain than it is.

    Never warns (no "mean of empty slice").

    Raises:
        ValueError: ``values`` not 1-D, or ``level`` not in (0, 1).

    Example:
        >>> summarise_values([1.0, 2.0, 3.0])       # MeanCI(mean=2.0, half_width=2.48...)
        >>> summarise_values([1.0, float("nan")])   # MeanCI(mean=1.0, half_width=nan)
    """
    level = _level(level)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {x.shape}")
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return MeanCI(math.nan, math.nan)
    if finite.size == x.size and x.size >= 2:
        return mean_ci(x, level)
    return MeanCI(float(finite.mean()), math.nan)


def batch_means_ci(
    samples: Sequence[float] | np.ndarray, n_batches: int = 20, level: float = 0.95
) -> MeanCI:
    """Mean and half-width for one long autocorrelated run, by batch means.

    The samples (in time order) are cut into ``n_batches`` contiguous batches
    (sizes differing by at most one; nothing is dropped); the batch means are
    treated as independent, so the half-width is
    ``t_{(1+level)/2, n_batches-1} * std(batch means) / sqrt(n_batches)``. The
    returned mean is the mean of all samples. Batches must be long compared
    with the correlation time (e.g. many busy periods). Warm-up is *not*
    removed: slice it off before calling.

    Raises:
        ValueError: ``n_batches < 2``, fewer than 2 samples per batch, a
            non-finite sample, or ``level`` not in (0, 1).
    """
    n_batches = _integer("n_batches", n_batches, "number of batches", at_least=2)
    x = _samples(samples, 2 * n_batches)
    level = _level(level)
    means = np.array([b.mean() for b in np.array_split(x, n_batches)])
    half = t_quantile((1.0 + level) / 2.0, n_batches - 1) * float(means.std(ddof=1))
    return MeanCI(float(x.mean()), half / math.sqrt(n_batches))


def proportion_ci(successes: int, n: int, level: float = 0.95) -> ProportionCI:
    """Wilson score interval for a fraction ``successes / n`` (e.g. shed items / offered).

    ``center = (p + z**2 / 2n) / (1 + z**2 / n)``, ``half = z / (1 + z**2 / n) *
    sqrt(p (1 - p) / n + z**2 / 4n**2)`` with ``z`` the normal
    ``(1 + level) / 2`` quantile. Unlike the normal approximation it behaves at
    0 and n successes.

    Raises:
        ValueError: ``n < 1``, ``successes`` not in ``[0, n]``, or ``level`` not in (0, 1).
    """
    n = _integer("n", n, "trials", at_least=1)
    k = _integer("successes", successes, "count", at_least=0)
    if k > n:
        raise ValueError(f"successes must be <= n={n}, got {k}")
    z = NormalDist().inv_cdf((1.0 + _level(level)) / 2.0)
    p = k / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    # At 0 and n successes the Wilson bound is exactly 0 or 1; rounding may miss it.
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return ProportionCI(p, low, high)


# -- sample percentiles ------------------------------------------------------------------


def percentiles(values: np.ndarray, qs: Sequence[float]) -> list[float]:
    """``np.percentile(values, qs)`` (its default, linear method), bit for bit, as floats.

    numpy's own function imports ``numpy.ma`` on first use (about 6 ms of a
    command line's start-up) to find the partition points; this one computes
    the same two neighbours and the same interpolation without it.

    Args:
        values: a 1-D float array (not modified).
        qs: percentiles, each in [0, 100].

    Returns:
        One value per entry of ``qs``: NaN if ``values`` is empty or holds a NaN.
    """
    n = len(values)
    if n == 0:
        return [math.nan] * len(qs)
    q = np.true_divide(np.asarray(qs, dtype=np.float64), 100)
    virtual = (n - 1) * q
    below = np.floor(virtual)
    above = below + 1
    # Past the last index both neighbours are the largest value, as in numpy.
    last = virtual >= n - 1
    below[last] = -1
    above[last] = -1
    below = below.astype(np.intp)
    above = above.astype(np.intp)
    ordered = np.partition(values, np.concatenate(([0, -1], below, above)))
    if np.isnan(ordered[-1]):
        return [math.nan] * len(qs)
    a, b = ordered[below], ordered[above]
    gamma = virtual - below
    # numpy's _lerp: from the nearer neighbour, so the result stays within [a, b].
    diff = b - a
    result = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=result, where=gamma >= 0.5)
    return result.tolist()


# -- step functions ----------------------------------------------------------------------


def _step_durations(times: np.ndarray, t_end: float, t_start: float = -math.inf) -> np.ndarray:
    """How long each step ``[times[i], times[i+1])`` holds inside ``[t_start, t_end]``, seconds.

    The last step runs to ``t_end``. No validation: ``times`` must be a float
    array, non-decreasing (see :func:`time_weighted_mean`).
    """
    # In place where possible: a long run's series has tens of millions of rows.
    durations = np.append(times[1:], max(t_end, float(times[-1])))
    np.minimum(durations, t_end, out=durations)
    durations -= np.maximum(times, t_start) if t_start > times[0] else times
    return np.clip(durations, 0.0, None, out=durations)


def _segments(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    t_end: float,
    t_start: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Values and their durations inside ``[t_start, t_end]``."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.ndim != 1 or t.shape != v.shape or t.size == 0:
        raise ValueError(
            f"times and values must be non-empty 1-D arrays of one length, "
            f"got shapes {t.shape} and {v.shape}"
        )
    if not (np.isfinite(t).all() and np.isfinite(v).all()):
        raise ValueError("times and values must be finite")
    bad = np.flatnonzero(np.diff(t) < 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"times must be non-decreasing (seconds), got times[{i}]={float(t[i])!r} "
            f"then times[{i + 1}]={float(t[i + 1])!r}"
        )
    start = (
        float(t[0])
        if t_start is None
        else _number(
            "t_start", t_start, f"seconds, >= times[0]={float(t[0])!r}", at_least=float(t[0])
        )
    )
    end = _number("t_end", t_end, f"seconds, > t_start={start!r}", above=start)
    return v, _step_durations(t, end, start)


def time_weighted_mean(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    t_end: float,
    *,
    t_start: float | None = None,
) -> float:
    """Time average of a right-continuous step function over ``[t_start, t_end]``.

    The function is ``values[i]`` on ``[times[i], times[i+1])`` and
    ``values[-1]`` from ``times[-1]`` to ``t_end``; equal times are allowed
    (the later value wins). ``t_start`` defaults to ``times[0]`` (start the
    series at 0 to average from 0; pass a later ``t_start`` to skip warm-up).
    Changes after ``t_end`` are ignored. Result: ``sum(v_i * d_i) / (t_end - t_start)``.

    Raises:
        ValueError: mismatched, empty, non-finite or decreasing input,
            ``t_start < times[0]`` or ``t_end <= t_start``.
    """
    v, d = _segments(times, values, t_end, t_start)
    return float(np.dot(v, d) / d.sum())


def time_weighted_quantile(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    t_end: float,
    q: float,
    *,
    t_start: float | None = None,
) -> float:
    """The ``q``-quantile of a step function's value under time (see :func:`time_weighted_mean`).

    Returns the smallest value ``v`` such that the function is ``<= v`` for at
    least a share ``q`` of ``[t_start, t_end]`` (so ``q=0.5`` is the time
    median, ``q=1`` the maximum over the window, ``q=0`` the minimum held for
    a positive time).

    Raises:
        ValueError: as :func:`time_weighted_mean`, or ``q`` not in [0, 1].
    """
    q = _number("q", q, "probability in [0, 1]", at_least=0, at_most=1)
    v, d = _segments(times, values, t_end, t_start)
    held = d > 0
    v, d = v[held], d[held]
    order = np.argsort(v, kind="stable")
    cumulative = np.cumsum(d[order])
    total = cumulative[-1]
    # a relative slack so that exact ties (q = 1/2 of two equal halves) are not
    # pushed to the next value by rounding in the cumulative sum
    i = int(np.searchsorted(cumulative, q * total - 1e-12 * total, side="left"))
    return float(v[order][min(i, v.size - 1)])
