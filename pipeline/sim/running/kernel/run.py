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
- **the event path** (:mod:`pipeline.sim.running.kernel.events`): the engine's tasks
  replayed step by step over a timer heap, ties included. For no failures,
  :class:`IndependentFailures` or :class:`PermanentFailures` the same steps
  also run on flat arrays (:mod:`pipeline.sim.running.kernel.arrays`),
  compiled by numba when the ``[fast]`` extra is installed: ``auto`` takes
  that once a process has run enough event-path items to pay for loading it
  (:func:`~.paths.kernel_path` makes a block run one path).

The domain (:func:`unsupported` names what is outside it): any arrival
process or trace, any service distribution or :class:`ServiceTrace`, FCFS
with ``concurrency`` workers, ``on_full`` block or reject, bounded or
unbounded queues, failures from :class:`NoFailures`,
:class:`IndependentFailures`, :class:`PermanentFailures`,
:class:`ScriptedFailures` and their combinations, ``max_attempts``,
:class:`~pipeline.Backoff` (constant or exponential, capped, with or without
full jitter) and :class:`~pipeline.RetryPolicy`, drain timeout, warm-up and
item size. Outside: priority keys and deadlines (``priority``, ``max_wait_s``), rate
limits, attempt timeouts, hangs, provider models
(:class:`Overload`, :class:`TokenQuota`) and failure models, backoffs or
retry policies of your own (subclasses). Those either wait on machinery the
kernel does not model (the rate limiter's buckets and windows, a timeout
cancelling an attempt, a quota reading the loop's clock) or run code of
yours whose behaviour the kernel cannot know; ``engine="auto"`` runs the
engine for them.

Chains (``Scenario.stages``) take a third path,
:mod:`pipeline.sim.running.kernel.chain` (:func:`run_chain_kernel`): the
real :class:`~pipeline.Chain` replayed stage by stage, hand-offs that block
after service and fan-out included. A chain is inside the domain when every
stage is; a drain that reaches its timeout is found only by running and then
declined (:class:`KernelDeclined`), and ``engine="auto"`` runs the engine.

The event path reproduces CPython's asyncio scheduling (what 3.11 to 3.13
do; the equality tests run on each), not a property of asyncio in general.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline._spelling import setting_value
from pipeline.config import PipelineConfig
from pipeline.records import RunReport
from pipeline.retry import Backoff, RetryPolicy

from ...workloads.failures import (
    CombinedFailures,
    FailureModel,
    Hangs,
    IndependentFailures,
    NoFailures,
    Overload,
    PermanentFailures,
    ScriptedFailures,
    TokenQuota,
)
from ...workloads.scenario import Scenario, Streams
from ..recorder import ItemColumns, Recorder, StepSeries, item_columns, step_series
from ..summary import HeldPeak
from ..workload import StageWorkload, Workload, source_arrivals
from .paths import current
from .report import make_report

if TYPE_CHECKING:
    from pipeline.chain.report import ChainReport

__all__ = [
    "ENGINES",
    "KernelDeclined",
    "check_engine",
    "refusal",
    "require_kernel",
    "run_chain_kernel",
    "run_kernel",
    "unsupported",
]

ENGINES = ("auto", "asyncio", "kernel")
"""Values of ``engine=`` for :func:`~pipeline.sim.simulate` and :func:`~pipeline.sim.sweep`."""

_KERNEL_FAILURES = (NoFailures, IndependentFailures, PermanentFailures, ScriptedFailures)
_OUTSIDE = {
    Hangs: "hangs (Hangs failures)",
    Overload: "provider models (Overload failures)",
    TokenQuota: "provider models (TokenQuota failures)",
}


def check_engine(engine: object) -> str:
    """Return ``engine`` if it is one of :data:`ENGINES`.

    Raises:
        ValueError: anything else (the message lists what is allowed).
    """
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f"engine must be 'auto', 'asyncio' or 'kernel', got {engine!r}")
    return engine


def unsupported(scenario: Scenario) -> str | None:
    """The first feature of ``scenario`` outside the kernel's domain, or None if it has none.

    A chain is inside when every stage is (its feature is then named with the
    stage, ``"stage 'write': rate limits (config.rate_limit)"``); a chain's
    drain that runs into its timeout is only known by running it (see
    :func:`run_chain_kernel`). ``simulate(engine="auto")`` runs the asyncio
    engine when this is not None; ``engine="kernel"`` raises a ValueError naming it.
    """
    if scenario.classes is not None:
        # Their priority keys and deadlines are the engine's; the kernel has neither yet.
        return "item classes (Scenario.classes: priorities and patience)"
    if scenario.stages is not None:
        for spec in scenario.stages:
            feature = _unsupported_stage(spec.config, spec.failures)
            if feature is not None:
                return f"stage {spec.name!r}: {feature}"
        return None
    return _unsupported_stage(scenario.config, scenario.failures)


def _unsupported_stage(config: PipelineConfig, failures: FailureModel) -> str | None:
    """The first feature of one pipeline (or stage) outside the kernel's domain, or None."""
    if config.priority is not None:
        return "priority keys (config.priority)"
    if config.max_wait_s is not None:
        return "deadlines (config.max_wait_s)"
    if config.rate_limit is not None:
        return "rate limits (config.rate_limit)"
    if config.attempt_timeout_s is not None:
        return "attempt timeouts (config.attempt_timeout_s)"
    if type(config.backoff) is not Backoff:
        return f"a backoff of its own ({type(config.backoff).__name__})"
    if type(config.retry) is not RetryPolicy:
        return f"a retry policy of its own ({type(config.retry).__name__})"
    models = failures.models if type(failures) is CombinedFailures else (failures,)
    for model in models:
        if type(model) in _KERNEL_FAILURES:
            continue
        return _OUTSIDE.get(type(model), f"the failure model {type(model).__name__}")
    return None


def refusal(feature: str) -> str:
    """The one-line message of ``engine="kernel"`` refusing ``feature``, in the reader's words
    (``engine='kernel'`` in Python, ``--engine kernel`` on the command line)."""
    return (
        f"{setting_value('engine', 'kernel')} does not support {feature}; use "
        f"{setting_value('engine', 'auto')} (the asyncio engine runs it) or "
        f"{setting_value('engine', 'asyncio')}"
    )


def require_kernel(scenario: Scenario) -> None:
    """Raise a ValueError naming the first feature of ``scenario`` the kernel does not support."""
    feature = unsupported(scenario)
    if feature is not None:
        raise ValueError(refusal(feature))


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

    The caller checks the domain first (:func:`unsupported`). With ``series=False``,
    a run on :mod:`.arrays` gives a :class:`~pipeline.sim.running.summary.HeldPeak`
    instead of the step series, and columns without their attempt log: what a
    summary of every key but the other series statistics reads
    (:func:`~pipeline.sim.running.single.summary_once`); the other paths give
    their series as always.
    """
    from .arrays import run_arrays, step_series_merged
    from .events import run_events
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
    fast = _take_arrays(scenario, quiet, n)
    log = Recorder()
    steps: StepSeries | HeldPeak
    if fast is not None:
        run, columns = run_arrays(
            workload,
            scenario.failures,
            quiet,
            config,
            fast=fast,
            warmup_s=scenario.warmup_s,
            record=series,
        )
        if series:
            steps = step_series_merged(arrivals, run, fast=fast)
        else:
            steps = HeldPeak(end_s=run.finished_s, held=run.held_peak)
    else:
        run = run_events(
            arrivals.tolist(),
            workload.first_attempt_s.tolist(),
            workload.retry_time,
            None if quiet else workload.failures,
            config,
            workload.streams.jitter,
        )
        log.kinds, log.times, log.ids = run.kinds, run.times, run.ids
        columns = item_columns(arrivals, log)
        steps = step_series(arrivals, log, run.finished_s)
    report = make_report(
        config=scenario.config,
        offered=run.offered,
        admitted=run.admitted,
        completed=run.completed,
        attempts=run.attempts,
        retried=run.retried,
        dead_letters=run.dead_letters,
        shed=run.shed,
        unfinished=run.unfinished,
        drain_timed_out=run.drain_timed_out,
        finished_s=run.finished_s,
        queue_peak=run.queue_peak,
        producer_blocked_s=run.producer_blocked_s,
    )
    return report, arrivals, columns, steps


def _take_arrays(scenario: Scenario, quiet: bool, n: int) -> bool | None:
    """True: run :mod:`.arrays` compiled, False: its plain source, None: run :mod:`.events`."""
    from .arrays import compiled, inside, worth_it

    path = current().path
    if path == "closures" or not (quiet or inside(scenario.failures)):
        return None
    if path == "plain":
        return False
    if path == "compiled":
        if compiled() is None:
            raise RuntimeError(
                "the compiled event path needs numba: pip install 'pipeline-lab[fast]'"
            )
        return True
    return True if worth_it(n) else None


class KernelDeclined(Exception):
    """Raised by :func:`run_chain_kernel` when a run turns out to leave the kernel's domain.

    ``feature`` names what (for :func:`refusal`); ``engine="auto"`` then runs the engine.
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
    from .chain import StageInput, run_chain_events
    from .chain_report import chain_report

    streams = Streams.from_seed(scenario.seed, replication)
    arrivals = source_arrivals(scenario, streams.arrivals)
    inputs, reaching = [], len(arrivals)
    for number, spec in enumerate(scenario.stages):
        work = StageWorkload(spec, reaching, scenario.seed, replication, number)
        quiet = _never_fails(spec.failures, reaching)
        inputs.append(
            StageInput(
                name=spec.name,
                config=spec.config,
                fan_out=spec.fan_out,
                first_attempt_s=work.first_attempt_s,
                retry_time=work.retry_time,
                failures=None if quiet else work.failures,
                rng=work.jitter,
            )
        )
        reaching *= spec.fan_out
    played = run_chain_events(arrivals.tolist(), inputs, scenario.stages[0].config.drain_timeout_s)
    if isinstance(played, str):
        raise KernelDeclined(played)
    runs, finished_s = played
    reports, recorders = [], []
    for spec, run in zip(scenario.stages, runs, strict=True):
        report = make_report(
            config=spec.config,
            offered=run.offered,
            admitted=run.admitted,
            completed=run.completed,
            attempts=run.attempts,
            retried=run.retried,
            dead_letters=run.dead_letters,
            shed=run.shed,
            unfinished=[],
            drain_timed_out=False,
            finished_s=run.finished_s,
            queue_peak=run.queue_peak,
            producer_blocked_s=run.producer_blocked_s,
        )
        reports.append((spec.name, report, run))
        log = Recorder()
        log.kinds, log.times, log.ids = run.kinds, run.times, run.ids
        recorders.append(log)
    return chain_report(reports, finished_s), arrivals, recorders
