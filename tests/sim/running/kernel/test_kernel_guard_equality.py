"""The kernel runs a retry budget and a circuit breaker as the asyncio engine does, item by item.

Random scenarios (hypothesis, derandomized) with budgets and breakers that bite often:
small windows, tiny ratios and floors, breakers with windows of a few calls, low
``min_calls``, short ``open_s``, one or two probes, slow-call rules, and high failure
rates; each run by both engines and compared with ``assert_same_run`` (every item
column, series and summary key, the controls' series, the report, dead letters with
their reasons and errors), on both replay paths. Then the ties the breaker makes, one
by one: its half-open timer at the instant of an arrival, a service end, a retry, the
drain's deadline; probes that end together; an attempt refused twice.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pipeline import Backoff, CircuitBreaker, PipelineConfig, RetryBudget
from pipeline.sim import (
    Constant,
    IndependentFailures,
    NoFailures,
    Poisson,
    Scenario,
    ScriptedFailures,
    StageSpec,
    Trace,
    simulate,
)
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.single import simulate_once, summary_once
from pipeline.sim.workloads.traces.service import ServiceTrace
from tests.sim.running.kernel.test_kernel_chain_equality import PATHS, chains
from tests.sim.running.kernel.test_kernel_chain_equality import assert_kernel_agrees as chain_agrees
from tests.sim.running.kernel.test_kernel_chain_equality import run_both as run_chain_both
from tests.sim.running.kernel.test_kernel_equality import (
    SETTINGS,
    arrivals,
    assert_kernel_agrees,
    assert_same_run,
    backlogged,
    backoffs,
    failures,
    service,
)
from tests.tiers import examples


@st.composite
def budgets(draw):
    return RetryBudget(
        ratio=draw(st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0, 3.0])),
        min_retries_per_s=draw(st.sampled_from([0.0, 0.1, 0.3, 1.0, 3.0])),
        window_s=draw(st.sampled_from([0.25, 0.5, 1.0, 2.0, 5.0, 1e6])),
    )


@st.composite
def breakers(draw):
    window = draw(st.integers(1, 6))
    slow = draw(st.sampled_from([None, None, 0.25, 0.5, 1.0]))
    return CircuitBreaker(
        failure_rate=draw(st.sampled_from([0.1, 0.3, 0.5, 0.7, 1.0])),
        window=window,
        min_calls=draw(st.integers(1, window)),
        open_s=draw(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.7])),
        half_open_calls=draw(st.integers(1, 3)),
        slow_call_s=slow,
        slow_call_rate=draw(st.sampled_from([0.2, 0.5, 1.0])),
    )


@st.composite
def guarded(draw, *, budget: bool, breaker: bool):
    """A scenario with a retry budget and/or a breaker, failing often."""
    n = draw(st.integers(0, 60))
    process = draw(arrivals(n))
    if isinstance(process, Trace):
        n = min(n, len(process))
    high = st.sampled_from([IndependentFailures(0.4), IndependentFailures(0.7)])
    model = draw(high if draw(st.booleans()) else failures(n))
    config = PipelineConfig(
        concurrency=draw(st.integers(1, 5)),
        queue_maxsize=draw(st.sampled_from([None, 1, 2, 5, 100])),
        on_full=draw(st.sampled_from(["block", "reject"])),
        max_attempts=draw(st.integers(1, 5) if breaker else st.integers(2, 5)),
        backoff=draw(backoffs()),
        drain_timeout_s=draw(st.sampled_from([None, None, 0.0, 1.0, 5.0])),
        retry_budget=draw(budgets()) if budget else None,
        breaker=draw(breakers()) if breaker else None,
    )
    return Scenario(
        arrivals=process,
        service=draw(service(n)),
        config=config,
        failures=model,
        n_items=n,
        seed=draw(st.integers(0, 2**32 - 1)),
        warmup_s=draw(st.sampled_from([0.0, 1.0])),
    )


def agrees(scenario: Scenario, replication: int) -> None:
    """``assert_kernel_agrees``, and what the controls did (pytest --hypothesis-show-statistics)."""
    assert_kernel_agrees(scenario, replication)
    statistics = simulate_once(scenario, replication, "kernel").report.statistics
    event(f"retries denied: {statistics.retries_denied > 0}")
    event(f"breaker opened: {statistics.breaker_open_s > 0}")
    event(f"calls refused: {statistics.breaker_calls_refused > 0}")


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=examples(150), **SETTINGS)
@given(scenario=guarded(budget=True, breaker=False), replication=st.integers(0, 2))
def test_kernel_equals_engine_with_a_retry_budget(path, scenario, replication):
    with kernel_path(path, budget=1):  # rings of one time: they grow many times in a run
        agrees(scenario, replication)


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=examples(150), **SETTINGS)
@given(scenario=guarded(budget=False, breaker=True), replication=st.integers(0, 2))
def test_kernel_equals_engine_with_a_breaker(path, scenario, replication):
    with kernel_path(path):
        agrees(scenario, replication)


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=examples(150), **SETTINGS)
@given(scenario=guarded(budget=True, breaker=True), replication=st.integers(0, 2))
def test_kernel_equals_engine_with_a_budget_and_a_breaker(path, scenario, replication):
    with kernel_path(path, budget=2, heap=1, ready=1, log=1, block=1):
        agrees(scenario, replication)


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=examples(100), **SETTINGS)
@given(scenario=backlogged(), budget=budgets(), breaker=breakers(), replication=st.integers(0, 2))
def test_kernel_equals_engine_with_a_backlog_a_budget_and_a_breaker(
    path, scenario, budget, breaker, replication
):
    # A burst at 0.0 ahead of the arrivals: the breaker's first verdicts tie with it.
    with kernel_path(path):
        agrees(scenario.replace(retry_budget=budget, breaker=breaker), replication)


@pytest.mark.slow
@settings(max_examples=800, **SETTINGS)
@given(
    scenario=guarded(budget=True, breaker=True),
    path=st.sampled_from(PATHS),
    replication=st.integers(0, 5),
)
def test_kernel_equals_engine_with_both_on_many_scenarios(scenario, path, replication):
    with kernel_path(path, budget=1):
        agrees(scenario, replication)


# -- the ties, one by one --------------------------------------------------------------------


def both(scenario: Scenario, path: str = "plain"):
    with kernel_path(path):
        engine = simulate_once(scenario, 0, "asyncio")
        kernel = simulate_once(scenario, 0, "kernel")
    assert_same_run(engine, kernel)
    return kernel


def traced(times, service_s, fails, **config):
    config.setdefault("drain_timeout_s", None)
    return Scenario(
        arrivals=Trace(times),
        service=ServiceTrace(tuple(service_s)),
        config=PipelineConfig(**config),
        failures=ScriptedFailures(tuple(fails)),
        n_items=len(times),
    )


def opens_at_1(**breaker):
    # One call in the window, failing: the breaker opens at 1.0 (item 0 ends then).
    return CircuitBreaker(failure_rate=1.0, window=1, min_calls=1, **breaker)


@pytest.mark.parametrize("path", PATHS)
def test_half_open_at_an_arrival_instant(path):
    # Open 1.0-2.0; item 1 arrives at 2.0, when the spell ends: its attempt is the first of
    # five probes (and the last made: half-open at the end).
    result = both(traced([0.0, 2.0], [1.0, 1.0], [1, 0], breaker=opens_at_1(open_s=1.0)), path)
    assert result.items["start_s"].tolist() == [0.0, 2.0]
    assert result.report.statistics.breaker_state == "half_open"
    assert result.summary["breaker_open_s"] == 1.0


@pytest.mark.parametrize("path", PATHS)
def test_half_open_at_a_service_end_and_a_waiting_item(path):
    # Two workers: item 0 fails at 1.0 (open until 2.0); item 1 arrives at 1.5 and waits
    # (refused once); item 2 runs 0.5-2.0 and ends at the instant the spell ends.
    scenario = traced(
        [0.0, 0.5, 1.5], [1.0, 1.5, 1.0], [1, 0, 0], concurrency=2, breaker=opens_at_1(open_s=1.0)
    )
    result = both(scenario, path)
    assert result.report.statistics.breaker_calls_refused == 1
    assert result.timeseries["breaker_calls_refused"].iloc[-1] == 1


@pytest.mark.parametrize("path", PATHS)
def test_half_open_at_the_instant_a_retry_is_due(path):
    # Item 0 fails at 1.0 and is retried after 1.0 s, at 2.0, when the spell ends.
    scenario = traced(
        [0.0], [1.0], [1], max_attempts=2, backoff=Backoff.constant(1.0),
        breaker=opens_at_1(open_s=1.0),
    )  # fmt: skip
    result = both(scenario, path)
    assert result.items["outcome"].tolist() == ["completed"]


@pytest.mark.parametrize("path", PATHS)
def test_one_probe_and_many_waiting_items_asking_again(path):
    # Four workers wait while open; one probe goes through at 2.0, the rest ask again at its
    # verdict (3.0, closed), and again each time the breaker wakes them.
    scenario = traced(
        [0.0, 1.2, 1.2, 1.2, 1.5], [1.0] * 5, [1, 0, 0, 0, 0], concurrency=4, max_attempts=1,
        breaker=opens_at_1(open_s=1.0, half_open_calls=1),
    )  # fmt: skip
    result = both(scenario, path)
    assert result.items["start_s"].tolist() == [0.0, 2.0, 3.0, 3.0, 3.0]


@pytest.mark.parametrize("path", PATHS)
def test_probes_ending_together_reopen_it(path):
    # Two probes at 2.0 both fail at 3.0: it opens again until 4.0.
    scenario = traced(
        [0.0, 1.5, 1.5, 1.5], [1.0] * 4, [1, 1, 1, 0], concurrency=3, max_attempts=1,
        breaker=opens_at_1(open_s=1.0, half_open_calls=2),
    )  # fmt: skip
    result = both(scenario, path)
    assert result.summary["breaker_open_s"] == 2.0
    assert result.items["start_s"].tolist()[3] == 4.0


@pytest.mark.parametrize("path", PATHS)
def test_the_drain_deadline_at_the_end_of_an_open_spell(path):
    # Intake stops at 0.5; the drain gives up at 2.0, the instant the spell ends; item 1 waits.
    scenario = traced(
        [0.0, 0.5], [1.0, 1.0], [1, 0], concurrency=2, drain_timeout_s=1.5,
        breaker=opens_at_1(open_s=1.0),
    )  # fmt: skip
    result = both(scenario, path)
    assert result.items["outcome"].tolist()[1] in ("completed", "unfinished")


@pytest.mark.parametrize("path", PATHS)
def test_a_denied_retry_is_a_dead_letter_for_the_budget(path):
    # A budget of no retries at all: the first failure dead-letters its item.
    scenario = traced(
        [0.0, 0.0], [1.0, 1.0], [1, 1], concurrency=2, max_attempts=3,
        retry_budget=RetryBudget(ratio=0.0, min_retries_per_s=0.0),
    )  # fmt: skip
    result = both(scenario, path)
    reasons = [letter.reason for letter in result.report.dead_letters]
    assert reasons == ["retry_budget", "retry_budget"]
    assert result.summary["retries_denied"] == 2


@pytest.mark.parametrize("path", PATHS)
def test_the_budget_window_edge_is_exclusive(path):
    # window 1 s, floor 1 retry: item 0's retry at 1.0 counts; item 1's failure at 2.0 finds
    # it at the window's edge (2.0 - 1.0 = 1.0, out), so it is allowed too.
    scenario = traced(
        [0.0, 1.0], [1.0, 1.0], [1, 1], concurrency=2, max_attempts=2,
        backoff=Backoff.constant(5.0),
        retry_budget=RetryBudget(ratio=0.0, min_retries_per_s=1.0, window_s=1.0),
    )  # fmt: skip
    result = both(scenario, path)
    assert result.summary["retries_denied"] == 0


# -- the domain ------------------------------------------------------------------------------

GUARDED = Scenario(
    arrivals=Poisson(rate=4.0),
    service=Constant(0.5),
    config=PipelineConfig(
        concurrency=2,
        max_attempts=3,
        drain_timeout_s=None,
        retry_budget=RetryBudget(ratio=0.1, min_retries_per_s=0.5, window_s=2.0),
        breaker=CircuitBreaker(window=5, min_calls=3, open_s=1.0, half_open_calls=2),
    ),
    failures=IndependentFailures(0.5),
    n_items=100,
    seed=4,
)


def test_auto_runs_a_budget_and_a_breaker_on_the_kernel():
    result = simulate(GUARDED)
    assert result.summary["engine"] == "kernel"
    assert result.controls.names == ("retries_denied", "breaker_state", "breaker_calls_refused")
    assert_same_run(simulate(GUARDED, engine="asyncio"), result)


def test_a_budget_on_the_fcfs_path_has_its_series():
    # Nothing fails: the recursion runs it, and the budget's column is there, all 0.
    quiet = GUARDED.replace(breaker=None, failures=IndependentFailures(0.0))
    result = simulate(quiet, engine="kernel")
    assert result.controls.names == ("retries_denied",)
    assert_same_run(simulate(quiet, engine="asyncio"), result)


@pytest.mark.parametrize(
    ("change", "feature"),
    [
        ({"retry_budget": RetryBudget(ratio=0.1234567891)}, "more than 9 significant digits"),
        ({"breaker": CircuitBreaker(failure_rate=1 / 3)}, "more than 9 significant digits"),
        ({"retry_budget": RetryBudget(min_retries_per_s=2e9, window_s=2)}, "2\\*\\*31 and above"),
    ],
)
def test_the_kernel_refuses_rates_it_cannot_compare_exactly(change, feature):
    with pytest.raises(ValueError, match=feature):
        simulate(GUARDED.replace(**change), engine="kernel")
    assert simulate(GUARDED.replace(**change)).summary["engine"] == "asyncio"


@settings(max_examples=examples(150), **SETTINGS)
@given(
    scenario=chains(),
    each=st.lists(st.tuples(st.one_of(st.none(), budgets()), st.one_of(st.none(), breakers())),
                  min_size=4, max_size=4),
)  # fmt: skip
def test_kernel_equals_engine_on_chains_with_budgets_and_breakers(scenario, each):
    # A stage with a control fails half its attempts and makes up to 4.
    stages = [
        spec
        if budget is None and breaker is None
        else dataclasses.replace(
            spec,
            config=dataclasses.replace(
                spec.config, retry_budget=budget, breaker=breaker, max_attempts=4
            ),
            failures=IndependentFailures(0.5),
        )
        for spec, (budget, breaker) in zip(scenario.stages, each, strict=False)
    ]
    chain = scenario.replace(stages=stages)
    chain_agrees(chain, 0)  # on every replay path
    reports = simulate_once(chain, 0, "asyncio").report.stages.values()
    event(f"retries denied: {any(stage.retries_denied for stage in reports)}")
    states = {stage.statistics.breaker_state for stage in reports}
    event(f"a breaker open at the end: {'open' in states}")
    event(f"calls refused: {any(r.statistics.breaker_calls_refused for r in reports)}")


def test_slow_calls_open_a_breaker_without_failures():
    slow = CircuitBreaker(window=3, min_calls=2, open_s=1.0, slow_call_s=0.5)
    result = both(GUARDED.replace(retry_budget=None, breaker=slow, failures=NoFailures()))
    assert result.summary["breaker_open_s"] > 0


def test_a_summary_of_a_few_keys_is_the_whole_runs():
    # summary_once's lean path (no event log) reads the controls from the report.
    keys = frozenset({"retries_denied", "breaker_open_s", "latency_p99_s"})
    whole = simulate(GUARDED, engine="asyncio").summary
    lean = summary_once(GUARDED, 0, "kernel", keys)
    assert lean["engine"] == "kernel"
    for key in keys & set(whole):
        assert lean[key] == pytest.approx(whole[key], rel=1e-12, abs=1e-12), key
    assert lean["retries_denied"] > 0 and lean["breaker_open_s"] > 0


@pytest.mark.parametrize("path", PATHS)
def test_a_window_longer_than_the_run_holds_the_runs_calls(path):
    # Ten million calls in the window, 100 items: the ring holds the run's calls, no more.
    wide = CircuitBreaker(window=10_000_000, min_calls=20, open_s=1.0, half_open_calls=3)
    both(GUARDED.replace(breaker=wide), path)


def test_a_chain_stage_closing_as_its_breaker_turns_half_open():
    # Stage a: item 0 fails at 1.0 (open until 2.0); item 1 runs 0.5-2.0 on the other
    # worker, so the stage settles its last item, and closes, as the spell ends. Stage b's
    # breaker opens at its first call's end and is still open when the chain ends.
    a = StageSpec(
        name="a",
        service=ServiceTrace((1.0, 1.5)),
        config=PipelineConfig(concurrency=2, max_attempts=1, breaker=opens_at_1(open_s=1.0)),
        failures=ScriptedFailures((1, 0)),
    )
    b = StageSpec(
        name="b",
        service=Constant(0.5),
        config=PipelineConfig(max_attempts=1, breaker=opens_at_1(open_s=5.0)),
        failures=IndependentFailures(1.0),
    )
    chain = Scenario(arrivals=Trace([0.0, 0.5]), stages=[a, b], n_items=2)
    stages = run_chain_both(chain).stages
    assert stages["a"].report.statistics.breaker_state == "half_open"
    assert stages["b"].report.statistics.breaker_state == "open"
    assert stages["b"].summary["breaker_open_s"] == 0.0  # opened at the chain's last instant
