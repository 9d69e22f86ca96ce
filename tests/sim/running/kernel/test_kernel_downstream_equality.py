"""The kernel computes what the asyncio engine computes with a downstream, attempt timeouts
and faults: item by item, on random scenarios and at the ties they make.

An attempt the client's ``attempt_timeout_s`` cuts leaves its request in the downstream's
queue or on its server, served to its end for nobody (orphaned work); a full downstream
queue fails an attempt at once; both are retried as the retry policy says. The kernel's
replay must order every timer of that machinery (the timeout's, the request's end, the
client-side sleep's, the arrivals', the retries', the drain's) as the virtual loop does.
Every column, series, summary key and the report must agree, as in
``test_kernel_equality.py``, and so must the downstream's account and its log of every
request. Both kernel paths (plain and compiled) run each scenario.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PipelineConfig, RetryPolicy
from pipeline.sim import (
    CapacityDrop,
    Constant,
    Downstream,
    Empirical,
    Exponential,
    Gamma,
    IndependentFailures,
    LoadSpike,
    NoFailures,
    PermanentFailures,
    Poisson,
    Scenario,
    ScriptedFailures,
    Trace,
)
from pipeline.sim.running.engine_choice import unsupported
from pipeline.sim.running.kernel import driver
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.single import simulate_once
from pipeline.sim.workloads.arrivals import Deterministic
from pipeline.sim.workloads.traces.service import ServiceTrace
from tests.sim.running.kernel.test_kernel_chain_equality import (
    assert_kernel_agrees as assert_chain_agrees,
)
from tests.sim.running.kernel.test_kernel_chain_equality import chains
from tests.sim.running.kernel.test_kernel_equality import SETTINGS, assert_same_run
from tests.tiers import examples

PATHS = ("plain", *(("compiled",) if driver.compiled() is not None else ()))
"""The kernel's paths (compiled with numba, the ``[fast]`` extra; skipped without it)."""


def assert_same_downstream(engine, kernel) -> None:
    """The two runs' downstream accounts agree: counts exactly, means and times to 1e-9."""
    a, b = engine.downstream, kernel.downstream
    if a is None or b is None:
        assert a is b
        return
    for name in ("requests", "served", "orphaned", "rejected"):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("queue_mean", "in_system_mean", "busy_mean", "end_s"):
        x, y = getattr(a, name), getattr(b, name)
        assert math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(x) and math.isnan(y))
    for name in ("sent_s", "start_s", "end_s", "abandoned_s"):
        np.testing.assert_allclose(getattr(a.log, name), getattr(b.log, name), 0, 1e-9)


def run_both(scenario: Scenario, replication: int = 0):
    """The engine's run and the kernel's on both paths, all three the same; the engine's."""
    assert unsupported(scenario) is None, unsupported(scenario)
    engine = simulate_once(scenario, replication, "asyncio")
    for path in PATHS:
        with kernel_path(path):
            kernel = simulate_once(scenario, replication, "kernel")
        assert_same_run(engine, kernel)
        assert_same_downstream(engine, kernel)
    return engine


# -- random scenarios -------------------------------------------------------------------------

ROUND_S = (0.0, 0.25, 0.5, 1.0)  # times that tie with each other and with the timeouts


@st.composite
def distributions(draw, means):
    kind = draw(st.sampled_from(["exponential", "gamma", "constant", "round"]))
    mean = draw(st.sampled_from(means))
    if kind == "exponential":
        return Exponential(mean=mean)
    if kind == "gamma":
        return Gamma(mean=mean, cv=0.5)
    if kind == "constant":
        return Constant(mean)
    return Empirical(ROUND_S)


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 40))
    kind = draw(st.sampled_from(["poisson", "fixed", "trace"]))
    if kind == "poisson":
        arrivals = Poisson(rate=draw(st.sampled_from([2.0, 9.5, 20.0])))
    elif kind == "fixed":
        arrivals = Deterministic(rate=draw(st.sampled_from([2.0, 4.0, 10.0])))
    else:
        times = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0]), min_size=n, max_size=n))
        arrivals = Trace(tuple(sorted(times)))
    downstream = None
    if draw(st.integers(0, 4)):  # mostly with a downstream; else a plain service sleep is cut
        downstream = Downstream(
            concurrency=draw(st.integers(1, 4)),
            service=draw(distributions([0.1, 0.25, 0.5])),
            queue_maxsize=draw(st.sampled_from([None, 1, 3, 10])),
        )
    service = None
    if downstream is None or draw(st.booleans()):
        service = draw(distributions([0.05, 0.25, 0.5] if downstream else [0.25, 0.5, 1.0]))
    retry = draw(st.sampled_from([RetryPolicy(), RetryPolicy(retry_on=(TimeoutError,))]))
    config = PipelineConfig(
        concurrency=draw(st.integers(1, 6)),
        queue_maxsize=draw(st.sampled_from([None, 2, 10])),
        on_full=draw(st.sampled_from(["block", "reject"])),
        attempt_timeout_s=draw(st.sampled_from([None, 0.1, 0.25, 0.5, 1.0][bool(service) :])),
        max_attempts=draw(st.integers(1, 4)),
        backoff=Backoff(
            base_s=draw(st.sampled_from([0.0, 0.05, 0.25])), jitter=draw(st.booleans())
        ),
        retry=retry,
        drain_timeout_s=draw(st.sampled_from([None, None, 0.0, 0.5, 2.0])),
    )
    faults = []
    if downstream is not None:
        for _ in range(draw(st.integers(0, 3))):
            faults.append(CapacityDrop(
                at_s=draw(st.sampled_from([0.0, 1.0, 2.5])),
                for_s=draw(st.sampled_from([0.5, 1.0, 3.0])),
                factor=draw(st.sampled_from([0.2, 0.5, 2.0])),
            ))  # fmt: skip
    if kind == "poisson" and draw(st.booleans()):
        faults.append(LoadSpike(at_s=1.0, for_s=2.0, factor=2.0))
    more = {"initial_backlog": draw(st.sampled_from([0, 0, 3])),
            "warmup_s": draw(st.sampled_from([0.0, 0.0, 0.5]))}  # fmt: skip
    if downstream is None:  # a plain service sleep, cut, and failures of every kind
        more["failures"] = draw(st.sampled_from([
            NoFailures(), IndependentFailures(p=0.2), PermanentFailures(fraction=0.3),
            ScriptedFailures(fails=(1, 2, 0, 3), permanent=(1,)),
            IndependentFailures(p=0.2) | PermanentFailures(fraction=0.2),
        ]))  # fmt: skip
        if draw(st.booleans()):
            times = draw(st.lists(st.sampled_from(ROUND_S), min_size=n + 3, max_size=n + 3))
            more["service"] = ServiceTrace(tuple(times))
    return Scenario(arrivals=arrivals, n_items=n, downstream=downstream, faults=tuple(faults),
                    config=config, seed=draw(st.integers(0, 999)),
                    **{"service": service, **more})  # fmt: skip


@settings(max_examples=examples(800), **SETTINGS)
@given(scenario=scenarios(), replication=st.integers(0, 2))
def test_kernel_equals_engine_with_a_downstream_timeouts_and_faults(scenario, replication):
    run_both(scenario, replication)


@settings(max_examples=examples(100), **SETTINGS)
@given(scenario=scenarios(), replication=st.integers(0, 2))
def test_tiny_arrays_that_grow_and_refill_give_the_same_run(scenario, replication):
    # The replay stops, grows its arrays and refills its draws many times in a run.
    engine = simulate_once(scenario, replication, "asyncio")
    with kernel_path("plain", block=1, log=1, heap=1, ready=1):
        kernel = simulate_once(scenario, replication, "kernel")
    assert_same_run(engine, kernel)
    assert_same_downstream(engine, kernel)


@settings(max_examples=examples(60), **SETTINGS)
@given(
    rate=st.floats(5.0, 12.0),
    servers=st.integers(1, 3),
    timeout=st.floats(0.2, 1.0),
    attempts=st.integers(1, 4),
    at=st.floats(0.0, 10.0),
    length=st.floats(1.0, 10.0),
    factor=st.floats(0.1, 0.9),
    seed=st.integers(0, 2**32 - 1),
)
def test_kernel_equals_engine_through_a_capacity_drop(rate, servers, timeout, attempts, at,
                                                      length, factor, seed):  # fmt: skip
    # Metafor's loop in small: a drop that may leave retries of cut attempts feeding on
    # themselves, two overlapping drops multiplying, and a queue of 100 in front.
    run_both(Scenario(
        arrivals=Poisson(rate=rate), service=None, n_items=150, seed=seed,
        downstream=Downstream(concurrency=servers, service=Exponential(mean=0.1 * servers),
                              queue_maxsize=100),
        faults=(CapacityDrop(at_s=at, for_s=length, factor=factor),
                CapacityDrop(at_s=at + length / 2, for_s=length, factor=0.5)),
        config=PipelineConfig(concurrency=64, attempt_timeout_s=timeout, max_attempts=attempts,
                              backoff=Backoff(base_s=0.1, jitter=True), drain_timeout_s=5.0),
    ))  # fmt: skip


# -- the ties, one by one ---------------------------------------------------------------------


def downstream_run(times, service_s, *, client_s=None, servers=1, maxsize=None, **config):
    """Items arriving at ``times``; a downstream of constant service; the engine's run."""
    config.setdefault("drain_timeout_s", None)
    return run_both(Scenario(
        arrivals=Trace(tuple(times)), n_items=len(times),
        service=None if client_s is None else Constant(client_s),
        downstream=Downstream(concurrency=servers, service=Constant(service_s),
                              queue_maxsize=maxsize),
        config=PipelineConfig(**config),
    ))  # fmt: skip


def test_a_timeout_at_the_instant_the_answer_comes_cuts_the_attempt():
    # The timeout's timer is set before the call, so at equal times it fires first: the
    # request is served all the same, for nobody.
    run = downstream_run([0.0], 1.0, attempt_timeout_s=1.0, max_attempts=1)
    assert run.report.statistics.attempts_timed_out == 1
    assert (run.downstream.served, run.downstream.orphaned) == (1, 1)
    assert run.downstream.log.abandoned_s.tolist() == [1.0]


def test_a_cut_request_keeps_its_server_and_the_queue_behind_it_waits():
    run = downstream_run([0.0, 0.0, 0.0], 1.0, attempt_timeout_s=0.5, max_attempts=2,
                         concurrency=3, backoff=Backoff(base_s=0.25))  # fmt: skip
    # six requests sent, one served (its caller long gone) when the run ends at 1.25 s
    assert (run.downstream.requests, run.downstream.served, run.downstream.orphaned) == (6, 1, 1)
    assert run.summary["items_dead_lettered"] == 3


def test_a_timeout_at_the_instant_the_client_side_time_ends_cuts_before_the_call():
    run = downstream_run([0.0, 0.5], 0.25, client_s=0.5, attempt_timeout_s=0.5, max_attempts=2)
    assert run.downstream.requests == 0


def test_a_zero_client_side_time_is_a_turn_of_the_loop_not_a_timer():
    downstream_run([0.0, 0.0, 0.25], 0.25, client_s=0.0, attempt_timeout_s=0.25, concurrency=2)


def test_a_full_downstream_fails_attempts_at_once_one_after_another():
    # One server, a queue of one: a burst fails most attempts at the instant they start,
    # a worker taking its next item in the same step.
    run = downstream_run(
        [0.0] * 6,
        0.5,
        maxsize=1,
        concurrency=6,
        queue_maxsize=None,
        attempt_timeout_s=1.0,
        max_attempts=3,
        backoff=Backoff(base_s=0.5),
    )
    assert run.downstream.rejected > 0


def test_timeouts_tie_with_arrivals_retries_and_the_drain_deadline():
    # Constant times on a quarter-second grid: timeouts, answers, arrivals, readmissions
    # and the drain's deadline all fall on the same instants.
    downstream_run([0.0, 0.25, 0.5, 0.5, 0.75, 1.0], 0.25, servers=2, concurrency=2,
                   attempt_timeout_s=0.5, max_attempts=4, backoff=Backoff(base_s=0.25),
                   drain_timeout_s=0.5)  # fmt: skip


def test_requests_still_awaited_at_a_drain_timeout_are_given_up_then():
    run = downstream_run([0.0, 0.0], 2.0, concurrency=2, drain_timeout_s=1.0)
    assert run.report.drain_timed_out
    assert run.downstream.log.abandoned_s.tolist()[:1] == [1.0]


def test_a_plain_service_sleep_cut_at_its_own_end_times_out():
    run = run_both(Scenario(
        arrivals=Trace((0.0, 0.5, 0.5)), service=Constant(0.5), n_items=3,
        config=PipelineConfig(attempt_timeout_s=0.5, max_attempts=2, drain_timeout_s=None),
    ))  # fmt: skip
    assert run.report.statistics.attempts_timed_out == 6
    assert [letter.errors[0].type for letter in run.report.dead_letters] == ["TimeoutError"] * 3


@pytest.mark.parametrize(("factor", "end_s"), [(0.25, 1.75), (4.0, 0.625)])
def test_a_capacity_drop_over_work_in_progress_moves_its_end(factor, end_s):
    # 1 s of work from 0 s: half of it before the drop at 0.5 s, the rest at the drop's speed
    # (0.25: a quarter of it by 1.5 s, the last quarter after).
    run = run_both(Scenario(
        arrivals=Trace((0.0,)), service=None, n_items=1,
        downstream=Downstream(concurrency=1, service=Constant(1.0)),
        faults=(CapacityDrop(at_s=0.5, for_s=1.0, factor=factor),),
        config=PipelineConfig(drain_timeout_s=None),
    ))  # fmt: skip
    assert run.downstream.log.end_s.tolist() == [end_s]


def test_a_summary_of_a_few_keys_reads_the_downstreams_account_on_the_kernel():
    from pipeline.sim.running.single import summary_once

    scenario = Scenario(
        arrivals=Poisson(rate=9.5), service=None, n_items=300, seed=3,
        downstream=Downstream(concurrency=1, service=Exponential(mean=0.1), queue_maxsize=10),
        faults=(CapacityDrop(at_s=5.0, for_s=5.0, factor=0.2),),
        config=PipelineConfig(attempt_timeout_s=1.0, max_attempts=3, concurrency=50),
    )  # fmt: skip
    keys = frozenset({"goodput_per_s", "recovered", "downstream_orphaned", "downstream_queue_mean"})
    engine = summary_once(scenario, 0, "asyncio", keys)
    kernel = summary_once(scenario, 0, "auto", keys)
    assert kernel["engine"] == "kernel"
    for key in keys:
        assert kernel[key] == pytest.approx(engine[key], rel=1e-9), key


@st.composite
def timed_chains(draw):
    """A random chain of ``test_kernel_chain_equality.py`` with attempt timeouts at some stages."""
    scenario = draw(chains())
    stages = [
        dataclasses.replace(spec, config=dataclasses.replace(
            spec.config, attempt_timeout_s=draw(st.sampled_from([None, 0.25, 0.5, 1.0, 2.5]))
        ))
        for spec in scenario.stages
    ]  # fmt: skip
    return scenario.replace(stages=stages)


@settings(max_examples=examples(200), **SETTINGS)
@given(scenario=timed_chains(), replication=st.integers(0, 3))
def test_kernel_equals_engine_on_random_chains_with_attempt_timeouts(scenario, replication):
    assert_chain_agrees(scenario, replication)
