"""A day of traffic fitted: ``daily_curve(base, peak, peak_hour, width_h)`` from arrival times.

:func:`fit_daily_curve` turns one recorded day of arrival times into a
:class:`~pipeline.sim.TimeVarying` process whose rate is a fitted
:class:`~pipeline.sim.workloads.arrivals.DailyCurve` (a base rate with one
Gaussian bump), so a what-if can scale the peak or move it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..._validate import real
from ..workloads.arrivals import DailyCurve, daily_curve

if TYPE_CHECKING:
    from ..workloads.arrivals import TimeVarying

__all__ = ["fit_daily_curve"]


def fit_daily_curve(
    arrival_s: Sequence[float] | np.ndarray, *, bin_s: float = 900.0, start_s: float = 0.0
) -> TimeVarying:
    """Fit ``daily_curve(base, peak, peak_hour, width_h)`` to one day of arrival times.

    A method-of-moments fit on counts per ``bin_s``: ``base`` is the median
    rate of the quietest quarter of bins, ``peak`` the highest rate of a
    centred three-bin average, ``peak_hour`` the centre of mass of the
    arrivals above ``base``, and ``width_h`` makes the bump's area
    (``(peak - base) * width * sqrt(2 pi)``) equal those excess arrivals.

    Args:
        arrival_s: arrival times in seconds from midnight, within one day.
        bin_s: width of the counting bins, seconds.
        start_s: time of day at which the returned curve's clock starts (its
            ``t = 0``), seconds from midnight; pair it with
            ``trace_window(workload, start_s, ...)`` to model the same hours.

    Returns:
        A :class:`~pipeline.sim.TimeVarying` whose ``rate_fn`` is the fitted
        :class:`~pipeline.sim.workloads.arrivals.DailyCurve`.

    Raises:
        ValueError: fewer than 100 arrivals, or times outside ``[0, 86400]`` s.
    """
    t = np.asarray(arrival_s, dtype=np.float64)
    if t.size < 100:
        raise ValueError(f"need at least 100 arrival times to fit a daily curve, got {t.size}")
    if t.min() < 0 or t.max() > DailyCurve.period_s:
        raise ValueError("arrival_s must lie within one day, [0, 86400] seconds from midnight")
    width = real("bin_s", bin_s, "seconds", above=0)
    start_h = real("start_s", start_s, "seconds", at_least=0, at_most=DailyCurve.period_s) / 3600
    edges = np.arange(0.0, DailyCurve.period_s + width, width)
    counts, _ = np.histogram(t, edges)
    rates = counts / width
    base = float(np.median(np.sort(rates)[: max(1, len(rates) // 4)]))
    peak = float(np.convolve(rates, np.ones(3) / 3, mode="same").max())
    excess = np.clip(rates - base, 0.0, None)
    centres_h = (edges[:-1] + width / 2) / 3600.0
    peak_hour = float(np.average(centres_h, weights=excess)) if excess.sum() > 0 else 12.0
    area_s = float(excess.sum() * width)
    width_h = area_s / max(peak - base, 1e-12) / math.sqrt(2 * math.pi) / 3600.0
    hour = (peak_hour - start_h) % 24.0
    return daily_curve(base, max(peak, base), hour, width_h=min(max(width_h, 0.1), 12.0))
