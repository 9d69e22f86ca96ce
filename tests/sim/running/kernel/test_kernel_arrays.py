"""The event path on arrays (``kernel/arrays.py``) equals the engine, compiled and as plain Python.

``kernel.run.ARRAYS`` picks the path: every test here runs both the plain
source and (when numba is installed, the ``[fast]`` extra) its compiled
form, on the random scenarios of ``test_kernel_equality`` whose failure model
the path knows, item by item against the asyncio engine (1e-9 s), and checks
the per-item columns it fills in as it goes against those the recorder sorts
out of its log, and the step series it merges against the recorder's. Then
the bulk draws against the draws one at a time, the domain of ``auto`` (with
and without numba), and the edges: every attempt failing, a huge budget, zero
service times, no items.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PipelineConfig, RetryPolicy
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    LogNormal,
    PermanentFailures,
    Poisson,
    Scenario,
    ScriptedFailures,
    StageSpec,
    Trace,
)
from pipeline.sim.running.kernel import arrays
from pipeline.sim.running.kernel import run as kernel_run
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.recorder import Recorder, StepSeries, item_columns, step_series
from pipeline.sim.running.single import simulate_once
from pipeline.sim.running.workload import StageWorkload, Workload
from pipeline.sim.workloads.traces.service import ServiceTrace

from .test_kernel_equality import (
    SETTINGS,
    assert_kernel_agrees,
    assert_same_run,
    backlogged,
    scenarios,
)

HAS_NUMBA = arrays.compiled() is not None
NEEDS_NUMBA = pytest.mark.skipif(
    not HAS_NUMBA, reason="needs numba: pip install 'pipeline-lab[fast]'"
)
PATHS = ["plain", pytest.param("compiled", marks=NEEDS_NUMBA)]


def path(name: str):
    return kernel_path(name)


def known(scenario: Scenario) -> Scenario:
    """The scenario, its failure model swapped for one the path knows if it has another."""
    if arrays.inside(scenario.failures):
        return scenario
    return scenario.replace(failures=IndependentFailures(0.3))


def assert_columns_match_the_log(scenario: Scenario, replication: int, fast: bool) -> None:
    workload = Workload(scenario, replication)
    quiet = kernel_run._cannot_fail(scenario, len(workload.arrival_s))
    run, columns = arrays.run_arrays(workload, scenario.failures, quiet, scenario.config, fast=fast)
    log = Recorder()
    log.kinds, log.times, log.ids = run.kinds, run.times, run.ids
    sorted_out = item_columns(workload.arrival_s, log)
    for name in ("arrival_s", "admitted_s", "start_s", "finish_s", "attempts", "outcome"):
        np.testing.assert_array_equal(getattr(columns, name), getattr(sorted_out, name), name)
    for name in ("start_s", "end_s", "ending", "readmitted_s"):
        np.testing.assert_array_equal(
            getattr(columns.attempt_log, name), getattr(sorted_out.attempt_log, name), name
        )
    merged = arrays.step_series_merged(workload.arrival_s, run, fast=fast)
    expected = step_series(workload.arrival_s, log, run.finished_s)
    assert merged.end_s == expected.end_s
    for name in ("time_s", *StepSeries.COLUMNS):
        np.testing.assert_array_equal(getattr(merged, name), getattr(expected, name), name)
        assert getattr(merged, name).dtype == getattr(expected, name).dtype, name


@pytest.mark.parametrize("name", PATHS)
def test_the_array_path_equals_the_engine_on_random_scenarios(name):
    @settings(max_examples=500, **SETTINGS)
    @given(scenario=scenarios(), replication=st.integers(0, 3))
    def check(scenario, replication):
        scenario = known(scenario)
        with path(name):
            assert_kernel_agrees(scenario, replication)
        assert_columns_match_the_log(scenario, replication, fast=name == "compiled")

    check()


@pytest.mark.parametrize("name", PATHS)
def test_the_array_path_equals_the_engine_with_an_initial_backlog(name):
    @settings(max_examples=200, **SETTINGS)
    @given(scenario=backlogged(), replication=st.integers(0, 3))
    def check(scenario, replication):
        with path(name):
            assert_kernel_agrees(known(scenario), replication)

    check()


def run_both(scenario: Scenario, name: str):
    with path(name):
        kernel = simulate_once(scenario, 0, "kernel")
    return simulate_once(scenario, 0, "asyncio"), kernel


EDGES = {
    "every attempt fails, budget of 50": dict(
        failures=IndependentFailures(1.0), config=PipelineConfig(concurrency=2, max_attempts=50)
    ),
    "a budget of a billion attempts, p = 0.5": dict(
        failures=IndependentFailures(0.5), config=PipelineConfig(concurrency=2, max_attempts=10**9)
    ),
    "every attempt fails, nothing retried": dict(
        failures=IndependentFailures(1.0),
        config=PipelineConfig(concurrency=2, retry=RetryPolicy(retry_on=())),
    ),
    "permanent failures retried by a policy that allows it": dict(
        failures=PermanentFailures(0.5),
        config=PipelineConfig(concurrency=3, max_attempts=4, retry=RetryPolicy(give_up_on=())),
    ),
    "zero service and zero backoff: everything ties": dict(
        service=Constant(0.0),
        failures=IndependentFailures(0.5),
        config=PipelineConfig(concurrency=2, queue_maxsize=1, backoff=Backoff.none()),
    ),
    "reject on an unbounded queue with a zero drain": dict(
        failures=IndependentFailures(0.4),
        config=PipelineConfig(on_full="reject", queue_maxsize=None, drain_timeout_s=0.0),
    ),
    "a service trace: retries repeat the item's time": dict(
        service=ServiceTrace(tuple(0.25 * (i % 5) for i in range(40))),
        failures=IndependentFailures(0.5),
        config=PipelineConfig(concurrency=2, queue_maxsize=3, drain_timeout_s=3.0),
    ),
    "no items": dict(n_items=0, failures=IndependentFailures(0.5)),
}


@pytest.mark.parametrize("name", PATHS)
@pytest.mark.parametrize("edge", list(EDGES))
def test_the_array_path_equals_the_engine_at_the_edges(name, edge):
    fields = {
        "arrivals": Poisson(rate=4.0),
        "service": Exponential(mean=0.5),
        "n_items": 40,
        "seed": 7,
        **EDGES[edge],
    }
    engine, kernel = run_both(Scenario(**fields), name)
    assert_same_run(engine, kernel)


@pytest.mark.parametrize("name", PATHS)
def test_a_burst_of_a_trace_with_jittered_backoff_equals_the_engine(name):
    scenario = Scenario(
        arrivals=Trace(np.repeat([0.0, 1.0, 2.0], 30)),
        service=LogNormal(mean=0.3, cv=2.0),
        config=PipelineConfig(
            concurrency=3, queue_maxsize=5, max_attempts=4, backoff=Backoff(jitter=True)
        ),
        failures=IndependentFailures(0.3),
        n_items=90,
        seed=3,
    )
    assert_same_run(*run_both(scenario, name))


@NEEDS_NUMBA
def test_runs_anticipated_load_the_compiled_path_at_the_first_event_path_run(monkeypatch):
    monkeypatch.setattr(arrays, "_SEEN", [0])
    monkeypatch.setattr(arrays, "_COMPILED", {})
    scenario = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=100, backoff=Backoff(jitter=True)),
        failures=IndependentFailures(0.2),
        n_items=300,
        seed=2,
    )
    arrays.anticipate(np.int64(arrays.MIN_ITEMS))  # a numpy integer is an integer
    assert arrays._COMPILED == {}  # nothing loaded before a run needs it
    taken = []
    original = arrays.run_arrays

    def spy(*args, **kwargs):
        taken.append(kwargs["fast"])
        return original(*args, **kwargs)

    monkeypatch.setattr(arrays, "run_arrays", spy)
    with path("closures"):
        events = simulate_once(scenario, 0, "kernel")
    events.summary["engine"] = "asyncio"  # the reference here: the events path
    assert_same_run(events, simulate_once(scenario, 0, "auto"))  # a short run, compiled
    assert taken == [True]


@pytest.mark.parametrize(
    ("items", "error"),
    [(-1, ValueError), (1.5, TypeError), (float("nan"), TypeError), (True, TypeError),
     ("100", TypeError), (None, TypeError)],
)  # fmt: skip
def test_anticipate_takes_a_count_of_items(monkeypatch, items, error):
    from decimal import Decimal

    monkeypatch.setattr(arrays, "_SEEN", [7])
    with pytest.raises(error, match="items must be"):
        arrays.anticipate(items)
    with pytest.raises(TypeError, match="items must be"):
        arrays.anticipate(Decimal(3))
    assert arrays._SEEN == [7]  # nothing counted
    arrays.anticipate(0)
    arrays.anticipate(2**70)  # huge: the next event-path run loads the compiled path
    assert arrays._SEEN == [7 + 2**70]


@NEEDS_NUMBA
def test_auto_loads_the_compiled_path_once_the_process_has_run_enough_items(monkeypatch):
    monkeypatch.setattr(arrays, "MIN_ITEMS", 3000)
    monkeypatch.setattr(arrays, "_SEEN", [0])
    monkeypatch.setattr(arrays, "_COMPILED", {})
    scenario = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=100, backoff=Backoff(jitter=True)),
        failures=IndependentFailures(0.1),
        n_items=2000,
        seed=1,
    )
    taken = []
    original = arrays.run_arrays

    def spy(*args, **kwargs):
        taken.append(kwargs["fast"])
        return original(*args, **kwargs)

    monkeypatch.setattr(arrays, "run_arrays", spy)  # run_kernel imports it when it runs
    for items in (1000, 1999, 2, 40):  # the third run reaches 3000 items
        short = scenario.replace(n_items=items)
        with path("closures"):
            events = simulate_once(short, 0, "kernel")
        events.summary["engine"] = "asyncio"  # the reference here: the events path
        assert_same_run(events, simulate_once(short, 0, "auto"))
    assert taken == [True, True]
    # without failures or ties the FCFS recursion still runs first
    quiet = scenario.replace(failures=IndependentFailures(0.0), config=PipelineConfig())
    assert simulate_once(quiet, 0, "auto").summary["engine"] == "kernel"
    assert taken == [True, True]


def test_auto_leaves_models_the_path_does_not_know_to_the_events_path():
    for model in (ScriptedFailures((1, 0, 2)), IndependentFailures(0.1) | PermanentFailures(0.1)):
        scenario = Scenario(
            arrivals=Poisson(rate=1.0), service=Constant(1.0), failures=model, n_items=3
        )
        assert not arrays.inside(model)
        assert kernel_run._take_arrays(scenario, False, 10**6) is None


def test_bulk_failure_draws_equal_the_checks_one_at_a_time():
    model = IndependentFailures(0.3)
    one, bulk = (model.bind(np.random.default_rng(5), 10) for _ in range(2))
    singles = [one._u.next() for _ in range(14_000)]
    taken = np.concatenate([bulk.draws(k) for k in (0, 1, 4095, 1, 4096, 5000, 807)])
    np.testing.assert_array_equal(taken, singles)
    assert one._u.next() == bulk._u.next()  # and both streams go on alike


def test_bulk_retry_times_equal_the_draws_one_at_a_time():
    scenario = Scenario(arrivals=Poisson(rate=1.0), service=LogNormal(mean=1.0, cv=1.0), n_items=10)
    one, bulk = Workload(scenario, 2), Workload(scenario, 2)
    singles = [one.retry_time(0) for _ in range(9000)]
    taken = np.concatenate([bulk.retry_times(k) for k in (3, 0, 4093, 4100, 804)])
    np.testing.assert_array_equal(taken, singles)
    assert one.retry_time(0) == bulk.retry_time(0)


def test_bulk_failure_outcomes_equal_the_checks_one_at_a_time():
    model = IndependentFailures(0.3)
    one, bulk = (model.bind(np.random.default_rng(5), 10) for _ in range(2))
    singles = [one.check(0, 1, 1) is not None for _ in range(9_000)]
    taken = np.concatenate([bulk.failing(k) for k in (0, 4096, 1, 4096, 807)])
    assert taken.dtype == np.bool_
    np.testing.assert_array_equal(taken, singles)
    assert (one.check(0, 1, 1) is None) == (not bulk.failing(1)[0])  # the streams go on alike


def test_a_stages_bulk_retry_times_equal_the_draws_one_at_a_time():
    spec = StageSpec(name="s", service=LogNormal(mean=1.0, cv=1.0))
    one, bulk = (StageWorkload(spec, 10, seed=3, replication=1, number=0) for _ in range(2))
    singles = [one.retry_time(0) for _ in range(9000)]
    taken = np.concatenate([bulk.retry_times(k) for k in (3, 0, 4093, 4100, 804)])
    np.testing.assert_array_equal(taken, singles)
    assert one.retry_time(0) == bulk.retry_time(0)


@pytest.mark.parametrize("name", PATHS)
def test_the_jitter_stream_is_left_where_the_engine_leaves_it(name):
    scenario = Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=2, max_attempts=3, backoff=Backoff(jitter=True)),
        failures=IndependentFailures(0.5),
        n_items=200,
        seed=11,
    )
    workload = Workload(scenario, 0)
    retries = int(simulate_once(scenario, 0, "asyncio").summary["retries_total"])
    expected = random.Random()
    expected.setstate(workload.streams.jitter.getstate())
    for _ in range(retries):
        expected.random()
    bulk = Workload(scenario, 0)
    arrays.run_arrays(bulk, scenario.failures, False, scenario.config, fast=name == "compiled")
    assert bulk.streams.jitter.getstate() == expected.getstate()


def test_without_numba_auto_takes_the_events_path(monkeypatch):
    monkeypatch.setattr(arrays, "_COMPILED", {"play": None, "series_rows": None})
    monkeypatch.setattr(arrays, "_SEEN", [0])
    scenario = Scenario(
        arrivals=Poisson(rate=1.0),
        service=Constant(1.0),
        failures=IndependentFailures(0.1),
        n_items=10**6,
    )
    assert arrays.compiled() is None
    assert kernel_run._take_arrays(scenario, False, 10**6) is None
    with path("compiled"), pytest.raises(RuntimeError, match=r"needs numba: pip install"):
        kernel_run._take_arrays(scenario, False, 10)
