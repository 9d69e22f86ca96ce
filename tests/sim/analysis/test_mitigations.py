"""``compare_controls``: every control against none, paired on common random numbers.

The coverage of its paired interval is measured where the truth is exact: with
independent failures at rate p and two attempts, an item is dead-lettered with
probability p**2; a retry budget that allows no retry at all dead-letters it with
probability p. The difference of the dead-letter fractions is exactly p - p**2.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline import AIMD, Backoff, CircuitBreaker, CoDel, PipelineConfig, RetryBudget
from pipeline.sim import (
    CapacityDrop,
    Constant,
    Downstream,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    StageSpec,
    compare,
    compare_controls,
)
from pipeline.sim.analysis.mitigations import COLUMNS
from tests.sim.running.test_class_sim import allowed_misses

P = 0.5
EXPERIMENTS = 100  # independent comparisons, seeds 0..99
LEVEL = 0.95
FALSE_ALARM = 1e-3  # the chance this test fails when the intervals cover at LEVEL


def failing(seed: int) -> Scenario:
    config = PipelineConfig(
        concurrency=100,
        queue_maxsize=None,
        max_attempts=2,
        backoff=Backoff(kind="constant", base_s=0.0, jitter=False),
        drain_timeout_s=None,
    )
    return Scenario(
        arrivals=Poisson(rate=20.0),
        service=Constant(0.01),
        failures=IndependentFailures(P),
        config=config,
        n_items=60,
        seed=seed,
    )


NO_RETRIES = RetryBudget(ratio=0.0, min_retries_per_s=0.0)


@pytest.mark.slow  # a coverage rate over many seeds
def test_the_paired_interval_covers_the_exact_difference_at_its_level():
    truth = P - P**2  # dead-lettered with no retry allowed, minus with one retry
    misses = 0
    for seed in range(EXPERIMENTS):
        table = compare_controls(
            failing(seed),
            {"no retries": NO_RETRIES},
            metrics=["dead_letter_fraction"],
            replications=4,
            level=LEVEL,
        )
        row = table.iloc[1]
        misses += not row.low <= truth <= row.high
    # Misses are Binomial(EXPERIMENTS, 1 - LEVEL) when the interval covers at LEVEL (or
    # fewer: paired_difference is never narrower than Student t's, which is exact for
    # normal differences, and a difference of 60 items' fractions is nearly normal).
    assert misses <= allowed_misses(EXPERIMENTS, LEVEL, FALSE_ALARM), misses


def test_each_arm_is_compare_on_the_same_runs():
    scenario = failing(7)
    table = compare_controls(
        scenario, {"no retries": NO_RETRIES}, metrics=["dead_letter_fraction"], replications=5
    )
    assert list(table.columns) == list(COLUMNS)
    assert list(table.control) == ["none", "no retries"]
    config = dataclasses.replace(scenario.config, retry_budget=NO_RETRIES)
    alone = compare(
        scenario, scenario.replace(config=config), metric="dead_letter_fraction", replications=5
    )
    row = table.iloc[1]
    assert row.difference == pytest.approx(alone.difference, abs=1e-12)
    assert row.high - row.difference == pytest.approx(alone.half_width, abs=1e-12)
    assert row["mean"] == pytest.approx(alone.mean_b) and table.iloc[0]["mean"] == pytest.approx(
        alone.mean_a
    )
    assert row.pairs == 5 and np.isnan(table.iloc[0].difference)


def stuck() -> Scenario:
    """A retry storm that outlives its trigger: 80% of capacity gone for 5 s at 20 s."""
    config = PipelineConfig(
        concurrency=40,
        queue_maxsize=None,
        max_attempts=4,
        attempt_timeout_s=1.0,
        drain_timeout_s=None,
        backoff=Backoff(kind="constant", base_s=0.1),
    )
    return Scenario(
        arrivals=Poisson(rate=28.0),
        config=config,
        duration_s=70.0,
        seed=3,
        downstream=Downstream(concurrency=4, service=Exponential(mean=0.1)),
        faults=[CapacityDrop(at_s=20.0, for_s=5.0, factor=0.2)],
    )


@pytest.mark.slow  # a stuck system's replications: 2 s
def test_a_limit_gets_a_stuck_system_out_and_the_table_says_so():
    table = compare_controls(stuck(), {"aimd": AIMD(timeout_s=1.0)}, replications=4)
    rows = {(row.control, row.metric): row for row in table.itertuples()}
    assert rows["none", "recovered"].mean == 0.0  # stuck in every replication
    goodput = rows["aimd", "goodput_per_s"]
    assert goodput.low > 0  # significantly more goodput, paired
    recovered = rows["aimd", "recovered"]
    assert -1.0 <= recovered.low <= recovered.difference <= recovered.high <= 1.0
    # recovery_s: no pair where both recovered (none never does), so no difference
    assert rows["aimd", "recovery_s"].pairs == 0 and np.isnan(rows["aimd", "recovery_s"].low)


def test_a_control_s_own_counters_are_zero_in_the_arms_without_it():
    table = compare_controls(
        stuck().replace(duration_s=40.0),
        {"budget": RetryBudget(ratio=0.1, min_retries_per_s=1.0), "codel": CoDel()},
        metrics=["retries_denied", "breaker_open_s", "codel_shed"],
        replications=2,
    )
    rows = {(row.control, row.metric): row for row in table.itertuples()}
    for metric in ("retries_denied", "breaker_open_s", "codel_shed"):
        assert rows["none", metric].mean == 0.0
    assert rows["codel", "retries_denied"].mean == rows["budget", "codel_shed"].mean == 0.0
    denied = rows["budget", "retries_denied"]
    assert denied.mean > 0 and denied.difference == denied.mean and denied.pairs == 2
    assert rows["codel", "codel_shed"].difference == rows["codel", "codel_shed"].mean


@pytest.mark.parametrize(
    "controls, error, message",
    [
        ({}, ValueError, "controls must be a non-empty dict"),
        ({"none": AIMD()}, ValueError, "other than 'none'"),
        ({"x": 3}, TypeError, "controls['x'] must be a control"),
        ({"x": [AIMD(), AIMD()]}, ValueError, "sets concurrency_limit twice"),
        ({"x": {"codel": CoDel(), "max_wait_s": 1.0}}, ValueError, "controls['x']: "),
        ({"x": {"retries": 2}}, TypeError, "controls['x']: "),
    ],
)
def test_bad_controls_are_refused_before_any_run(controls, error, message, monkeypatch):
    from pipeline.sim.analysis import compare as machinery

    monkeypatch.setattr(machinery, "run_task", lambda *_: pytest.fail("a run started"))
    with pytest.raises(error, match=None) as caught:
        compare_controls(failing(0), controls, replications=2)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_bad_metrics_and_chains_are_refused():
    with pytest.raises(ValueError, match="'nope' is not a numeric summary key"):
        compare_controls(failing(0), {"x": NO_RETRIES}, metrics=["nope"], replications=2)
    with pytest.raises(TypeError, match="metrics must be a non-empty sequence"):
        compare_controls(failing(0), {"x": NO_RETRIES}, metrics="goodput_per_s")
    chain = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[StageSpec(name="a", service=Constant(0.1))],
        n_items=5,
    )
    with pytest.raises(ValueError, match="scenario has stages"):
        compare_controls(chain, {"x": CircuitBreaker()})
