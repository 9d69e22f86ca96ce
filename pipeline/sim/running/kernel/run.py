"""The exact kernel: what the asyncio engine computes, without running it.

The asyncio engine (:class:`~pipeline.Pipeline` on the virtual clock) is the
reference semantics; for the scenarios inside its domain (decided in
:mod:`pipeline.sim.running.engine_choice`) the kernel returns the same report,
item columns and step series, item by item, for the same seed
(``tests/sim/running/kernel/`` checks it on thousands of random scenarios, with
CPython 3.11 to 3.13's asyncio scheduling). A single pipeline takes the FCFS
recursion (:mod:`.fcfs`) when nothing can fail, no circuit breaker waits, the queue
blocks and no two events it would have to order coincide; every other run, chains
included (hand-offs that block after service, fan-out), takes the replay of the engine's steps
(:mod:`.replay`, run by :mod:`.driver`, compiled or plain as :mod:`.paths` says).
A chain whose drain reaches its timeout is found only by running and is then
declined (:class:`KernelDeclined`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from pipeline._spelling import setting_value
from pipeline.events import EventKind
from pipeline.overload.breaker import OPEN, STATES
from pipeline.records import RunReport

from ...workloads.failures import (
    CombinedFailures,
    FailureModel,
    IndependentFailures,
    NoFailures,
    PermanentFailures,
    ScriptedFailures,
)
from ...workloads.faults import CapacityDrop, SpeedProfile
from ...workloads.scenario import Scenario, Streams
from ...workloads.traces.service import ServiceTrace
from ..control_series import control_series
from ..recorder import (
    ARRIVAL,
    DELTAS,
    SERIES,
    ItemColumns,
    LoggedAttempts,
    Recorder,
    StepSeries,
    finish_series,
    step_series,
)
from ..summary import HeldPeak
from ..workload import StageWorkload, Workload, source_arrivals
from .report import make_report

if TYPE_CHECKING:
    from pipeline.chain.report import ChainReport

    from ..control_series import ControlSeries
    from ..downstream import DownstreamStats
    from ..pooltrace import PoolSeries
    from .cuts import Cuts

__all__ = [
    "KernelDeclined", "KernelRun", "never_fails", "run_chain_kernel", "run_kernel",
]  # fmt: skip


def never_fails(failures: FailureModel, n: int) -> bool:
    """True when ``failures`` fails no attempt of the first ``n`` items, whatever the draws."""
    models = failures.models if type(failures) is CombinedFailures else (failures,)
    return all(
        type(model) is NoFailures
        or (type(model) is IndependentFailures and model.p == 0)
        or (type(model) is PermanentFailures and model.fraction == 0)
        or (type(model) is ScriptedFailures and not any(model.fails[:n]))
        for model in models
    )


class KernelRun(NamedTuple):
    """One replication on the kernel: what :func:`run_kernel` returns."""

    report: RunReport
    arrivals: np.ndarray
    """Arrival times, seconds."""
    columns: ItemColumns
    series: StepSeries | HeldPeak
    pool: PoolSeries | None
    """An autoscaled run's pool over time (with ``series``), else None."""
    downstream: DownstreamStats | None
    """The downstream's account, None without a downstream."""
    controls: ControlSeries | None = None
    """The overload controls' step functions (with ``series``), None without controls."""


def run_kernel(scenario: Scenario, replication: int, *, series: bool = True) -> KernelRun:
    """Run one replication in the kernel (see :class:`KernelRun`).

    The caller checks the domain first. With ``series=False`` a replayed run writes
    no event log and gives a :class:`~pipeline.sim.running.summary.HeldPeak`
    instead of the step series (what :func:`~pipeline.sim.running.single.summary_once`
    reads for every key but the other series statistics); the FCFS recursion gives
    its series as always.
    """
    from .driver import StageInput, replay, take_compiled
    from .fcfs import run_fcfs

    workload = Workload(scenario, replication)
    config, arrivals = scenario.config, workload.arrival_s
    n = len(arrivals)
    quiet = never_fails(scenario.failures, n)
    cuts = _cuts(scenario, replication)
    fcfs = cuts is None and config.autoscale is None and config.breaker is None  # no timers
    if quiet and config.on_full == "block" and fcfs:  # of their own (a breaker's, a sync's)
        fast = run_fcfs(arrivals, workload.first_attempt_s, config)
        if fast is not None:
            quiet_controls = control_series(config, Recorder(), fast[0].finished_s)
            return KernelRun(*fast, None, None, quiet_controls)  # (a budget never asked)
    failures = None if quiet else workload.failures
    first, traced = workload.first_attempt_s, workload.traced
    if first is None:  # a downstream's call and no client-side time: no sleep, ever
        first, traced = np.zeros(n), True
    stage = StageInput("pipeline", config, 1, first, workload.retry_times, traced, failures,
                       workload.streams.jitter, cuts)  # fmt: skip
    compiled = take_compiled(n)
    run = replay(arrivals, [stage], single=True, drain_timeout_s=config.drain_timeout_s,
                 warmup_s=scenario.warmup_s, fast=compiled, log=series)  # fmt: skip
    played, end_s = run.stages[0], run.finished_s
    admitted, start, finish, tries, outcome = played["columns"]
    outcome[~np.isnan(admitted) & (outcome == 4)] = 3  # admitted, never settled: unfinished
    left = np.flatnonzero(outcome == 3)
    steps: StepSeries | HeldPeak = HeldPeak(end_s=end_s, held=run.held_peak)
    attempts = pool = controls = None
    if series:  # the series and the attempt log read the close's UNFINISHED events too
        if config.autoscale is not None:
            pool = _pool_series(played, config.concurrency)
        log = Recorder()
        log.kinds, log.times, log.ids = played["kinds"], played["times"], played["ids"]
        if len(left):  # (no copy of the log when the drain finished every item)
            log.kinds = np.append(log.kinds, np.full(len(left), EventKind.UNFINISHED, np.int8))
            log.times = np.append(log.times, np.full(len(left), end_s))
            log.ids = np.append(log.ids, left)
        attempts = LoggedAttempts(log.kinds, log.times, log.ids)  # paired if a caller reads it
        controls = control_series(config, log, end_s)
        # plain Python: numpy's vectorised passes beat a loop
        steps = (_merged_series if compiled else step_series)(arrivals, log, end_s)
    report = make_report(config, played, left.tolist(), run.drain_timed_out, end_s, pool=run.pool)
    columns = ItemColumns(arrivals, admitted, start, finish, tries, outcome, attempts)
    downstream = None if run.downstream is None else _downstream_stats(run.downstream, end_s)
    return KernelRun(report, arrivals, columns, steps, pool, downstream, controls)


def _pool_series(played: dict, concurrency: int) -> PoolSeries:
    """The :class:`PoolSeries` a :class:`PoolTrace` records, from the replay's log.

    The replay logs a SCALED event with the pool's new size as its id and a SYNCED one
    with the desired count (a WORKER_LEFT one takes a worker off); here the rows are
    read and those ids set back to -1, as the engine's log has them.
    """
    from ..pooltrace import NO_DESIRED, PoolSeries

    kinds, ids = played["kinds"], played["ids"]
    at = np.flatnonzero(np.isin(kinds, _POOL_KINDS))
    rows, workers, desired = [(0.0, concurrency, NO_DESIRED)], concurrency, NO_DESIRED
    for kind, time_s, value in zip(kinds[at].tolist(), played["times"][at].tolist(),
                                   ids[at].tolist(), strict=True):  # fmt: skip
        if kind == EventKind.SCALED:
            workers = value
            continue
        if kind == EventKind.SYNCED:
            desired = value
        else:
            workers -= 1
        rows.append((time_s, workers, desired))
    ids[at] = -1
    time_s, size, want = zip(*rows, strict=True)
    return PoolSeries(np.array(time_s), np.array(size, np.int64), np.array(want, np.int64))


_POOL_KINDS = [int(EventKind.SCALED), int(EventKind.SYNCED), int(EventKind.WORKER_LEFT)]


def _cuts(scenario: Scenario, replication: int) -> Cuts | None:
    """The scenario's attempt timeout and downstream as the replay takes them (None: neither)."""
    timeout_s, downstream = scenario.config.attempt_timeout_s, scenario.downstream
    if downstream is None and timeout_s is None:
        return None
    from .cuts import Cuts

    if downstream is None:
        return Cuts(timeout_s)
    profile = SpeedProfile([f for f in scenario.faults if isinstance(f, CapacityDrop)])
    starts, _, factors = zip(*profile.segments(), strict=True)
    from ..downstream import downstream_rng

    rng = downstream_rng(scenario.seed, replication)
    return Cuts(timeout_s, downstream, rng, starts, factors, scenario.service is not None)


def _downstream_stats(played: dict, end_s: float) -> DownstreamStats:
    """:meth:`DownstreamRun.stats` at ``end_s``, from the replay's account of it."""
    from ..downstream import DownstreamLog, stats_over

    queue_area, busy_area = played["queue_area"], played["busy_area"]
    span = end_s - played["since"]
    if span > 0:  # (DownstreamRun._account, to the end)
        queue_area += span * played["waiting"]
        busy_area += span * (played["concurrency"] - played["free"])
    counts = tuple(played[name] for name in ("requests", "served", "orphaned", "rejected"))
    return stats_over(counts, queue_area, busy_area, end_s, DownstreamLog(*played["log"]))


def _merged_series(arrivals: np.ndarray, log: Recorder, end_s: float) -> StepSeries:
    """:func:`~pipeline.sim.running.recorder.step_series`, by a compiled merge (both sorted)."""
    from .driver import compiled

    kinds, times = log.kinds, log.times
    rows = len(arrivals) + len(times) + 1
    time_s = np.empty(rows)
    table = np.empty((len(SERIES), rows), np.int32)
    deltas = DELTAS.astype(np.int64)
    rows = compiled().series_rows(arrivals, kinds, times, deltas, ARRIVAL, time_s, table)
    # views, not copies: the rows left over are a few bytes per event
    named = {name: table[index, :rows] for index, name in enumerate(SERIES)}
    return finish_series(time_s[:rows], named, end_s)


class KernelDeclined(Exception):
    """Raised by :func:`run_chain_kernel` when a run turns out to leave the kernel's domain.

    ``feature`` names what (for :func:`~pipeline.sim.running.engine_choice.refusal`);
    :func:`~pipeline.sim.running.engine_choice.run_chosen` then runs the engine for
    ``engine="auto"``.
    """

    def __init__(self, feature: str) -> None:
        super().__init__(feature)
        self.feature = feature


def run_chain_kernel(
    scenario: Scenario, replication: int
) -> tuple[ChainReport, np.ndarray, list, Callable[..., StepSeries]]:
    """Run one replication of a chain in the kernel: (chain report, arrival times, recorders,
    series).

    The same triple the engine's run gives (one :class:`Recorder` per stage, its log in
    time order), from the same streams: the source's arrivals from the scenario's, each
    stage's service times, retries, failures and jitter from its own; and the
    :func:`step_series` of a stage for this path (compiled: a merge).

    Raises:
        KernelDeclined: a drain runs into its timeout (outside the chain path's domain).
    """
    from pipeline.chain.report import ChainReport, StageReport

    from .cuts import Cuts
    from .driver import StageInput, replay, take_compiled

    arrivals = source_arrivals(scenario, Streams.from_seed(scenario.seed, replication).arrivals)
    inputs, reaching, total = [], len(arrivals), 0
    for number, spec in enumerate(scenario.stages):
        work = StageWorkload(spec, reaching, scenario.seed, replication, number)
        failures = None if never_fails(spec.failures, reaching) else work.failures
        traced = isinstance(spec.service, ServiceTrace)
        timeout_s = spec.config.attempt_timeout_s
        cut = None if timeout_s is None else Cuts(timeout_s)
        inputs.append(StageInput(spec.name, spec.config, spec.fan_out, work.first_attempt_s,
                                 work.retry_times, traced, failures, work.jitter, cut))  # fmt: skip
        total += reaching
        reaching *= spec.fan_out
    fast = take_compiled(total)
    run = replay(arrivals, inputs, single=False, fast=fast)
    drain = scenario.stages[0].config.drain_timeout_s
    finished = _close(inputs, run.last_settle, run.stages, run.closed_s, drain)
    reports, recorders = {}, []
    for spec, played, finished_s in zip(scenario.stages, run.stages, finished, strict=True):
        if spec.config.breaker is not None:
            _breaker_at_close(spec.config.breaker.open_s, played, finished_s)
        joint = {key: played[key] for key in ("outputs", "handed_on", "hand_off_blocked_s")}
        reports[spec.name] = make_report(spec.config, played, [], False, finished_s,
                                         kind=StageReport, name=spec.name, **joint)  # fmt: skip
        recorders.append(log := Recorder())
        log.kinds, log.times, log.ids = played["kinds"], played["times"], played["ids"]
    head, tail = reports[scenario.stages[0].name], reports[spec.name]
    report = ChainReport(reports, head.offered, tail.completed, False, 0.0, finished[-1])
    # numpy's vectorised passes beat a loop in plain Python; a stage's arrivals are in item order
    merged = lambda at, log, end_s: _merged_series(np.sort(at), log, end_s)  # noqa: E731
    return report, arrivals, recorders, merged if fast else step_series


def _breaker_at_close(open_s: float, played: dict, close_s: float) -> None:
    """A chain stage's breaker as its close left it: the close cancels the half-open timer,
    which the replay ran on (after a stage's last item, nothing else changes the breaker).

    A timer due at the close instant ran before it (it was due in the instant's first turn).
    """
    late = (played["kinds"] == EventKind.BREAKER_HALF_OPEN) & (played["times"] > close_s)
    if late.any():
        for key in ("kinds", "times", "ids"):
            played[key] = played[key][~late]
        denied, refused, _, opened_s, open_total_s = played["guard"]
        played["guard"] = (denied, refused, STATES.index(OPEN), opened_s, open_total_s - open_s)


def _close(
    stages: list,
    last_settle: list[float | None],
    runs: list[dict],
    closed_s: float,
    drain_timeout_s: float | None,
) -> list[float]:
    """Each stage's close time; its log gets the intake-closed event, in time order.

    Declines a drain timeout.

    The head stops taking items at ``closed_s``; stage *k* is told to stop when stage
    *k - 1* has closed, and closes once it has settled its last item. A timeout gives
    the head up at ``closed_s + drain_timeout_s`` and each later stage at its stop time
    plus what is left of that deadline (the engine's own float arithmetic).

    Raises:
        KernelDeclined: a stage is still busy at its drain's deadline.
    """
    deadline = None if drain_timeout_s is None else closed_s + drain_timeout_s
    before = closed_s
    finished = []
    for number, (spec, last, run) in enumerate(zip(stages, last_settle, runs, strict=True)):
        busy = last is not None and last >= before
        if deadline is not None and busy:
            if number == 0:
                gives_up = closed_s + drain_timeout_s
            else:
                gives_up = before + max(0.0, deadline - before)
            if last >= gives_up:
                timeout = setting_value("drain_timeout_s", drain_timeout_s)
                raise KernelDeclined(
                    f"a chain whose drain reaches {timeout} "
                    f"(stage {spec.name!r} is still busy at its deadline)"
                )
        at = int(np.searchsorted(run["times"], before, side="right"))  # the head works on
        run["kinds"] = np.insert(run["kinds"], at, np.int8(EventKind.INTAKE_CLOSED))
        run["times"] = np.insert(run["times"], at, before)
        run["ids"] = np.insert(run["ids"], at, np.int64(-1))
        if busy:
            before = last
        finished.append(before)
    return finished
