"""Which engine runs a scenario: the one answer every caller asks for.

``engine=`` takes ``"auto"``, ``"asyncio"`` or ``"kernel"`` (:data:`ENGINES`)
wherever a scenario is run: :func:`~pipeline.sim.simulate`, ``simulate_replication``,
:func:`~pipeline.sim.sweep`, :func:`~pipeline.sim.compare`, :func:`~pipeline.sim.plan`
and its search and sensitivity, chains, and the command line's ``--engine``.
The asyncio engine is the reference semantics; the exact kernel
(:mod:`pipeline.sim.running.kernel`) is its fast path on a declared domain.
This module holds the rule, once:

- :func:`unsupported` names the first feature of a scenario outside the kernel's
  domain (None inside);
- :func:`choose_engine` turns a scenario and a request into the engine that runs it
  (``"auto"``: the kernel inside its domain, the asyncio engine outside;
  ``"asyncio"``: the engine; ``"kernel"``: the kernel, or the one-line refusal,
  :func:`refusal`, outside);
- :func:`run_chosen` runs it, and owns the one case only a run can find: a chain's
  drain that reaches its timeout makes the kernel decline
  (:class:`~pipeline.sim.running.kernel.run.KernelDeclined`); ``"auto"`` then runs
  the engine and ``"kernel"`` refuses in the same words.

The domain: any arrival process or trace, any service distribution or
:class:`~pipeline.sim.ServiceTrace`, FCFS with ``concurrency`` workers,
``on_full`` block or reject, bounded or unbounded queues, failures from
:class:`NoFailures`, :class:`IndependentFailures`, :class:`PermanentFailures`,
:class:`ScriptedFailures` and their combinations, ``max_attempts``,
:class:`~pipeline.Backoff` (constant or exponential, capped, with or without full
jitter) and :class:`~pipeline.RetryPolicy`, a :class:`~pipeline.RetryBudget` and a
:class:`~pipeline.CircuitBreaker` (their rates of at most 9 significant digits and below
2**31, which the kernel compares exactly in 64-bit integers), drain timeout, warm-up, an
initial backlog and item size, attempt timeouts, a downstream with its orphaned work and
faults (:class:`~pipeline.sim.Downstream`, :class:`~pipeline.sim.CapacityDrop`,
:class:`~pipeline.sim.LoadSpike`), an :class:`~pipeline.Autoscaler` on a single
pipeline (up to :data:`MAX_SCALED_WORKERS` workers, its stabilisation windows spanning
at most :data:`MAX_WINDOW_SYNCS` syncs); a chain when every stage is, none autoscaled.
Outside: item classes, priority keys and deadlines (``priority``, ``max_wait_s``), rate
limits, an autoscaled chain stage, the adaptive overload controls (``concurrency_limit``,
``codel``), hangs, provider models (:class:`Overload`, :class:`TokenQuota`) and failure
models, backoffs or retry policies of your own (subclasses). Those either wait on
machinery the kernel does not model (the rate limiter's buckets and windows, a limit or
a queue reacting to delays, a quota reading the loop's clock) or run code of yours
whose behaviour the kernel cannot know.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TypeVar

from pipeline._spelling import setting_value
from pipeline.config import PipelineConfig
from pipeline.retry import Backoff, RetryPolicy

from ..workloads.failures import (
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
from ..workloads.scenario import Scenario

__all__ = [
    "ENGINES",
    "EngineChoice",
    "check_engine",
    "choose_engine",
    "refusal",
    "request_again",
    "require_kernel",
    "run_chosen",
    "unsupported",
]

ENGINES = ("auto", "asyncio", "kernel")
"""Values of ``engine=`` (and ``--engine``): what a caller may ask for."""

_KERNEL_FAILURES = (NoFailures, IndependentFailures, PermanentFailures, ScriptedFailures)
_OUTSIDE = {
    Hangs: "hangs (Hangs failures)",
    Overload: "provider models (Overload failures)",
    TokenQuota: "provider models (TokenQuota failures)",
}

# PipelineConfig settings outside the kernel's domain when set (not None), in the order a
# refusal names the first: the field, and the feature in a reader's words.
_OUTSIDE_SETTINGS = (
    ("priority", "priority keys"),
    ("max_wait_s", "deadlines"),
    ("rate_limit", "rate limits"),
    ("concurrency_limit", "adaptive concurrency limits"),
    ("codel", "CoDel queue shedding"),
)

MAX_WINDOW_SYNCS = 1_000_000
"""The most syncs an autoscaler's longer stabilisation window may span in the kernel, which
keeps the desired counts its windows see in an array sized at the run's start."""
MAX_SCALED_WORKERS = 100_000
"""The largest ``max_workers`` of an autoscaler the kernel runs: its worker arrays (and its
ring of ready steps) are sized for that many workers at the run's start."""

T = TypeVar("T")


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
    drain that runs into its timeout is only known by running it
    (:func:`run_chosen`).
    """
    if scenario.classes is not None:
        # Their priority keys and deadlines are the engine's; the kernel has neither yet.
        return "item classes (Scenario.classes: priorities and patience)"
    if scenario.stages is not None:
        for spec in scenario.stages:
            feature = _unsupported_stage(spec.config, spec.failures)
            if feature is None and spec.config.autoscale is not None:
                feature = "autoscaling in a chain (config.autoscale)"
            if feature is not None:
                return f"stage {spec.name!r}: {feature}"
        return None
    return _unsupported_stage(scenario.config, scenario.failures)


def _unsupported_stage(config: PipelineConfig, failures: FailureModel) -> str | None:
    """The first feature of one pipeline (or stage) outside the kernel's domain, or None."""
    for field, feature in _OUTSIDE_SETTINGS:
        if getattr(config, field) is not None:
            return f"{feature} (config.{field})"
    scaler = config.autoscale
    if scaler is not None and scaler.max_workers > MAX_SCALED_WORKERS:
        return f"an autoscaler of more than {MAX_SCALED_WORKERS:,} workers (config.autoscale)"
    if scaler is not None:
        window_s = max(scaler.scale_up_stabilization_s, scaler.scale_down_stabilization_s)
        if window_s / scaler.sync_s > MAX_WINDOW_SYNCS:
            return (
                f"an autoscaler whose stabilisation windows span more than "
                f"{MAX_WINDOW_SYNCS:,} syncs (config.autoscale)"
            )
    if (config.retry_budget is not None or config.breaker is not None) and not _exact_fits(config):
        return (
            "a retry budget or breaker rate the kernel cannot compare exactly "
            "(more than 9 significant digits, or 2**31 and above)"
        )
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


def _exact_fits(config: PipelineConfig) -> bool:
    """Whether the budget's and breaker's exact rates fit the kernel's 64-bit comparisons."""
    from .kernel.guard import guard_terms  # the kernel loads only with a control

    return all(term < 2**31 for term in guard_terms(config).values())


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


@dataclass(frozen=True)
class EngineChoice:
    """What :func:`choose_engine` decided for one scenario and one request."""

    engine: str
    """The engine that runs it: ``"kernel"`` or ``"asyncio"`` (the summary's ``engine``,
    unless a chain's kernel run declines, :func:`run_chosen`)."""
    outside: str | None
    """The scenario's first feature outside the kernel's domain (:func:`unsupported`),
    None inside it; whatever was asked."""

    @property
    def kernel(self) -> bool:
        """True when the kernel runs it."""
        return self.engine == "kernel"


def choose_engine(scenario: Scenario, engine: object, *, where: str = "") -> EngineChoice:
    """Which engine runs ``scenario`` when ``engine`` is asked for.

    ``"auto"``: the kernel inside its domain, else the asyncio engine;
    ``"asyncio"``: the asyncio engine; ``"kernel"``: the kernel.

    Args:
        where: names the scenario at the head of a refusal, for a caller that runs
            several (``"grid point {'concurrency': 4}"``, ``"b"``).

    Raises:
        ValueError: ``engine`` is not one of :data:`ENGINES`, or is ``"kernel"``
            for a scenario outside the kernel's domain (:func:`refusal`: one line
            naming the feature, after ``where`` and a colon).
    """
    check_engine(engine)
    outside = unsupported(scenario)
    if engine == "kernel" and outside is not None:
        raise ValueError(f"{where}: {refusal(outside)}" if where else refusal(outside))
    runs = "kernel" if engine != "asyncio" and outside is None else "asyncio"
    return EngineChoice(runs, outside)


def request_again(ran: Collection[str]) -> str:
    """The request that runs changed copies of runs that ran on the engines ``ran``.

    ``"asyncio"`` when every run was the engine's (it was asked for, or the
    scenario is outside the kernel's domain); else ``"auto"``: the kernel where a
    copy stays in its domain, the engine where it leaves it (the two agree to
    1e-9, item by item), where ``"kernel"`` would refuse it.
    """
    return "asyncio" if set(ran) == {"asyncio"} else "auto"


def run_chosen(
    scenario: Scenario,
    engine: str,
    on_kernel: Callable[[], T],
    on_asyncio: Callable[[], T],
) -> T:
    """Run ``scenario`` on the engine :func:`choose_engine` picks: ``on_kernel()`` or
    ``on_asyncio()``, whichever it is.

    A kernel run that declines part way (a chain's drain reaching its timeout,
    :class:`~pipeline.sim.running.kernel.run.KernelDeclined`) is given to the
    asyncio engine when ``engine`` is ``"auto"``, and refused in one line when it
    is ``"kernel"``.

    Raises:
        ValueError: as :func:`choose_engine`, or ``"kernel"`` and the run declined.
    """
    if not choose_engine(scenario, engine).kernel:
        return on_asyncio()
    from .kernel.run import KernelDeclined  # the kernel loads only when it runs

    try:
        return on_kernel()
    except KernelDeclined as declined:
        if engine == "kernel":
            raise ValueError(refusal(declined.feature)) from None
    return on_asyncio()
