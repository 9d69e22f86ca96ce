"""The arrival process at the source: one by one, or counted per interval.

- **A recorded run's arrivals** (:func:`fit_arrivals`, what
  :func:`~pipeline.sim.calibrate` fits): a *backlog* (everything available at
  the origin, as in a bulk ingestion) replayed as it was; otherwise a Poisson
  process at the measured rate when the gaps between arrivals pass a
  Kolmogorov-Smirnov test for exponential gaps (:mod:`.ks`), else the
  measured arrival times themselves (:class:`~pipeline.sim.Trace`).
- **Telemetry's arrivals one by one** (:func:`fit_observed_arrivals`): a Poisson
  process as above; otherwise they are counted per interval (about 25 arrivals
  each, at most 1,000 intervals) and fitted as counts.
- **Counts per interval** (:func:`fit_counts`): a Poisson process at the mean
  rate when the dispersion test
  (:func:`~pipeline.sim.stats.chisquare.dispersion_test`) is consistent with
  one rate at 5%; else :meth:`TimeVarying.from_counts
  <pipeline.sim.TimeVarying.from_counts>`, the measured rate interval by
  interval (the window repeating). The rate's 95% interval is the Poisson
  count's, ``1.96 sqrt(N) / T``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..stats.chisquare import ChiSquareTest, dispersion_test
from ..workloads.arrivals import ArrivalProcess, Poisson, TimeVarying, Trace
from ..workloads.telemetry.observed import Observed
from .ks import LILLIEFORS_5PCT, MIN_FIT, ks_distance
from .records import ArrivalFit

__all__ = ["CountsArrivalFit", "fit_arrivals", "fit_counts", "fit_observed_arrivals"]

_LEVEL = 0.05
_PER_BIN = 25  # arrivals per interval when times one by one are counted
_MAX_BINS = 1000
_UNTESTED = ChiSquareTest(math.nan, 0, math.nan)


def fit_arrivals(arrivals_s: np.ndarray) -> ArrivalFit:
    """Model the source's arrival times: a backlog, a Poisson process, or the times themselves."""
    t = np.asarray(arrivals_s, dtype=np.float64)
    n = int(t.size)
    if n == 0:
        raise ValueError("no arrivals to fit: the source offered nothing")
    start = min(0.0, float(t[0]))
    t = t - start
    span = float(t[-1] - t[0])
    if n == 1 or span <= 1e-9 * max(1.0, abs(float(t[-1]))):
        return ArrivalFit("backlog", Trace(t), n, math.nan, math.nan, math.nan, math.nan)
    gaps = np.diff(np.concatenate([[0.0], t]))
    rate = n / float(t[-1]) if t[-1] > 0 else math.nan
    mean_gap = float(gaps.mean())
    distance = ks_distance(gaps, lambda v: 1.0 - np.exp(-v / mean_gap))
    critical = LILLIEFORS_5PCT["exponential"] / math.sqrt(n)
    ci = 1.96 * math.sqrt(n) / float(t[-1])
    if n >= MIN_FIT and distance <= critical and math.isfinite(rate):
        return ArrivalFit("poisson", Poisson(rate=rate), n, rate, ci, distance, critical)
    return ArrivalFit("trace", Trace(t), n, rate, ci, distance, critical)


@dataclass(frozen=True)
class CountsArrivalFit(ArrivalFit):
    """An :class:`~.records.ArrivalFit` made from counts per interval.

    Attributes:
        interval_s: the counting interval, seconds.
        counts: arrivals in each interval.
        dispersion: the Poisson dispersion test of the counts.
    """

    interval_s: float = math.nan
    counts: tuple[float, ...] = ()
    dispersion: ChiSquareTest = _UNTESTED


def fit_counts(
    counts: np.ndarray, interval_s: float, *, prefix: str = ""
) -> tuple[CountsArrivalFit, str]:
    """Arrivals counted per ``interval_s`` seconds: the fit and one sentence saying how.

    Raises:
        ValueError: no arrival counted at all.
    """
    total = float(counts.sum())
    if not total > 0:
        raise ValueError("no arrivals counted in the window: nothing to fit a rate to")
    span = counts.size * interval_s
    rate = total / span
    half = 1.96 * math.sqrt(total) / span
    test = dispersion_test(counts)
    described = (
        f"dispersion D={test.statistic:.4g} on {test.df} df, p={test.p_value:.3g}"
        if test.df
        else "one interval, no dispersion test"
    )
    if test.p_value >= _LEVEL:
        process: ArrivalProcess = Poisson(rate=rate)
        kind = "poisson"
        how = (
            f"{prefix}Poisson at the mean rate {rate:.4g}/s: {counts.size} counts per "
            f"{interval_s:g} s are consistent with one rate ({described} >= {_LEVEL})"
        )
    else:
        process = TimeVarying.from_counts(counts.tolist(), interval_s=interval_s)
        kind = "time_varying"
        how = (
            f"{prefix}time-varying Poisson, the rate of each of {counts.size} intervals of "
            f"{interval_s:g} s (mean {rate:.4g}/s): the rate varies ({described} < {_LEVEL})"
        )
    fit = CountsArrivalFit(
        kind, process, round(total), rate, half, math.nan, math.nan,
        interval_s=float(interval_s), counts=tuple(counts.tolist()), dispersion=test,
    )  # fmt: skip
    return fit, how


def fit_observed_arrivals(observed: Observed) -> tuple[ArrivalFit, str, float]:
    """The arrivals of ``observed``: the fit, how it was made, and the window in seconds.

    Raises:
        ValueError: no arrivals, or all of them at one instant.
    """
    if observed.counts is not None:
        counts = np.asarray(observed.counts, dtype=np.float64)
        if not counts.sum() > 0:
            raise ValueError(
                f"{observed.source}: no arrivals counted in the window ({counts.size} intervals "
                f"of {observed.interval_s:g} s): nothing to fit a rate to"
            )
        fit, how = fit_counts(counts, float(observed.interval_s))
        return fit, how, counts.size * float(observed.interval_s)
    if observed.arrivals_s is None:
        raise ValueError(f"{observed.source}: no arrivals (times or counts) to fit a rate to")
    times = np.asarray(observed.arrivals_s, dtype=np.float64)
    fit = fit_arrivals(times)
    span = float(times[-1]) if times.size else 0.0
    if fit.kind == "backlog":
        raise ValueError(f"{observed.source}: every arrival is at one instant; no rate to fit")
    if fit.kind == "poisson":
        how = (
            f"Poisson at {fit.rate_per_s:.4g}/s: the gaps of {fit.n} arrivals pass a KS test "
            f"for exponential gaps (D={fit.ks_statistic:.3f} <= {fit.ks_critical:.3f})"
        )
        return fit, how, span
    bins = int(min(_MAX_BINS, max(1, fit.n // _PER_BIN)))
    interval = span / bins
    counts = np.histogram(times, bins=bins, range=(0.0, span))[0].astype(np.float64)
    prefix = (
        f"the gaps fail a KS test for exponential gaps (D={fit.ks_statistic:.3f} > "
        f"{fit.ks_critical:.3f}), so they were counted per {interval:.4g} s: "
    )
    counted, how = fit_counts(counts, interval, prefix=prefix)
    return counted, how, span
