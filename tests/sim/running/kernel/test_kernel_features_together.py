"""The kernel's features at once: the run the engine makes when they meet, item by item.

Each feature has its own equality tests (a downstream and attempt timeouts, the retry
budget and the breaker, the autoscaler); here they are drawn together, since that is
where their steps share a worker, a timer heap and a retry decision:

- a retry storm's mitigations: a downstream whose requests the client's timeout cuts,
  with a retry budget, a circuit breaker or both (notebook 12 and ``compare_controls``);
- an autoscaled pool in front of a downstream that its timed-out clients retry against
  (the pool grows on a queue the retries inflate: the autoscaling guide's storm);
- all of them in one run.

Both kernel paths run each scenario (the compiled one where numba is installed), and
every column, series, summary key, the report, the pool's series and the downstream's
account must agree with the engine's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import CircuitBreaker, RetryBudget
from pipeline.sim import Scenario
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.single import simulate_once
from tests.sim.running.kernel.test_kernel_autoscale_equality import scalers
from tests.sim.running.kernel.test_kernel_downstream_equality import (
    PATHS,
    assert_same_downstream,
)
from tests.sim.running.kernel.test_kernel_downstream_equality import (
    scenarios as cut_scenarios,
)
from tests.sim.running.kernel.test_kernel_equality import SETTINGS, assert_same_run
from tests.sim.running.kernel.test_kernel_guard_equality import breakers, budgets
from tests.tiers import examples


def run_all_ways(scenario: Scenario, replication: int) -> None:
    """The engine's run, and the kernel's on every path, the same in everything."""
    engine = simulate_once(scenario, replication, "asyncio")
    for path in PATHS:
        with kernel_path(path):
            kernel = simulate_once(scenario, replication, "kernel")
        assert kernel.summary["engine"] == "kernel"
        assert_same_run(engine, kernel)
        assert_same_downstream(engine, kernel)
        if engine.pool is not None or kernel.pool is not None:
            for name in ("time_s", "workers", "desired"):
                np.testing.assert_array_equal(getattr(engine.pool, name),
                                              getattr(kernel.pool, name))  # fmt: skip


@st.composite
def together(draw, *, guard: bool, scale: bool) -> Scenario:
    """A scenario with cut attempts (mostly a downstream), and the features asked for."""
    scenario = draw(cut_scenarios())
    config = scenario.config
    change: dict = {}
    if guard:
        which = draw(st.sampled_from(["budget", "breaker", "both"]))
        if which != "breaker":
            change["retry_budget"] = draw(budgets())
        if which != "budget":
            change["breaker"] = draw(breakers())
    if scale:
        change["autoscale"] = draw(scalers(config.concurrency))
    return scenario.replace(config=dataclasses.replace(config, **change))


@settings(max_examples=examples(200), **SETTINGS)
@given(scenario=together(guard=True, scale=False), replication=st.integers(0, 2))
def test_a_storm_with_a_budget_or_a_breaker_is_the_engines(scenario, replication):
    run_all_ways(scenario, replication)


@settings(max_examples=examples(200), **SETTINGS)
@given(scenario=together(guard=False, scale=True), replication=st.integers(0, 2))
def test_an_autoscaled_pool_whose_clients_time_out_is_the_engines(scenario, replication):
    run_all_ways(scenario, replication)


@settings(max_examples=examples(150), **SETTINGS)
@given(scenario=together(guard=True, scale=True), replication=st.integers(0, 2))
def test_every_feature_at_once_is_the_engines(scenario, replication):
    run_all_ways(scenario, replication)


def test_the_guides_storm_under_an_autoscaler_and_a_breaker_is_the_engines():
    # The stuck scenario of docs/guide/overload.md, short, with the pool autoscaled on its
    # retry-inflated queue and a breaker in front of the downstream: long enough for the
    # drop to tip it over, the breaker to open and the pool to grow.
    from pipeline import Autoscaler, Backoff, PipelineConfig
    from pipeline.sim import CapacityDrop, Downstream, Exponential, Poisson

    config = PipelineConfig(
        concurrency=20, queue_maxsize=None, max_attempts=4, attempt_timeout_s=1.0,
        drain_timeout_s=None, backoff=Backoff(kind="constant", base_s=0.1),
        autoscale=Autoscaler(min_workers=5, max_workers=200, target=2.0, sync_s=1.0,
                             cold_start_s=0.5),
        breaker=CircuitBreaker(failure_rate=0.5, window=50, min_calls=20, open_s=2.0),
        retry_budget=RetryBudget(ratio=0.2, min_retries_per_s=5.0, window_s=5.0),
    )  # fmt: skip
    scenario = Scenario(
        arrivals=Poisson(rate=100.0), config=config, duration_s=30.0, seed=3,
        downstream=Downstream(concurrency=10, service=Exponential(mean=0.08)),
        faults=[CapacityDrop(at_s=5.0, for_s=3.0, factor=0.2)],
    )  # fmt: skip
    run_all_ways(scenario, 0)
