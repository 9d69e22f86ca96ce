"""The kernel's replay (``kernel/replay.py``) equals the engine, compiled and as plain Python.

``kernel_path`` picks the path: every test here runs both the plain source
and (when numba is installed, the ``[fast]`` extra) its compiled form, on the
random scenarios of ``test_kernel_equality`` (every failure model of the
kernel's domain, combinations included), item by item against the asyncio
engine (1e-9 s, the step series it merges included), and again with refill
blocks of three draws and arrays that start at one entry, so the replay stops,
refills, grows and resumes many times in a run. Then the bulk draws against
the draws one at a time, when ``auto`` loads numba (with and without it), and
the edges: every attempt failing, a huge budget, zero service times, no items.
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
from pipeline.sim.running.kernel import driver
from pipeline.sim.running.kernel import run as kernel_run
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.single import simulate_once
from pipeline.sim.running.workload import StageWorkload, Workload
from pipeline.sim.workloads.traces.service import ServiceTrace
from tests.tiers import examples

from .test_kernel_equality import (
    SETTINGS,
    assert_kernel_agrees,
    assert_same_run,
    backlogged,
    scenarios,
)

HAS_NUMBA = driver.compiled() is not None
NEEDS_NUMBA = pytest.mark.skipif(
    not HAS_NUMBA, reason="needs numba: pip install 'pipeline-lab[fast]'"
)

PATHS = ["plain", pytest.param("compiled", marks=NEEDS_NUMBA)]


def path(name: str):
    return kernel_path(name)


@pytest.mark.parametrize("name", PATHS)
def test_the_array_path_equals_the_engine_on_random_scenarios(name):
    @settings(max_examples=examples(500), **SETTINGS)
    @given(scenario=scenarios(), replication=st.integers(0, 3))
    def check(scenario, replication):
        with path(name):
            assert_kernel_agrees(scenario, replication)

    check()


@pytest.mark.parametrize("name", PATHS)
def test_the_array_path_equals_the_engine_with_an_initial_backlog(name):
    @settings(max_examples=examples(200), **SETTINGS)
    @given(scenario=backlogged(), replication=st.integers(0, 3))
    def check(scenario, replication):
        with path(name):
            assert_kernel_agrees(scenario, replication)

    check()


@pytest.mark.parametrize("name", PATHS)
def test_the_replay_refills_and_grows_its_arrays_as_it_goes(name):
    # Every pool of draws runs out after three values and every array starts at one entry:
    # the replay stops and resumes many times in a run, and the run is still the engine's.
    @settings(max_examples=examples(150), **SETTINGS)
    @given(scenario=scenarios(), replication=st.integers(0, 3))
    def check(scenario, replication):
        with path(name), kernel_path(block=3, log=1, heap=1, ready=1):
            assert_kernel_agrees(scenario, replication)

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


def spy_on_the_path(monkeypatch) -> list[bool]:
    """The list each kernel run appends to: True when it ran compiled."""
    taken: list[bool] = []
    original = driver.replay

    def spy(*args, **kwargs):
        taken.append(kwargs["fast"])
        return original(*args, **kwargs)

    monkeypatch.setattr(driver, "replay", spy)  # run_kernel imports it when it runs
    return taken


@NEEDS_NUMBA
def test_runs_anticipated_load_the_compiled_path_at_the_first_run(monkeypatch):
    monkeypatch.setattr(driver, "_SEEN", [0])
    monkeypatch.setattr(driver, "_COMPILED", {})
    scenario = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=100, backoff=Backoff(jitter=True)),
        failures=IndependentFailures(0.2),
        n_items=300,
        seed=2,
    )
    driver.anticipate(np.int64(driver.LOAD_AFTER_ITEMS))  # a numpy integer is an integer
    assert driver._COMPILED == {}  # nothing loaded before a run needs it
    taken = spy_on_the_path(monkeypatch)
    engine = simulate_once(scenario, 0, "asyncio")
    assert_same_run(engine, simulate_once(scenario, 0, "auto"))  # a short run, compiled
    assert taken == [True]


@pytest.mark.parametrize(
    ("items", "error"),
    [(-1, ValueError), (1.5, TypeError), (float("nan"), TypeError), (True, TypeError),
     ("100", TypeError), (None, TypeError)],
)  # fmt: skip
def test_anticipate_takes_a_count_of_items(monkeypatch, items, error):
    from decimal import Decimal

    monkeypatch.setattr(driver, "_SEEN", [7])
    with pytest.raises(error, match="items must be"):
        driver.anticipate(items)
    with pytest.raises(TypeError, match="items must be"):
        driver.anticipate(Decimal(3))
    assert driver._SEEN == [7]  # nothing counted
    driver.anticipate(0)
    driver.anticipate(2**70)  # huge: the next run loads the compiled path
    assert driver._SEEN == [7 + 2**70]


@NEEDS_NUMBA
def test_auto_loads_the_compiled_path_once_the_process_has_run_enough_items(monkeypatch):
    monkeypatch.setattr(driver, "LOAD_AFTER_ITEMS", 3000)
    monkeypatch.setattr(driver, "_SEEN", [0])
    monkeypatch.setattr(driver, "_COMPILED", {})
    scenario = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=100, backoff=Backoff(jitter=True)),
        failures=IndependentFailures(0.1),
        n_items=2000,
        seed=1,
    )
    taken = spy_on_the_path(monkeypatch)
    for items in (1000, 1999, 2, 40):  # the third run reaches 3000 items
        short = scenario.replace(n_items=items)
        assert_same_run(simulate_once(short, 0, "asyncio"), simulate_once(short, 0, "auto"))
    assert taken == [False, False, True, True]
    # without failures or ties the FCFS recursion still runs first
    quiet = scenario.replace(failures=IndependentFailures(0.0), config=PipelineConfig())
    assert simulate_once(quiet, 0, "auto").summary["engine"] == "kernel"
    assert taken == [False, False, True, True]


@pytest.mark.parametrize("name", PATHS)
def test_scripted_and_combined_failures_run_on_every_path(name):
    for model in (
        ScriptedFailures((1, 0, 2), permanent=frozenset({2})),
        IndependentFailures(0.3) | PermanentFailures(0.2) | ScriptedFailures((2, 0, 1)),
    ):
        scenario = Scenario(
            arrivals=Poisson(rate=1.0),
            service=Constant(1.0),
            failures=model,
            config=PipelineConfig(max_attempts=3, backoff=Backoff(jitter=True)),
            n_items=60,
            seed=4,
        )
        engine, kernel = run_both(scenario, name)
        assert kernel.summary["items_dead_lettered"] > 0
        assert_same_run(engine, kernel)


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
def test_the_jitter_stream_is_left_where_the_engine_leaves_it(name, monkeypatch):
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
    monkeypatch.setattr(kernel_run, "Workload", lambda scenario, replication: bulk)
    with path(name), kernel_path(block=64):  # several refills of the jitter pool
        kernel_run.run_kernel(scenario, 0)
    assert bulk.streams.jitter.getstate() == expected.getstate()


def test_without_numba_auto_runs_plain(monkeypatch):
    monkeypatch.setattr(driver, "_COMPILED", {"replay": None})
    monkeypatch.setattr(driver, "_SEEN", [0])
    assert driver.compiled() is None
    assert not driver.take_compiled(10**6)
    with path("compiled"), pytest.raises(RuntimeError, match=r"needs numba: pip install"):
        driver.take_compiled(10)


@NEEDS_NUMBA
def test_the_compiled_fcfs_recursion_gives_the_plain_ones_very_floats():
    # Two loops of one recursion: heapq's heap in Python floats, and a heap sifted by hand
    # in numba. Ties of free times, arrivals on a free time, one worker and many, no items.
    from pipeline.sim.running.kernel.fcfs import _starts

    @settings(max_examples=examples(300), **SETTINGS)
    @given(
        workers=st.integers(1, 40),
        gaps=st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 3), max_size=300),
        work=st.lists(st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 50), min_size=300),
    )
    def check(workers, gaps, work):
        arrival, service = np.cumsum(gaps), np.array(work[: len(gaps)])
        with path("plain"):
            plain = _starts(arrival, service, workers)
        with path("compiled"):
            compiled = _starts(arrival, service, workers)
        assert np.array_equal(plain, compiled)

    check()


@NEEDS_NUMBA
def test_the_fcfs_recursion_loads_numba_for_the_runs_it_made_not_for_announced_ones(monkeypatch):
    # A widget announces its runs (anticipate); if they take the FCFS recursion, whose Python
    # loop is cheap, numba's memory is not worth it. Its own long work is.
    from pipeline.sim.running.kernel.fcfs import PLAIN_ITEMS_PER_REPLAYED

    monkeypatch.setattr(driver, "LOAD_AFTER_ITEMS", 100)
    monkeypatch.setattr(driver, "_SEEN", [0])
    monkeypatch.setattr(driver, "_RUN", [0])
    monkeypatch.setattr(driver, "_COMPILED", {})
    quiet = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4),
        n_items=60 * PLAIN_ITEMS_PER_REPLAYED,  # each run counts 60 of the 100
        seed=3,
    )
    driver.anticipate(10**9)
    engine = simulate_once(quiet, 0, "asyncio")
    assert_same_run(engine, simulate_once(quiet, 0, "auto"))
    assert driver._COMPILED == {}  # the first run: 60 items run, numba not loaded
    assert_same_run(engine, simulate_once(quiet, 0, "auto"))
    assert driver._COMPILED["replay"] is not None  # the second: 120, loaded and compiled
