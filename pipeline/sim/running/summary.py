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


_ROWS = 1 << 18
"""Rows of a series that :class:`_Window` reads at a time (bounds its scratch memory)."""


class _Window:
    """A series' rows clipped to ``[start_s, end_s]``, for every time statistic of one summary.

    Gives the same numbers as :meth:`StepSeries.time_mean` and
    :meth:`StepSeries.time_max` (the same durations, the same dot product) for
    a series of up to :data:`_ROWS` rows. A longer one (a run of millions of
    items has tens of millions of rows) is read :data:`_ROWS` rows at a time,
    so that no statistic makes a float copy of a whole column or of its
    durations: the dot products are then summed a block at a time, which can
    move a mean in its last bit or two (about 1e-16 relative), not more.

    Every statistic of one summary is computed in one pass (:meth:`means`),
    each block's durations once.
    """

    def __init__(self, series: StepSeries, start_s: float) -> None:
        self._series = series
        self._start_s = float(start_s)
        times, end = series.time_s, series.end_s
        self._clip = max(self._start_s, float(times[0]))
        self.empty = not end > self._clip
        self._blocks = [(low, min(low + _ROWS, len(times))) for low in range(0, len(times), _ROWS)]

    def _durations(self, low: int, high: int) -> np.ndarray:
        """Rows ``low:high``'s durations, as :func:`step_durations` gives them for all rows."""
        times, end = self._series.time_s, self._series.end_s
        if high == len(times):
            if low == 0:
                return step_durations(times, end, self._clip)
            durations = np.append(times[low + 1 :], max(end, float(times[-1])))
        else:
            durations = times[low + 1 : high + 1].copy()
        np.minimum(durations, end, out=durations)
        start = self._clip
        here = times[low:high]
        durations -= np.maximum(here, start) if start > times[0] else here
        return np.clip(durations, 0.0, None, out=durations)

    def means(self, columns: list) -> list[float]:
        """Time-weighted means over the window of each of ``columns`` (NaN if it is empty).

        Each entry is a function of ``(low, high)`` returning those rows' values.
        """
        if self.empty:
            return [float("nan")] * len(columns)
        total = 0.0
        sums = [0.0] * len(columns)
        for low, high in self._blocks:
            durations = self._durations(low, high)
            total += durations.sum()
            for index, rows in enumerate(columns):
                values = np.asarray(rows(low, high), dtype=np.float64)
                sums[index] += weighted_sum(values, durations)
        return [value / total for value in sums]

    def max(self, rows) -> int | float:
        """Largest value held in the window (0.0 if no row is); ``rows`` as for :meth:`means`."""
        times, start, end = self._series.time_s, self._start_s, self._series.end_s
        best = None
        for low, high in self._blocks:
            if high == len(times):
                live = np.append(times[low + 1 :] >= start, end >= start)
            else:
                live = times[low + 1 : high + 1] >= start
            if live.any():
                values = rows(low, high)
                peak = values.max() if live.all() else values[live].max()
                best = peak if best is None or peak > best else best
        return 0.0 if best is None else best


def _column(values: np.ndarray):
    """``values`` as a function of ``(low, high)``, for :class:`_Window`."""
    return lambda low, high: values[low:high]


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
    # One statistic at a time, freeing as it goes: a long run has tens of millions of
    # rows. A run's values are its own copies, so the percentiles may reorder them in
    # place, once the batch means have read them in arrival order.
    waits = c.start_s - c.arrival_s
    if not started.all():
        waits = waits[started]
    del started
    wait_mean, wait_half = _mean(waits), _batch_half_width(waits)
    (wait_p95,) = percentiles(waits, (95,), overwrite=True)
    del waits
    latencies = c.finish_s - c.arrival_s
    if not done.all():
        latencies = latencies[done]
    del done
    latency_mean, latency_half = _mean(latencies), _batch_half_width(latencies)
    # One partition for the three percentiles (the same values as three calls).
    latency = (latency_mean, *percentiles(latencies, (50, 95, 99), overwrite=True))
    del latencies
    sim_time = s.end_s
    span = max(sim_time - warm, 0.0)
    window = _Window(s, warm)
    queue, running, retrying = s.queue_depth, s.in_flight, s.retry_waiting

    def in_system(low: int, high: int) -> np.ndarray:
        # StepSeries.in_system, a block at a time
        return queue[low:high] + running[low:high] + retrying[low:high]

    # The peak of (held items x item size) is the peak of held items, times the size
    # (as int64 products, converted to float as StepSeries.memory_bytes' maximum would be).
    # Dead letters only ever accumulate: if the last count is 0, every count is.
    dead = s.dead_letters
    if dead[-1]:
        held = window.max(lambda low, high: in_system(low, high) + dead[low:high])
    else:
        held = window.max(in_system)
    memory_peak = int(float(np.int64(held) * np.int64(scenario.item_size_bytes)))
    # Seconds during which an arrived item could not be admitted (backpressure held it).
    # The engine's own statistic counts every second a producer waits for a slot,
    # arrival or not (it reserves a slot before reading its source); for capacity
    # planning the time an *arrived* item was held upstream is what matters.
    upstream = s.upstream_backlog
    means = [_column(running), _column(queue), in_system]
    held_upstream = sim_time > warm and bool(upstream.any())
    if held_upstream:
        means.append(lambda low, high: upstream[low:high] > 0)
    running_mean, queue_mean, in_system_mean, *upstream_share = window.means(means)
    blocked = upstream_share[0] * (sim_time - warm) if held_upstream else 0.0
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
        "utilisation": running_mean / concurrency,
        "queue_depth_mean": queue_mean,
        "queue_depth_max": int(window.max(_column(queue))),
        "in_system_mean": in_system_mean,
        "upstream_backlog_max": int(window.max(_column(upstream))),
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
