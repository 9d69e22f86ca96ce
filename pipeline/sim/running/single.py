"""One replication: the real :class:`~pipeline.Pipeline` on the virtual clock, or its kernel.

The simulated source sleeps (in virtual time) until each arrival and yields
the item's id; the simulated handler sleeps for the attempt's service time and
then succeeds or fails as the failure model says (:func:`run_engine`).
:func:`simulate_once` runs one replication on the engine
:mod:`~pipeline.sim.running.engine_choice` picks for the request: the exact
kernel or the asyncio engine, a chain's run for a multi-stage scenario.
:func:`summary_once` is the same run for a caller that reads a few summary
keys (a plan's SLOs): it computes only what those need.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import numpy as np

from ...config import PipelineConfig
from ...engine import Pipeline
from ...records import RunReport
from ..workloads.classes import ClassDraws, class_codes
from ..workloads.failures import NoFailures
from ..workloads.faults import CapacityDrop, SpeedProfile
from ..workloads.scenario import Scenario
from .control_series import control_series
from .engine_choice import run_chosen
from .recorder import Recorder, item_columns, step_series
from .result import SimulationResult
from .summary import SERIES_KEYS, summary_of
from .workload import Workload

__all__ = ["class_config", "run_engine", "simulate_once", "summary_once"]


def class_config(config: PipelineConfig, classes: ClassDraws | None) -> PipelineConfig:
    """``config`` with the items' classes as the engine's own priority keys and deadlines.

    The payload is the item id: the key is its class's priority, the deadline its
    drawn patience (``inf``, no deadline, for a patient class). Equal priorities
    leave the queue FIFO, and no patience leaves no deadline: the engine then
    runs exactly as without classes.
    """
    if classes is None:
        return config
    changes = {}
    if classes.prioritised:
        changes["priority"] = classes.priority.__getitem__
    if classes.impatient:
        changes["max_wait_s"] = classes.patience_s.tolist().__getitem__
    return dataclasses.replace(config, **changes) if changes else config


async def run_engine(
    scenario: Scenario, replication: int
) -> tuple[RunReport, np.ndarray, Recorder]:
    from ..vloop import wake_unless_cancelled as _wake_unless_cancelled

    workload = Workload(scenario, replication)
    streams, arrivals = workload.streams, workload.arrival_s
    first = workload.first_attempt_s
    first_attempt = first.tolist() if first is not None else None
    failures = workload.failures
    n = len(arrivals)
    attempts = [0] * n
    loop = asyncio.get_running_loop()
    # loop.create_future() is asyncio.Future(loop=loop) on the virtual loop; asyncio.Future()
    # makes the same in a task of the running loop, without a Python frame or a keyword
    # argument to parse (twice an item).
    create_future, call_later = asyncio.Future, loop.call_later

    def sleep(seconds: float) -> asyncio.Future[None]:
        # asyncio.sleep minus its per-call overhead (this is the hot path). The
        # guard lets the drain cancel the wait safely; the timer stays in the
        # heap until due, which only matters when attempts are cut short often.
        # call_later(s) is call_at(loop.time() + s) without the call of time().
        wake = create_future()
        call_later(seconds, _wake_unless_cancelled, wake)
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

    chosen = cannot_fail if isinstance(scenario.failures, NoFailures) else handler
    if scenario.downstream is not None:
        # Here, not at the top: a run without a downstream need not load it (start-up).
        from .downstream import DownstreamRun, downstream_rng

        servers = DownstreamRun(
            scenario.downstream,
            SpeedProfile([f for f in scenario.faults if isinstance(f, CapacityDrop)]),
            downstream_rng(scenario.seed, replication),
            loop,
        )
        call, abandoned = servers.call, servers.abandoned

        async def calls_downstream(item_id: int) -> None:
            # Client-side time (if any), then the call; a timeout cancels the await, not the work.
            attempt = attempts[item_id] = attempts[item_id] + 1
            if first_attempt is not None:
                await sleep(first_attempt[item_id] if attempt == 1 else retry_time(item_id))
            number = servers.requests  # the number the call gives its request
            request = call()
            try:
                await request
            except asyncio.CancelledError:
                abandoned(number, request)  # dated in the log: orphaned from now on
                raise

        chosen = calls_downstream

    recorder = Recorder()
    pipe = Pipeline(
        chosen,
        class_config(scenario.config, workload.classes),
        rng=streams.jitter,
        name="sim",
    )
    pipe.add_listener(recorder.listeners())
    pool = None
    if scenario.config.autoscale is not None:
        from .pooltrace import PoolTrace  # here, not at the top: only an autoscaled run needs it

        pool = PoolTrace(pipe.statistics, scenario.config.concurrency)
        pipe.add_listener(pool.listeners())
    report = await pipe.run(_ArrivalSource(arrivals.tolist(), loop))
    if scenario.downstream is not None:
        recorder.downstream = servers.stats(report.finished_s)
    if pool is not None:
        recorder.pool = pool.series()
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

    __slots__ = ("_arrival_s", "_future", "_loop", "_next", "_resolve")

    def __init__(self, arrival_s: list[float], loop: asyncio.AbstractEventLoop) -> None:
        from ..vloop import resolve_unless_cancelled

        self._arrival_s = arrival_s
        self._loop = loop
        # loop.create_future, as the producer (a task of the running loop) calls it: see run_engine
        self._future = asyncio.Future
        self._next = 0
        self._resolve = resolve_unless_cancelled

    def __aiter__(self) -> _ArrivalSource:
        return self

    def __anext__(self) -> asyncio.Future[int]:
        item_id = self._next
        if item_id >= len(self._arrival_s):
            raise StopAsyncIteration
        self._next = item_id + 1
        loop = self._loop
        arrival = self._arrival_s[item_id]
        future = self._future()
        if arrival > loop.time():
            # call_at, not call_later(delay): the timer fires at exactly `arrival`,
            # which exact trace replay depends on.
            loop.call_at(arrival, self._resolve, future, item_id)
        else:  # already arrived (the producer was held up): no wait
            future.set_result(item_id)
        return future


def simulate_once(scenario: Scenario, replication: int, engine: str = "auto") -> SimulationResult:
    """One replication on the engine :func:`~.engine_choice.run_chosen` picks for ``engine``
    (module level: pools pickle it)."""
    if scenario.stages is not None:
        from .chained import simulate_chain

        return run_chosen(
            scenario,
            engine,
            lambda: simulate_chain(scenario, replication, kernel=True),
            lambda: simulate_chain(scenario, replication),
        )
    return run_chosen(
        scenario,
        engine,
        lambda: _kernel_once(scenario, replication),
        lambda: _engine_once(scenario, replication),
    )


def _kernel_once(scenario: Scenario, replication: int) -> SimulationResult:
    """One replication of a single-stage scenario inside the kernel's domain, on the kernel."""
    from .kernel.run import run_kernel

    began = time.perf_counter()
    run = run_kernel(scenario, replication)
    return SimulationResult(
        scenario, run.report, run.columns, run.series, time.perf_counter() - began, "kernel",
        pool=run.pool, downstream=run.downstream, controls=run.controls,
    )  # fmt: skip


def _engine_once(scenario: Scenario, replication: int) -> SimulationResult:
    """One replication of a single-stage scenario on the asyncio engine."""
    from ..vloop import run_virtual  # the kernel's runs need no virtual loop (start-up)

    began = time.perf_counter()
    report, arrivals, recorder = run_virtual(run_engine(scenario, replication))
    columns = item_columns(arrivals, recorder)
    series = step_series(arrivals, recorder, report.finished_s)
    codes = None
    if scenario.classes is not None:  # the very draw run_engine's workload made
        codes = class_codes(scenario.classes, len(arrivals), scenario.seed, replication)
    return SimulationResult(
        scenario,
        report,
        columns,
        series,
        time.perf_counter() - began,
        "asyncio",
        codes,
        downstream=recorder.downstream,
        controls=control_series(scenario.config, recorder, report.finished_s),
        pool=recorder.pool,
    )


def summary_once(
    scenario: Scenario,
    replication: int,
    engine: str = "auto",
    keys: frozenset[str] | None = None,
) -> dict:
    """``simulate_once(scenario, replication, engine).summary`` for the keys ``keys`` names.

    The same run on the same engine, and each of ``keys`` the very number the whole
    summary holds; the counts, ``drain_timed_out``, ``sim_time_s``, ``wall_time_s``
    and ``engine`` are always there. Only what those keys need is computed: on the
    kernel's array path, no event log, no attempt log and, unless a key other than
    ``memory_peak_bytes`` reads it, no step series (the run tracks its peak of items
    held); no batch means or percentile that is not asked. None, a chain, item
    classes, an initial backlog or the asyncio engine: the whole summary.
    (Module level: pools pickle it.)
    """
    if (
        keys is None
        or scenario.stages is not None
        or scenario.classes is not None
        or scenario.initial_backlog > 0
    ):
        return simulate_once(scenario, replication, engine).summary
    return run_chosen(
        scenario,
        engine,
        lambda: _kernel_summary(scenario, replication, keys),
        lambda: _engine_once(scenario, replication).summary,
    )


def _kernel_summary(scenario: Scenario, replication: int, keys: frozenset[str]) -> dict:
    """:func:`summary_once` on the kernel: only what ``keys`` need (see there)."""
    from .kernel.run import run_kernel

    began = time.perf_counter()
    series = any(key in keys for key in SERIES_KEYS if key != "memory_peak_bytes")
    run = run_kernel(scenario, replication, series=series)
    return summary_of(
        scenario,
        run.report,
        run.columns,
        run.series,
        wall_time_s=time.perf_counter() - began,
        engine="kernel",
        keys=keys,
        downstream=run.downstream,
    )
