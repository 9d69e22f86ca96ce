"""Queueing theory's verdict on a configuration that cannot keep up, given without a run.

When work arrives faster than the workers can do it, a queue that blocks
(or has no bound) grows without limit, and every wait and latency with it.
:func:`unstable_note` says when that argument is exact enough for
:func:`~pipeline.sim.analysis.planning.plan.plan` to reject a configuration without
simulating it, and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pipeline.retry import RetryPolicy

from ...workloads.arrivals import Deterministic, MarkovModulated, Poisson
from ...workloads.distributions import Distribution
from ...workloads.failures import IndependentFailures, NoFailures, PermanentFailures
from ...workloads.scenario import Scenario
from ..planning.slo import SLO

__all__ = ["grows_when_unstable", "unstable_note"]

# Metrics that grow without bound when the offered load exceeds the workers: an
# upper limit on one of them cannot hold in a long enough run of an unstable system.
_GROW_WHEN_UNSTABLE = frozenset(
    {"wait_mean_s", "wait_p95_s", "latency_mean_s", "latency_p50_s", "latency_p95_s",
     "latency_p99_s"}
)  # fmt: skip


def grows_when_unstable(slo: SLO) -> bool:
    """True for an upper limit on a wait or latency: the SLOs :func:`unstable_note` is
    about, which a configuration that cannot keep up fails however long it runs."""
    return slo.upper and slo.metric in _GROW_WHEN_UNSTABLE


def _attempts_per_item(scenario: Scenario) -> float | None:
    """Mean attempts per item, or a lower bound of it; None when not even that is known."""
    failures = scenario.failures
    if isinstance(failures, NoFailures):
        return 1.0
    retries_every_failure = scenario.config.retry == RetryPolicy()
    if type(failures) is IndependentFailures and retries_every_failure:
        p, k = failures.p, scenario.config.max_attempts
        return float(k) if p == 1 else (1 - p**k) / (1 - p)
    if type(failures) in (IndependentFailures, PermanentFailures):
        # Every item takes at least one attempt of a full service time: a lower bound
        # on the load, so a configuration it already overloads is overloaded.
        return 1.0
    return None


def unstable_note(scenario: Scenario, slos: Sequence[SLO]) -> str | None:
    """Why queueing theory rejects ``scenario`` for these SLOs without a run (or None).

    When the offered load (arrival rate x mean service time x mean attempts per
    item) exceeds the workers, the backlog of a blocking or unbounded queue
    grows without bound, and so do waits and latencies: an upper limit on a
    wait or latency cannot hold in steady state, however long the run. A
    finite simulation would only measure how long it ran. The rule is applied
    only where that argument is exact: stationary arrivals with a known
    long-run rate (Poisson, constant, Markov-modulated), a service-time
    distribution with a known mean, no failures or independent ones (mean
    attempts ``(1 - p**k) / (1 - p)`` under the default retry policy; one
    attempt, a lower bound, under another policy or with permanent failures),
    no attempt timeout (it would cut service short), ``on_full="block"`` or
    an unbounded queue, and at least one SLO ``<=`` on a wait or latency. At
    a load exactly equal to the workers the configuration is simulated (a
    deterministic system can keep up). The workers of an autoscaled pool are its
    ``max_workers``: starting smaller, it may grow to keep up.
    """
    if not any(grows_when_unstable(slo) for slo in slos):
        return None
    config = scenario.config
    if config.on_full == "reject" and config.queue_maxsize is not None:
        return None
    if config.attempt_timeout_s is not None:
        return None
    if not isinstance(scenario.arrivals, Poisson | Deterministic | MarkovModulated):
        return None
    if not isinstance(scenario.service, Distribution):
        return None
    attempts = _attempts_per_item(scenario)
    if attempts is None:
        return None
    load = float(scenario.arrivals.rate) * float(scenario.service.mean) * attempts
    # An autoscaled pool may grow to max_workers: only a load beyond that cannot be kept up with.
    scaler = config.autoscale
    workers = config.concurrency if scaler is None else scaler.max_workers
    if not (math.isfinite(load) and load > workers):
        return None
    pool = "concurrency" if scaler is None else "the autoscaler's max_workers"
    return (
        f"unstable: offered load {load:.4g} > {pool} {workers} "
        "(queueing theory: waits grow without bound; not simulated)"
    )
