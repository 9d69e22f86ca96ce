"""A chain in virtual time: tandem queueing theory, exact replay, result shapes, validation."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    StageSpec,
    Trace,
    simulate,
    theory,
)
from pipeline.sim.stats.intervals import mean_ci
from pipeline.sim.workloads.traces.service import ServiceTrace


def unbounded(concurrency):
    return PipelineConfig(concurrency=concurrency, queue_maxsize=None, drain_timeout_s=None)


def tandem(**overrides):
    base = dict(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=1.0), config=unbounded(3)),
            StageSpec(name="write", service=Exponential(mean=0.6), config=unbounded(2)),
        ],
        n_items=400,
        seed=1,
    )
    base.update(overrides)
    return Scenario(**base)


# -- queueing theory -----------------------------------------------------------------------


def test_tandem_mmc_stages_wait_as_erlang_c_at_the_external_rate():
    # Burke: a stable M/M/c stage's departures are Poisson at the arrival rate, so
    # each stage of the tandem is an M/M/c queue fed at 2 per second.
    # Independent replications give a 99% Student t interval for each stage's mean
    # wait; the Erlang C value must lie inside it (one run's waits are correlated,
    # so the replications, not the items, are the samples).
    # Eight runs of 5,000 items give intervals of about +-25% (fetch, rho = 0.67) and
    # +-17% (write, rho = 0.6); a stage fed at the wrong rate or timed from the wrong
    # arrival (its wait would include the stage before) falls far outside.
    runs = [
        simulate(tandem(n_items=5000, seed=seed, warmup_s=50.0), engine="auto") for seed in range(8)
    ]
    for name, mean_s, c in (("fetch", 1.0, 3), ("write", 0.6, 2)):
        waits = [run.stages[name].summary["wait_mean_s"] for run in runs]
        mean, half = mean_ci(waits, level=0.99)
        expected = theory.mmc(2.0, mean_s, c).wait_mean_s
        assert abs(mean - expected) <= half, (name, mean, half, expected)
        assert half <= 0.35 * expected  # the interval is narrow enough to mean something
    assert all(run.summary["engine"] == "kernel" for run in runs)  # the chain path ran them


# -- exact replay --------------------------------------------------------------------------


def fcfs(arrival_s, service_s, c):
    """Start and finish times of an FCFS queue with ``c`` servers, items served in arrival order."""
    order = np.argsort(arrival_s, kind="stable")
    free = [0.0] * c
    start = np.empty(len(arrival_s))
    for i in order:
        start[i] = max(arrival_s[i], heapq.heappop(free))
        heapq.heappush(free, start[i] + service_s[i])
    return start, start + service_s


def test_per_item_stage_times_equal_the_tandem_fcfs_recursion():
    rng = np.random.default_rng(5)
    n = 300
    arrivals = np.cumsum(rng.exponential(0.5, n))
    services = [rng.exponential(1.2, n), rng.exponential(0.8, n), rng.lognormal(-1.0, 1.0, n)]
    concurrency = [3, 2, 1]
    scenario = Scenario(
        arrivals=Trace(arrivals),
        stages=[
            StageSpec(name=f"s{k}", service=ServiceTrace(tuple(services[k])), config=unbounded(c))
            for k, c in enumerate(concurrency)
        ],
        n_items=n,
    )
    result = simulate(scenario)
    arrival = arrivals
    for k, c in enumerate(concurrency):
        start, finish = fcfs(arrival, services[k], c)
        items = result.stages[f"s{k}"].items
        np.testing.assert_allclose(items["arrival_s"], arrival, rtol=0, atol=1e-9)
        np.testing.assert_allclose(items["start_s"], start, rtol=0, atol=1e-9)
        np.testing.assert_allclose(items["finish_s"], finish, rtol=0, atol=1e-9)
        arrival = finish
    latency = result.items["latency_s"].to_numpy()
    np.testing.assert_allclose(latency, arrival - arrivals, rtol=0, atol=1e-9)


# -- what a result holds -------------------------------------------------------------------


def test_each_stage_has_the_summary_items_and_timeseries_of_a_single_stage_run():
    single = simulate(
        Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=1.0), n_items=50, seed=1)
    )
    result = simulate(tandem(n_items=50))
    for stage in result.stages.values():
        assert set(stage.summary) == set(single.summary)
        assert list(stage.items.columns) == list(single.items.columns)
        assert list(stage.timeseries.columns) == list(single.timeseries.columns)
    for key in (
        "items_offered",
        "items_completed",
        "latency_p50_s",
        "latency_p95_s",
        "latency_p99_s",
        "throughput_per_s",
        "memory_peak_bytes",
    ):
        assert key in result.summary
    assert result.summary["items_offered"] == 50 == result.summary["items_completed"]
    assert result.report.balanced


def test_fan_out_multiplies_the_items_and_memory_stays_within_the_stages_bounds():
    bounded = dict(queue_maxsize=3, drain_timeout_s=None, max_attempts=2, backoff=Backoff.none())
    scenario = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[
            StageSpec(
                name="page",
                service=Exponential(mean=0.5),
                config=PipelineConfig(concurrency=2, **bounded),
                fan_out=5,
            ),
            StageSpec(
                name="record",
                service=Exponential(mean=0.3),
                config=PipelineConfig(concurrency=2, **bounded),
                failures=IndependentFailures(p=0.1),
            ),
        ],
        n_items=200,
        seed=3,
        item_size_bytes=100,
    )
    result = simulate(scenario)
    report = result.report
    assert report.balanced
    assert report.offered + report.children_added == 1000 - 0  # 200 pages of 5 records
    assert result.summary["items_completed"] + result.summary["items_dead_lettered"] == 1000
    # page: queue 3 + 2 workers x 5 children; record: queue 3 + 2 workers.
    bound = (3 + 2 * 5) + (3 + 2)
    # Items held are what the bounds bound; the dead letters the report keeps are memory.
    assert 0 < result.summary["items_held_max"] <= bound
    assert result.summary["memory_peak_bytes"] <= (bound + report.dead_lettered) * 100
    assert result.stages["page"].summary["items_completed"] == 200
    assert len(result.items) == 1000
    assert set(result.items["source_item_id"]) == set(range(200))


def test_a_slow_last_stage_backs_up_into_the_first():
    scenario = Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(
                name="fast",
                service=Constant(value=0.1),
                config=PipelineConfig(concurrency=1, queue_maxsize=2),
            ),
            StageSpec(
                name="slow",
                service=Constant(value=1.0),
                config=PipelineConfig(concurrency=1, queue_maxsize=2, drain_timeout_s=None),
            ),
        ],
        n_items=100,
        seed=1,
    )
    result = simulate(scenario, engine="auto")
    fast = result.stages["fast"]
    assert result.report.stages["fast"].hand_off_blocked_s > 50
    assert fast.summary["producer_blocked_s"] > 50  # the backlog ends up at the source
    assert result.summary["throughput_per_s"] == pytest.approx(1.0, rel=0.05)


# -- engines and validation ----------------------------------------------------------------


def test_the_kernel_refuses_a_chain_stage_outside_its_domain_in_one_line():
    scenario = tandem(n_items=5).replace(**{"fetch.max_wait_s": 1.0})
    with pytest.raises(ValueError, match="stage 'fetch': deadlines") as caught:
        simulate(scenario, engine="kernel")
    assert "\n" not in str(caught.value)
    assert simulate(scenario, engine="auto").summary["engine"] == "asyncio"
    assert simulate(tandem(n_items=5), engine="auto").summary["engine"] == "kernel"


def test_one_seed_reproduces_a_chain_run():
    first, second = simulate(tandem(n_items=100)), simulate(tandem(n_items=100))
    for name in ("fetch", "write"):
        assert first.stages[name].items.equals(second.stages[name].items)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"service": Exponential(mean=1.0)}, ValueError, "not both"),
        ({"stages": []}, ValueError, "at least one StageSpec"),
        ({"stages": "fetch"}, TypeError, "list of StageSpec"),
        ({"stages": [object()]}, TypeError, r"stages\[0\] must be a StageSpec"),
        (
            {"stages": [StageSpec(name="a", service=Constant(value=1))] * 2},
            ValueError,
            "unique",
        ),
        ({"failures": IndependentFailures(p=0.1)}, ValueError, "own failures"),
        (
            {
                "n_items": 10**8,
                "stages": [
                    StageSpec(name="a", service=Constant(value=1), fan_out=100),
                    StageSpec(name="b", service=Constant(value=1)),
                ],
            },
            ValueError,
            "at most",
        ),
    ],
)
def test_bad_stage_scenarios_name_the_problem(changes, error, message):
    with pytest.raises(error, match=message):
        tandem(**changes)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"name": ""}, ValueError, "non-empty"),
        ({"service": 1.0}, TypeError, "distribution"),
        ({"config": {}}, TypeError, "PipelineConfig"),
        ({"fan_out": 0}, ValueError, "fan_out"),
        ({"fan_out": True}, ValueError, "fan_out"),
        ({"fan_out": math.inf}, ValueError, "fan_out"),
        ({"fan_out": 10**9}, ValueError, "fan_out"),
        ({"failures": 0.1}, TypeError, "failure model"),
    ],
)
def test_bad_stage_specs_name_the_parameter(kwargs, error, message):
    base = dict(name="a", service=Constant(value=1.0))
    base.update(kwargs)
    with pytest.raises(error, match=message):
        StageSpec(**base)


def test_the_offered_load_of_a_chain_is_its_busiest_stages():
    assert tandem().offered_load == pytest.approx(2.0)
    scenario = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[
            StageSpec(name="a", service=Constant(value=0.5), fan_out=4),
            StageSpec(name="b", service=Constant(value=0.75)),
        ],
        n_items=1,
    )
    assert scenario.offered_load == pytest.approx(3.0)


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_every_end_to_end_key_counts_the_last_stages_items_when_it_fans_out(engine):
    # The last stage splits each item into 3 outputs that leave the chain: the chain's
    # items are still the last stage's items, in the report, the summary and the frame.
    scenario = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.2), config=unbounded(2)),
            StageSpec(
                name="split",
                service=Exponential(mean=0.2),
                config=unbounded(2),
                fan_out=3,
                failures=IndependentFailures(p=0.2),
            ),
        ],
        n_items=100,
        seed=5,
        warmup_s=10.0,
    )
    result = simulate(scenario, engine=engine)
    report, summary, items = result.report, result.summary, result.items
    tail = report.stages["split"]
    completed = int((items["outcome"] == "completed").sum())
    assert tail.outputs == 3 * tail.completed > 0
    assert summary["items_completed"] == report.completed == tail.completed == completed
    assert len(items) == summary["items_offered"] == 100
    assert report.children_added == 0 and report.balanced
    counted = int(((items["outcome"] == "completed") & (items["arrival_s"] >= 10.0)).sum())
    span = summary["sim_time_s"] - 10.0
    assert summary["throughput_per_s"] == pytest.approx(counted / span, rel=1e-12)


def _stage_series(rng: np.random.Generator, rows: int, times: np.ndarray) -> object:
    """A stage's step series: ``rows`` non-decreasing times from ``times`` and random counts."""
    from types import SimpleNamespace

    time_s = np.sort(np.concatenate([[0.0], rng.choice(times, rows - 1)]))
    counts = [rng.integers(0, 9, rows) for _ in range(3)]
    return SimpleNamespace(
        series=SimpleNamespace(
            time_s=time_s,
            in_system=counts[0].astype(np.int32),
            upstream_backlog=counts[1].astype(np.int32),
            dead_letters=counts[2].astype(np.int32),
        )
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_chains_items_held_are_every_stages_steps_summed_at_every_instant(seed):
    # Against a direct evaluation: at each instant, each stage's last row at or before it.
    # Stages share instants (drawn from one small set), repeat one, or have a single row.
    from pipeline.sim.running.chained import _items_held

    rng = np.random.default_rng(seed)
    instants = np.round(rng.uniform(0, 5, 6), 1)
    count = int(rng.integers(1, 5))
    stages = [_stage_series(rng, int(rng.integers(1, 12)), instants) for _ in range(count)]
    times, held, kept = _items_held(stages)
    expected = np.unique(np.concatenate([stage.series.time_s for stage in stages]))
    np.testing.assert_array_equal(times, expected)
    for at, got_held, got_kept in zip(times, held, kept, strict=True):
        want_held = want_kept = 0
        for number, stage in enumerate(stages):
            s = stage.series
            row = np.flatnonzero(s.time_s <= at)[-1]  # row 0 is at 0.0: always there
            want_held += int(s.in_system[row]) + (int(s.upstream_backlog[row]) if number else 0)
            want_kept += int(s.dead_letters[row])
        assert (got_held, got_kept) == (want_held, want_kept), at
