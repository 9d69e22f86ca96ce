"""``simulate()``: run the unchanged :class:`~pipeline.Pipeline` on a virtual clock.

The simulated source sleeps (in virtual time) until each arrival and yields
the item's id; the simulated handler sleeps for the attempt's service time and
then succeeds or fails as the failure model says. Everything else -- the
bounded queue, backpressure, retries, dead letters, the drain -- is the real
engine, recorded event by event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine import Pipeline
from ..records import DeadLetter, RunReport
from .recorder import ItemColumns, Recorder, StepSeries, item_columns, step_series
from .scenario import Scenario, ServiceTrace, Streams
from .vloop import run_virtual
from .vloop import wake_unless_cancelled as _wake_unless_cancelled

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Replications", "SimulationResult", "simulate"]

_RETRY_BLOCK = 4096


class SimulationResult:
    """One simulated run: the report, per-item records and exact time series.

    Attributes:
        scenario: what was simulated.
        report: the engine's own :class:`~pipeline.RunReport` (payloads are item ids).
        columns: per-item numpy columns (see :class:`~pipeline.sim.recorder.ItemColumns`).
        series: exact step functions (see :class:`~pipeline.sim.recorder.StepSeries`).
        wall_time_s: real seconds the simulation took.
        summary: headline numbers, keys as in the command line's JSON.
        items: one row per item (DataFrame, built on first use).
        timeseries: the step functions as a DataFrame (built on first use).
    """

    def __init__(
        self,
        scenario: Scenario,
        report: RunReport,
        columns: ItemColumns,
        series: StepSeries,
        wall_time_s: float,
    ) -> None:
        self.scenario = scenario
        self.report = report
        self.columns = columns
        self.series = series
        self.wall_time_s = wall_time_s
        self.summary = _summarise(self)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<SimulationResult items={s['items_offered']} completed={s['items_completed']} "
            f"dead_lettered={s['items_dead_lettered']} shed={s['items_shed']} "
            f"wait_mean_s={s['wait_mean_s']:.4g} sim_time_s={s['sim_time_s']:.6g}>"
        )

    @property
    def dead_letters(self) -> list[DeadLetter]:
        """Dead-letter records (payloads are item ids)."""
        return self.report.dead_letters

    @cached_property
    def items(self) -> pd.DataFrame:
        """One row per item, in arrival order; columns as ``items.csv``."""
        import pandas as pd

        c = self.columns
        return pd.DataFrame(
            {
                "item_id": np.arange(len(c.arrival_s)),
                "arrival_s": c.arrival_s,
                "admitted_s": c.admitted_s,
                "start_s": c.start_s,
                "finish_s": c.finish_s,
                "wait_s": c.start_s - c.arrival_s,
                "latency_s": c.finish_s - c.arrival_s,
                "attempts": c.attempts,
                "outcome": pd.Categorical.from_codes(c.outcome, ItemColumns.OUTCOMES),
            }
        )

    @cached_property
    def timeseries(self) -> pd.DataFrame:
        """Exact step functions over virtual time; each row holds until the next."""
        import pandas as pd

        s = self.series
        frame = pd.DataFrame({"time_s": s.time_s})
        for name in StepSeries.COLUMNS:
            frame[name] = getattr(s, name)
        frame["in_system"] = s.in_system
        frame["lag_items"] = s.lag_items
        frame["memory_bytes"] = s.memory_bytes(self.scenario.item_size_bytes)
        return frame

    @property
    def diagnostics(self) -> list[Any]:
        """Findings of :func:`pipeline.sim.diagnose` for this run."""
        from .diagnostics import diagnose

        return diagnose(self)


def _percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def _time_with_backlog(series: StepSeries, start_s: float) -> float:
    """Seconds during which an arrived item could not be admitted (backpressure held it).

    The engine's own statistic counts every second a producer waits for a
    slot, arrival or not (it reserves a slot before reading its source); for
    capacity planning the time an *arrived* item was held upstream is what
    matters.
    """
    span = series.end_s - start_s
    if span <= 0:
        return 0.0
    return series.time_mean(series.upstream_backlog > 0, start_s) * span


def _summarise(result: SimulationResult) -> dict[str, Any]:
    scenario, report, c, s = result.scenario, result.report, result.columns, result.series
    warm = scenario.warmup_s
    counted = c.arrival_s >= warm
    started = counted & ~np.isnan(c.start_s)
    done = counted & (c.outcome == 0)
    waits = (c.start_s - c.arrival_s)[started]
    latencies = (c.finish_s - c.arrival_s)[done]
    sim_time = s.end_s
    span = max(sim_time - warm, 0.0)
    memory = s.memory_bytes(scenario.item_size_bytes)
    concurrency = scenario.config.concurrency
    return {
        "items_offered": report.offered,
        "items_admitted": report.admitted,
        "items_completed": report.completed,
        "items_dead_lettered": len(report.dead_letters),
        "items_shed": report.statistics.shed,
        "items_unfinished": len(report.unfinished),
        "attempts_total": report.attempts,
        "retries_total": report.statistics.retried,
        "wait_mean_s": _mean(waits),
        "wait_p95_s": _percentile(waits, 95),
        "latency_mean_s": _mean(latencies),
        "latency_p50_s": _percentile(latencies, 50),
        "latency_p95_s": _percentile(latencies, 95),
        "latency_p99_s": _percentile(latencies, 99),
        "throughput_per_s": float(done.sum() / span) if span > 0 else float("nan"),
        "utilisation": s.time_mean(s.in_flight, warm) / concurrency,
        "queue_depth_mean": s.time_mean(s.queue_depth, warm),
        "queue_depth_max": int(s.time_max(s.queue_depth, warm)),
        "in_system_mean": s.time_mean(s.in_system, warm),
        "upstream_backlog_max": int(s.time_max(s.upstream_backlog, warm)),
        "producer_blocked_s": _time_with_backlog(s, warm),
        "memory_peak_bytes": int(s.time_max(memory, warm)),
        "drain_timed_out": report.drain_timed_out,
        "sim_time_s": sim_time,
        "wall_time_s": result.wall_time_s,
    }


async def _run(scenario: Scenario, replication: int) -> tuple[RunReport, np.ndarray, Recorder]:
    streams = Streams.from_seed(scenario.seed, replication)
    arrivals = scenario.arrivals.times(
        streams.arrivals, n=scenario.n_items, duration_s=scenario.duration_s
    )
    n = len(arrivals)
    service = scenario.service
    if isinstance(service, ServiceTrace):
        if len(service.times_s) < n:
            raise ValueError(
                f"the service trace has {len(service.times_s)} times but {n} items arrive"
            )
        first_attempt = list(service.times_s[:n])
    else:
        first_attempt = service.sample(streams.service, n).tolist()
    failures = scenario.failures.bind(streams.failures, n)
    attempts = [0] * n
    retry_pool: list[float] = []
    loop = asyncio.get_running_loop()
    create_future, call_at, now = loop.create_future, loop.call_at, loop.time

    def sleep(seconds: float) -> asyncio.Future[None]:
        # asyncio.sleep minus its per-call overhead (this is the hot path). The
        # guard lets the drain cancel the wait safely; the timer stays in the
        # heap until due, which only matters when attempts are cut short often.
        wake = create_future()
        call_at(now() + seconds, _wake_unless_cancelled, wake)
        return wake

    if scenario.config.attempt_timeout_s is not None:
        # Attempts may be cut short: cancel their timers too, as asyncio.sleep does.
        sleep = asyncio.sleep  # type: ignore[assignment]

    in_flight = 0

    def retry_time(item_id: int) -> float:
        if isinstance(service, ServiceTrace):
            return service.times_s[item_id]
        if not retry_pool:
            retry_pool.extend(service.sample(streams.retry_service, _RETRY_BLOCK).tolist()[::-1])
        return retry_pool.pop()

    async def handler(item_id: int) -> None:
        nonlocal in_flight
        attempt = attempts[item_id] = attempts[item_id] + 1
        seconds = first_attempt[item_id] if attempt == 1 else retry_time(item_id)
        in_flight += 1
        try:
            failure = failures.check(item_id, attempt, in_flight)
            if failure is None:
                await sleep(seconds)
                return
            await sleep(seconds if failure.hang_s is None else failure.hang_s)
            raise failure.error
        finally:
            in_flight -= 1

    async def source() -> AsyncIterator[int]:
        for item_id, arrival in enumerate(arrivals.tolist()):
            if arrival > loop.time():
                # call_at, not sleep(delay): the timer fires at exactly `arrival`,
                # which exact trace replay depends on.
                wake = create_future()
                call_at(arrival, _wake_unless_cancelled, wake)
                await wake
            yield item_id

    recorder = Recorder()
    pipe = Pipeline(
        handler, scenario.config, on_event=recorder.listener, rng=streams.jitter, name="sim"
    )
    report = await pipe.run(source())
    return report, arrivals, recorder


def _simulate_once(scenario: Scenario, replication: int) -> SimulationResult:
    began = time.perf_counter()
    report, arrivals, recorder = run_virtual(_run(scenario, replication))
    columns = item_columns(arrivals, recorder)
    series = step_series(arrivals, recorder, report.finished_s)
    return SimulationResult(scenario, report, columns, series, time.perf_counter() - began)


class Replications:
    """Independent replications of one scenario, with 95% confidence intervals.

    Replication *r* uses streams derived from ``(seed, r)``, so the same
    replication of two what-if scenarios sees the same traffic.

    Attributes:
        results: one :class:`SimulationResult` per replication.
    """

    def __init__(self, results: list[SimulationResult]) -> None:
        self.results = results

    def __repr__(self) -> str:
        return f"<Replications n={len(self.results)} scenario={self.results[0].scenario!r}>"

    def __len__(self) -> int:
        return len(self.results)

    def values(self, key: str) -> np.ndarray:
        """One summary value per replication."""
        return np.array([float(r.summary[key]) for r in self.results])

    def interval(self, key: str, level: float = 0.95) -> tuple[float, float]:
        """(mean, half-width) of a summary key across replications (Student t)."""
        from .stats import mean_ci

        return mean_ci(self.values(key), level=level)

    @property
    def summary(self) -> pd.DataFrame:
        """Mean, 95% half-width and bounds of every numeric summary key.

        Missing values (NaN: e.g. no latency when nothing completed) are left
        out of the mean; the half-width is NaN unless every run has a value.
        """
        import pandas as pd

        from .stats import summarise_values

        rows = []
        for key, value in self.results[0].summary.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            mean, half = summarise_values(self.values(key))
            rows.append(
                {
                    "metric": key,
                    "mean": mean,
                    "half_width": half,
                    "low": mean - half,
                    "high": mean + half,
                }
            )
        return pd.DataFrame(rows).set_index("metric")


def simulate(scenario: Scenario, *, replications: int | None = None) -> Any:
    """Run a scenario on the virtual clock.

    Works from a script, from pytest and from a Jupyter cell (where the kernel
    already runs a loop: the virtual loop then runs on a helper thread).

    Args:
        scenario: the :class:`~pipeline.sim.Scenario` to run.
        replications: None for one run (a :class:`SimulationResult`), or R >= 1
            for :class:`Replications` with confidence intervals.

    Returns:
        A :class:`SimulationResult`, or :class:`Replications` when asked.

    Raises:
        TypeError: ``scenario`` is not a Scenario.
        ValueError: ``replications`` < 1.
        DeadlockError: the run can never progress (a bug in custom code).

    Example:
        >>> result = simulate(Scenario(arrivals=Poisson(rate=3.2),
        ...     service=Exponential(mean=1.0), config=PipelineConfig(concurrency=4),
        ...     n_items=10_000, seed=1))
        >>> result.summary["wait_mean_s"]
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {scenario!r}")
    if replications is None:
        return _simulate_once(scenario, 0)
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"replications must be an integer >= 1 or None, got {replications!r}")
    return Replications([_simulate_once(scenario, r) for r in range(replications)])
