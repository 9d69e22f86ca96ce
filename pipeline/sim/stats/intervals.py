"""Confidence intervals for simulation output (tests and notebooks), importable from here.

The intervals of a mean are this module's own; the others live in a module of
their own concept (:mod:`.skewed`, :mod:`.proportions`, :mod:`.quantiles`) and
are importable from here too:

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
- :func:`~.quantiles.percentiles` -- ``np.percentile`` without its start-up cost (in
  :mod:`.quantiles` alone);
- :func:`t_quantile` -- Student t quantiles without scipy (from :mod:`.tdist`).

How long to run for a precise enough interval is :mod:`.runlength`; time
averages of step functions (queue depth, memory) are :mod:`.stepstats`.
Statistical tests in this project take their tolerance from these intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from pipeline._validate import integer
from pipeline.sim.stats.proportions import ProportionCI, proportion_bound, proportion_ci
from pipeline.sim.stats.quantiles import QuantileCI, quantile_ci
from pipeline.sim.stats.samples import confidence_level, sample_array
from pipeline.sim.stats.skewed import lognormal_mean_bounds, mean_bounds, skew_corrected_bounds
from pipeline.sim.stats.tdist import t_quantile

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
bound's chi-square has 2 degrees of freedom and its upper end ran to a median 10.7 times
the t half-width (48,556 s against t's 3.78 s on run means of 2.27, 1.01 and
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
    missed 6% of 600 looks, within its level's spread, and on 2,000-item runs
    at rho = 0.8 7.1%. For short runs,
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
