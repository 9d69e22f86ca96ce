"""A run's summary: the headline numbers, keyed as in the command line's JSON.

:func:`summarise` reads a run's exact per-item columns and step series once
and returns the dict that :attr:`SimulationResult.summary
<pipeline.sim.SimulationResult.summary>` holds: waits, latencies, the
time-weighted queue and memory, outcome counts and fractions, with the
batch-means 95% half-widths of the mean wait and latency; with an initial
backlog also how it drained (:mod:`.backlog`); ``goodput_per_s``, and with
faults ``recovered`` and ``recovery_s`` (:mod:`.recovery`; both None without
faults); with a downstream what it served (``downstream_requests``, ``_served``,
``_orphaned``, ``_rejected``, ``_queue_mean``, ``_in_system_mean``). Those half-widths assume a
steady state: with a backlog they are NaN unless ``warmup_s`` cuts off its
whole drain (``warmup_s >= backlog_drained_s``).

:func:`summary_of` computes the same from a run's parts, and with ``keys``
only the statistics those keys name (a plan reads a handful): each is the
very number the whole summary holds, and a :class:`HeldPeak` may stand in for
the step series when ``memory_peak_bytes`` is the only series key asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..stats.intervals import batch_means_ci
from ..stats.quantiles import percentiles
from ..stats.stepstats import step_durations, weighted_sum
from .backlog import backlog_summary
from .class_summary import class_summaries
from .recorder import ItemColumns, StepSeries
from .recovery import recovery

if TYPE_CHECKING:
    from ...records import RunReport
    from ...statistics import Statistics
    from ..workloads.scenario import Scenario
    from .downstream import DownstreamStats
    from .result import SimulationResult

__all__ = [
    "BATCHES",
    "BATCH_MEANS_MIN_ITEMS",
    "SERIES_KEYS",
    "HeldPeak",
    "pool_keys",
    "summarise",
    "summary_of",
]


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
        self._live = (-1, None)  # the last block max() read, and which of its rows count

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
            values = np.empty(high - low)  # every column's floats in turn: one array's pages
            for index, rows in enumerate(columns):
                values[:] = rows(low, high)
                sums[index] += weighted_sum(values, durations)
        return [float(value / total) for value in sums]  # plain floats: a summary is plain data

    def max(self, rows) -> int | float:
        """Largest value held in the window (0.0 if no row is); ``rows`` as for :meth:`means`."""
        times, start, end = self._series.time_s, self._start_s, self._series.end_s
        best = None
        for low, high in self._blocks:
            if self._live[0] != low:  # (every max of a short series reads one block)
                if high == len(times):
                    live = np.append(times[low + 1 :] >= start, end >= start)
                else:
                    live = times[low + 1 : high + 1] >= start
                self._live = (low, live)
            live = self._live[1]
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
latency covered 90.7% at 2,000 items and 92.7% at 5,000 even with the
skew-robust bounds, 95% from 10,000 on
(``tests/sim/running/test_summary_intervals.py``). A shorter run is too short
to know its own precision: replications (one value per run) do, for any
length."""


def _batch_half_width(values: np.ndarray) -> float:
    """95% batch-means half-width of values in arrival order (NaN when too few)."""
    if len(values) < BATCH_MEANS_MIN_ITEMS:
        return math.nan
    return batch_means_ci(values, n_batches=BATCHES).half_width


SERIES_KEYS = (
    "utilisation",
    "queue_depth_mean",
    "in_system_mean",
    "producer_blocked_s",
    "queue_depth_max",
    "upstream_backlog_max",
    "memory_peak_bytes",
)
"""Summary keys read from the step series (a :class:`HeldPeak` gives ``memory_peak_bytes``)."""


@dataclass(frozen=True)
class HeldPeak:
    """What a summary of ``memory_peak_bytes`` needs of a run's step series, without the series.

    Attributes:
        end_s: the run's end (the series' ``end_s``), seconds.
        held: the most items held (in the system or dead-lettered) by any row
            the warm-up window reads, as ``StepSeries.in_system + dead_letters``
            gives them (0 when it reads none).
    """

    end_s: float
    held: int


LATENCY_PERCENTILES = {"latency_p50_s": 50, "latency_p95_s": 95, "latency_p99_s": 99}
"""Summary keys of latency percentiles, and the percentile each one is."""

WAIT_PERCENTILES = {"wait_p95_s": 95}
"""Summary keys of wait percentiles, and the percentile each one is."""


def _wanted(keys: Collection[str] | None) -> Callable[..., bool]:
    """Whether a summary limited to ``keys`` (None: every key) needs any of the names given."""

    def want(*names: str) -> bool:
        return keys is None or any(name in keys for name in names)

    return want


def _wait_statistics(c: ItemColumns, warm: float, want: Callable[..., bool]) -> dict[str, Any]:
    """The wait keys asked for (mean, its batch-means half-width, p95), after the warm-up."""
    started = (c.arrival_s >= warm) & ~np.isnan(c.start_s)
    # One statistic at a time, freeing as it goes: a long run has tens of millions of
    # rows. A run's values are its own copies, so the percentiles may reorder them in
    # place, once the batch means have read them in arrival order.
    waits = c.start_s - c.arrival_s
    if not started.all():
        waits = waits[started]
    del started
    return _time_statistics(waits, "wait", WAIT_PERCENTILES, want)


def _latency_statistics(
    c: ItemColumns, warm: float, want: Callable[..., bool], values: dict[str, Any]
) -> int:
    """Put the latency keys asked for into ``values``; return the items completed after warm-up."""
    done = (c.arrival_s >= warm) & (c.outcome == 0)
    completed = int(done.sum())
    if not want("latency_mean_s", "latency_mean_ci95_s", *LATENCY_PERCENTILES):
        return completed
    latencies = c.finish_s - c.arrival_s
    if not done.all():
        latencies = latencies[done]
    del done
    values.update(_time_statistics(latencies, "latency", LATENCY_PERCENTILES, want))
    return completed


def _time_statistics(
    times: np.ndarray, name: str, levels: dict[str, int], want: Callable[..., bool]
) -> dict[str, Any]:
    """``{name}_mean_s``, ``{name}_mean_ci95_s`` and the percentiles of ``times`` asked for.

    The percentiles last, in one partition of ``times`` in place (the same values as one
    call each): the batch means must read the times in arrival order first.
    """
    values: dict[str, Any] = {}
    if want(f"{name}_mean_s"):
        values[f"{name}_mean_s"] = _mean(times)
    if want(f"{name}_mean_ci95_s"):
        values[f"{name}_mean_ci95_s"] = _batch_half_width(times)
    asked = [(k, q) for k, q in levels.items() if want(k)]
    if asked:
        found = percentiles(times, [q for _, q in asked], overwrite=True)
        values.update(zip([k for k, _ in asked], found, strict=True))
    return values


def _backlog_keys(
    scenario: Scenario,
    report: RunReport,
    c: ItemColumns,
    s: StepSeries | HeldPeak,
    summary: dict[str, Any],
) -> dict[str, Any]:
    """An initial backlog's drain keys, and the half-widths its transient makes meaningless."""
    if not isinstance(s, StepSeries):
        raise ValueError("an initial backlog's summary needs the step series")
    drain = backlog_summary(c, s, scenario.initial_backlog, report.drain_timed_out)
    if not scenario.warmup_s >= drain["backlog_drained_s"]:  # also when it never drained (NaN)
        # Batch means assume a steady state; the items counted include the backlog's
        # drain, a transient, so those half-widths would be no precision of anything.
        for key in ("wait_mean_ci95_s", "latency_mean_ci95_s"):
            if key in summary:
                drain[key] = math.nan
    return drain


def summarise(result: SimulationResult, keys: Collection[str] | None = None) -> dict[str, Any]:
    """The summary of ``result`` (every key; or, with ``keys``, only those and the cheap counts)."""
    return summary_of(
        result.scenario,
        result.report,
        result.columns,
        result.series,
        wall_time_s=result.wall_time_s,
        engine=result.engine,
        item_class=result.item_class,
        keys=keys,
        downstream=result.downstream,
    )


def summary_of(
    scenario: Scenario,
    report: RunReport,
    c: ItemColumns,
    s: StepSeries | HeldPeak,
    *,
    wall_time_s: float,
    engine: str,
    item_class: np.ndarray | None = None,
    keys: Collection[str] | None = None,
    downstream: DownstreamStats | None = None,
) -> dict[str, Any]:
    """A run's summary from its parts (see :func:`summarise`).

    With ``keys``, only the statistics those keys name are computed (each value
    the very number the whole summary holds: the same arrays, the same
    operations), with the report's counts, ``drain_timed_out``, ``sim_time_s``,
    ``wall_time_s`` and ``engine``, in the whole summary's order; item classes
    and an initial backlog add their keys as always. ``s`` may be a
    :class:`HeldPeak` when no key but ``memory_peak_bytes`` reads the series.
    """
    want = _wanted(keys)
    if isinstance(s, HeldPeak) and (
        keys is None or any(k in keys for k in SERIES_KEYS if k != "memory_peak_bytes")
    ):
        raise ValueError("a summary of series statistics needs the step series, not a HeldPeak")
    warm = scenario.warmup_s
    values: dict[str, Any] = {}
    if want("wait_mean_s", "wait_mean_ci95_s", "wait_p95_s"):
        values.update(_wait_statistics(c, warm, want))
    completed = 0
    if want("latency_mean_s", "latency_mean_ci95_s", *LATENCY_PERCENTILES, "throughput_per_s"):
        completed = _latency_statistics(c, warm, want, values)
    sim_time = s.end_s
    span = max(sim_time - warm, 0.0)
    if isinstance(s, HeldPeak):
        if want("memory_peak_bytes"):
            values["memory_peak_bytes"] = _memory_peak(s.held, scenario.item_size_bytes)
    elif want(*SERIES_KEYS):
        values.update(_series_statistics(scenario, s, want))
    concurrency = scenario.config.concurrency
    statistics = report.statistics
    summary = {
        "items_offered": report.offered,
        "items_admitted": report.admitted,
        "items_completed": report.completed,
        "items_dead_lettered": len(report.dead_letters),
        "items_shed": statistics.shed,
        "items_unfinished": len(report.unfinished),
        "items_expired": statistics.expired,
        "expired_fraction": (statistics.expired / report.offered if report.offered else math.nan),
        "attempts_total": report.attempts,
        "retries_total": statistics.retried,
        "wait_mean_s": values.get("wait_mean_s"),
        "wait_mean_ci95_s": values.get("wait_mean_ci95_s"),
        "wait_p95_s": values.get("wait_p95_s"),
        "latency_mean_s": values.get("latency_mean_s"),
        "latency_mean_ci95_s": values.get("latency_mean_ci95_s"),
        "latency_p50_s": values.get("latency_p50_s"),
        "latency_p95_s": values.get("latency_p95_s"),
        "latency_p99_s": values.get("latency_p99_s"),
        "throughput_per_s": float(completed / span) if span > 0 else float("nan"),
        "utilisation": None,
        "queue_depth_mean": None,
        "queue_depth_max": None,
        "in_system_mean": None,
        "upstream_backlog_max": None,
        "producer_blocked_s": None,
        "memory_peak_bytes": None,
        "drain_timed_out": report.drain_timed_out,
        "sim_time_s": sim_time,
        "wall_time_s": wall_time_s,
        "engine": engine,
        "goodput_per_s": float(report.completed / sim_time) if sim_time > 0 else float("nan"),
        **_recovery_keys(scenario, c),
    }
    summary.update(_optional_keys(scenario, statistics, sim_time, downstream))
    if want("utilisation"):
        # Busy workers over workers: the pool's time-weighted mean when it is resized.
        workers = summary.get("workers_mean", concurrency)
        summary["utilisation"] = values["running_mean"] / workers if workers else math.nan
    for key in SERIES_KEYS[1:]:
        if want(key):
            summary[key] = values[key]
    if keys is not None:  # only what was asked, and the counts every summary has
        summary = {
            key: value for key, value in summary.items() if key in keys or key not in _COMPUTED
        }
    if scenario.classes is not None and item_class is not None:
        summary["classes"] = class_summaries(scenario.classes, item_class, c, warm)
    if scenario.initial_backlog:
        summary.update(_backlog_keys(scenario, report, c, s, summary))
    return summary


def _optional_keys(
    scenario: Scenario, statistics: Statistics, sim_time_s: float, downstream: Any
) -> dict[str, Any]:
    """The keys a run has only with an autoscaler, an overload control or a downstream: the
    other summaries, and the command line's JSON, keep their keys (and no None in them)."""
    config = scenario.config
    keys: dict[str, Any] = {}
    if config.autoscale is not None:
        keys.update(pool_keys(statistics, sim_time_s))
    if config.retry_budget is not None or config.breaker is not None:
        keys["retries_denied"] = statistics.retries_denied
        keys["breaker_open_s"] = statistics.breaker_open_s
    if config.concurrency_limit is not None or config.codel is not None:
        keys["codel_shed"] = statistics.codel_shed  # part of items_shed
        keys["concurrency_limit"] = statistics.concurrency_limit  # at the end; None if unset
    if downstream is not None:
        keys.update(downstream.summary_keys())
    return keys


def _recovery_keys(scenario: Scenario, c: ItemColumns) -> dict[str, Any]:
    """``recovered`` and ``recovery_s`` by the rule of :mod:`.recovery` (None without faults)."""
    if not scenario.faults:
        return {"recovered": None, "recovery_s": None}
    if scenario.duration_s is not None:
        traffic_end = scenario.duration_s
    else:
        traffic_end = float(c.arrival_s.max()) if len(c.arrival_s) else 0.0
    found = recovery(
        c.finish_s[c.outcome == 0],
        first_fault_s=min(fault.at_s for fault in scenario.faults),
        last_fault_end_s=max(fault.end_s for fault in scenario.faults),
        traffic_end_s=traffic_end,
    )
    return {"recovered": found.recovered, "recovery_s": found.recovery_s}


def pool_keys(statistics: Statistics, sim_time_s: float) -> dict[str, Any]:
    """An autoscaled pool's summary keys, over the whole run ``[0, sim_time_s]``.

    ``workers_mean`` is time-weighted (``worker_seconds / sim_time_s``), ``workers_max``
    the largest pool, cold-starting and departing busy workers included.
    """
    seconds = statistics.worker_seconds
    return {
        "workers_mean": seconds / sim_time_s if sim_time_s > 0 else math.nan,
        "workers_max": statistics.workers_peak,
        "worker_seconds": seconds,
        "scale_events": statistics.scale_events,
    }


_COMPUTED = frozenset(
    (
        "wait_mean_s",
        "wait_mean_ci95_s",
        "wait_p95_s",
        "latency_mean_s",
        "latency_mean_ci95_s",
        "latency_p50_s",
        "latency_p95_s",
        "latency_p99_s",
        "throughput_per_s",
        *SERIES_KEYS,
    )
)
"""Summary keys computed from the columns or the series (the others are counts and flags)."""


def _memory_peak(held: int | float, item_size_bytes: int) -> int:
    # The peak of (held items x item size) is the peak of held items, times the size
    # (as int64 products, converted to float as StepSeries.memory_bytes' maximum would be).
    return int(float(np.int64(held) * np.int64(item_size_bytes)))


def _series_statistics(scenario: Scenario, s: StepSeries, want) -> dict[str, Any]:
    """The summary's statistics of the step series that ``want`` asks for (and
    ``running_mean``, the mean workers busy, for ``utilisation``)."""
    warm = scenario.warmup_s
    sim_time = s.end_s
    window = _Window(s, warm)
    queue, running, retrying = s.queue_depth, s.in_flight, s.retry_waiting

    last = [-1, None]  # the last block's, read again by the means (one block: the whole series)

    def in_system(low: int, high: int) -> np.ndarray:
        # StepSeries.in_system, a block at a time
        if last[0] != low:
            last[:] = low, queue[low:high] + running[low:high] + retrying[low:high]
        return last[1]

    found: dict[str, Any] = {}
    if want("memory_peak_bytes"):
        # Dead letters only ever accumulate: if the last count is 0, every count is.
        dead = s.dead_letters
        if dead[-1]:
            held = window.max(lambda low, high: in_system(low, high) + dead[low:high])
        else:
            held = window.max(in_system)
        found["memory_peak_bytes"] = _memory_peak(held, scenario.item_size_bytes)
    # producer_blocked_s is the engine's statistic (report.statistics.producer_blocked_s, and
    # the metric pipeline_producer_blocked_seconds_total): every second a producer waits for
    # a slot, summed over producers, whether or not an item has arrived meanwhile (a producer
    # reserves its slot before it reads the source), over the window. One definition for
    # every output: the time arrived items waited upstream is in the waits already.
    upstream = s.upstream_backlog
    blocked_producers = s.producers_blocked
    if want("utilisation", "queue_depth_mean", "in_system_mean", "producer_blocked_s"):
        # Every mean in one pass (each block's durations once), as the whole summary does.
        means = [_column(running), _column(queue), in_system]
        any_blocked = sim_time > warm and bool(blocked_producers.any())
        if any_blocked:
            means.append(_column(blocked_producers))
        running_mean, queue_mean, in_system_mean, *blocked_mean = window.means(means)
        blocked = blocked_mean[0] * (sim_time - warm) if any_blocked else 0.0
        found.update(
            running_mean=running_mean,
            queue_depth_mean=queue_mean,
            in_system_mean=in_system_mean,
            producer_blocked_s=blocked,
        )
    if want("queue_depth_max"):
        found["queue_depth_max"] = int(window.max(_column(queue)))
    if want("upstream_backlog_max"):
        found["upstream_backlog_max"] = int(window.max(_column(upstream)))
    return found
