"""A simulated run as OpenMetrics text: the engine's metrics, timestamped in virtual time.

:func:`write_openmetrics` (also ``result.to_openmetrics(path)`` and
``python -m pipeline simulate ... --metrics-out FILE``) writes what a
Prometheus server scraping the real pipeline would have stored, under the
names of the metrics contract (:data:`METRICS`, the one table of them here),
so that ``promtool tsdb create-blocks-from openmetrics FILE DIR`` backfills a
what-if into the dashboards a team already has.

Time: virtual second ``t`` of the run is written as ``start_s + t`` (UNIX
seconds, to the millisecond, as Prometheus stores them). By default the run
ends now (``start_s = now - sim_time_s``, whole seconds), which keeps the
samples inside any Prometheus retention; pass ``start_s`` for a file that
depends only on the run.

Samples: every series is sampled at ``0, step_s, 2 step_s, ...`` and at the
run's end, from the exact step functions and per-item records, not from an
approximation: a sample at time ``t`` is the value at ``t``.

- Counters (``_total``) count the events at or before ``t``; their last
  samples equal the run's counts (``items_offered``, ``items_completed``...,
  ``attempts_total``, ``retries_total``; ``pipeline_producer_blocked_seconds_total``
  is the engine's ``producer_blocked_s``, the seconds a producer waited for a slot).
- The step-function gauges (``pipeline_queue_depth``, ``pipeline_workers_busy``)
  are also sampled, in every step, at the first moment the largest value of
  that step is held, so ``max_over_time(pipeline_queue_depth[...])`` over the
  whole run is the summary's ``queue_depth_max`` (with ``warmup_s=0``; over
  the post-warm-up range otherwise). Two samples of one series in one
  millisecond become one, the larger value: each sample is a value the series
  held within the millisecond of its timestamp.
- ``pipeline_oldest_item_age_seconds`` is the age, since admission, of the
  oldest admitted item not yet finished (0 when none is), at each sampling
  time; it grows between events, so only the sampled moments are exact.
- ``pipeline_queue_capacity`` is the queue's ``maxsize`` (no sample for an
  unbounded queue), ``pipeline_workers`` the configured workers. With an
  autoscaler, ``pipeline_workers`` is the pool's size over time and
  ``pipeline_workers_desired`` the count the last sync's metric asked for (from
  the first sync on), both step functions sampled as the gauges above (the run's
  ``timeseries`` columns ``workers`` and ``workers_desired``); without one there is
  no ``pipeline_workers_desired`` family, as the exporter serves none.
- The overload controls' families, each only when its control is on (a run
  without one writes none of them, as before they existed), with the values
  ``statistics()`` shows at each sampling time (``result.controls``):
  ``pipeline_retries_denied_total`` (``retry_budget``),
  ``pipeline_breaker_calls_refused_total`` and ``pipeline_breaker_state{state}``
  (``breaker``; 1 for the state at that time, 0 for the other two),
  ``pipeline_concurrency_limit`` (``concurrency_limit``) and
  ``pipeline_codel_shed_total`` (``codel``). They are sampled on the grid only:
  a breaker spell or a limit held between two sampling times is not in the file.
- Histograms (:data:`BUCKETS_S`, seconds) observe each item's wait at its first
  start (``start - arrival``, as ``wait_mean_s``), each attempt's duration when
  it ends, and each completed item's latency at its finish (as ``latency_mean_s``).
- ``pipeline_attempts_total{result}``: ``ok`` for attempts that succeeded,
  ``timeout`` for those that failed after exactly ``attempt_timeout_s`` (the
  engine cut them) or were cut short by the drain's end, ``failed`` for the
  rest. ``pipeline_items_total{outcome="expired"}`` counts the items whose
  deadline came first (``max_wait_s``, or an item class's patience), at the
  moment each expired.

Bounded output: at most :data:`MAX_STEPS` sampling steps per series. A longer
run is sampled at the smallest whole multiple of ``step_s`` that fits
(:func:`sampling_step` says which; the command line says so on stderr): at
most about 360,000 samples (some 26 MB) per stage, however long the run.

Labels: ``pipeline`` (``pipeline=`` here, default ``"sim"``) and, for a
chain, ``stage`` (each stage's name). The file is written to a temporary file
beside ``path`` and moved into place once complete: nothing half-written.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._metric_names import BUCKETS_S, SPECS
from .recorder import AttemptLog

if TYPE_CHECKING:
    from .control_series import ControlSeries
    from .result import SimulationResult

__all__ = [
    "DEFAULT_STEP_S",
    "MAX_STEPS",
    "METRICS",
    "MIN_STEP_S",
    "OPTIONAL_METRICS",
    "sampling_step",
    "write_openmetrics",
]

# The samples' keys here -> the families of the one table (pipeline._metric_names), in the
# order a file lists them. OpenMetrics names a counter's family without its ``_total``.
_FAMILIES = {
    "items_offered": "pipeline_items_offered_total",
    "items": "pipeline_items_total",
    "attempts": "pipeline_attempts_total",
    "retries": "pipeline_retries_total",
    "producer_blocked": "pipeline_producer_blocked_seconds_total",
    "queue_depth": "pipeline_queue_depth",
    "queue_capacity": "pipeline_queue_capacity",
    "workers": "pipeline_workers",
    "workers_busy": "pipeline_workers_busy",
    "oldest_item_age": "pipeline_oldest_item_age_seconds",
    "wait": "pipeline_wait_seconds",
    "attempt_duration": "pipeline_attempt_duration_seconds",
    "latency": "pipeline_latency_seconds",
}
# The overload controls' families: each written only by a run with that control.
_CONTROL_FAMILIES = {
    "retries_denied": "pipeline_retries_denied_total",
    "breaker_calls_refused": "pipeline_breaker_calls_refused_total",
    "breaker_state": "pipeline_breaker_state",
    "concurrency_limit": "pipeline_concurrency_limit",
    "codel_shed": "pipeline_codel_shed_total",
}


def _table(families: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    return {
        key: (name.removesuffix("_total"), SPECS[name].kind, SPECS[name].help)
        for key, name in families.items()
    }


METRICS: dict[str, tuple[str, str, str]] = _table(_FAMILIES)
"""The metrics contract's families every file has: key -> (family name, OpenMetrics type, help
text)."""
# The families only some runs write: an overload control's, an autoscaler's desired count.
_OPTIONAL_FAMILIES = {**_CONTROL_FAMILIES, "workers_desired": "pipeline_workers_desired"}
OPTIONAL_METRICS: dict[str, tuple[str, str, str]] = _table(_OPTIONAL_FAMILIES)
"""As :data:`METRICS`, the families a file has only with their control or an autoscaler."""
# The order a file lists them: the exporter's (pipeline._metric_names.METRICS).
_WRITTEN = sorted(
    {**METRICS, **OPTIONAL_METRICS}.items(),
    key=lambda entry: list(SPECS).index({**_FAMILIES, **_OPTIONAL_FAMILIES}[entry[0]]),
)

DEFAULT_STEP_S = 1.0
"""Sampling step when none is given, seconds."""
MIN_STEP_S = 0.001
"""The finest sampling step, seconds: Prometheus keeps milliseconds."""
MAX_STEPS = 5000
"""Most sampling steps per series; a longer run is sampled coarser (:func:`sampling_step`)."""

_LATEST_START_S = 32503680000.0  # year 3000: beyond it a timestamp is a mistake, not a plan


def sampling_step(step_s: float, sim_time_s: float) -> float:
    """The step used: ``step_s``, or its smallest whole multiple within :data:`MAX_STEPS` steps."""
    steps = math.ceil(sim_time_s / step_s) if sim_time_s > 0 else 0
    if steps <= MAX_STEPS:
        return float(step_s)
    return float(step_s * math.ceil(steps / MAX_STEPS))


def check_step(step_s: Any) -> float:
    """``step_s`` as a float, or ValueError naming what is allowed."""
    if isinstance(step_s, bool) or not isinstance(step_s, int | float | np.integer | np.floating):
        raise TypeError(f"step_s must be a number of seconds, got {step_s!r}")
    value = float(step_s)
    if not (math.isfinite(value) and value >= MIN_STEP_S):
        raise ValueError(
            f"step_s must be a finite number >= {MIN_STEP_S} (seconds), got {step_s!r}"
        )
    return value


def check_start(start_s: Any) -> float | None:
    """``start_s`` as a float (None: the run ends now), or ValueError naming what is allowed."""
    if start_s is None:
        return None
    if isinstance(start_s, bool) or not isinstance(start_s, int | float | np.integer | np.floating):
        raise TypeError(f"start_s must be UNIX seconds (a number) or None, got {start_s!r}")
    value = float(start_s)
    if not (math.isfinite(value) and 0 <= value <= _LATEST_START_S):
        raise ValueError(
            f"start_s must be UNIX seconds between 0 and {_LATEST_START_S:.0f} (year 3000), "
            f"got {start_s!r}"
        )
    return value


def write_openmetrics(
    result: Any,
    path: str | os.PathLike[str],
    *,
    start_s: float | None = None,
    step_s: float = DEFAULT_STEP_S,
    pipeline: str = "sim",
) -> float:
    """Write ``result`` (a single-stage or chain result) to ``path`` as OpenMetrics text.

    Args:
        result: a :class:`~pipeline.sim.SimulationResult` or a chain's result.
        path: the file (replaced if it exists).
        start_s: UNIX seconds of virtual time 0; None: the run ends now.
        step_s: sampling step, seconds (>= :data:`MIN_STEP_S`; coarsened
            beyond :data:`MAX_STEPS` steps).
        pipeline: the ``pipeline`` label's value.

    Returns:
        The sampling step used, seconds.

    Raises:
        ValueError, TypeError: a bad ``start_s``, ``step_s`` or ``pipeline``.
        OSError: the file cannot be written.
    """
    step = check_step(step_s)
    start = check_start(start_s)
    if not isinstance(pipeline, str) or not pipeline:
        raise ValueError(f"pipeline must be a non-empty string, got {pipeline!r}")
    stages = getattr(result, "stages", None)
    if isinstance(stages, dict):
        parts = [({"pipeline": pipeline, "stage": name}, stage) for name, stage in stages.items()]
        end_s = float(result.report.finished_s)
    else:
        parts = [({"pipeline": pipeline}, result)]
        end_s = float(result.series.end_s)
    step = sampling_step(step, end_s)
    if start is None:
        start = float(math.floor(time.time() - end_s))
    start_ms = round(start * 1000)
    grid = _grid(end_s, step)
    grid_ms = start_ms + np.round(grid * 1000).astype(np.int64)
    samples = [(labels, _stage_samples(stage, grid, end_s)) for labels, stage in parts]
    directory = os.path.dirname(os.path.abspath(path))
    handle, staging = tempfile.mkstemp(prefix=".partial-", suffix=".om", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as f:
            for line in _lines(samples, grid, grid_ms, start_ms):
                f.write(line)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        os.replace(staging, path)
    except BaseException:
        with _quiet():
            os.unlink(staging)
        raise
    return step


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *_: Any) -> bool:
        return kind is not None and issubclass(kind, OSError)


def _grid(end_s: float, step: float) -> np.ndarray:
    """Sampling times ``0, step, 2 step, ...`` below ``end_s``, then ``end_s``."""
    count = math.ceil(end_s / step) if end_s > 0 else 0
    grid = np.arange(count, dtype=np.float64) * step
    # Below the end's millisecond: one series never has two samples in one millisecond.
    return np.append(grid[np.round(grid * 1000) < round(end_s * 1000)], end_s)


def _counted(times: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """How many of ``times`` (NaN: never) are at or before each grid time."""
    times = np.sort(times[~np.isnan(times)])
    return np.searchsorted(times, grid, side="right").astype(np.int64)


def _attempts(result: SimulationResult) -> AttemptLog:
    """The run's attempt log (built from the item columns when it made one attempt per item)."""
    c = result.columns
    if c.attempt_log is not None:
        return c.attempt_log
    if len(c.attempts) and int(c.attempts.max()) > 1:  # pragma: no cover - no such path today
        raise ValueError("this result has retries but no attempt log to write them from")
    started = ~np.isnan(c.start_s)
    finish = c.finish_s[started]
    return AttemptLog(
        start_s=c.start_s[started],
        end_s=finish,
        ending=np.where(np.isnan(finish), 3, np.where(c.outcome[started] == 0, 0, 2)).astype(
            np.int8
        ),
    )


def _stage_samples(result: SimulationResult, grid: np.ndarray, end_s: float) -> dict[str, Any]:
    """Every family's series for one stage: key -> list of (extra labels, points)."""
    c, s, config = result.columns, result.series, result.scenario.config
    nan = np.full(len(c.arrival_s), np.nan)
    shed_at = np.where(c.outcome == 2, c.arrival_s, nan)
    offered_at = np.where(np.isnan(c.admitted_s), shed_at, c.admitted_s)
    unfinished_at = np.where(c.outcome == 3, end_s, nan)
    by_outcome = {
        "completed": np.where(c.outcome == 0, c.finish_s, nan),
        "dead_lettered": np.where(c.outcome == 1, c.finish_s, nan),
        "shed": shed_at,
        "unfinished": unfinished_at,
        # When each expired item expired (max_wait_s, or an item class's patience).
        "expired": c.expired_times(),
    }
    log = _attempts(result)
    ended = np.where(np.isnan(log.end_s), end_s, log.end_s)
    duration = ended - log.start_s
    failed = (log.ending == 1) | (log.ending == 2)
    timeout_s = config.attempt_timeout_s
    timed_out = log.ending == 3
    if timeout_s is not None:
        # The engine cuts an attempt at start + timeout: its duration is the timeout, to rounding.
        timed_out = timed_out | (failed & (duration >= timeout_s * (1 - 1e-9)))
    by_result = {
        "ok": np.where(log.ending == 0, ended, np.nan),
        "failed": np.where(failed & ~timed_out, ended, np.nan),
        "timeout": np.where(timed_out, ended, np.nan),
    }
    rows = np.searchsorted(s.time_s, grid, side="right") - 1
    at = np.maximum(rows, 0)

    def gauge(values: np.ndarray, peaks: bool) -> list[tuple[float, float]]:
        held = np.where(rows >= 0, values[at], 0)
        points = list(zip(grid.tolist(), held.tolist(), strict=True))
        if peaks:
            points += _peaks(s.time_s, values, grid, held)
        return points

    blocked = _integral(s.time_s, s.producers_blocked, grid)
    gauges: dict[str, Any] = {
        "queue_depth": [({}, gauge(s.queue_depth, True))],
        "workers": [({}, [(t, config.concurrency) for t in grid.tolist()])],
        **_pool_gauges(result, gauge),
        "workers_busy": [({}, gauge(s.in_flight, True))],
        "oldest_item_age": [({}, _oldest_age(c, grid, end_s))],
        "queue_capacity": []
        if config.queue_maxsize is None
        else [({}, [(t, config.queue_maxsize) for t in grid.tolist()])],
    }
    started = ~np.isnan(c.start_s)
    done = c.outcome == 0
    return {
        **_control_samples(result.controls, grid),
        "items_offered": [({}, _points(grid, _counted(offered_at, grid)))],
        "items": [
            ({"outcome": name}, _points(grid, _counted(times, grid)))
            for name, times in by_outcome.items()
        ],
        "attempts": [
            ({"result": name}, _points(grid, _counted(times, grid)))
            for name, times in by_result.items()
        ],
        "retries": [({}, _points(grid, _counted(np.where(log.ending == 1, ended, np.nan), grid)))],
        "producer_blocked": [({}, _points(grid, blocked))],
        **gauges,
        "wait": _histogram(c.start_s[started], (c.start_s - c.arrival_s)[started], grid),
        "attempt_duration": _histogram(ended, duration, grid),
        "latency": _histogram(c.finish_s[done], (c.finish_s - c.arrival_s)[done], grid),
    }


def _control_samples(controls: ControlSeries | None, grid: np.ndarray) -> dict[str, Any]:
    """The overload controls' families at the grid times (none without a control)."""
    if controls is None:
        return {}
    out: dict[str, Any] = {}
    for name in controls.names:
        values = controls.at(name, grid)
        if name == "breaker_state":
            out[name] = [
                ({"state": state}, _points(grid, (values == code).astype(np.int64)))
                for code, state in enumerate(controls.STATES)
            ]
        else:
            out[name] = [({}, _points(grid, values))]
    return out


def _pool_gauges(result: SimulationResult, gauge: Any) -> dict[str, Any]:
    """An autoscaled run's ``workers`` and ``workers_desired`` series; none for a fixed pool."""
    pool = getattr(result, "pool", None)
    if pool is None:
        return {}
    workers, desired = pool.at(result.series.time_s)
    synced = [(t, v) for t, v in gauge(desired, True) if v >= 0]  # none before the first sync
    return {"workers": [({}, gauge(workers, True))], "workers_desired": [({}, synced)]}


def _points(grid: np.ndarray, values: np.ndarray) -> list[tuple[float, float]]:
    return list(zip(grid.tolist(), values.tolist(), strict=True))


def _peaks(
    time_s: np.ndarray, values: np.ndarray, grid: np.ndarray, held: np.ndarray
) -> list[tuple[float, float]]:
    """In each step, the first moment its largest value is held, where that beats the step's start.

    Row ``i`` holds from ``time_s[i]``; the rows starting strictly after grid
    time ``k`` and at or before grid time ``k + 1`` (the last one: the end)
    are that step's changes.
    """
    step_of = np.searchsorted(grid, time_s, side="left") - 1  # row i starts in step step_of[i]
    inside = (step_of >= 0) & (time_s > grid[np.maximum(step_of, 0)])
    rows = np.flatnonzero(inside)
    if not len(rows):
        return []
    steps, row_values = step_of[rows], values[rows]
    # Per step, the largest value and its first row: sort by (step, -value, row).
    order = np.lexsort((rows, -row_values.astype(np.int64), steps))
    first = order[np.append(True, steps[order][1:] != steps[order][:-1])]
    beat = row_values[first] > held[steps[first]]
    chosen = first[beat]
    return list(zip(time_s[rows[chosen]].tolist(), row_values[chosen].tolist(), strict=True))


def _integral(time_s: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The integral of a step function from 0 to each grid time (seconds x value)."""
    widths = np.diff(time_s)
    cumulative = np.concatenate([[0.0], np.cumsum(values[:-1] * widths)])
    rows = np.searchsorted(time_s, grid, side="right") - 1
    at = np.maximum(rows, 0)
    return np.where(rows >= 0, cumulative[at] + values[at] * (grid - time_s[at]), 0.0)


def _oldest_age(c: Any, grid: np.ndarray, end_s: float) -> list[tuple[float, float]]:
    """Age since admission of the oldest admitted, unfinished item at each grid time."""
    admitted = ~np.isnan(c.admitted_s)
    since = c.admitted_s[admitted]
    until = np.where(np.isnan(c.finish_s), end_s, c.finish_s)[admitted]
    order = np.argsort(since, kind="stable")
    since, until = since[order], until[order]
    if not len(since):
        return _points(grid, np.zeros(len(grid)))
    # The oldest alive at t is the first (by admission) whose end is after t: the first
    # index where the running maximum of the ends passes t.
    reach = np.maximum.accumulate(until)
    index = np.searchsorted(reach, grid, side="right")
    safe = np.minimum(index, len(since) - 1)
    alive = (index < len(since)) & (since[safe] <= grid)
    return _points(grid, np.where(alive, grid - since[safe], 0.0))


def _histogram(
    at_s: np.ndarray, values: np.ndarray, grid: np.ndarray
) -> list[tuple[dict[str, str], Any]]:
    """One histogram's cumulative buckets, count and sum at each grid time."""
    order = np.argsort(at_s, kind="stable")
    at_s, values = at_s[order], values[order]
    index = np.searchsorted(at_s, grid, side="right")
    count = index.astype(np.int64)
    total = np.concatenate([[0.0], np.cumsum(values)])[index]
    buckets = []
    for bound in BUCKETS_S:  # one bucket at a time: a million items need 8 MB, not 120
        inside = np.concatenate([[0], np.cumsum(values <= bound)])[index]
        buckets.append(inside.astype(np.int64))
    return [({}, (buckets, count, total))]


def _label_text(labels: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{key}="{escape(value)}"' for key, value in labels.items())


def _stamp(ms: int) -> str:
    return f"{ms // 1000}.{ms % 1000:03d}"


def _number(value: float | int) -> str:
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 2**53):
        return str(int(value))
    return repr(float(value))


def _lines(
    samples: list[tuple[dict[str, str], dict[str, Any]]],
    grid: np.ndarray,
    grid_ms: np.ndarray,
    start_ms: int,
) -> Iterator[str]:
    stamps = [_stamp(ms) for ms in grid_ms.tolist()]
    for key, (name, kind, text) in _WRITTEN:
        if not any(key in families for _, families in samples):
            continue  # an optional family no stage has (a control's, a desired count)
        yield f"# TYPE {name} {kind}\n"
        if name.endswith("_seconds"):
            yield f"# UNIT {name} seconds\n"
        yield f"# HELP {name} {text}\n"
        sample_name = f"{name}_total" if kind == "counter" else name
        for base, families in samples:
            for extra, points in families.get(key, ()):
                labels = _label_text({**base, **extra})
                if kind == "histogram":
                    yield from _histogram_lines(name, labels, points, stamps)
                    continue
                head = f"{sample_name}{{{labels}}} "
                if kind == "gauge":
                    points = _by_millisecond(points, start_ms)
                    for ms, value in points:
                        yield f"{head}{_number(value)} {_stamp(ms)}\n"
                else:
                    for (_, value), stamp in zip(points, stamps, strict=True):
                        yield f"{head}{_number(value)} {stamp}\n"
    yield "# EOF\n"


def _by_millisecond(points: list[tuple[float, float]], start_ms: int) -> list[tuple[int, float]]:
    """Points in time order at whole milliseconds; in one millisecond, the largest value."""
    merged: dict[int, float] = {}
    for t, value in points:
        ms = start_ms + round(t * 1000)
        merged[ms] = value if ms not in merged else max(merged[ms], value)
    return sorted(merged.items())


def _histogram_lines(name: str, labels: str, points: Any, stamps: list[str]) -> Iterator[str]:
    buckets, count, total = points
    bucket_lists = [b.tolist() for b in buckets]
    bounds = [repr(float(bound)) for bound in BUCKETS_S]
    sep = "," if labels else ""
    for row, stamp in enumerate(stamps):
        for bound, values in zip(bounds, bucket_lists, strict=True):
            yield f'{name}_bucket{{{labels}{sep}le="{bound}"}} {values[row]} {stamp}\n'
        n = int(count[row])
        yield f'{name}_bucket{{{labels}{sep}le="+Inf"}} {n} {stamp}\n'
        yield f"{name}_count{{{labels}}} {n} {stamp}\n"
        yield f"{name}_sum{{{labels}}} {_number(float(total[row]))} {stamp}\n"
