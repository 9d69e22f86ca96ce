"""Confidence intervals for simulation output (tests and notebooks).

- :func:`mean_ci` -- Student t interval across independent replications;
- :func:`robust_mean_ci` -- the same, widened for skew (:func:`mean_bounds`) from
  :data:`SKEW_ROBUST_MIN_VALUES` values on: the interval the project prints
  across replications;
- :func:`batch_means_ci` -- the same for one long, autocorrelated run;
- :func:`proportion_ci` -- Wilson interval for a fraction (shed, dead-lettered);
- :func:`proportion_bound` -- exact one-sided (Clopper-Pearson) bound on a
  fraction, the one that stays honest at 0 events ("the rule of three");
- :func:`lognormal_mean_bounds` -- one-sided bounds on the mean of skewed,
  positive per-replication values (generalised pivotal quantity on log scale);
- :func:`skew_corrected_bounds` -- one-sided bounds on a mean from Hall's
  skewness-corrected Student t (any sign: differences too);
- :func:`mean_bounds` -- the skew-robust one-sided bounds the project prints:
  on each side the widest of Student t, Hall's and (positive values) the
  lognormal bound;
- :func:`quantile_ci` -- distribution-free order-statistic interval for a
  quantile of independent values (e.g. one p95 per replication, or measured
  service times);
- :func:`paired_difference` -- mean difference and t interval of paired values
  (two configurations run on the same random numbers, replication by
  replication);
- :func:`summarise_values` -- mean and half-width of per-replication values that
  may be missing (NaN), without warnings: the one rule the CLI, ``sweep`` and
  ``Replications`` share;
- :func:`percentiles` -- ``np.percentile`` without its start-up cost;
- :func:`t_quantile` -- Student t quantiles without scipy (from :mod:`.tdist`).

How long to run for a precise enough interval is :mod:`.runlength`; time
averages of step functions (queue depth, memory) are :mod:`.stepstats`.
Statistical tests in this project take their tolerance from these intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from pipeline._validate import integer, real
from pipeline.sim.stats.tdist import regularised_beta, t_quantile

__all__ = [
    "SKEW_ROBUST_MIN_VALUES",
    "MeanCI",
    "ProportionCI",
    "QuantileCI",
    "batch_means_ci",
    "lognormal_mean_bounds",
    "mean_bounds",
    "mean_ci",
    "paired_difference",
    "proportion_bound",
    "proportion_ci",
    "quantile_ci",
    "robust_mean_ci",
    "skew_corrected_bounds",
    "summarise_values",
    "t_quantile",
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

    def within(self, floor: float = -math.inf, ceiling: float = math.inf) -> tuple[float, float]:
        """``(low, high)`` cut to the quantity's range ``[floor, ceiling]``.

        A mean of depths or times is never below 0: an interval reaching below
        says no more than one cut at 0, and covers no less. NaN stays NaN.
        ``pipeline._units.metric_range`` gives a summary key's range.
        """
        return min(max(self.low, floor), ceiling), max(min(self.high, ceiling), floor)


class ProportionCI(NamedTuple):
    """An observed fraction and its (asymmetric) interval ``[low, high]``."""

    estimate: float
    low: float
    high: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high


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


# -- intervals ---------------------------------------------------------------------------


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


def mean_ci(samples: Sequence[float] | np.ndarray, level: float = 0.95) -> MeanCI:
    """Mean and Student t half-width over independent replications.

    ``half_width = t_{(1+level)/2, n-1} * s / sqrt(n)`` with ``s`` the sample
    standard deviation (ddof=1). Use one value per independent run (e.g. the
    mean wait of each seed), not the correlated values inside one run.

    Raises:
        ValueError: fewer than 2 samples, a non-finite one, or ``level`` not in (0, 1).
    """
    x = sample_array(samples, 2)
    level = confidence_level(level)
    half = t_quantile((1.0 + level) / 2.0, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return MeanCI(float(x.mean()), half)


SKEW_ROBUST_MIN_VALUES = 6
"""Fewest values from which :func:`robust_mean_ci` widens Student t for skew.

Below it the skew cannot be bounded usefully: with 3 values the lognormal
bound's chi-square has 2 degrees of freedom and its upper end ran to 80 times
the t half-width (49,478 s against t's 3.78 s on run means of 2.27, 1.01 and
4.04 s), and Hall's correction, whose sample skewness of 3 values is noise,
still tripled it (median 3.3 times t on 2,000-item M/M/10 runs)."""


def robust_mean_ci(samples: Sequence[float] | np.ndarray, level: float = 0.95) -> MeanCI:
    """Mean and a two-sided half-width over independent replications, widened for skew.

    From :data:`SKEW_ROBUST_MIN_VALUES` values on, each side is bounded at
    ``(1 + level) / 2`` by :func:`mean_bounds` (the widest of Student t,
    Hall's skewness-corrected t and, for values of one sign, the lognormal
    bound) and the half-width is the larger of the two distances from the
    mean, so ``mean +- half`` covers with at least ``level``; it is never
    narrower than :func:`mean_ci`'s. Per-replication means of short queueing
    runs are skewed to the right, and there the t interval misses above too
    often: 95% t intervals over 3 to 12 2,000-item M/M/10 runs at rho = 0.8
    (skewness of the run means about 1.8) missed the mean wait 7-8% of the
    time.

    With fewer values the interval is Student t's (:func:`mean_ci`): a skew
    that 2 to 5 values cannot show cannot be bounded without an interval many
    times wider than t's, which says nothing. Student t holds its level when
    the runs are long enough for their means to be nearly symmetric: at 3
    replications of 20,000-item M/M/10 runs at rho = 0.7 (skewness 0.4) it
    missed 4.6%, at rho = 0.8 (skewness 0.6) about 6%, and on 2,000-item runs
    at rho = 0.8 7.3%. For short runs,
    run at least :data:`SKEW_ROBUST_MIN_VALUES` replications
    (``tests/sim/running/test_replication_intervals.py`` checks both).

    Raises:
        ValueError: fewer than 2 samples, a non-finite one, or ``level`` not in (0, 1).
    """
    x = sample_array(samples, 2)
    level = confidence_level(level)
    if x.size < SKEW_ROBUST_MIN_VALUES:
        return mean_ci(x, level)
    mean = float(x.mean())
    low, high = mean_bounds(x, (1.0 + level) / 2.0)
    return MeanCI(mean, max(high - mean, mean - low, 0.0))


def summarise_values(values: Sequence[float] | np.ndarray, level: float = 0.95) -> MeanCI:
    """Mean and skew-robust half-width of per-replication values, some possibly missing.

    The one rule for "mean +- CI" of a summary key across replications, where a
    run may have no value (NaN, e.g. no item completed):

    - non-finite values (NaN, +-inf) are left out of the mean;
    - the mean is over the finite values, NaN when there is none;
    - the half-width is :func:`robust_mean_ci`'s (at least Student t's, wider
      on the side a skew reaches) when there are at least 2 values and
      every one is finite, otherwise NaN: with one value there is no spread to
      measure, and an interval over the surviving runs only would look more
      certain than it is.

    Never warns (no "mean of empty slice").

    Raises:
        ValueError: ``values`` not 1-D, or ``level`` not in (0, 1).

    Example:
        >>> summarise_values([1.0, 2.0, 3.0])       # MeanCI(mean=2.0, half_width=2.48...): t
        >>> summarise_values([1.0, float("nan")])   # MeanCI(mean=1.0, half_width=nan)
    """
    level = confidence_level(level)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {x.shape}")
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return MeanCI(math.nan, math.nan)
    if finite.size == x.size and x.size >= 2:
        return robust_mean_ci(x, level)
    return MeanCI(float(finite.mean()), math.nan)


def batch_means_ci(
    samples: Sequence[float] | np.ndarray, n_batches: int = 10, level: float = 0.95
) -> MeanCI:
    """Mean and half-width for one long autocorrelated run, by batch means.

    The samples (in time order) are cut into ``n_batches`` contiguous batches
    (sizes differing by at most one; nothing is dropped); the batch means are
    treated as independent values and bounded on each side at
    ``(1 + level) / 2`` by :func:`mean_bounds` (the widest of Student t,
    Hall's skewness-corrected t and, for positive means, the lognormal bound);
    the half-width is the larger of the two distances from the mean, so the
    interval ``mean +- half`` covers with at least ``level``. The returned mean
    is the mean of all samples. Batches must be long compared with the
    correlation time (e.g. many busy periods). Warm-up is *not* removed: slice
    it off before calling.

    Why not plain t: the batch means of a queueing run are skewed to the
    right, and a run with a low mean also has a narrow t interval, so the t
    interval misses above far more often than ``(1 - level) / 2``. With short
    batches the batch means are also correlated, and their spread
    understates the mean's; fewer, longer batches (10, not 20) and enough
    items per batch are the remedy (the run summary gives none below
    :data:`~pipeline.sim.running.summary.BATCH_MEANS_MIN_ITEMS` values).
    Measured on M/M/10 at rho = 0.8 (``tests/sim/running/test_summary_intervals.py``).

    Raises:
        ValueError: ``n_batches < 2``, fewer than 2 samples per batch, a
            non-finite sample, or ``level`` not in (0, 1).
    """
    n_batches = integer("n_batches", n_batches, "number of batches", at_least=2)
    x = sample_array(samples, 2 * n_batches)
    level = confidence_level(level)
    means = np.array([b.mean() for b in np.array_split(x, n_batches)])
    mean = float(x.mean())
    low, high = mean_bounds(means, (1.0 + level) / 2.0)
    # The batch means' mean is the samples' mean up to rounding (batch sizes differ by one).
    return MeanCI(mean, max(high - mean, mean - low, 0.0))


PIVOT_DRAWS = 20_000
"""Monte Carlo draws behind :func:`lognormal_mean_bounds` (fixed seed: repeatable bounds)."""


@lru_cache(maxsize=64)
def _pivot_draws(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Draws of ``Z sqrt((n - 1) / (U n))`` and ``(n - 1) / (2 U)``: Z normal, U chi2(n - 1)."""
    rng = np.random.default_rng(20261201 + n)
    z = rng.standard_normal(PIVOT_DRAWS)
    u = rng.chisquare(n - 1, PIVOT_DRAWS)
    noise = z * np.sqrt((n - 1) / (u * n))
    shift = (n - 1) / (2.0 * u)
    noise.setflags(write=False)  # cached: shared by every call with n values
    shift.setflags(write=False)
    return noise, shift


def lognormal_mean_bounds(
    samples: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float]:
    """One-sided lower and upper bounds, each at ``level``, on the mean of positive, skewed values.

    Per-replication means and percentiles of short queueing runs are skewed
    to the right (a run that met a long busy period waits far longer than
    the rest), and a Student t bound on them is too low too often: on
    2,000-item M/M/10 runs at rho = 0.8 (skewness about 2) a 99% upper t
    bound missed the mean in 4-6% of cases. Their logarithms are close to
    symmetric, so the values are modelled as lognormal and the mean
    ``exp(mu + sigma**2 / 2)`` bounded by the generalised pivotal quantity of
    Krishnamoorthy and Mathew (2003),
    ``T = ybar - Z s sqrt((n - 1) / (U n)) + (n - 1) s**2 / (2 U)`` with ``ybar``,
    ``s`` the mean and standard deviation of the logs, ``Z ~ N(0, 1)`` and
    ``U ~ chi2(n - 1)``: the bounds are ``exp`` of its ``1 - level`` and
    ``level`` quantiles, over :data:`PIVOT_DRAWS` fixed-seed draws. For
    lognormal values its coverage is close to ``level`` from about 6 values
    on, but not with 3 (its lower bound then misses more often): callers
    that need the level to hold take, on each side, the wider of this and
    the t bound, as :func:`~pipeline.sim.analysis.planning.judgement.judge` does.

    Raises:
        ValueError: fewer than 2 samples, a non-finite or non-positive one, or
            ``level`` not in (0, 1).
    """
    x = sample_array(samples, 2)
    level = confidence_level(level)
    if not (x > 0).all():
        i = int(np.flatnonzero(x <= 0)[0])
        raise ValueError(f"samples must be > 0 (logs are taken), got samples[{i}]={float(x[i])!r}")
    y = np.log(x)
    ybar, s2 = float(y.mean()), float(y.var(ddof=1))
    noise, shift = _pivot_draws(x.size)
    pivot = ybar - noise * math.sqrt(s2) + shift * s2
    low, high = np.quantile(pivot, [1.0 - level, level])
    with np.errstate(over="ignore"):  # values over many decades: the upper bound is inf, honestly
        return float(np.exp(low)), float(np.exp(high))


def skew_corrected_bounds(
    samples: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float]:
    """One-sided lower and upper bounds, each at ``level``, on a mean: Hall's skew-corrected t.

    The Student t bound assumes the studentised mean ``(xbar - mu) / (s / sqrt(n))``
    is symmetric. For right-skewed values it is not: a sample with a low mean
    also has a small ``s``, so the t upper bound falls short too often. Hall
    (1992, "On the removal of skewness by transformation") maps ``theta =
    (xbar - mu) / s`` through the monotone
    ``g(theta) = theta + a theta**2 + a**2 theta**3 / 3 + gamma / (6 n)``, ``a = gamma / 3``,
    with ``gamma`` the sample skewness (third central moment over the cube of
    the standard deviation, both with divisor ``n``); ``sqrt(n) g(theta)`` is
    close to normal up to order ``1 / n``. The bounds are
    ``xbar - s g^-1(+-q / sqrt(n))``, ``q`` the Student t ``level`` quantile
    with ``n - 1`` degrees of freedom, and
    ``g^-1(y) = (cbrt(1 + 3 a (y - gamma / (6 n))) - 1) / a``. It works for
    values of any sign (paired differences too). With few values ``gamma``
    underestimates the skew: :func:`mean_bounds` also takes the lognormal
    bound where it applies.

    Raises:
        ValueError: fewer than 2 samples, a non-finite one, or ``level`` not in (0, 1).
    """
    x = sample_array(samples, 2)
    level = confidence_level(level)
    n = x.size
    mean = float(x.mean())
    centred = x - mean
    s = float(x.std(ddof=1))
    if s == 0.0:
        return mean, mean
    q = t_quantile(level, n - 1) / math.sqrt(n)
    sigma = float(np.sqrt((centred**2).mean()))
    gamma = float((centred**3).mean()) / sigma**3
    a, shift = gamma / 3.0, gamma / (6.0 * n)

    def inverse(y: float) -> float:
        if abs(a) < 1e-12:
            return y - shift
        return (float(np.cbrt(1.0 + 3.0 * a * (y - shift))) - 1.0) / a

    return mean - s * inverse(q), mean - s * inverse(-q)


def mean_bounds(samples: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Skew-robust one-sided lower and upper bounds, each at ``level``, on a mean.

    For independent values (one per replication).

    The bounds every plan and cost in the project prints, and every interval
    across :data:`SKEW_ROBUST_MIN_VALUES` or more replications (a plan can
    afford a wide bound: an undecided look runs more replications; a printed
    interval over 3 values cannot, see :func:`robust_mean_ci`).
    Per-replication means of short queueing runs are skewed to the right (a
    run that met a long busy period waits far longer than the rest) and even
    their logarithms are (skewness about 0.2 on 2,000-item M/M/10
    runs at rho = 0.8), so no one method holds its level everywhere: on each
    side the bound is the widest of

    - the Student t bound ``xbar -+ t s / sqrt(n)``;
    - Hall's skewness-corrected t (:func:`skew_corrected_bounds`), which
      corrects the skew it can estimate and gains with more values;
    - when every value is positive, the lognormal bound
      (:func:`lognormal_mean_bounds`), which is wide with few values, where
      the sample skewness cannot show the skew; when every value is
      negative, the same on the mirrored values. From 3 values on: with 2,
      its upper end is astronomically far whatever the values, and the
      bounds are Student t's (Hall's correction has no skew to see in two
      values). Two replications are too few for skewed values: a 97.5% t
      upper bound over 2 of those runs missed 4.7%.

    Taking the widest keeps each side's miss rate at most that of the best of
    the three. On those M/M/10 runs (Erlang C exact) a 99% upper bound missed
    0.6%, 0.9%, 1.0% and 1.2% at 3, 6, 12 and 30 values, where t alone
    missed 2.7-4.0% and t with the lognormal bound 0.9-1.75%
    (``tests/sim/analysis/planning/test_skewed_bounds.py``).

    Raises:
        ValueError: fewer than 2 samples, a non-finite one, or ``level`` not in (0, 1).
    """
    x = sample_array(samples, 2)
    level = confidence_level(level)
    n = x.size
    mean = float(x.mean())
    if bool((x == x[0]).all()):
        return mean, mean  # no spread to measure (a log's rounding would invent one)
    half = t_quantile(level, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    hall_low, hall_high = skew_corrected_bounds(x, level)
    low, high = min(mean - half, hall_low), max(mean + half, hall_high)
    if n < 3:
        # Two values: the lognormal bound's chi-square has one degree of freedom, and its
        # upper end is astronomically far (about 1e130 for 1 and 3 at 97.5%): no use.
        return low, high
    if (x > 0).all():
        skew_low, skew_high = lognormal_mean_bounds(x, level)
        low, high = min(low, skew_low), max(high, skew_high)
    elif (x < 0).all():
        mirror_low, mirror_high = lognormal_mean_bounds(-x, level)
        low, high = min(low, -mirror_high), max(high, -mirror_low)
    return low, high


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


def paired_difference(
    values_a: Sequence[float] | np.ndarray,
    values_b: Sequence[float] | np.ndarray,
    level: float = 0.95,
) -> MeanCI:
    """Mean of ``b - a`` over pairs, with its skew-robust half-width (:func:`robust_mean_ci`).

    Pair *r* holds the same replication of two configurations, run on the same
    random numbers (replication *r* of two scenarios with one seed sees the same
    arrivals and service times). The noise both share cancels in the
    difference, so its interval is usually far narrower than two separate
    intervals would suggest; it is still valid when they share nothing.
    Differences of short queueing runs are skewed as their values are (a
    busy period that one configuration absorbs and the other does not), so
    the interval is :func:`robust_mean_ci`'s, never narrower than Student t's.

    Raises:
        ValueError: the two lengths differ, fewer than 2 pairs, a non-finite
            value, or ``level`` not in (0, 1).
    """
    a, b = sample_array(values_a, 2), sample_array(values_b, 2)
    if a.size != b.size:
        raise ValueError(
            f"values_a and values_b must pair up (one value per replication each), "
            f"got {a.size} and {b.size} values"
        )
    return robust_mean_ci(b - a, level)


# -- sample percentiles ------------------------------------------------------------------


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
