"""The exact kernel: what the asyncio engine computes, without running it.

The asyncio engine (:class:`~pipeline.Pipeline` on the virtual clock) is the
reference semantics. The kernel is its verified fast path: for the scenarios
inside its declared domain it returns the same report, per-item columns and
step series, item by item, for the same seed.
``tests/sim/running/kernel/test_kernel_equality.py`` checks that on thousands of
random scenarios; a single mismatch is a bug.

Two paths, chosen per run:

- **FCFS recursion** (:mod:`pipeline.sim.running.kernel.fcfs`): when no attempt can
  fail and the queue blocks (or is unbounded), start times follow the
  Kiefer-Wolfowitz recursion over a heap of worker-free times and everything
  else is vectorised. It takes it only when no two events that the engine
  would have to order fall on the same instant; otherwise it hands over to
- **the replay** (:mod:`pipeline.sim.running.kernel.replay`, run by
  :mod:`.driver`): the engine's tasks replayed step by step over a timer heap,
  ties included, a pipeline as the one-stage case of a chain. One source,
  compiled by numba when the ``[fast]`` extra is installed and worth loading
  (:func:`~.driver.take_compiled`), plain Python otherwise;
  :func:`~.paths.kernel_path` makes a block run one path.

The domain, and which engine runs a scenario, are decided in one place,
:mod:`pipeline.sim.running.engine_choice`: the callers there check the domain
before they run the kernel.

Chains (``Scenario.stages``, :func:`run_chain_kernel`) take the replay too:
the real :class:`~pipeline.Chain` replayed stage by stage, hand-offs that block
after service and fan-out included. A chain is inside the domain when every
stage is; a drain that reaches its timeout is found only by running and then
declined (:class:`KernelDeclined`;
:func:`~pipeline.sim.running.engine_choice.run_chosen` then runs the engine).

The replay reproduces CPython's asyncio scheduling (what 3.11 to 3.13
do; the equality tests run on each), not a property of asyncio in general.
"""

from __future__ import annotations

import dataclasses
from array import array
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from pipeline._spelling import setting_value
from pipeline.config import PipelineConfig
from pipeline.records import RunReport

from ...workloads.failures import (
    CombinedFailures,
    FailureModel,
    IndependentFailures,
    NoFailures,
    PermanentFailures,
    ScriptedFailures,
)
from ...workloads.scenario import Scenario, Streams
from ...workloads.traces.service import ServiceTrace
from ..recorder import (
    ARRIVAL,
    DELTAS,
    SERIES,
    ItemColumns,
    Recorder,
    StepSeries,
    attempt_log,
    finish_series,
    item_columns,
    step_series,
)
from ..summary import HeldPeak
from ..workload import StageWorkload, Workload, source_arrivals
from .kinds import ADMITTED, COMPLETED, DEAD_LETTERED, INTAKE_CLOSED, UNFINISHED
from .report import make_report

if TYPE_CHECKING:
    from pipeline.chain.report import ChainReport

__all__ = ["KernelDeclined", "run_chain_kernel", "run_kernel"]


def _cannot_fail(scenario: Scenario, n: int) -> bool:
    """True when no attempt of the first ``n`` items can fail, whatever the draws."""
    return _never_fails(scenario.failures, n)


def _never_fails(failures: FailureModel, n: int) -> bool:
    """True when ``failures`` fails no attempt of the first ``n`` items, whatever the draws."""
    models = failures.models if type(failures) is CombinedFailures else (failures,)
    for model in models:
        if type(model) is NoFailures:
            continue
        if type(model) is IndependentFailures and model.p == 0:
            continue
        if type(model) is PermanentFailures and model.fraction == 0:
            continue
        if type(model) is ScriptedFailures and not any(model.fails[:n]):
            continue
        return False
    return True


def run_kernel(
    scenario: Scenario, replication: int, *, series: bool = True
) -> tuple[RunReport, np.ndarray, ItemColumns, StepSeries | HeldPeak]:
    """Run one replication in the kernel: (report, arrival times, item columns, step series).

    The caller checks the domain first
    (:func:`~pipeline.sim.running.engine_choice.unsupported`). With ``series=False``,
    a replayed run gives a :class:`~pipeline.sim.running.summary.HeldPeak` instead
    of the step series: what a summary of every key but the other series
    statistics reads (:func:`~pipeline.sim.running.single.summary_once`); the
    FCFS recursion gives its series as always.
    """
    from .driver import StageInput, replay, take_compiled
    from .fcfs import run_fcfs

    workload = Workload(scenario, replication)
    config = scenario.config
    arrivals = workload.arrival_s
    n = len(arrivals)
    quiet = _cannot_fail(scenario, n)
    if quiet and config.on_full == "block":
        fast = run_fcfs(arrivals, workload.first_attempt_s, config)
        if fast is not None:
            return fast
    stage = StageInput(
        name="pipeline",
        config=config,
        fan_out=1,
        first_attempt_s=workload.first_attempt_s,
        retry_times=workload.retry_times,
        traced=workload.traced,
        failures=None if quiet else workload.failures,
        rng=workload.streams.jitter,
    )
    compiled = take_compiled(n)
    run = replay(
        arrivals,
        [stage],
        single=True,
        drain_timeout_s=config.drain_timeout_s,
        warmup_s=scenario.warmup_s,
        fast=compiled,
    )
    played = run.stages[0]
    log = Recorder()
    log.kinds, log.times, log.ids = played["kinds"], played["times"], played["ids"]
    steps: StepSeries | HeldPeak
    if compiled:
        columns = _compiled_columns(arrivals, log)
        left = np.flatnonzero(columns.outcome == 3)
        if series:  # the series and the attempt log read the close's unfinished events
            _add_unfinished(log, left, run.finished_s)
            columns = dataclasses.replace(columns, attempt_log=attempt_log(log))
    else:  # numpy's vectorised passes beat a loop in plain Python
        kinds, ids = played["kinds"], played["ids"]
        live = np.zeros(n, np.bool_)
        live[ids[kinds == ADMITTED]] = True
        live[ids[(kinds == COMPLETED) | (kinds == DEAD_LETTERED)]] = False
        left = np.flatnonzero(live)
        _add_unfinished(log, left, run.finished_s)
        columns = item_columns(arrivals, log)
    kinds, times = log.kinds, log.times
    if series and compiled:
        steps = _merged_series(arrivals, kinds, times, run.finished_s)
    elif series:
        steps = step_series(arrivals, log, run.finished_s)
    else:
        steps = HeldPeak(end_s=run.finished_s, held=run.held_peak)
    report = _report(config, played, left.tolist(), run.drain_timed_out, run.finished_s)
    return report, arrivals, columns, steps


def _report(
    config: PipelineConfig, played: dict, unfinished: list[int], timed_out: bool, end_s: float
) -> RunReport:
    """The :class:`~pipeline.RunReport` of one replayed stage (its counts in ``played``)."""
    counts = ("offered", "admitted", "completed", "attempts", "retried", "dead_letters", "shed")
    return make_report(
        config=config,
        **{name: played[name] for name in (*counts, "queue_peak", "producer_blocked_s")},
        unfinished=unfinished,
        drain_timed_out=timed_out,
        finished_s=end_s,
    )


def _add_unfinished(log: Recorder, left: np.ndarray, end_s: float) -> None:
    """Append the close's UNFINISHED events (``left``, in id order) to the log."""
    if len(left):
        log.kinds = np.concatenate([log.kinds, np.full(len(left), UNFINISHED, np.int8)])
        log.times = np.concatenate([log.times, np.full(len(left), end_s)])
        log.ids = np.concatenate([log.ids, left])


def _compiled_columns(arrivals: np.ndarray, log: Recorder) -> ItemColumns:
    """:func:`~pipeline.sim.running.recorder.item_columns` of a log without the close's
    events, by one compiled pass; an item admitted and never settled is unfinished."""
    from .driver import compiled

    n = len(arrivals)
    admitted, start, finish = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    tries, outcome = np.zeros(n, np.int64), np.full(n, 4, np.int8)  # not_offered
    compiled().item_table(*log.arrays(), admitted, start, finish, tries, outcome)
    outcome[~np.isnan(admitted) & (outcome == 4)] = 3
    return ItemColumns(
        arrival_s=arrivals,
        admitted_s=admitted,
        start_s=start,
        finish_s=finish,
        attempts=tries,
        outcome=outcome,
    )


def _merged_series(
    arrivals: np.ndarray, kinds: np.ndarray, times: np.ndarray, end_s: float
) -> StepSeries:
    """:func:`~pipeline.sim.running.recorder.step_series` of a log, by a compiled merge."""
    from .driver import compiled

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


def run_chain_kernel(scenario: Scenario, replication: int) -> tuple[ChainReport, np.ndarray, list]:
    """Run one replication of a chain in the kernel: (chain report, arrival times, recorders).

    The same triple the engine's run gives (one :class:`Recorder` per stage),
    from the same streams: the source's arrivals from the scenario's, each
    stage's service times, retries, failures and jitter from its own.

    Raises:
        KernelDeclined: a drain runs into its timeout (outside the chain path's domain).
    """
    from .chain_report import chain_report
    from .driver import StageInput, replay, take_compiled

    streams = Streams.from_seed(scenario.seed, replication)
    arrivals = source_arrivals(scenario, streams.arrivals)
    inputs, reaching, total = [], len(arrivals), 0
    for number, spec in enumerate(scenario.stages):
        work = StageWorkload(spec, reaching, scenario.seed, replication, number)
        quiet = _never_fails(spec.failures, reaching)
        inputs.append(
            StageInput(
                name=spec.name,
                config=spec.config,
                fan_out=spec.fan_out,
                first_attempt_s=work.first_attempt_s,
                retry_times=work.retry_times,
                traced=isinstance(spec.service, ServiceTrace),
                failures=None if quiet else work.failures,
                rng=work.jitter,
            )
        )
        total += reaching
        reaching *= spec.fan_out
    run = replay(arrivals, inputs, single=False, fast=take_compiled(total))
    drain = scenario.stages[0].config.drain_timeout_s
    finished = _close(inputs, run.last_settle, run.stages, run.closed_s, drain)
    reports, recorders = [], []
    for spec, played, finished_s in zip(scenario.stages, run.stages, finished, strict=True):
        report = _report(spec.config, played, [], False, finished_s)
        reports.append((spec.name, report, SimpleNamespace(**played)))
        log = Recorder()
        log.kinds = array("b", played["kinds"].tobytes())
        log.times = array("d", played["times"].tobytes())
        log.ids = array("q", played["ids"].tobytes())
        recorders.append(log)
    return chain_report(reports, finished[-1]), arrivals, recorders


def _close(
    stages: list,
    last_settle: list[float | None],
    runs: list[dict],
    closed_s: float,
    drain_timeout_s: float | None,
) -> list[float]:
    """Each stage's close time; its log gets the intake-closed event. Declines a drain timeout.

    The head stops taking items at ``closed_s`` and drains; stage *k* is told
    to stop when stage *k - 1* has closed, and closes once it has settled its
    last item. With a timeout, the head's drain gives up at ``closed_s +
    drain_timeout_s`` and each later stage's at its stop time plus what is
    left of that deadline (``asyncio.timeout`` over the engine's own
    arithmetic, so the floats are the engine's).

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
        run["kinds"] = np.append(run["kinds"], np.int8(INTAKE_CLOSED))
        run["times"] = np.append(run["times"], before)
        run["ids"] = np.append(run["ids"], np.int64(-1))
        if busy:
            before = last
        finished.append(before)
    return finished
