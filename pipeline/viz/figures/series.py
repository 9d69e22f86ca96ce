"""What every figure of one run draws from: step-series vertices, distributions, byte units.

These helpers turn a :class:`~pipeline.sim.SimulationResult` into the arrays
that lines are drawn from, thinned to what a screen can show, and format the
quantities their labels name. They draw nothing themselves, so both the
one-shot plots (:mod:`~pipeline.viz.figures.run`) and the panels that are redrawn in
place (:mod:`~pipeline.viz.figures.panels`) use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .style import COLORS

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = ["MAX_POINTS", "StepBuckets", "bucket_steps", "memory_bound_bytes"]

#: Step series longer than this are drawn as this many buckets: a min-max band and the mean.
MAX_POINTS = 2000

#: How a previous run is drawn behind the current one.
FADED = {"alpha": 0.3, "linewidth": 1.0}
#: Percentiles marked on the wait and latency distributions.
MARKS = (50, 95, 99)


def memory_bound_bytes(result: SimulationResult) -> int | None:
    """``(maxsize + concurrency) * item_size``, the in-system ceiling; None if unbounded.

    It bounds the items queued, running and waiting for a retry; dead letters
    kept in memory are not in the queue and come on top.
    """
    cfg = result.scenario.config
    if cfg.queue_maxsize is None:
        return None
    return (cfg.queue_maxsize + cfg.concurrency) * result.scenario.item_size_bytes


class StepBuckets(NamedTuple):
    """A long step function summarised over equal spans of time, for drawing.

    ``edges`` holds one more value than the others: bucket ``k`` is
    ``[edges[k], edges[k + 1])`` seconds. ``low`` and ``high`` are the least
    and greatest values the function takes in it (the value carried in at
    its start included), and ``mean`` is its exact time-weighted mean there,
    so ``low <= mean <= high``.
    """

    edges: np.ndarray
    low: np.ndarray
    high: np.ndarray
    mean: np.ndarray

    @property
    def width_s(self) -> float:
        """Seconds per bucket."""
        return float(self.edges[1] - self.edges[0])


def bucket_steps(
    t: np.ndarray, y: np.ndarray, end_s: float, max_points: int = MAX_POINTS
) -> StepBuckets | None:
    """The step function ``y[i]`` from ``t[i]`` (the last value to ``end_s``), in time buckets.

    The one thinning rule of every figure of a run: a series with more than
    ``max_points`` steps is drawn as ``max_points`` buckets of equal time, a
    band from each bucket's least to its greatest value and a line at its
    time-weighted mean. Keeping every k-th step, or each bucket's peak alone,
    drew a queue that is busy 58% of the time flat at its peak.

    Args:
        t: the times of the steps, seconds, non-decreasing.
        y: the value from each step on (same length).
        end_s: when the last value ends, seconds.
        max_points: longest series drawn as it is.

    Returns:
        The buckets, or None when the series is short enough to draw exactly (or
        spans no time).
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(t)
    if n <= max_points or not end_s > t[0]:
        return None
    count = max(int(max_points), 1)
    edges = np.linspace(t[0], end_s, count + 1)
    edges[-1] = end_s
    # The value held when each bucket opens (the last step at or before its start) ...
    carried = y[np.searchsorted(t, edges[:-1], side="right") - 1]
    low, high = carried.copy(), carried.copy()
    # ... and every value set inside it (a step at end_s holds for no time: the last bucket's).
    bucket = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, count - 1)
    sizes = np.bincount(bucket, minlength=count)
    filled = np.flatnonzero(sizes)
    starts = (np.cumsum(sizes) - sizes)[filled]
    low[filled] = np.minimum(low[filled], np.minimum.reduceat(y, starts))
    high[filled] = np.maximum(high[filled], np.maximum.reduceat(y, starts))
    # Exact time-weighted means from the running integral F(x) = integral of y from t[0] to x.
    area = np.concatenate(([0.0], np.cumsum(y * np.diff(np.append(t, end_s)))))
    at = np.searchsorted(t, edges, side="right") - 1
    integral = area[at] + y[at] * (edges - t[at])
    mean = np.diff(integral) / np.diff(edges)
    # Rounding in the running integral must not put a mean outside its own band.
    return StepBuckets(edges, low, high, np.clip(mean, low, high))


def step_vertices(
    t: np.ndarray, y: np.ndarray, end_s: float, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of a step series held to ``end_s`` (steps-post), exact or thinned.

    A series longer than ``max_points`` gives its time-weighted mean per
    bucket (:func:`bucket_steps`); :func:`band_vertices` gives the band around it.
    """
    buckets = bucket_steps(t, y, end_s, max_points)
    if buckets is not None:
        return buckets.edges, np.append(buckets.mean, buckets.mean[-1])
    return np.append(t, end_s), np.append(y, y[-1] if len(y) else 0)


def band_vertices(
    t: np.ndarray, y: np.ndarray, end_s: float, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """``(x, low, high, width_s)``: the min-max band of a thinned series (steps-post), or None.

    None when :func:`step_vertices` draws the series exactly.
    """
    buckets = bucket_steps(t, y, end_s, max_points)
    if buckets is None:
        return None
    low = np.append(buckets.low, buckets.low[-1])
    high = np.append(buckets.high, buckets.high[-1])
    return buckets.edges, low, high, buckets.width_s


def step_data(
    result: SimulationResult, values: np.ndarray, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`step_vertices` of one series of ``result`` (values per row of ``result.series``)."""
    return step_vertices(result.series.time_s, values, result.series.end_s, max_points)


def step_band(
    result: SimulationResult, values: np.ndarray, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """:func:`band_vertices` of one series of ``result``."""
    return band_vertices(result.series.time_s, values, result.series.end_s, max_points)


def thinned_label(label: str, width_s: float, *, band: bool = True) -> str:
    """A legend label that says the series is thinned and how it is drawn."""
    if not band:
        return f"{label} (mean per {width_s:.3g} s)"
    return f"{label} (mean, band min–max per {width_s:.3g} s)"


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(values[~np.isnan(values)])
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


def thin(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= max_points:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, max_points).astype(np.int64))
    return x[keep], y[keep]


def waits_and_latencies(run: SimulationResult) -> tuple[tuple[str, np.ndarray, str], ...]:
    """``(name, seconds, colour)`` of waits (items that started) and latencies (completed)."""
    c = run.columns
    return (
        ("wait", (c.start_s - c.arrival_s)[~np.isnan(c.start_s)], COLORS["wait"]),
        ("latency", (c.finish_s - c.arrival_s)[c.outcome == 0], COLORS["latency"]),
    )


def percentile_note(name: str, q: np.ndarray) -> str:
    return f"{name} " + " · ".join(f"p{m} {v:.3g}" for m, v in zip(MARKS, q, strict=True)) + " s"


def layers(
    result: SimulationResult, compare: SimulationResult | None
) -> Iterator[tuple[SimulationResult, bool]]:
    """``(run, faded)`` in drawing order: the previous run (if any) first, faded, behind."""
    if compare is not None:
        yield compare, True
    yield result, False


def styled(kwargs: dict[str, Any], faded: bool) -> dict[str, Any]:
    """Line keywords as given, or faded and unlabelled (the legend describes the current run)."""
    return {**kwargs, **FADED, "label": None} if faded else kwargs
