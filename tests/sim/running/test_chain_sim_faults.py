"""Chains in virtual time under random faults: every balance holds, memory stays bounded, no hang.

Random chains of one to three simulated stages, each with its own failures
(independent, permanent, hangs cut by an attempt timeout or not), retries,
fan-out, block or reject, and a drain timeout from none to zero. Whatever
happens, ``simulate`` returns (the virtual loop raises on a deadlock rather
than wait), every stage balances, the chain balances end to end, each stage's
per-item outcomes agree with its report, and with every queue bounded the
items held never exceed the sum of the stages' bounds (dead letters are not
held: the report keeps them, and only the memory counts them).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    NoFailures,
    PermanentFailures,
    Poisson,
    Scenario,
    StageSpec,
    diagnose,
    simulate,
)
from pipeline.sim.workloads.failures import Hangs

FAILURES = {
    "none": NoFailures(),
    "flaky": IndependentFailures(0.3),
    "permanent": PermanentFailures(0.1),
    "hangs": Hangs(p=0.2, hang_s=50.0),
    "mixed": IndependentFailures(0.2) | Hangs(p=0.1, hang_s=20.0),
}


@st.composite
def stage_specs(draw, number: int) -> StageSpec:
    timeout = draw(st.sampled_from([None, None, 2.0]))
    config = PipelineConfig(
        concurrency=draw(st.integers(1, 4)),
        queue_maxsize=draw(st.sampled_from([1, 2, 5, None])),
        on_full=draw(st.sampled_from(["block", "block", "reject"])),
        max_attempts=draw(st.integers(1, 3)),
        backoff=Backoff(base_s=0.5, jitter=True),
        attempt_timeout_s=timeout,
        drain_timeout_s=draw(st.sampled_from([None, 0.0, 5.0, 60.0])),
    )
    return StageSpec(
        name=f"s{number}",
        service=Exponential(mean=draw(st.sampled_from([0.1, 0.5, 1.5]))),
        config=config,
        fan_out=draw(st.sampled_from([1, 1, 3])),
        failures=FAILURES[draw(st.sampled_from(sorted(FAILURES)))],
    )


@st.composite
def chains(draw) -> Scenario:
    count = draw(st.integers(1, 3))
    return Scenario(
        arrivals=Poisson(rate=draw(st.sampled_from([0.5, 2.0, 8.0]))),
        stages=[draw(stage_specs(number)) for number in range(count)],
        n_items=draw(st.integers(0, 40)),
        seed=draw(st.integers(0, 2**16)),
        item_size_bytes=100,
    )


def stage_bound(spec: StageSpec) -> int:
    """Items a stage may hold: its queue, plus each worker's item or its fan-out children."""
    return spec.config.queue_maxsize + spec.config.concurrency * spec.fan_out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_random_faults_keep_every_balance_and_the_memory_bound(scenario):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DrainTimeoutWarning)  # short drains are on purpose
        result = simulate(scenario)
    report = result.report
    assert report.balanced, report
    assert report.offered == scenario.n_items
    for spec in scenario.stages:
        stage, stage_report = result.stages[spec.name], report.stages[spec.name]
        assert stage_report.balanced
        outcome = np.asarray(stage.columns.outcome)
        counts = np.bincount(outcome, minlength=5)
        assert counts[0] == stage_report.completed
        assert counts[1] == len(stage_report.dead_letters)
        assert counts[2] == len(stage_report.shed)
    summary = result.summary
    assert summary["items_offered"] == scenario.n_items
    assert (
        summary["items_completed"]
        + summary["items_dead_lettered"]
        + summary["items_unfinished"]
        + summary["items_shed"]
        == scenario.n_items + report.children_added
    )
    held = result.timeseries["items_held"].to_numpy()
    assert summary["items_held_max"] <= held.max(initial=0)
    if all(spec.config.queue_maxsize is not None for spec in scenario.stages):
        bound = sum(stage_bound(spec) for spec in scenario.stages)
        assert held.max(initial=0) <= bound  # whatever the faults: dead letters are not held
    # Memory is what is held plus the dead letters the report keeps, at every moment.
    kept = result.timeseries["memory_bytes"].to_numpy() // 100 - held
    assert (kept >= 0).all() and kept.max(initial=0) <= report.dead_lettered
    assert [f for f in diagnose(result) if f.code == "LOST_TASK"] == []


def test_a_saturated_bounded_chain_fills_its_bound_and_never_passes_it():
    stages = [
        StageSpec(
            name="fetch",
            service=Exponential(mean=0.2),
            config=PipelineConfig(concurrency=2, queue_maxsize=4),
            fan_out=5,
        ),
        StageSpec(
            name="write",
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=3, queue_maxsize=6, drain_timeout_s=None),
        ),
    ]
    result = simulate(
        Scenario(arrivals=Poisson(rate=5.0), stages=stages, n_items=300, seed=2, item_size_bytes=10)
    )
    bound = sum(stage_bound(spec) for spec in stages)  # (4 + 2 x 5) + (6 + 3) = 23 items
    assert result.summary["memory_peak_bytes"] <= bound * 10
    # Saturated, every slot fills at some moment: the bound is reached, so it is the right one.
    assert result.summary["items_held_max"] == bound


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_dead_letters_are_not_items_held_but_their_memory_is_counted(engine):
    # Every write fails at once: 200 dead letters behind a chain that holds at most
    # (2 + 1) + (2 + 1) = 6 items.
    stages = [
        StageSpec(
            name="fetch",
            service=Exponential(mean=0.1),
            config=PipelineConfig(concurrency=1, queue_maxsize=2, drain_timeout_s=None),
        ),
        StageSpec(
            name="write",
            service=Exponential(mean=0.1),
            config=PipelineConfig(concurrency=1, queue_maxsize=2, max_attempts=1),
            failures=PermanentFailures(1.0),
        ),
    ]
    scenario = Scenario(
        arrivals=Poisson(rate=1.0), stages=stages, n_items=200, seed=1, item_size_bytes=10
    )
    result = simulate(scenario, engine=engine)
    summary = result.summary
    assert summary["items_dead_lettered"] == 200
    assert 0 < summary["items_held_max"] <= sum(stage_bound(spec) for spec in stages) == 6
    # The report keeps all 200 in memory at the end, with nothing else held.
    assert summary["memory_peak_bytes"] == 200 * 10
