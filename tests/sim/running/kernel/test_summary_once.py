"""A summary of a few keys (``summary_once``, what a plan reads) is the whole summary's numbers.

``summary_once`` computes only what its keys need: on the kernel's replay no
step series unless a key reads it (the run tracks its peak of items held as it
plays). Every key it gives must be the
very number ``simulate_once(...).summary`` holds (bit for bit, NaN for NaN),
on the plain and the compiled source, for the random scenarios of the
equality tests with random warm-ups, and a plan run through it must give the
same answer as one run through the whole summary.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import PipelineConfig
from pipeline.sim import IndependentFailures, LogNormal, Poisson, Scenario, plan
from pipeline.sim.analysis.planning import rounds
from pipeline.sim.analysis.planning.slo import SUMMARY_METRICS, summary_keys
from pipeline.sim.running.kernel import driver, replay
from pipeline.sim.running.kernel import run as kernel_run
from pipeline.sim.running.single import simulate_once, summary_once
from pipeline.sim.running.summary import SERIES_KEYS, HeldPeak, summary_of
from tests.tiers import examples

from .test_kernel_arrays import HAS_NUMBA, PATHS, path
from .test_kernel_equality import SETTINGS, scenarios

PLAN_KEYS = frozenset(
    (
        "latency_p95_s",
        "memory_peak_bytes",
        "wait_mean_s",
        "items_admitted",
        "items_offered",
        "items_completed",
    )
)
NO_SERIES = frozenset(k for k in SUMMARY_METRICS if k not in SERIES_KEYS) | {"memory_peak_bytes"}
KEY_SETS = [
    PLAN_KEYS,
    NO_SERIES,
    frozenset({"memory_peak_bytes"}),
    frozenset({"latency_p99_s", "wait_p95_s"}),
    frozenset({"throughput_per_s"}),
    frozenset({"utilisation", "queue_depth_max", "latency_p50_s"}),  # reads the series
    frozenset(),
]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_same_numbers(scenario: Scenario, replication: int, keys: frozenset[str]) -> None:
    whole = simulate_once(scenario, replication, "kernel").summary
    some = summary_once(scenario, replication, "kernel", keys)
    assert some["engine"] == "kernel"
    for key, value in some.items():
        if key != "wall_time_s":
            assert same(value, whole[key]), (key, value, whole[key])
    assert [k for k in whole if k in some] == list(some)  # the whole summary's order
    for key in keys:
        assert key in some, key
    assert not any(k in some for k in SERIES_KEYS if k not in keys)


@pytest.mark.parametrize("name", PATHS)
def test_a_summary_of_some_keys_holds_the_whole_summarys_numbers(name):
    @settings(max_examples=examples(300), **SETTINGS)
    @given(
        scenario=scenarios(),
        replication=st.integers(0, 3),
        warmup=st.sampled_from([None, 0.0, 0.25, 1.0, 2.0, 3.5, 10.0, 1e9]),
        keys=st.sampled_from(KEY_SETS),
    )
    def check(scenario, replication, warmup, keys):
        if warmup is not None:
            scenario = scenario.replace(warmup_s=warmup)
        with path(name):
            assert_same_numbers(scenario, replication, keys)

    check()


@pytest.mark.parametrize("name", PATHS)
def test_the_run_without_its_series_is_the_same_run(name):
    # series=False hands back the peak of items held instead of the step series: the
    # report and the item columns are those of the run with it.
    @settings(max_examples=examples(200), **SETTINGS)
    @given(scenario=scenarios(), replication=st.integers(0, 3))
    def check(scenario, replication):
        with path(name):
            full = kernel_run.run_kernel(scenario, replication, series=True)
            lean = kernel_run.run_kernel(scenario, replication, series=False)
        (full_report, _, full_columns, steps, *_), (lean_report, _, lean_columns, peak, *_) = (
            full,
            lean,
        )
        assert full_report == lean_report
        if isinstance(peak, HeldPeak):
            assert peak.end_s == steps.end_s
        for column in ("arrival_s", "admitted_s", "start_s", "finish_s", "attempts", "outcome"):
            np.testing.assert_array_equal(
                getattr(full_columns, column), getattr(lean_columns, column), column
            )

    check()


@pytest.mark.slow  # a run per instant of the run: 1.5 s
def test_the_held_peak_is_the_series_peak_at_every_warm_up():
    # One scenario with retries, dead letters and a drain cut short, its warm-up moved
    # over every instant of the run: the peak the run tracks is the series' peak.
    scenario = Scenario(
        arrivals=Poisson(rate=8),
        service=LogNormal(mean=0.4, cv=2),
        config=PipelineConfig(concurrency=2, queue_maxsize=6, max_attempts=2, drain_timeout_s=0.3),
        failures=IndependentFailures(0.3),
        item_size_bytes=1,
        n_items=120,
        seed=5,
    )
    full = simulate_once(scenario, 0, "kernel")
    assert full.report.dead_letters and full.report.unfinished
    times = full.series.time_s
    warmups = sorted(
        {0.0, *times.tolist(), *(times[:-1] + np.diff(times) / 2).tolist(), full.series.end_s + 1.0}
    )
    for warmup in warmups:
        warm = scenario.replace(warmup_s=warmup)
        expected = simulate_once(warm, 0, "kernel").summary["memory_peak_bytes"]
        assert (
            summary_once(warm, 0, "kernel", frozenset({"memory_peak_bytes"}))["memory_peak_bytes"]
            == expected
        ), warmup


def test_a_held_peak_cannot_answer_the_series_means():
    scenario = Scenario(arrivals=Poisson(rate=1), service=LogNormal(mean=0.5, cv=1), n_items=5)
    result = simulate_once(scenario, 0, "kernel")
    peak = HeldPeak(end_s=result.series.end_s, held=1)
    with pytest.raises(ValueError, match="needs the step series"):
        summary_of(
            scenario,
            result.report,
            result.columns,
            peak,
            wall_time_s=0.0,
            engine="kernel",
            keys=frozenset({"utilisation"}),
        )


def test_the_summary_keys_of_a_plans_metrics():
    assert summary_keys(["latency_p95_s", "shed_fraction"]) == {
        "latency_p95_s",
        "items_shed",
        "items_offered",
    }
    assert summary_keys(["classes.gold.wait_p95_s"]) is None
    assert summary_keys(["backlog_drained_s"]) is None


def test_a_plan_through_the_few_keys_gives_the_whole_summarys_answer(monkeypatch):
    base = Scenario(
        arrivals=Poisson(rate=50),
        service=LogNormal.from_quantiles(p50=0.05, p99=1.2),
        config=PipelineConfig(max_attempts=3),
        failures=IndependentFailures(0.02),
        item_size_bytes=20_000,
        n_items=1_000,
        seed=1,
    )
    search = {"concurrency": range(1, 12), "queue_maxsize": [5, 100]}
    slos = ["latency_p95_s<=0.8", "memory_peak_bytes<=1.5e6", "shed_fraction<=0.5"]
    with path("compiled" if HAS_NUMBA else "plain"):
        lean = plan(base, search, slos, processes=1, progress=False)

        def whole(scenario, replication, engine, keys):
            return simulate_once(scenario, replication, engine).summary

        monkeypatch.setattr(rounds, "summary_once", whole)
        reference = plan(base, search, slos, processes=1, progress=False)
    assert lean.to_dict() == reference.to_dict()
    assert len(lean.runs) > 3


@pytest.mark.parametrize("name", PATHS)
def test_a_run_without_its_series_logs_only_what_its_report_reads(name, monkeypatch):
    # A plan's summaries read no event log: the replay fills the item columns as it plays
    # and logs only the sheds, retries and dead letters its report is built from.
    logged = []

    def spy(*args, **kwargs):
        run = real(*args, **kwargs)
        logged.append(set(run.stages[0]["kinds"].tolist()))
        return run

    real = driver.replay
    monkeypatch.setattr(driver, "replay", spy)
    scenario = Scenario(
        arrivals=Poisson(rate=8),
        service=LogNormal(mean=0.4, cv=2),
        config=PipelineConfig(concurrency=2, queue_maxsize=6, on_full="reject", max_attempts=2),
        failures=IndependentFailures(0.3),
        n_items=300,
        seed=5,
    )
    with path(name):
        kernel_run.run_kernel(scenario, 0, series=False)
        kernel_run.run_kernel(scenario, 0, series=True)
    lean, full = logged
    assert lean == {replay.SHED, replay.RETRY_SCHEDULED, replay.DEAD_LETTERED}
    assert {replay.ADMITTED, replay.STARTED, replay.COMPLETED, replay.READMITTED} <= full
