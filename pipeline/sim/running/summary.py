"""A run's summary: the headline numbers, keyed as in the command line's JSON.

:func:`summarise` reads a run's exact per-item columns and step series once
and returns the dict that :attr:`SimulationResult.summary
<pipeline.sim.SimulationResult.summary>` holds: waits, latencies, the
time-weighted queue and memory, outcome counts and fractions, with the
batch-means 95% half-widths of the mean wait and latency; with an initial
backlog also how it drained (:mod:`.backlog`). Those half-widths assume a
steady state: with a backlog they are NaN unless ``warmup_s`` cuts off its
whole drain (``warmup_s >= backlog_drained_s``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..stats.intervals import batch_means_ci, percentiles
from ..stats.stepstats import step_durations, weighted_sum
from .backlog import backlog_summary
from .class_summary import class_summaries
from .recorder import StepSeries

if TYPE_CHECKING:
    from .result import SimulationResult

__all__ = ["BATCHES", "BATCH_MEANS_MIN_ITEMS", "summarise"]


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


class _Window:
    """A series' rows clipped to ``[start_s, end_s]``, for every time statistic of one summary.

    Gives the same numbers as :meth:`StepSeries.time_mean` and
    :meth:`StepSeries.time_max` (the same durations, the same dot product),
    computing the durations once instead of once per statistic: a long run's
    series has tens of millions of rows.
    """

    def __init__(self, series: StepSeries, start_s: float) -> None:
        times, end = series.time_s, series.end_s
        start = max(float(start_s), float(times[0]))
        self._durations = step_durations(times, end, start) if end > start else None
        self._total = float("nan") if self._durations is None else self._durations.sum()
        self._live = np.append(times[1:] >= start_s, end >= start_s)

    def mean(self, values: np.ndarray) -> float:
        """Time-weighted mean over the window (NaN if it is empty)."""
        if self._durations is None:
            return float("nan")
        return weighted_sum(np.asarray(values, dtype=np.float64), self._durations) / self._total

    def max(self, values: np.ndarray) -> int | float:
        """Largest value held in the window (0.0 if no row is)."""
        live = self._live
        return values[live].max() if live.any() else 0.0


BATCHES = 10
"""Batches of the batch-means half-widths ``wait_mean_ci95_s`` and ``latency_mean_ci95_s``."""
BATCH_MEANS_MIN_ITEMS = 10_000
"""Fewest values (1,000 per batch) for which those half-widths are given; NaN (JSON null) below.

Shorter batches of a queueing run are correlated, and their spread
understates the mean's: on M/M/10 at rho = 0.8 the 95% half-width of the mean
latency covered 92% at 2,000 items and 94.3% at 5,000 even with the
skew-robust bounds, 95% from 10,000 on
(``tests/sim/running/test_summary_intervals.py``). A shorter run is too short
to know its own precision: replications (one value per run) do, for any
length."""


def _batch_half_width(values: np.ndarray) -> float:
    """95% batch-means half-width of values in arrival order (NaN when too few)."""
    if len(values) < BATCH_MEANS_MIN_ITEMS:
        return math.nan
    return batch_means_ci(values, n_batches=BATCHES).half_width


def summarise(result: SimulationResult) -> dict[str, Any]:
    scenario, report, c, s = result.scenario, result.report, result.columns, result.series
    warm = scenario.warmup_s
    counted = c.arrival_s >= warm
    started = counted & ~np.isnan(c.start_s)
    done = counted & (c.outcome == 0)
    del counted
    completed = int(done.sum())
    # One statistic at a time, freeing as it goes: a long run has tens of millions of rows.
    waits = (c.start_s - c.arrival_s)[started]
    del started
    wait_mean, (wait_p95,) = _mean(waits), percentiles(waits, (95,))
    wait_half = _batch_half_width(waits)
    del waits
    latencies = (c.finish_s - c.arrival_s)[done]
    del done
    # One partition for the three percentiles (the same values as three calls).
    latency = (_mean(latencies), *percentiles(latencies, (50, 95, 99)))
    latency_half = _batch_half_width(latencies)
    del latencies
    sim_time = s.end_s
    span = max(sim_time - warm, 0.0)
    window = _Window(s, warm)
    in_system = s.in_system
    # The peak of (held items x item size) is the peak of held items, times the size
    # (as int64 products, converted to float as StepSeries.memory_bytes' maximum would be).
    # Dead letters only ever accumulate: if the last count is 0, every count is.
    held = window.max(in_system + s.dead_letters if s.dead_letters[-1] else in_system)
    memory_peak = int(float(np.int64(held) * np.int64(scenario.item_size_bytes)))
    # Seconds during which an arrived item could not be admitted (backpressure held it).
    # The engine's own statistic counts every second a producer waits for a slot,
    # arrival or not (it reserves a slot before reading its source); for capacity
    # planning the time an *arrived* item was held upstream is what matters.
    blocked = 0.0
    if sim_time > warm and s.upstream_backlog.any():
        blocked = window.mean(s.upstream_backlog > 0) * (sim_time - warm)
    concurrency = scenario.config.concurrency
    summary = {
        "items_offered": report.offered,
        "items_admitted": report.admitted,
        "items_completed": report.completed,
        "items_dead_lettered": len(report.dead_letters),
        "items_shed": report.statistics.shed,
        "items_unfinished": len(report.unfinished),
        "items_expired": report.statistics.expired,
        "expired_fraction": (
            report.statistics.expired / report.offered if report.offered else math.nan
        ),
        "attempts_total": report.attempts,
        "retries_total": report.statistics.retried,
        "wait_mean_s": wait_mean,
        "wait_mean_ci95_s": wait_half,
        "wait_p95_s": wait_p95,
        "latency_mean_s": latency[0],
        "latency_mean_ci95_s": latency_half,
        "latency_p50_s": latency[1],
        "latency_p95_s": latency[2],
        "latency_p99_s": latency[3],
        "throughput_per_s": float(completed / span) if span > 0 else float("nan"),
        "utilisation": window.mean(s.in_flight) / concurrency,
        "queue_depth_mean": window.mean(s.queue_depth),
        "queue_depth_max": int(window.max(s.queue_depth)),
        "in_system_mean": window.mean(in_system),
        "upstream_backlog_max": int(window.max(s.upstream_backlog)),
        "producer_blocked_s": blocked,
        "memory_peak_bytes": memory_peak,
        "drain_timed_out": report.drain_timed_out,
        "sim_time_s": sim_time,
        "wall_time_s": result.wall_time_s,
        "engine": result.engine,
    }
    if scenario.classes is not None and result.item_class is not None:
        summary["classes"] = class_summaries(scenario.classes, result.item_class, c, warm)
    if scenario.initial_backlog:
        drain = backlog_summary(c, s, scenario.initial_backlog, report.drain_timed_out)
        summary.update(drain)
        if not warm >= drain["backlog_drained_s"]:  # also when it never drained (NaN)
            # Batch means assume a steady state; the items counted include the backlog's
            # drain, a transient, so those half-widths would be no precision of anything.
            summary["wait_mean_ci95_s"] = summary["latency_mean_ci95_s"] = math.nan
    return summary
