"""Simulate a multi-stage scenario: the real :class:`~pipeline.Chain` on the virtual clock.

Each :class:`~pipeline.sim.StageSpec` becomes a :class:`~pipeline.Stage` whose
handler sleeps (in virtual time) for the attempt's service time and fails as
the stage's failure model says; a fan-out stage returns its children's ids.
Everything else is the engine: bounded queues, the hand-off with blocking
after service, retries, dead letters, the end-to-end drain. One recorder per
stage logs its events; afterwards each stage gets the per-item columns, step
series and summary a single-stage run has, and the chain an end-to-end
summary.

Item ids: the source's items are 0, 1, 2, ... in arrival order; child *j* of
item *i* at a stage with ``fan_out=F`` is item ``i * F + j`` of the next
stage. An item's arrival at a stage is the moment the stage before it
finished the item (or its parent): time spent waiting for room in this
stage's queue counts as this stage's wait, as backpressure at the source
counts as waiting at the source.

The kernel's replay (:mod:`pipeline.sim.running.kernel.replay`) replays
that run without asyncio and hands back the same report and event logs;
:func:`simulate_chain` turns either into the same result.

Random streams: arrivals come from the scenario's own streams, and each stage
draws service times, retries, failures and jitter from streams of its own,
derived from ``(seed, replication, stage number)``: changing one stage does
not change the traffic another sees.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import time
from collections.abc import AsyncIterator
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ...chain.chain import Chain
from ...chain.report import ChainReport
from ...chain.stage import Stage
from ...config import PipelineConfig
from ...statistics import Statistics
from ..vloop import run_virtual, wake_unless_cancelled
from ..workloads.classes import ClassDraws, class_codes, draw_classes
from ..workloads.scenario import Scenario, Streams
from .class_summary import class_summaries
from .control_series import control_series
from .openmetrics import write_openmetrics
from .pooltrace import PoolTrace
from .recorder import ItemColumns, Recorder, item_columns, step_series
from .result import SimulationResult
from .workload import StageWorkload, source_arrivals

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ChainSimulationResult", "simulate_chain"]


def _handler(work: StageWorkload, sleep: Any) -> Any:
    """The simulated handler of one stage: service time, failures, children."""
    attempts = [0] * work.n
    first, failures, fan_out = work.first_attempt_s, work.failures, work.spec.fan_out
    in_flight = 0

    async def handler(item_id: int) -> Any:
        nonlocal in_flight
        attempt = attempts[item_id] = attempts[item_id] + 1
        seconds = first[item_id] if attempt == 1 else work.retry_time(item_id)
        in_flight += 1
        try:
            failure = failures.check(item_id, attempt, in_flight)
            if failure is not None:
                await sleep(seconds if failure.hang_s is None else failure.hang_s)
                raise failure.error
            await sleep(seconds)
        finally:
            in_flight -= 1
        if fan_out == 1:
            return item_id
        return range(item_id * fan_out, (item_id + 1) * fan_out)

    return handler


def _stage_config(
    config: PipelineConfig, classes: ClassDraws | None, number: int, spread: int
) -> PipelineConfig:
    """A stage's config with the items' classes: their priority at every stage (a child
    inherits its source item's), their patience at the first stage only (how long an
    item waits for the chain to begin its work; once begun, it is not abandoned)."""
    if classes is None:
        return config
    changes: dict[str, Any] = {}
    if classes.prioritised:
        keys = classes.priority
        changes["priority"] = keys.__getitem__ if spread == 1 else _Inherited(keys, spread)
    if number == 0 and classes.impatient:
        changes["max_wait_s"] = classes.patience_s.tolist().__getitem__
    return dataclasses.replace(config, **changes) if changes else config


class _Inherited:
    """The priority key of item ``i`` of a stage: that of its source item, ``i // spread``."""

    __slots__ = ("_keys", "_spread")

    def __init__(self, keys: list[Any], spread: int) -> None:
        self._keys, self._spread = keys, spread

    def __call__(self, item_id: int) -> Any:
        return self._keys[item_id // self._spread]


async def _run_chain(
    scenario: Scenario, replication: int
) -> tuple[ChainReport, np.ndarray, list[Recorder]]:
    streams = Streams.from_seed(scenario.seed, replication)
    arrivals = source_arrivals(scenario, streams.arrivals)
    loop = asyncio.get_running_loop()
    create_future, call_at, now = loop.create_future, loop.call_at, loop.time

    def fast_sleep(seconds: float) -> asyncio.Future[None]:
        wake = create_future()
        call_at(now() + seconds, wake_unless_cancelled, wake)
        return wake

    stages, recorders = [], []
    reaching = len(arrivals)
    classes = draw_classes(scenario, replication, len(arrivals))
    spread = 1  # source items per item id at this stage: item i descends from i // spread
    for number, spec in enumerate(scenario.stages):
        work = StageWorkload(spec, reaching, scenario.seed, replication, number)
        # Attempts cut short by a timeout must cancel their timers too, as asyncio.sleep does.
        sleep = asyncio.sleep if spec.config.attempt_timeout_s is not None else fast_sleep
        recorder = Recorder()
        stages.append(
            Stage(
                spec.name,
                _handler(work, sleep),
                _stage_config(spec.config, classes, number, spread),
                fan_out=spec.fan_out > 1,
                on_event=recorder.listener,
                rng=work.jitter,
            )
        )
        recorders.append(recorder)
        reaching *= spec.fan_out
        spread *= spec.fan_out

    async def source() -> AsyncIterator[int]:
        for item_id, arrival in enumerate(arrivals.tolist()):
            if arrival > now():
                wake = create_future()
                call_at(arrival, wake_unless_cancelled, wake)  # exactly at `arrival`
                await wake
            yield item_id

    chain = Chain(stages, name="sim")
    pools = {
        spec.name: PoolTrace(partial(_stage_statistics, chain, spec.name), spec.config.concurrency)
        for spec in scenario.stages
        if spec.config.autoscale is not None
    }
    if pools:
        chain.add_listener(lambda name: pools[name].listeners() if name in pools else {})
    report = await chain.run(source())
    for spec, recorder in zip(scenario.stages, recorders, strict=True):
        if spec.name in pools:
            recorder.pool = pools[spec.name].series()
    return report, arrivals, recorders


def _stage_statistics(chain: Chain, name: str) -> Statistics:
    """The ``statistics()`` of the pipeline of ``chain``'s stage ``name``."""
    return chain.statistics().stages[name].pipeline


class ChainSimulationResult:
    """One simulated run of a chain: per-stage results and the end-to-end view.

    Attributes:
        scenario: what was simulated.
        report: the chain's :class:`~pipeline.ChainReport` (payloads are item ids).
        stages: by name, each stage's :class:`SimulationResult`, with the
            ``summary`` keys, ``items`` columns and ``timeseries`` columns of a
            single-stage run (``arrival_s`` is the arrival at that stage).
        summary: end to end: items offered at the source and completed by the
            last stage, end-to-end latency (source arrival to the last stage's
            finish) percentiles, throughput, items held and the memory of every
            stage together. Every key counts the last stage's items, as
            ``items`` does: ``items_completed`` is the items it completed
            (``report.completed``), ``throughput_per_s`` those arriving after the
            warm-up per second of the measured span; its fan-out children are
            its ``outputs`` in the report, not items. ``items_held_max`` is the
            peak of what the stages hold (queued, waiting for a retry, in an
            attempt, waiting to be handed on: what the stages' bounds bound);
            ``memory_peak_bytes`` adds the dead letters the report keeps. An
            autoscaled stage adds ``STAGE.workers_mean``: its worker-seconds over
            the chain's run (``sim_time_s``), what its pool was paid for.
        items: one row per item of the last stage, with its source item and
            end-to-end latency (built on first use).
        timeseries: items held by the whole chain over time, and their memory
            (with the kept dead letters).
        wall_time_s: real seconds the run took.
        engine: which one ran it, ``"asyncio"`` or ``"kernel"`` (also the summary's ``engine``).
    """

    def __init__(
        self,
        scenario: Scenario,
        report: ChainReport,
        arrival_s: np.ndarray,
        stages: dict[str, SimulationResult],
        wall_time_s: float,
        engine: str = "asyncio",
        item_class: np.ndarray | None = None,
    ) -> None:
        self.engine = engine
        self.item_class = item_class
        self.scenario = scenario
        self.report = report
        self.arrival_s = arrival_s
        self.stages = stages
        self.wall_time_s = wall_time_s
        self._held_time_s, self._held, self._kept = _items_held(list(stages.values()))
        self.summary = self._summarise()

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<ChainSimulationResult stages={list(self.stages)} items={s['items_offered']} "
            f"completed={s['items_completed']} latency_p95_s={s['latency_p95_s']:.4g}>"
        )

    def to_openmetrics(
        self,
        path: str | os.PathLike[str],
        *,
        start_s: float | None = None,
        step_s: float = 1.0,
        pipeline: str = "sim",
    ) -> float:
        """Write this run as OpenMetrics text (see :mod:`pipeline.sim.running.openmetrics`).

        Args:
            path: the file, replaced once complete.
            start_s: UNIX seconds of virtual time 0; None: the run ends now.
            step_s: sampling step, seconds (coarsened beyond ``MAX_STEPS`` steps).
            pipeline: the ``pipeline`` label's value.

        Returns:
            The sampling step used, seconds.
        """
        return write_openmetrics(self, path, start_s=start_s, step_s=step_s, pipeline=pipeline)

    def source_ids(self, ids: np.ndarray) -> np.ndarray:
        """The source item each of the last stage's items ``ids`` came from (fan-outs undone)."""
        spread = 1
        for spec in self.scenario.stages[:-1]:
            spread *= spec.fan_out
        return ids // spread

    def _summarise(self) -> dict[str, Any]:
        scenario, report = self.scenario, self.report
        tail = list(self.stages.values())[-1].columns
        warm = scenario.warmup_s
        ids = np.arange(len(tail.finish_s))
        done = tail.outcome == 0
        source_arrival = self.arrival_s[self.source_ids(ids[done])]
        counted = source_arrival >= warm
        latencies = tail.finish_s[done][counted] - source_arrival[counted]
        if len(latencies):
            mean = float(latencies.mean())
            p50, p95, p99 = np.percentile(latencies, (50, 95, 99)).tolist()
        else:
            mean = p50 = p95 = p99 = math.nan
        sim_time = report.finished_s
        span = sim_time - warm
        live = np.append(self._held_time_s[1:] >= warm, sim_time >= warm)
        held_peak = int(self._held[live].max()) if live.any() else 0
        # Memory: the items held plus the dead letters the report keeps (as for one stage).
        in_memory = self._held + self._kept
        memory_peak = int(in_memory[live].max()) if live.any() else 0
        summary = {
            "items_offered": report.offered,
            "items_admitted": next(iter(report.stages.values())).admitted,
            "items_completed": report.completed,
            "items_dead_lettered": report.dead_lettered,
            "items_shed": report.shed,
            "items_unfinished": report.unfinished,
            "items_expired": report.expired,
            "expired_fraction": report.expired / report.offered if report.offered else math.nan,
            "attempts_total": sum(stage.attempts for stage in report.stages.values()),
            "latency_mean_s": mean,
            "latency_p50_s": p50,
            "latency_p95_s": p95,
            "latency_p99_s": p99,
            "throughput_per_s": float(len(latencies) / span) if span > 0 else math.nan,
            "memory_peak_bytes": memory_peak * scenario.item_size_bytes,
            "items_held_max": held_peak,
            "drain_timed_out": report.drain_timed_out,
            "sim_time_s": sim_time,
            "wall_time_s": self.wall_time_s,
            "engine": self.engine,
            "stages": len(self.stages),
        }
        for spec in scenario.stages:
            if spec.config.autoscale is not None:
                # What the stage's pool was paid for over the chain's run, workers (as
                # one stage's ``workers_mean``); a plan's cost prices it at the stage's rate.
                seconds = self.stages[spec.name].summary["worker_seconds"]
                mean = seconds / sim_time if sim_time > 0 else math.nan
                summary[f"{spec.name}.workers_mean"] = mean
        if scenario.classes is not None and self.item_class is not None:
            summary["classes"] = self._class_summaries()
        if scenario.initial_backlog:
            first = next(iter(self.stages.values()))
            summary["items_backlog"] = scenario.initial_backlog
            summary["backlog_cleared_s"] = self._backlog_cleared_s()
            summary["backlog_drained_s"] = first.summary["backlog_drained_s"]
        return summary

    def _class_summaries(self) -> dict[str, dict[str, Any]]:
        """End to end, per class: the source's items, the last stage's completions.

        ``items`` counts the class's source items, ``expired`` those whose patience
        ran out at the first stage (the only one that has deadlines), ``completed``
        the last stage's items of the class (a fan-out's children), and ``wait_*``
        the first stage's waits (arrival at the source to the first start);
        ``latency_*`` are end to end, source arrival to the last stage's finish.
        """
        results = list(self.stages.values())
        first, tail = results[0], results[-1]
        own = first.summary["classes"]
        ends = class_summaries(
            self.scenario.classes, tail.item_class, _end_to_end(self, tail), self.scenario.warmup_s
        )
        out = {}
        for name, head in own.items():
            block = dict(head)
            block["completed"] = ends[name]["completed"]
            block["dead_lettered"] = sum(
                s.summary["classes"][name]["dead_lettered"] for s in self.stages.values()
            )
            block["shed"] = sum(s.summary["classes"][name]["shed"] for s in self.stages.values())
            for key in ("latency_mean_s", "latency_p50_s", "latency_p95_s", "latency_p99_s"):
                block[key] = ends[name][key]
            out[name] = block
        return out

    def _backlog_cleared_s(self) -> float:
        """When the last item descending from the backlog left the chain (NaN: one never did).

        It leaves when the last stage completes it, or when any stage dead-letters or sheds it.
        """
        reaching, cleared = self.scenario.initial_backlog, 0.0
        results = list(self.stages.values())
        for number, (spec, result) in enumerate(zip(self.scenario.stages, results, strict=True)):
            outcome = result.columns.outcome[:reaching]
            if (outcome == 3).any():  # unfinished: handed back by a drain that timed out
                return math.nan
            left = (outcome == 1) | ((outcome == 0) if number == len(results) - 1 else False)
            # A shed item left when it reached the stage (its arrival there).
            finish = np.concatenate(
                [
                    result.columns.finish_s[:reaching][left],
                    result.columns.arrival_s[:reaching][outcome == 2],
                ]
            )
            if len(finish):
                cleared = max(cleared, float(finish.max()))
            reaching *= spec.fan_out
        return cleared

    @cached_property
    def items(self) -> pd.DataFrame:
        """One row per item of the last stage: its source item, times and outcome, and
        ``expired_s``, when it expired in the last stage (NaN for the others)."""
        import pandas as pd

        tail = list(self.stages.values())[-1].columns
        ids = np.arange(len(tail.finish_s))
        source = self.source_ids(ids)
        arrival = self.arrival_s[source]
        frame = pd.DataFrame(
            {
                "item_id": ids,
                "source_item_id": source,
                "arrival_s": arrival,
                "finish_s": tail.finish_s,
                "latency_s": tail.finish_s - arrival,
                "outcome": pd.Categorical.from_codes(tail.outcome, ItemColumns.OUTCOMES),
                # When an item that expired in the last stage expired (as a stage's items).
                "expired_s": tail.expired_times(),
            }
        )
        if self.scenario.classes is not None and self.item_class is not None:
            frame["class"] = pd.Categorical.from_codes(
                self.item_class[source], [c.name for c in self.scenario.classes]
            )
        return frame

    @cached_property
    def timeseries(self) -> pd.DataFrame:
        """Items held by the whole chain (every stage and hand-off) over time, and the
        memory they and the kept dead letters take."""
        import pandas as pd

        return pd.DataFrame(
            {
                "time_s": self._held_time_s,
                "items_held": self._held,
                "memory_bytes": (self._held + self._kept).astype(np.int64)
                * self.scenario.item_size_bytes,
            }
        )


def _end_to_end(chain: ChainSimulationResult, tail: SimulationResult) -> ItemColumns:
    """The last stage's item columns with each item's arrival at the source."""
    c = tail.columns
    source = chain.arrival_s[chain.source_ids(np.arange(len(c.finish_s)))]
    return dataclasses.replace(c, arrival_s=source)


def _items_held(stages: list[SimulationResult]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chain's held items and kept dead letters as step functions: every stage's, summed.

    A stage holds its in-system items (queued, waiting for a retry, in an
    attempt); after the first stage also the items finished upstream and
    waiting to be handed over (its ``upstream_backlog``), which the stage
    before it holds in memory. That is what the stages' bounds bound, and what
    ``Chain.statistics().items_held`` counts in real time. Dead letters have
    left the chain: the report keeps them (memory, not items held).

    Returns:
        (times, items held, dead letters kept), one value per time.
    """
    # Each stage's steps as changes, merged in time order and summed: the stable sort
    # merges the stages' sorted runs (timsort), cheaper than np.unique and a search.
    times, held_steps, kept_steps = [], [], []
    kept_any = any(stage.series.dead_letters[-1] for stage in stages)  # the counts only rise
    for number, stage in enumerate(stages):
        series = stage.series
        held = series.in_system.astype(np.int64)
        if number:
            held = held + series.upstream_backlog
        times.append(series.time_s)
        held_steps.append(np.diff(held, prepend=0))
        if kept_any:
            kept_steps.append(np.diff(series.dead_letters.astype(np.int64), prepend=0))
    time_s = np.concatenate(times)
    order = np.argsort(time_s, kind="stable")
    time_s = time_s.take(order)
    total = np.cumsum(np.concatenate(held_steps).take(order))
    last = np.ones(len(time_s), dtype=bool)  # the last change at each time holds from it on
    last[:-1] = time_s[1:] != time_s[:-1]
    rows = np.flatnonzero(last)
    if not kept_any:
        return time_s.take(rows), total.take(rows), np.zeros(len(rows), np.int64)
    kept = np.cumsum(np.concatenate(kept_steps).take(order))
    return time_s.take(rows), total.take(rows), kept.take(rows)


def simulate_chain(
    scenario: Scenario, replication: int, *, kernel: bool = False
) -> ChainSimulationResult:
    """Run one replication of a multi-stage ``scenario``.

    Args:
        kernel: False runs the real chain on the virtual loop (the asyncio engine);
            True its exact replay, for a chain
            :func:`~pipeline.sim.running.engine_choice.choose_engine` gave the kernel.

    Raises:
        KernelDeclined: ``kernel`` and a drain runs into its timeout.
    """
    began = time.perf_counter()
    if kernel:
        from .kernel.run import run_chain_kernel

        engine = "kernel"
        report, arrivals, recorders, series_of = run_chain_kernel(scenario, replication)
    else:
        engine, series_of = "asyncio", step_series
        report, arrivals, recorders = run_virtual(_run_chain(scenario, replication))
    results: dict[str, SimulationResult] = {}
    arrival = arrivals
    codes = None
    if scenario.classes is not None:  # the very draw _run_chain made
        codes = class_codes(scenario.classes, len(arrivals), scenario.seed, replication)
    spread = 1
    for spec, recorder in zip(scenario.stages, recorders, strict=True):
        stage_report = report.stages[spec.name]
        columns = item_columns(arrival, recorder)
        # An item that reached the stage but was never taken (stranded) is unfinished.
        stranded = ~np.isnan(arrival) & (columns.outcome == 4)
        columns.outcome[stranded] = 3
        series = series_of(arrival[~np.isnan(arrival)], recorder, report.finished_s)
        stage_scenario = Scenario(
            arrivals=scenario.arrivals,
            service=spec.service,
            config=spec.config,
            n_items=scenario.n_items,
            duration_s=scenario.duration_s,
            seed=scenario.seed,
            failures=spec.failures,
            item_size_bytes=scenario.item_size_bytes,
            warmup_s=scenario.warmup_s,
            # The backlog waits at the first stage; later stages see its items handed on.
            initial_backlog=scenario.initial_backlog if not results else 0,
            classes=scenario.classes,
        )
        stage_codes = None if codes is None else np.repeat(codes, spread)
        results[spec.name] = SimulationResult(
            stage_scenario,
            stage_report,
            columns,
            series,
            0.0,
            engine,
            stage_codes,
            controls=control_series(spec.config, recorder, report.finished_s),
            pool=recorder.pool,
        )
        spread *= spec.fan_out
        # The next stage's items arrive when this stage finishes them (or their parent).
        finished = np.where(columns.outcome == 0, columns.finish_s, np.nan)
        arrival = np.repeat(finished, spec.fan_out)
    wall = time.perf_counter() - began
    for result in results.values():
        result.wall_time_s = wall
        result.summary["wall_time_s"] = wall
    return ChainSimulationResult(scenario, report, arrivals, results, wall, engine, codes)
