"""The kernel runs chains as the engine does: item by item, stage by stage, on random chains.

The asyncio engine (the real :class:`~pipeline.Chain` on the virtual clock)
is the reference; the kernel's chain path is its fast path. Hypothesis draws
chains of two to four stages inside the kernel's domain -- every kind of
service time (round ones and zero, so that events tie), concurrency 1 to 4,
fan-out 1 to 3, tiny, larger and unbounded queues, block and reject, failures
with retries, backoff with and without jitter, and drain timeouts from none to
small, with and without an initial backlog at the first stage -- and each one is
run by both. Every stage's ``items`` and
``timeseries`` must agree to 1e-9 s, every count exactly, every summary key
(except the wall time and the ``engine`` key), the stage reports (dead letters
and their errors, hand-offs, blocked time) and the chain's own summary,
``items``, ``timeseries`` and report. A mismatch is a bug in one of the two.

The kernel replays a chain with its one replay (``kernel/replay.py``), run as
plain Python or compiled by numba (the ``[fast]`` extra; skipped without it).
Every kernel run here is played on each path and each must give the engine's run.

A drain that runs into its ``drain_timeout_s`` is outside the chain path's
domain: the kernel then declines (``auto`` runs the engine, ``kernel``
refuses in one line), and every such decline must be one the engine confirms.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PipelineConfig, RateLimit, RetryPolicy
from pipeline.events import EventKind
from pipeline.sim import (
    Constant,
    Empirical,
    Exponential,
    IndependentFailures,
    LogNormal,
    NoFailures,
    PermanentFailures,
    Poisson,
    Scenario,
    ScriptedFailures,
    StageSpec,
    Trace,
    simulate,
)
from pipeline.sim.running.engine_choice import unsupported
from pipeline.sim.running.kernel import driver
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.single import simulate_once
from pipeline.sim.workloads.arrivals import Deterministic
from pipeline.sim.workloads.distributions import Uniform
from pipeline.sim.workloads.failures import Hangs
from pipeline.sim.workloads.traces.service import ServiceTrace
from tests.tiers import examples

TOLERANCE_S = 1e-9
ROUND_S = [0.0, 0.25, 0.5, 1.0, 2.0]  # service times that tie with arrivals and each other


def _close(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, int | str):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=TOLERANCE_S, abs_tol=TOLERANCE_S)
    return a == b


def _same_frames(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=0, atol=TOLERANCE_S)


def _same_summary(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key, value in a.items():
        if key not in ("wall_time_s", "engine"):
            assert _close(value, b[key]), (key, value, b[key])


def _same_letters(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.payload, x.attempts, x.reason) == (y.payload, y.attempts, y.reason)
        assert [(e.attempt, e.type, e.message) for e in x.errors] == [
            (e.attempt, e.type, e.message) for e in y.errors
        ]
        assert all(_close(e.at_s, f.at_s) for e, f in zip(x.errors, y.errors, strict=True))


def _same_stage_report(e, k) -> None:
    for name in ("offered", "admitted", "completed", "attempts", "drain_timed_out", "name"):
        assert getattr(e, name) == getattr(k, name), name
    for name in ("outputs", "handed_on", "batches", "results_dropped", "results_waiting"):
        assert getattr(e, name) == getattr(k, name), name
    for name in ("started_s", "finished_s", "hand_off_blocked_s"):
        assert _close(getattr(e, name), getattr(k, name)), (name, getattr(e, name))
    assert e.unfinished == k.unfinished and e.stranded == k.stranded
    assert e.abandoned == k.abandoned
    assert len(e.shed) == len(k.shed) and e.shed == k.shed
    _same_letters(e.dead_letters, k.dead_letters)
    for field in fields(e.statistics):
        assert _close(getattr(e.statistics, field.name), getattr(k.statistics, field.name)), (
            field.name
        )


PATHS = ("plain", *(("compiled",) if driver.compiled() is not None else ()))


@contextlib.contextmanager
def chain_path(path: str):
    """Run the kernel's chains on ``path`` (see :mod:`pipeline.sim.running.kernel.paths`)."""
    with kernel_path(path):
        yield


def kernel_runs(scenario: Scenario, replication: int) -> list:
    """The kernel's run of ``scenario`` on every path (the plain one first)."""
    runs = []
    for path in PATHS:
        with chain_path(path):
            runs.append(simulate_once(scenario, replication, "kernel"))
    return runs


def test_the_compiled_path_is_tested_when_numba_is_installed():
    if "compiled" not in PATHS:
        pytest.skip("numba is not installed: pip install 'pipeline-lab[fast]' to test that path")
    assert driver.compiled() is not None


def assert_same_chain_run(engine, kernel) -> None:
    """Everything a caller can read from two chain results agrees (times to 1e-9 s)."""
    assert engine.summary["engine"] == "asyncio" and kernel.summary["engine"] == "kernel"
    assert list(engine.stages) == list(kernel.stages)
    for name, e in engine.stages.items():
        k = kernel.stages[name]
        assert k.summary["engine"] == "kernel"
        _same_frames(e.items, k.items)
        _same_frames(e.timeseries, k.timeseries)
        _same_summary(e.summary, k.summary)
        _same_stage_report(e.report, k.report)
    _same_summary(engine.summary, kernel.summary)
    _same_frames(engine.items, kernel.items)
    _same_frames(engine.timeseries, kernel.timeseries)
    e, k = engine.report, kernel.report
    for name in ("offered", "completed", "drain_timed_out"):
        assert getattr(e, name) == getattr(k, name), name
    assert _close(e.started_s, k.started_s) and _close(e.finished_s, k.finished_s)
    assert k.balanced


def assert_kernel_agrees(scenario: Scenario, replication: int = 0) -> None:
    """Kernel and engine agree, or the kernel declined a drain the engine saw time out."""
    assert unsupported(scenario) is None, unsupported(scenario)
    engine = simulate_once(scenario, replication, "asyncio")
    try:
        kernels = kernel_runs(scenario, replication)
    except ValueError as declined:
        assert "drain" in str(declined) and "\n" not in str(declined)
        event("declined: the drain reached its timeout")
        if not engine.report.drain_timed_out:
            # Declined although the engine finished in time: something settled at the very
            # deadline, where only the engine's turn order decides. The decline may cost
            # time, never a result: without the timeout the kernel gives the engine's run.
            event("declined at a tie with the deadline")
            for kernel in kernel_runs(_no_drain_limit(scenario), replication):
                assert_same_chain_run(engine, kernel)
        for path in PATHS:  # the first path to decline raised: every path declines
            with chain_path(path), pytest.raises(ValueError, match="drain"):
                simulate_once(scenario, replication, "kernel")
        return
    for kernel in kernels:
        assert_same_chain_run(engine, kernel)
    event("kernel ran it")
    s = engine.summary
    for key in ("items_shed", "items_dead_lettered"):
        event(f"{key} > 0: {s[key] > 0}")
    blocked = any(stage.hand_off_blocked_s > 0 for stage in engine.report.stages.values())
    event(f"a hand-off blocked: {blocked}")
    event(f"retries: {sum(r.summary['retries_total'] for r in engine.stages.values()) > 0}")


def _no_drain_limit(scenario: Scenario) -> Scenario:
    """The same chain drained for as long as it takes (its first stage's timeout is the chain's)."""
    head, *rest = scenario.stages
    return scenario.replace(
        stages=[
            dataclasses.replace(
                head, config=dataclasses.replace(head.config, drain_timeout_s=None)
            ),
            *rest,
        ]
    )


# -- strategies ---------------------------------------------------------------------------


@st.composite
def arrivals(draw, n: int):
    kind = draw(st.sampled_from(["poisson", "constant", "trace"]))
    if kind == "poisson":
        return Poisson(rate=draw(st.floats(0.2, 20.0)))
    if kind == "constant":
        return Deterministic(rate=draw(st.sampled_from([0.5, 1.0, 2.0, 4.0])))
    gaps = draw(
        st.lists(
            st.one_of(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0]), st.floats(0.0, 3.0)),
            min_size=max(n, 1),
            max_size=max(n, 1),
        )
    )
    return Trace(np.cumsum(gaps))


@st.composite
def service(draw, reaching: int):
    kinds = ["exponential", "constant", "uniform", "lognormal", "empirical", "trace"]
    kind = draw(st.sampled_from(kinds))
    if kind == "exponential":
        return Exponential(mean=draw(st.floats(0.1, 3.0)))
    if kind == "constant":
        return Constant(draw(st.sampled_from(ROUND_S)))
    if kind == "uniform":
        return Uniform(0.0, draw(st.floats(0.1, 3.0)))
    if kind == "lognormal":
        return LogNormal(mean=draw(st.floats(0.1, 3.0)), cv=draw(st.floats(0.2, 3.0)))
    if kind == "empirical":
        return Empirical(tuple(draw(st.lists(st.sampled_from(ROUND_S), min_size=1, max_size=4))))
    times = draw(st.lists(st.sampled_from([*ROUND_S, 3.0]), min_size=reaching, max_size=reaching))
    return ServiceTrace(tuple(times) if times else (1.0,))


@st.composite
def failures(draw, reaching: int):
    kind = draw(st.sampled_from(["none", "none", "independent", "permanent", "scripted"]))
    if kind == "none":
        return NoFailures()
    if kind == "independent":
        return IndependentFailures(draw(st.sampled_from([0.1, 0.3, 0.5])))
    if kind == "permanent":
        return PermanentFailures(draw(st.sampled_from([0.2, 0.5])))
    fails = draw(st.lists(st.integers(0, 2), min_size=reaching, max_size=reaching))
    return ScriptedFailures(tuple(fails))


@st.composite
def backoffs(draw):
    kind = draw(st.sampled_from(["none", "constant", "exponential"]))
    jitter = draw(st.booleans())
    if kind == "none":
        return Backoff.none()
    if kind == "constant":
        return Backoff.constant(draw(st.sampled_from([0.0, 0.25, 1.0])), jitter=jitter)
    return Backoff(base_s=draw(st.sampled_from([0.1, 0.5])), factor=2.0, cap_s=4.0, jitter=jitter)


@st.composite
def stage_specs(draw, number: int, reaching: int, drain_timeout_s):
    config = PipelineConfig(
        concurrency=draw(st.integers(1, 4)),
        queue_maxsize=draw(st.sampled_from([None, 1, 1, 2, 3, 5, 100])),
        on_full=draw(st.sampled_from(["block", "block", "block", "reject"])),
        max_attempts=draw(st.integers(1, 3)),
        backoff=draw(backoffs()),
        drain_timeout_s=drain_timeout_s if number == 0 else draw(st.sampled_from([None, 0.0])),
        keep_shed=draw(st.sampled_from([None, 0, 2])),
        retry=draw(st.sampled_from([RetryPolicy(), RetryPolicy(give_up_on=())])),
    )
    return StageSpec(
        name=f"s{number}",
        service=draw(service(reaching)),
        config=config,
        fan_out=draw(st.sampled_from([1, 1, 2, 3])),
        failures=draw(failures(reaching)),
    )


@st.composite
def chains(draw):
    """A chain inside the kernel's domain: 2 to 4 stages, at most 40 source items."""
    n = draw(st.integers(0, 40))
    process = draw(arrivals(n))
    if isinstance(process, Trace):
        n = min(n, len(process))
    drain = draw(st.one_of(st.none(), st.sampled_from([0.0, 1.0, 30.0]), st.floats(0.0, 40.0)))
    stages, reaching = [], n
    for number in range(draw(st.integers(2, 4))):
        spec = draw(stage_specs(number, reaching, drain))
        stages.append(spec)
        reaching *= spec.fan_out
    return Scenario(
        arrivals=process,
        stages=stages,
        n_items=n,
        seed=draw(st.integers(0, 2**32 - 1)),
        warmup_s=draw(st.sampled_from([0.0, 0.0, 1.0, 4.5])),
        item_size_bytes=draw(st.sampled_from([0, 1, 1024])),
    )


SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.mark.slow
@settings(max_examples=300, **SETTINGS)
@given(scenario=chains(), replication=st.integers(0, 3))
def test_kernel_equals_engine_on_random_chains(scenario, replication):
    assert_kernel_agrees(scenario, replication)


@settings(max_examples=examples(100), **SETTINGS)
@given(
    rate=st.floats(0.5, 6.0),
    means=st.lists(st.floats(0.1, 2.0), min_size=3, max_size=3),
    concurrency=st.lists(st.integers(1, 4), min_size=3, max_size=3),
    maxsize=st.lists(st.sampled_from([None, 1, 2, 4]), min_size=3, max_size=3),
    fan_out=st.sampled_from([1, 2, 4]),
    n=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_kernel_equals_engine_on_continuous_tandem_lines(
    rate, means, concurrency, maxsize, fan_out, n, seed
):
    # Continuous service times, blocking after service between bounded stages, no drain limit.
    scenario = Scenario(
        arrivals=Poisson(rate=rate),
        stages=[
            StageSpec(
                name=f"s{k}",
                service=LogNormal(mean=means[k], cv=1.5),
                config=PipelineConfig(
                    concurrency=concurrency[k], queue_maxsize=maxsize[k], drain_timeout_s=None
                ),
                fan_out=fan_out if k == 0 else 1,
            )
            for k in range(3)
        ],
        n_items=n,
        seed=seed,
    )
    assert_kernel_agrees(scenario)


# -- the tie rules of a chain, one by one ----------------------------------------------------


def run_both(scenario: Scenario):
    engine = simulate_once(scenario, 0, "asyncio")
    kernels = kernel_runs(scenario, 0)
    for kernel in kernels:
        assert_same_chain_run(engine, kernel)
    return kernels[0]


def line(times, *stages, drain_timeout_s=None):
    """A chain fed by a trace; each stage is (service times, config keywords, fan_out)."""
    specs = []
    for number, (service_s, config, fan_out) in enumerate(stages):
        config = {"drain_timeout_s": drain_timeout_s if number == 0 else None, **config}
        specs.append(
            StageSpec(
                name=f"s{number}",
                service=ServiceTrace(tuple(service_s)),
                config=PipelineConfig(**config),
                fan_out=fan_out,
            )
        )
    return Scenario(arrivals=Trace(times), stages=specs, n_items=len(times))


def test_a_blocked_hand_off_waits_for_a_slot_and_holds_its_worker():
    # s1 has one worker and room for one item. Item 2 finishes s0 at 3.0 and waits, holding
    # s0's only worker, until s1 takes item 1 at 6.0; so s0 starts item 3 only at 6.0, and
    # item 3 waits in turn from 7.0 until s1 takes item 2 at 11.0.
    result = run_both(
        line(
            [0.0, 0.0, 0.0, 0.0],
            ([1.0] * 4, {"concurrency": 1}, 1),
            ([5.0] * 4, {"concurrency": 1, "queue_maxsize": 1}, 1),
        )
    )
    s0, s1 = result.stages["s0"].items, result.stages["s1"].items
    assert s0["start_s"].tolist() == [0.0, 1.0, 2.0, 6.0]
    assert s0["finish_s"].tolist() == [1.0, 2.0, 3.0, 7.0]
    assert s1["admitted_s"].tolist() == [1.0, 2.0, 6.0, 11.0]
    assert s1["start_s"].tolist() == [1.0, 6.0, 11.0, 16.0]
    assert result.report.stages["s0"].hand_off_blocked_s == pytest.approx(3.0 + 4.0)


def test_fan_out_children_arrive_together_and_idle_workers_take_them_in_order():
    result = run_both(
        line(
            [0.0, 0.5],
            ([1.0, 1.0], {"concurrency": 1}, 3),
            ([2.0, 1.0, 0.5, 1.0, 1.0, 1.0], {"concurrency": 2, "queue_maxsize": 2}, 1),
        )
    )
    s1 = result.stages["s1"].items
    assert s1["arrival_s"].tolist() == [1.0] * 3 + [2.0] * 3
    assert s1["start_s"].tolist()[:3] == [1.0, 1.0, 2.0]


def test_a_full_reject_stage_sheds_what_is_handed_to_it():
    result = run_both(
        line(
            [0.0, 0.0, 0.0],
            ([0.0, 0.0, 0.0], {"concurrency": 3}, 1),
            ([1.0, 1.0, 1.0], {"concurrency": 1, "queue_maxsize": 1, "on_full": "reject"}, 1),
        )
    )
    outcomes = result.stages["s1"].items["outcome"].tolist()
    assert outcomes.count("shed") >= 1 and outcomes.count("completed") >= 1


@pytest.mark.parametrize("maxsize", [1, 2, None])
def test_children_handed_to_a_reject_stage_are_judged_after_idle_workers_took_the_ones_before(
    maxsize,
):
    # Page 0 finishes at 1.0 into 5 records, page 1 at 4.0 into 5 more; s1 has 3 idle workers
    # each time. One turn after each record an idle worker has taken it, so a page sheds only
    # what exceeds queue_maxsize + 3: with a queue of one, record 4 of each page.
    result = run_both(
        line(
            [0.0, 0.0],
            ([1.0, 3.0], {"concurrency": 1}, 5),
            ([1.0] * 10, {"concurrency": 3, "queue_maxsize": maxsize, "on_full": "reject"}, 1),
        )
    )
    s1 = result.stages["s1"].items
    room = math.inf if maxsize is None else maxsize + 3
    shed = [item for item in range(10) if item % 5 >= room]
    assert s1.index[s1["outcome"] == "shed"].tolist() == shed
    assert s1["start_s"].tolist()[:3] == [1.0, 1.0, 1.0]


def test_a_hand_off_into_an_unbounded_stage_gives_a_turn_after_each_child_on_both_engines():
    result = run_both(
        line(
            [0.0, 0.0, 0.0],
            ([0.0, 0.0, 0.0], {"concurrency": 3}, 4),
            ([0.5] * 12, {"concurrency": 2, "queue_maxsize": None}, 1),
        )
    )
    assert result.stages["s1"].summary["items_completed"] == 12


# -- the domain: refusals and the fallback ---------------------------------------------------


def tandem(**first):
    return Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.4), config=PipelineConfig(**first)),
            StageSpec(name="write", service=Exponential(mean=0.3)),
        ],
        n_items=40,
        seed=2,
    )


OUTSIDE = [
    (tandem(rate_limit=RateLimit(requests_per_minute=60)), "stage 'fetch': rate limits"),
    (tandem(max_wait_s=2.0), "stage 'fetch': deadlines"),
    (
        tandem().replace(
            stages=[
                StageSpec(name="a", service=Constant(1.0), failures=Hangs(p=0.1, hang_s=5.0)),
                StageSpec(name="b", service=Constant(1.0)),
            ]
        ),
        "stage 'a': hangs",
    ),
]


@pytest.mark.parametrize(("scenario", "feature"), OUTSIDE)
def test_kernel_refuses_a_chain_outside_its_domain_in_one_line(scenario, feature):
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support ") as caught:
        simulate(scenario, engine="kernel")
    assert feature in str(caught.value) and "\n" not in str(caught.value)
    assert simulate(scenario).summary["engine"] == "asyncio"


def test_a_drain_that_times_out_is_declined_and_auto_runs_the_engine():
    # One item that takes 10 s at the tail; the chain drains within 1 s of intake stopping.
    scenario = line(
        [0.0],
        ([1.0], {"concurrency": 1}, 1),
        ([10.0], {"concurrency": 1}, 1),
        drain_timeout_s=1.0,
    )
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support .*drain") as caught:
        simulate(scenario, engine="kernel")
    assert "\n" not in str(caught.value)
    with pytest.warns(UserWarning, match="drain timed out"):
        result = simulate(scenario)
    assert result.summary["engine"] == "asyncio" and result.summary["drain_timed_out"] is True


def test_auto_runs_a_chain_inside_the_domain_on_the_kernel():
    assert simulate(tandem()).summary["engine"] == "kernel"
    assert simulate(tandem(), engine="asyncio").summary["engine"] == "asyncio"


def test_an_empty_source_gives_the_same_empty_chain_run():
    result = run_both(tandem().replace(n_items=0))
    assert result.summary["items_offered"] == 0 and result.report.finished_s == 0.0


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_stage_trace_too_short_is_the_same_one_line_error_on_both_engines(engine):
    # Two items fan out into four at s1, whose trace has three times.
    scenario = line([0.0, 1.0], ([1.0, 1.0], {}, 2), ([1.0, 1.0, 1.0], {}, 1))
    with pytest.raises(ValueError, match=r"^stage 's1': the service trace has 3 times but 4 items"):
        simulate(scenario, engine=engine)


@st.composite
def backlogged_chains(draw):
    """A random chain with items waiting at its first stage at time 0."""
    scenario = draw(chains())
    backlog = draw(st.sampled_from([1, 2, 5, 12, 30]))
    head = scenario.stages[0].config
    if head.on_full == "reject" and head.queue_maxsize is not None:
        backlog = min(backlog, head.queue_maxsize + head.concurrency)
    stages, reaching = [], scenario.n_items + backlog
    for spec in scenario.stages:
        if isinstance(spec.service, ServiceTrace):
            # Indexed by the stage's item ids: long enough for every item that may reach it.
            times = spec.service.times_s
            spec = dataclasses.replace(
                spec, service=ServiceTrace(tuple(times[i % len(times)] for i in range(reaching)))
            )
        stages.append(spec)
        reaching *= spec.fan_out
    return scenario.replace(stages=stages, initial_backlog=backlog)


@settings(max_examples=examples(150), **SETTINGS)
@given(scenario=backlogged_chains(), replication=st.integers(0, 3))
def test_kernel_equals_engine_on_random_chains_with_an_initial_backlog(scenario, replication):
    assert_kernel_agrees(scenario, replication)


# -- the array replay's own machinery: refills, growth, and which path auto takes ------------


@contextlib.contextmanager
def tiny_sizes():
    """Three draws per refill, and a log, heap and ready ring that start at one entry."""
    with kernel_path(block=3, log=1, heap=1, ready=1):
        yield


@settings(max_examples=examples(60), **SETTINGS)
@given(scenario=chains(), replication=st.integers(0, 3))
def test_the_array_replay_refills_and_grows_its_arrays_as_it_goes(scenario, replication):
    # Every block of draws runs out after three values and every array starts too small, so
    # the replay stops and resumes many times in a run: the runs must still be the engine's.
    with tiny_sizes():
        assert_kernel_agrees(scenario, replication)


def test_a_long_retrying_chain_is_the_same_on_every_path():
    # Enough retries to use several blocks of each stream (failures, retry times, jitter).
    scenario = Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(
                name="page",
                service=Exponential(mean=0.4),
                config=PipelineConfig(concurrency=2, queue_maxsize=5),
                fan_out=3,
            ),
            StageSpec(
                name="record",
                service=Exponential(mean=0.2),
                config=PipelineConfig(
                    concurrency=3,
                    queue_maxsize=None,
                    max_attempts=4,
                    backoff=Backoff(base_s=0.2, jitter=True),
                ),
                failures=IndependentFailures(0.4),
            ),
            StageSpec(
                name="write",
                service=Exponential(mean=0.1),
                config=PipelineConfig(concurrency=1, queue_maxsize=2),
                failures=PermanentFailures(0.05),
            ),
        ],
        n_items=600,
        seed=11,
    )
    with kernel_path(block=512):
        kernel = run_both(scenario)
    record = kernel.stages["record"].summary
    # blocks of 512 draws: several of failures, more than one of retry times and jitter
    assert record["retries_total"] > 512 and kernel.report.stages["record"].attempts > 3 * 512
    assert kernel.stages["write"].summary["items_dead_lettered"] > 0


@pytest.mark.parametrize("path", PATHS)
def test_every_stage_log_of_a_kernel_chain_is_in_time_order(path):
    # The compiled path merges each stage's log with its arrivals (no sort): the log must be
    # in time order, the intake-closed event too (the head closes while it still works).
    from pipeline.sim.running.kernel.run import run_chain_kernel

    with kernel_path(path):
        _, _, recorders, _ = run_chain_kernel(tandem().replace(n_items=200), 0)
    for recorder in recorders:
        kinds, times, _ = recorder.arrays()
        assert (np.diff(times) >= 0).all()
        assert (kinds == EventKind.INTAKE_CLOSED).sum() == 1


@pytest.mark.parametrize("path", PATHS)
def test_combined_failure_models_run_on_every_path(path):
    # A combination's parts each see every attempt (each draws from its own stream); the
    # first that fails it decides, and the dead letters name that part's errors.
    combined = tandem().replace(n_items=30)
    combined = combined.replace(
        stages=[
            dataclasses.replace(
                combined.stages[0],
                config=PipelineConfig(max_attempts=3),
                failures=IndependentFailures(0.3) | PermanentFailures(0.2),
            ),
            combined.stages[1],
        ]
    )
    with kernel_path(path):
        kernel = simulate_once(combined, 0, "kernel")
    assert kernel.stages[combined.stages[0].name].summary["items_dead_lettered"] > 0
    assert_same_chain_run(simulate_once(combined, 0, "asyncio"), kernel)


def test_auto_loads_numba_only_for_work_worth_it(monkeypatch):
    monkeypatch.setattr(driver, "_COMPILED", {})
    monkeypatch.setattr(driver, "_SEEN", [0])
    short = driver.LOAD_AFTER_ITEMS // 4
    assert not driver.take_compiled(short)  # a short run pays nothing
    assert not driver.take_compiled(10)
    if driver.compiled() is None:
        assert not driver.take_compiled(driver.LOAD_AFTER_ITEMS)
        pytest.skip("numba is not installed: pip install 'pipeline-lab[fast]' to test loading it")
    monkeypatch.setattr(driver, "_COMPILED", {})
    # with the runs of this process so far, this one passes the mark: it loads numba
    assert driver.take_compiled(3 * short)
    monkeypatch.setattr(driver, "_SEEN", [0])
    assert driver.take_compiled(driver.LOAD_AFTER_ITEMS)  # loaded: one long run, or ...
    assert driver.take_compiled(10)  # ... even a short one, compiled from now on
    monkeypatch.setattr(driver, "_COMPILED", {})
    monkeypatch.setattr(driver, "_SEEN", [0])
    assert driver.take_compiled(driver.LOAD_AFTER_ITEMS)  # one long run loads it at once
