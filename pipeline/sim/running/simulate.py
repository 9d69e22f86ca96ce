"""``simulate()``: run the unchanged :class:`~pipeline.Pipeline` on a virtual clock.

The simulated source sleeps (in virtual time) until each arrival and yields
the item's id; the simulated handler sleeps for the attempt's service time and
then succeeds or fails as the failure model says. Everything else -- the
bounded queue, backpressure, retries, dead letters, the drain -- is the real
engine, recorded event by event. That asyncio engine is the reference
semantics; for scenarios inside its domain, ``engine="auto"`` (the default)
computes the same run with the exact kernel (:mod:`pipeline.sim.running.kernel`),
item by item, many times faster.
"""

from __future__ import annotations

import asyncio
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ...engine import Pipeline
from ...records import DeadLetter, RunReport
from ..stats import batch_means_ci, percentiles, weighted_sum
from ..vloop import resolve_unless_cancelled as _resolve_unless_cancelled
from ..vloop import run_virtual
from ..vloop import wake_unless_cancelled as _wake_unless_cancelled
from ..workloads.failures import NoFailures
from ..workloads.scenario import Scenario
from .recorder import ItemColumns, Recorder, StepSeries, item_columns, step_series
from .workload import Workload

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pandas as pd

    from ..stats import MeanCI, QuantileCI

__all__ = [
    "DrainTimeoutWarning",
    "Replications",
    "SimulationResult",
    "drain_timeout_of",
    "drain_timeout_text",
    "simulate",
    "warn_drain_timeouts",
]


class DrainTimeoutWarning(UserWarning):
    """Warned by :func:`simulate` when a run's drain hit ``drain_timeout_s``.

    The items still queued, running or waiting for a retry at the deadline were
    handed back unfinished: they have no finish time, so they are missing from
    every latency statistic, and the heaviest tail is what gets cut. The
    message names how many items were left and the remedies
    (``drain_timeout_s=None`` or a longer one, or fewer items). Silence it on
    purpose with ``warnings.simplefilter("ignore", DrainTimeoutWarning)``.
    """


class SimulationResult:
    """One simulated run: the report, per-item records and exact time series.

    Attributes:
        scenario: what was simulated.
        report: the engine's own :class:`~pipeline.RunReport` (payloads are item ids).
        columns: per-item numpy columns (see :class:`~pipeline.sim.running.recorder.ItemColumns`).
        series: exact step functions (see :class:`~pipeline.sim.running.recorder.StepSeries`).
        wall_time_s: real seconds the simulation took.
        summary: headline numbers, keys as in the command line's JSON;
            ``wait_mean_ci95_s`` and ``latency_mean_ci95_s`` are the 95%
            batch-means half-widths of ``wait_mean_s`` and ``latency_mean_s``
            (:data:`BATCHES` batches in arrival order; NaN below
            :data:`BATCH_MEANS_MIN_ITEMS` values), the run's own precision.
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
        engine: str = "asyncio",
    ) -> None:
        self.scenario = scenario
        self.engine = engine
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
        from ..stats import _step_durations

        times, end = series.time_s, series.end_s
        start = max(float(start_s), float(times[0]))
        self._durations = _step_durations(times, end, start) if end > start else None
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


BATCHES = 20
"""Batches of the batch-means half-widths ``wait_mean_ci95_s`` and ``latency_mean_ci95_s``."""
BATCH_MEANS_MIN_ITEMS = 200
"""Fewest values (10 per batch) for which those half-widths are given; NaN below."""


def _batch_half_width(values: np.ndarray) -> float:
    """95% batch-means half-width of values in arrival order (NaN when too few)."""
    if len(values) < BATCH_MEANS_MIN_ITEMS:
        return math.nan
    return batch_means_ci(values, n_batches=BATCHES).half_width


def _summarise(result: SimulationResult) -> dict[str, Any]:
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
    return {
        "items_offered": report.offered,
        "items_admitted": report.admitted,
        "items_completed": report.completed,
        "items_dead_lettered": len(report.dead_letters),
        "items_shed": report.statistics.shed,
        "items_unfinished": len(report.unfinished),
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


async def _run(scenario: Scenario, replication: int) -> tuple[RunReport, np.ndarray, Recorder]:
    workload = Workload(scenario, replication)
    streams, arrivals = workload.streams, workload.arrival_s
    first_attempt, failures = workload.first_attempt_s.tolist(), workload.failures
    n = len(arrivals)
    attempts = [0] * n
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
    retry_time = workload.retry_time

    async def cannot_fail(item_id: int) -> None:
        # NoFailures: no failure draws and no count in flight, which only failure models read.
        attempt = attempts[item_id] = attempts[item_id] + 1
        await sleep(first_attempt[item_id] if attempt == 1 else retry_time(item_id))

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

    recorder = Recorder()
    pipe = Pipeline(
        cannot_fail if isinstance(scenario.failures, NoFailures) else handler,
        scenario.config,
        on_event=recorder.listener,
        rng=streams.jitter,
        name="sim",
    )
    report = await pipe.run(_ArrivalSource(arrivals.tolist(), loop))
    return report, arrivals, recorder


class _ArrivalSource:
    """The simulated source: yields item ids 0, 1, ..., each at its arrival time.

    An async iterator, as an async generator would be, but without one: its
    ``__anext__`` returns a future that the arrival's timer resolves with the
    item id, so taking an item costs no generator frame to resume, no
    ``asend`` object and no coroutine (this runs once per item). The producer
    awaits that future exactly where it would have awaited the generator's
    sleep, so every callback runs in the same order.

    Args:
        arrival_s: arrival times, seconds of virtual time, non-decreasing.
        loop: the virtual loop the run is on.
    """

    __slots__ = ("_arrival_s", "_loop", "_next")

    def __init__(self, arrival_s: list[float], loop: asyncio.AbstractEventLoop) -> None:
        self._arrival_s = arrival_s
        self._loop = loop
        self._next = 0

    def __aiter__(self) -> _ArrivalSource:
        return self

    def __anext__(self) -> asyncio.Future[int]:
        item_id = self._next
        if item_id >= len(self._arrival_s):
            raise StopAsyncIteration
        self._next = item_id + 1
        loop = self._loop
        arrival = self._arrival_s[item_id]
        future = loop.create_future()
        if arrival > loop.time():
            # call_at, not call_later(delay): the timer fires at exactly `arrival`,
            # which exact trace replay depends on.
            loop.call_at(arrival, _resolve_unless_cancelled, future, item_id)
        else:  # already arrived (the producer was held up): no wait
            future.set_result(item_id)
        return future


def _simulate_once(scenario: Scenario, replication: int, engine: str = "auto") -> SimulationResult:
    """One replication on the engine ``engine`` names (module level: pools pickle it)."""
    from .kernel import refusal, run_kernel, unsupported

    if scenario.stages is not None:
        from .chained import simulate_chain
        from .kernel import KernelDeclined

        outside = unsupported(scenario)
        if engine == "kernel" and outside is not None:
            raise ValueError(refusal(outside))
        if engine != "asyncio" and outside is None:
            try:
                return simulate_chain(scenario, replication, "kernel")
            except KernelDeclined as declined:
                if engine == "kernel":
                    raise ValueError(refusal(declined.feature)) from None
        return simulate_chain(scenario, replication)
    began = time.perf_counter()
    if engine != "asyncio":
        outside = unsupported(scenario)
        if outside is None:
            report, _, columns, series = run_kernel(scenario, replication)
            return SimulationResult(
                scenario, report, columns, series, time.perf_counter() - began, "kernel"
            )
        if engine == "kernel":
            raise ValueError(refusal(outside))
    report, arrivals, recorder = run_virtual(_run(scenario, replication))
    columns = item_columns(arrivals, recorder)
    series = step_series(arrivals, recorder, report.finished_s)
    return SimulationResult(
        scenario, report, columns, series, time.perf_counter() - began, "asyncio"
    )


class Replications:
    """Independent replications of one scenario, with 95% confidence intervals.

    Replication *r* uses streams derived from ``(seed, r)``, so the same
    replication of two what-if scenarios sees the same traffic
    (:func:`~pipeline.sim.compare` uses that for paired intervals).
    :meth:`interval` gives a key's t interval (percentile keys included),
    :meth:`quantile_interval` a distribution-free one for the median run, and
    :meth:`advice` says when an interval is too wide and how many
    replications would do.

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

    def interval(self, key: str, level: float = 0.95) -> MeanCI:
        """(mean, half-width) of a summary key across replications (Student t).

        For a percentile key (``latency_p95_s``) this is the t interval of the
        per-replication percentiles: each run's p95 is one independent value,
        so the interval is valid although the items inside a run are
        correlated. It bounds the p95 expected of a run of this length
        (``tests/test_percentile_intervals.py`` checks its coverage).

        Raises:
            ValueError: fewer than 2 replications, or a replication without a value (NaN).
        """
        from ..stats import mean_ci

        return mean_ci(self.values(key), level=level)

    def quantile_interval(self, key: str, q: float = 0.5, level: float = 0.95) -> QuantileCI:
        """Distribution-free interval for the ``q``-quantile of a key's per-replication values.

        With ``q=0.5``, the median run's value (e.g. its ``latency_p95_s``):
        unlike :meth:`interval` it assumes nothing about the shape of the
        per-replication values, which heavy traffic makes skewed. It needs at
        least 6 replications for a finite 95% interval of the median (and
        ``low``/``high`` are infinite below that). See
        :func:`~pipeline.sim.stats.quantile_ci`.

        Raises:
            ValueError: a replication without a value (NaN), or bad ``q``/``level``.
        """
        from ..stats import quantile_ci

        return quantile_ci(self.values(key), q, level)

    def advice(
        self,
        key: str,
        *,
        relative_precision: float | None = None,
        limit: float | None = None,
        level: float = 0.95,
    ) -> str | None:
        """Run-length advice for a key's interval, or None when it is precise enough.

        See :func:`~pipeline.sim.stats.run_length_advice`: the half-width is
        judged against ``relative_precision`` of the mean (default 10%), or
        against an SLO ``limit`` the interval should clear; the sentence says
        about how many replications would do, and warns when the runs'
        utilisation is near 1.
        """
        from ..stats import DEFAULT_RELATIVE_PRECISION, run_length_advice, summarise_values

        mean, half = summarise_values(self.values(key), level)
        return run_length_advice(
            mean,
            half,
            len(self.results),
            metric=key,
            relative_precision=(
                DEFAULT_RELATIVE_PRECISION if relative_precision is None else relative_precision
            ),
            limit=limit,
            level=level,
            utilisation=summarise_values(self.values("utilisation")).mean,
        )

    @property
    def summary(self) -> pd.DataFrame:
        """Mean, 95% half-width and bounds of every numeric summary key.

        Missing values (NaN: e.g. no latency when nothing completed) are left
        out of the mean; the half-width is NaN unless every run has a value.
        """
        import pandas as pd

        from ..stats import summarise_values

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


# Rough CPU seconds per item, to decide whether replications are worth a process pool.
_SECONDS_PER_ITEM = {"kernel": 3e-6, "asyncio": 25e-6}
_POOL_WORTH_S = 3.0  # a pool costs about a second to start (each worker imports numpy, pandas)


def _estimated_seconds(scenario: Scenario, engine: str, runs: int) -> float:
    """A rough guess of the serial CPU time of ``runs`` replications (0 if unknown).

    An unknown length (a rate function without a period) keeps the runs in
    this process: a pool is then only used when asked for (``processes=``).
    """
    if scenario.n_items is not None:
        items = float(scenario.n_items)
    else:
        try:
            items = float(scenario.arrivals.rate) * float(scenario.duration_s or 0.0)
        except (ValueError, TypeError, OverflowError):
            return 0.0
    if not math.isfinite(items):
        return 0.0
    return items * runs * _SECONDS_PER_ITEM[engine]


def _replicate(
    scenario: Scenario,
    replications: int,
    engine: str,
    processes: int | None,
    progress: bool | None,
    executor: Executor | None = None,
) -> list[SimulationResult]:
    from ._pool import check_picklable, default_workers, run_tasks
    from .kernel import unsupported

    ran = "asyncio" if engine == "asyncio" or unsupported(scenario) is not None else "kernel"
    guess = _estimated_seconds(scenario, ran, replications)
    if processes is None:
        workers = default_workers(None, replications) if guess >= _POOL_WORTH_S else 1
    else:
        workers = default_workers(processes, replications)
    what = "simulate(replications=...)"
    if workers > 1 or executor is not None:
        check_picklable([scenario], workers, what)
    pooled = workers > 1 or executor is not None
    show = progress if progress is not None else (pooled or guess >= _POOL_WORTH_S)

    from tqdm.auto import tqdm

    tasks = [(scenario, r, engine) for r in range(replications)]
    with tqdm(total=replications, desc="replications", unit="run", disable=not show) as bar:
        return run_tasks(
            _simulate_once,
            tasks,
            workers=workers,
            bar=bar,
            what=what,
            executor=executor,
            workers_asked=processes is not None,
        )


def simulate(
    scenario: Scenario,
    *,
    replications: int | None = None,
    engine: str = "auto",
    processes: int | None = None,
    progress: bool | None = None,
    executor: Executor | None = None,
) -> Any:
    """Run a scenario on the virtual clock.

    Works from a script, from pytest and from a Jupyter cell (where the kernel
    already runs a loop: the virtual loop then runs on a helper thread).

    Args:
        scenario: the :class:`~pipeline.sim.Scenario` to run.
        replications: None for one run (a :class:`SimulationResult`), or R >= 1
            for :class:`Replications` with confidence intervals.
        engine: ``"auto"`` (default) runs the exact kernel when the scenario is
            inside its domain and the asyncio engine otherwise; ``"asyncio"``
            always runs the engine (the reference semantics); ``"kernel"``
            refuses a scenario outside the kernel's domain. The summary's
            ``engine`` key says which one ran. See :mod:`pipeline.sim.running.kernel`.
        processes: worker processes for replications; None (default) uses a
            pool only when the runs are long enough to repay starting it (a few
            seconds of work); 1 runs everything in this process. Results are
            the same either way (except ``wall_time_s``).
        progress: show a tqdm progress bar over the replications; None
            (default) shows one when a pool or an executor is used or the runs are long.
        executor: a :class:`concurrent.futures.Executor` to run the
            replications on instead of a local process pool (``processes`` is
            then ignored), e.g. a Dask client's ``get_executor()`` (see
            :func:`~pipeline.sim.analysis.cluster.scheduler_executor`); results
            are the same as a local run's (except ``wall_time_s``). It is left
            open. Needs ``replications``.

    Returns:
        A :class:`SimulationResult`, or :class:`Replications` when asked.

    Warns:
        DrainTimeoutWarning: a run's drain hit ``drain_timeout_s`` (default 30 s)
            and left items unfinished, so they are missing from the latency
            statistics; the message says how many and what to change.

    Raises:
        TypeError: ``scenario`` is not a Scenario, or ``executor`` is not a
            :class:`concurrent.futures.Executor`.
        ValueError: ``replications`` < 1, bad ``engine`` or ``processes``,
            ``engine="kernel"`` for a scenario outside the kernel's domain
            (the one-line message names the feature), an ``executor`` without
            ``replications``, or a scenario an executor cannot be sent.
        RuntimeError: ``processes`` > 1 asked for from the top level of a script
            without an ``if __name__ == "__main__":`` guard (worker processes
            re-run the script); with the default ``processes`` such a call runs
            in this process, with a warning.
        DeadlockError: the run can never progress (a bug in custom code).
        Whatever a replication raises on the executor.

    Example:
        >>> result = simulate(Scenario(arrivals=Poisson(rate=3.2),
        ...     service=Exponential(mean=1.0), config=PipelineConfig(concurrency=4),
        ...     n_items=10_000, seed=1))
        >>> result.summary["wait_mean_s"], result.summary["engine"]
    """
    from .kernel import check_engine, require_kernel

    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {scenario!r}")
    check_engine(engine)
    if engine == "kernel":
        require_kernel(scenario)
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ValueError(f"processes must be an integer >= 1 or None, got {processes!r}")
    if executor is not None:
        from ._pool import check_executor

        check_executor(executor)
        if replications is None:
            raise ValueError(
                "executor runs replications: pass replications=R (R >= 1) with it, "
                "got replications=None"
            )
    if replications is None:
        result = _simulate_once(scenario, 0, engine)
        _warn_if_drain_timed_out([result])
        return result
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"replications must be an integer >= 1 or None, got {replications!r}")
    runs = Replications(_replicate(scenario, replications, engine, processes, progress, executor))
    _warn_if_drain_timed_out(runs.results)
    return runs


def _drain_timeout_message(results: list[SimulationResult]) -> str | None:
    """What :class:`DrainTimeoutWarning` says about these runs, or None if every drain finished."""
    where = "the run" if len(results) == 1 else None
    return drain_timeout_text(
        [(r.scenario, r.summary) for r in results], what="replications", where=where
    )


def drain_timeout_of(scenario: Scenario) -> float | None:
    """The ``drain_timeout_s`` a run of ``scenario`` drains within (a chain: its first stage's)."""
    config = scenario.config if scenario.stages is None else scenario.stages[0].config
    return config.drain_timeout_s


def drain_timeout_text(
    runs: Sequence[tuple[Scenario, Mapping[str, Any]]],
    *,
    what: str,
    where: str | None = None,
    then: str = "",
) -> str | None:
    """The :class:`DrainTimeoutWarning` message for some runs, or None if every drain finished.

    Shared by ``simulate``, ``sweep``, ``plan`` and ``compare``, which all warn
    once for all their runs with how many timed out.

    Args:
        runs: each run's scenario and summary (``drain_timed_out``, ``items_unfinished``).
        what: the runs' name in ``K of N <what>`` ("replications", "sweep runs").
        where: says which runs instead of ``K of N <what>`` (``"the run"``).
        then: a clause on what the caller made of those runs, after the count.
    """
    cut = [(scenario, summary) for scenario, summary in runs if summary["drain_timed_out"]]
    if not cut:
        return None
    # A chain's summary counts its unfinished items (stranded ones too).
    left = sum(int(summary["items_unfinished"]) for _, summary in cut)
    # Only a finite drain_timeout_s can time out.
    timeouts = sorted({drain_timeout_of(scenario) for scenario, _ in cut})
    timeout = ", ".join(str(t) for t in timeouts)
    where = where or f"{len(cut)} of {len(runs)} {what}"
    return (
        f"the drain timed out (drain_timeout_s={timeout}) in {where}: {left:,} item(s) were "
        "left unfinished and are missing from the latency statistics (the slowest tail)"
        f"{then}; use drain_timeout_s=None (or a longer one) to let every item finish, or "
        "simulate fewer items"
    )


def warn_drain_timeouts(
    runs: Sequence[tuple[Scenario, Mapping[str, Any]]],
    *,
    what: str,
    then: str = "",
    stacklevel: int = 2,
) -> int:
    """Warn once (:class:`DrainTimeoutWarning`) if any of ``runs`` timed out; returns how many did.

    ``stacklevel`` is as for :func:`warnings.warn`, counted from the caller of this function.
    """
    message = drain_timeout_text(runs, what=what, then=then)
    if message is None:
        return 0
    warnings.warn(message, DrainTimeoutWarning, stacklevel=stacklevel + 1)
    return sum(bool(summary["drain_timed_out"]) for _, summary in runs)


def _warn_if_drain_timed_out(results: list[SimulationResult]) -> None:
    message = _drain_timeout_message(results)
    if message is not None:
        # stacklevel 3: the warning points at the caller of simulate().
        warnings.warn(message, DrainTimeoutWarning, stacklevel=3)
