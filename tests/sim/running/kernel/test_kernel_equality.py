"""The kernel computes what the asyncio engine computes: item by item, on random scenarios.

The asyncio engine is the reference semantics; the kernel is its fast path.
Hypothesis draws scenarios inside the kernel's declared domain -- every kind of
arrival process, traces with bursts of equal arrival times, continuous and
discrete service times (zero included, so that events tie), tiny and unbounded
queues, block and reject, failures, retry budgets, backoff with and without
jitter, drain timeouts of 0, None and in between, warm-up and item size -- and
each one is run by both, also with an initial backlog (items waiting at time
0, ahead of the arrivals: a burst that ties with everything). Every column of
``items`` and ``timeseries`` must agree to 1e-9 s, every count exactly, every
summary key (except the wall time and the ``engine`` key) and the report, dead
letters and their errors included. A mismatch is a bug in one of the two; it
is never a tolerance to widen.

The examples are derandomized (the same ones on every run, like the fixed
seeds of the statistical tests) and small (at most 60 items, and a backlog of
at most 45), so the five property tests (3,600 scenarios together) take about
a minute or two.
"""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PipelineConfig, RateLimit, RetryPolicy
from pipeline.sim import (
    Constant,
    Empirical,
    Exponential,
    Gamma,
    IndependentFailures,
    LogNormal,
    NoFailures,
    OnOff,
    Overload,
    PermanentFailures,
    Poisson,
    Scenario,
    ScriptedFailures,
    TimeVarying,
    TokenQuota,
    Trace,
    simulate,
)
from pipeline.sim.analysis.sweep import simulate_replication, sweep
from pipeline.sim.running.engine_choice import unsupported
from pipeline.sim.running.single import simulate_once
from pipeline.sim.workloads.arrivals import Deterministic, MarkovModulated
from pipeline.sim.workloads.distributions import Uniform
from pipeline.sim.workloads.failures import CombinedFailures, Hangs
from pipeline.sim.workloads.traces.service import ServiceTrace
from tests.tiers import examples

TOLERANCE_S = 1e-9

# -- comparing two runs -------------------------------------------------------------------


def _close(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, int | str):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=TOLERANCE_S, abs_tol=TOLERANCE_S)
    return a == b


def assert_same_run(engine, kernel) -> None:
    """Everything a caller can read from the two results agrees (times to 1e-9 s)."""
    assert engine.summary["engine"] == "asyncio" and kernel.summary["engine"] == "kernel"
    pd.testing.assert_frame_equal(
        engine.items, kernel.items, check_exact=False, rtol=0, atol=TOLERANCE_S
    )
    pd.testing.assert_frame_equal(
        engine.timeseries, kernel.timeseries, check_exact=False, rtol=0, atol=TOLERANCE_S
    )
    assert _close(engine.series.end_s, kernel.series.end_s)
    if kernel.columns.attempt_log is not None:  # the FCFS path keeps none (one attempt each)
        _same_attempts(engine.columns.attempt_log, kernel.columns.attempt_log)
    assert list(engine.summary) == list(kernel.summary)
    for key, value in engine.summary.items():
        if key in ("wall_time_s", "engine"):
            continue
        assert _close(value, kernel.summary[key]), (key, value, kernel.summary[key])
    e, k = engine.report, kernel.report
    for name in ("offered", "admitted", "completed", "attempts", "drain_timed_out"):
        assert getattr(e, name) == getattr(k, name), name
    assert _close(e.started_s, k.started_s) and _close(e.finished_s, k.finished_s)
    assert e.unfinished == k.unfinished and e.abandoned == k.abandoned
    assert len(e.shed) == len(k.shed) and e.shed == k.shed
    assert len(e.dead_letters) == len(k.dead_letters)
    for a, b in zip(e.dead_letters, k.dead_letters, strict=True):
        assert (a.payload, a.attempts, a.reason) == (b.payload, b.attempts, b.reason)
        assert [(x.attempt, x.type, x.message) for x in a.errors] == [
            (x.attempt, x.type, x.message) for x in b.errors
        ]
        assert all(_close(x.at_s, y.at_s) for x, y in zip(a.errors, b.errors, strict=True))
    for field in fields(e.statistics):
        assert _close(getattr(e.statistics, field.name), getattr(k.statistics, field.name)), (
            field.name
        )
    assert k.balanced


def _same_attempts(engine, kernel) -> None:
    """Two runs' attempt logs agree, attempt by attempt (the kernel's is paired when read)."""
    np.testing.assert_array_equal(engine.ending, kernel.ending)
    for name in ("start_s", "end_s"):
        np.testing.assert_allclose(getattr(engine, name), getattr(kernel, name), 0, TOLERANCE_S)
    if engine.readmitted_s is None or kernel.readmitted_s is None:
        assert engine.readmitted_s is kernel.readmitted_s
    else:
        np.testing.assert_allclose(engine.readmitted_s, kernel.readmitted_s, 0, TOLERANCE_S)


def assert_kernel_agrees(scenario: Scenario, replication: int = 0) -> None:
    assert unsupported(scenario) is None, unsupported(scenario)
    engine = simulate_once(scenario, replication, "asyncio")
    kernel = simulate_once(scenario, replication, "kernel")
    assert_same_run(engine, kernel)
    # What the examples covered (pytest --hypothesis-show-statistics).
    s = engine.summary
    event(f"fcfs path: {_fcfs_taken(scenario, replication)}")
    for key in ("items_shed", "items_dead_lettered", "retries_total", "items_unfinished"):
        event(f"{key} > 0: {s[key] > 0}")
    event(f"drain timed out: {s['drain_timed_out']}")
    event(f"producer blocked: {engine.report.statistics.producer_blocked_s > 0}")


def _fcfs_taken(scenario: Scenario, replication: int) -> bool:
    """Whether the kernel's FCFS path (not its event path) ran this scenario."""
    from pipeline.sim.running.kernel.fcfs import run_fcfs
    from pipeline.sim.running.kernel.run import never_fails
    from pipeline.sim.running.workload import Workload

    workload = Workload(scenario, replication)
    quiet = never_fails(scenario.failures, len(workload.arrival_s))
    if scenario.config.on_full != "block" or not quiet:
        return False
    return run_fcfs(workload.arrival_s, workload.first_attempt_s, scenario.config) is not None


# -- strategies ---------------------------------------------------------------------------

ROUND_S = [0.0, 0.25, 0.5, 1.0, 2.0]  # service times that tie with arrivals and each other


@st.composite
def arrivals(draw, n: int):
    kind = draw(st.sampled_from(["poisson", "constant", "onoff", "mmpp", "varying", "trace"]))
    if kind == "poisson":
        return Poisson(rate=draw(st.floats(0.2, 20.0)))
    if kind == "constant":
        return Deterministic(rate=draw(st.sampled_from([0.5, 1.0, 2.0, 4.0, 3.0])))
    if kind == "onoff":
        return OnOff(
            rate_on=draw(st.floats(1.0, 20.0)),
            rate_off=draw(st.sampled_from([0.0, 0.5])),
            mean_on_s=draw(st.floats(0.5, 5.0)),
            mean_off_s=draw(st.floats(0.5, 5.0)),
        )
    if kind == "mmpp":
        return MarkovModulated(rates=(0.5, 4.0, 12.0), mean_durations_s=(3.0, 2.0, 0.5))
    if kind == "varying":
        return TimeVarying.from_profile([0.0, 5.0, 15.0], [0.5, draw(st.floats(1.0, 10.0)), 1.0])
    # A recorded trace: bursts (gaps of 0) and round gaps that tie with service times.
    gaps = draw(
        st.lists(
            st.one_of(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 2.0]), st.floats(0.0, 3.0)),
            min_size=max(n, 1),
            max_size=max(n, 1),
        )
    )
    return Trace(np.cumsum(gaps))


@st.composite
def service(draw, n: int | None):
    """Service times; a :class:`ServiceTrace` of ``n`` times unless ``n`` is None."""
    kinds = ["exponential", "constant", "uniform", "lognormal", "gamma", "empirical"]
    kind = draw(st.sampled_from(kinds if n is None else [*kinds, "trace"]))
    if kind == "exponential":
        return Exponential(mean=draw(st.floats(0.1, 3.0)))
    if kind == "constant":
        return Constant(draw(st.sampled_from(ROUND_S)))
    if kind == "uniform":
        return Uniform(0.0, draw(st.floats(0.1, 3.0)))
    if kind == "lognormal":
        return LogNormal(mean=draw(st.floats(0.1, 3.0)), cv=draw(st.floats(0.2, 3.0)))
    if kind == "gamma":
        return Gamma(mean=draw(st.floats(0.1, 3.0)), cv=draw(st.floats(0.2, 3.0)))
    if kind == "empirical":
        return Empirical(tuple(draw(st.lists(st.sampled_from(ROUND_S), min_size=1, max_size=4))))
    return ServiceTrace(
        tuple(draw(st.lists(st.sampled_from([*ROUND_S, 3.0]), min_size=n, max_size=n)))
    )


@st.composite
def backoffs(draw):
    kind = draw(st.sampled_from(["none", "constant", "exponential"]))
    jitter = draw(st.booleans())
    if kind == "none":
        return Backoff.none()
    if kind == "constant":
        return Backoff.constant(draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.7])), jitter=jitter)
    return Backoff(
        kind="exponential",
        base_s=draw(st.sampled_from([0.0, 0.1, 0.5, 1.0])),
        factor=draw(st.sampled_from([1.0, 2.0, 3.0])),
        cap_s=draw(st.sampled_from([0.5, 2.0, 30.0])),
        jitter=jitter,
    )


@st.composite
def failures(draw, n: int):
    kind = draw(st.sampled_from(["none", "independent", "permanent", "scripted", "combined"]))
    if kind == "none":
        return NoFailures()
    if kind == "independent":
        return IndependentFailures(draw(st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.9, 1.0])))
    if kind == "permanent":
        return PermanentFailures(draw(st.sampled_from([0.0, 0.2, 0.5])))
    scripted = ScriptedFailures(())
    if n:
        fails = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        failing = [i for i, f in enumerate(fails) if f]
        permanent = draw(st.sets(st.sampled_from(failing))) if failing else set()
        scripted = ScriptedFailures(tuple(fails), frozenset(permanent))
    if kind == "scripted":
        return scripted
    return CombinedFailures(IndependentFailures(draw(st.sampled_from([0.1, 0.4]))), scripted)


@st.composite
def configs(draw, *, quiet: bool = False):
    return PipelineConfig(
        concurrency=draw(st.integers(1, 6)),
        queue_maxsize=draw(st.sampled_from([None, 1, 1, 2, 2, 3, 5, 10, 100])),
        on_full="block" if quiet else draw(st.sampled_from(["block", "reject"])),
        max_attempts=draw(st.integers(1, 4)),
        backoff=draw(backoffs()),
        drain_timeout_s=draw(
            st.one_of(
                st.none(),
                st.sampled_from([0, 0.0, 0.5, 1.0, 2.0, 30.0]),
                st.floats(0.0, 20.0),
            )
        ),
        keep_shed=draw(st.sampled_from([None, 0, 2, 1000])),
        retry=draw(st.sampled_from([RetryPolicy(), RetryPolicy(give_up_on=())])),
    )


@st.composite
def scenarios(draw, *, quiet: bool = False):
    """A scenario inside the kernel's domain; ``quiet``: no failures, blocking queue."""
    n = draw(st.integers(0, 60))
    process = draw(arrivals(n))
    if isinstance(process, Trace):
        n = min(n, len(process))
    length = {"n_items": n}
    if not isinstance(process, Trace) and draw(st.integers(0, 6)) == 0:
        length = {"duration_s": draw(st.sampled_from([3.0, 10.0]))}
    times = draw(service(n if "n_items" in length else None))
    model = NoFailures() if quiet or "duration_s" in length else draw(failures(n))
    return Scenario(
        arrivals=process,
        service=times,
        config=draw(configs(quiet=quiet)),
        failures=model,
        seed=draw(st.integers(0, 2**32 - 1)),
        warmup_s=draw(st.sampled_from([0.0, 0.0, 1.0, 4.5])),
        item_size_bytes=draw(st.sampled_from([0, 1, 1024, 2**32])),
        **length,
    )


SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.mark.slow
@settings(max_examples=1800, **SETTINGS)
@given(scenario=scenarios(), replication=st.integers(0, 3))
def test_kernel_equals_engine_on_random_scenarios(scenario, replication):
    assert_kernel_agrees(scenario, replication)


@pytest.mark.slow
@settings(max_examples=700, **SETTINGS)
@given(scenario=scenarios(quiet=True), replication=st.integers(0, 3))
def test_kernel_equals_engine_without_failures(scenario, replication):
    # Failure-free blocking runs: the FCFS recursion path when no events tie, else the event path.
    assert_kernel_agrees(scenario, replication)


@settings(max_examples=examples(400), **SETTINGS)
@given(
    rate=st.floats(0.5, 8.0),
    mean=st.floats(0.1, 2.0),
    concurrency=st.integers(1, 8),
    maxsize=st.sampled_from([None, 1, 2, 4, 50]),
    drain=st.one_of(st.none(), st.floats(0.01, 10.0)),
    n=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_kernel_equals_engine_on_continuous_traffic(rate, mean, concurrency, maxsize, drain, n,
                                                    seed):  # fmt: skip
    # Continuous distributions, so the FCFS path runs (and must cut off the drain right).
    scenario = Scenario(
        arrivals=Poisson(rate=rate),
        service=LogNormal(mean=mean, cv=1.5),
        config=PipelineConfig(
            concurrency=concurrency, queue_maxsize=maxsize, drain_timeout_s=drain
        ),
        n_items=n,
        seed=seed,
    )
    assert_kernel_agrees(scenario)


# -- the tie rules, one by one --------------------------------------------------------------


def run_both(scenario: Scenario):
    engine = simulate_once(scenario, 0, "asyncio")
    kernel = simulate_once(scenario, 0, "kernel")
    assert_same_run(engine, kernel)
    return kernel


def trace(times, service_s, **config):
    config.setdefault("drain_timeout_s", None)
    return Scenario(
        arrivals=Trace(times),
        service=ServiceTrace(tuple(service_s)),
        config=PipelineConfig(**config),
        n_items=len(times),
    )


def test_a_worker_freed_at_an_arrival_instant_takes_the_waiting_item_first():
    # Item 0 runs 0-1; item 1 waits in the queue; item 2 arrives at 1.0, when the worker frees.
    # The worker takes item 1 (FCFS); with maxsize 1 and reject, item 2 then finds room.
    result = run_both(trace([0.0, 0.5, 1.0], [1.0, 1.0, 1.0], concurrency=1, queue_maxsize=1,
                            on_full="reject"))  # fmt: skip
    assert result.items["outcome"].tolist() == ["completed"] * 3
    assert result.items["start_s"].tolist() == [0.0, 1.0, 2.0]


def test_a_retry_due_at_an_arrival_instant_is_served_before_the_new_item():
    # Item 0 fails at 1.0 and is retried at 2.0 (backoff 1 s); item 1 arrives at 2.0.
    scenario = trace(
        [0.0, 2.0], [1.0, 1.0], concurrency=1, max_attempts=2, backoff=Backoff.constant(1.0)
    ).replace(failures=ScriptedFailures((1, 0)))
    result = run_both(scenario)
    items = result.items
    assert items["finish_s"].tolist() == [3.0, 4.0]  # the retry ran 2-3, the new item 3-4


def test_the_producer_reserves_a_slot_before_reading_and_blocks_at_its_last_admission():
    # maxsize 1, one worker busy 0-10: item 1 fills the queue at 1.0, and the producer
    # blocks right there, before item 2 (arriving at 2.0) is even read.
    result = run_both(trace([0.0, 1.0, 2.0], [10.0, 1.0, 1.0], concurrency=1, queue_maxsize=1))
    assert result.items["admitted_s"].tolist() == [0.0, 1.0, 10.0]
    blocked = result.timeseries.set_index("time_s")["producers_blocked"]
    # Blocked from 1.0; at 10.0 item 2 takes the freed slot and the producer blocks again
    # (reserving for the end of the source) until the worker takes item 2 at 11.0.
    assert blocked[1.0] == 1 and blocked[10.0] == 1 and blocked[11.0] == 0
    # The engine's own statistic counts that wait from 1.0 (and the wait for a slot to
    # read the end of the source, 10-11), and the summary's is the same quantity (one
    # definition for the summary, the report and the metric).
    assert result.report.statistics.producer_blocked_s == pytest.approx(9.0 + 1.0)
    assert result.summary["producer_blocked_s"] == pytest.approx(9.0 + 1.0)


def test_a_retry_waiting_out_its_backoff_holds_a_slot():
    # Item 0 fails at 1.0 and waits 5 s; meanwhile its slot is taken: with maxsize 1 and
    # reject, item 1 (arriving at 2.0 while the only worker is idle) is shed.
    scenario = trace(
        [0.0, 2.0], [1.0, 1.0], concurrency=1, queue_maxsize=1, on_full="reject",
        max_attempts=2, backoff=Backoff.constant(5.0),
    ).replace(failures=ScriptedFailures((1, 0)))  # fmt: skip
    result = run_both(scenario)
    assert result.items["outcome"].tolist() == ["completed", "shed"]


def test_a_burst_in_reject_mode_gives_idle_workers_a_turn_per_item():
    # Four items at 1.0, two idle workers, maxsize 1: K = maxsize + workers = 3 fit. After
    # each offer the producer gives the loop a turn, so a woken worker takes item 0, the
    # other takes item 1, item 2 waits in the queue and item 3 is shed, as M/M/c/K says.
    result = run_both(trace([1.0] * 4, [5.0] * 4, concurrency=2, queue_maxsize=1,
                            on_full="reject"))  # fmt: skip
    assert result.items["outcome"].tolist() == ["completed", "completed", "completed", "shed"]
    assert result.items["start_s"].tolist()[:3] == [1.0, 1.0, 6.0]


def test_an_item_finishing_at_the_drain_deadline_completes_but_the_drain_timed_out():
    # Intake stops at 0.0 (one item); the drain waits 1.0 s; the item finishes at 1.0.
    result = run_both(trace([0.0], [1.0], concurrency=1, drain_timeout_s=1.0))
    assert result.items["outcome"].tolist() == ["completed"]
    assert result.summary["drain_timed_out"] is True


def test_a_worker_freed_at_the_deadline_starts_its_next_item_which_is_cut_off():
    result = run_both(trace([0.0, 0.0], [1.0, 1.0], concurrency=1, drain_timeout_s=1.0))
    items = result.items
    assert items["outcome"].tolist() == ["completed", "unfinished"]
    assert items["start_s"].tolist() == [0.0, 1.0] and items["attempts"].tolist() == [1, 1]


def test_a_zero_drain_timeout_still_lets_due_work_finish_in_the_same_instant():
    # Zero service time: item 0 starts and finishes at 0.0 while the drain's timeout,
    # scheduled for "now", waits its turn; item 1 (service 1 s) is handed back.
    result = run_both(trace([0.0, 0.0], [0.0, 1.0], concurrency=2, drain_timeout_s=0))
    assert result.items["outcome"].tolist() == ["completed", "unfinished"]


def test_timers_at_one_instant_fire_in_the_order_they_were_set():
    # Constant 1 s services and arrivals every second: every finish ties with an arrival.
    scenario = Scenario(
        arrivals=Deterministic(rate=1.0),
        service=Constant(1.0),
        config=PipelineConfig(concurrency=1, queue_maxsize=1, on_full="reject"),
        n_items=20,
    )
    result = run_both(scenario)
    assert (result.items["outcome"] == "completed").all()


# -- the domain: refusals and the fallback ---------------------------------------------------

BASE = Scenario(
    arrivals=Poisson(rate=2.0),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=2),
    n_items=50,
    seed=3,
)


class MyBackoff(Backoff):
    pass


class MyRetry(RetryPolicy):
    pass


OUTSIDE = [
    (BASE.replace(rate_limit=RateLimit(requests_per_minute=60)), "rate limits"),
    (BASE.replace(max_wait_s=2.0), "deadlines"),
    (BASE.replace(failures=Hangs(p=0.1, hang_s=5.0)), "hangs"),
    (BASE.replace(failures=Overload(limit=1)), "provider models (Overload"),
    (BASE.replace(failures=TokenQuota(100.0, tuple([1.0] * 50))), "provider models (TokenQuota"),
    (BASE.replace(failures=IndependentFailures(0.1) | Hangs(p=0.1, hang_s=1.0)), "hangs"),
    (BASE.replace(backoff=MyBackoff()), "a backoff of its own (MyBackoff)"),
    (BASE.replace(retry=MyRetry()), "a retry policy of its own (MyRetry)"),
    (BASE.replace(priority=lambda payload: 0), "priority keys (config.priority)"),
    (BASE.replace(max_wait_s=5.0), "deadlines (config.max_wait_s)"),
    (BASE.replace(max_wait_s=lambda payload: 5.0), "deadlines (config.max_wait_s)"),
]


@pytest.mark.parametrize(("scenario", "feature"), OUTSIDE)
def test_kernel_refuses_what_it_does_not_model_in_one_line(scenario, feature):
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support ") as caught:
        simulate(scenario, engine="kernel")
    message = str(caught.value)
    assert feature in message and "\n" not in message


@pytest.mark.parametrize(("scenario", "feature"), [*OUTSIDE[:3], *OUTSIDE[-3:]])
def test_auto_falls_back_to_the_engine_outside_the_domain(scenario, feature):
    result = simulate(scenario)
    assert result.summary["engine"] == "asyncio"
    pd.testing.assert_frame_equal(result.items, simulate(scenario, engine="asyncio").items)


def test_auto_runs_the_kernel_inside_the_domain_and_asyncio_runs_the_engine():
    assert simulate(BASE).summary["engine"] == "kernel"
    assert simulate(BASE, engine="asyncio").summary["engine"] == "asyncio"
    assert simulate(BASE, engine="kernel").summary["engine"] == "kernel"


def _measured_workloads(tmp_path):
    """One of each workload built from measurements: percentiles, durations, counts."""
    (tmp_path / "durations.csv").write_text("duration_s\n0.2\n0.05\n1.4\n0.3\n0.1\n")
    (tmp_path / "counts.csv").write_text("count\n30\n90\n0\n45\n")
    counts = TimeVarying.from_counts_csv(tmp_path / "counts.csv", interval_s=10)
    return {
        "percentiles": (Poisson(2.5), LogNormal.from_quantiles(p50=0.4, p99=6.0)),
        "durations": (Poisson(2.5), Empirical.from_csv(tmp_path / "durations.csv")),
        "counts": (counts, Exponential(1.2)),
    }


@pytest.mark.parametrize("which", ["percentiles", "durations", "counts"])
def test_workloads_from_measurements_are_inside_the_domain_and_agree(tmp_path, which):
    arrivals, service = _measured_workloads(tmp_path)[which]
    config = PipelineConfig(
        concurrency=3, queue_maxsize=4, max_attempts=3, backoff=Backoff.constant(0.5, jitter=True)
    )
    scenario = Scenario(
        arrivals=arrivals,
        service=service,
        config=config,
        failures=IndependentFailures(0.2),
        n_items=400,
        seed=5,
    )
    assert unsupported(scenario) is None
    kernel = run_both(scenario)
    assert kernel.summary["retries_total"] > 0 and kernel.summary["producer_blocked_s"] > 0


@pytest.mark.parametrize("engine", ["fast", "", None, 1, "Kernel"])
def test_a_bad_engine_is_named(engine):
    with pytest.raises(ValueError, match=r"engine must be 'auto', 'asyncio' or 'kernel', got"):
        simulate(BASE, engine=engine)
    with pytest.raises(ValueError, match=r"engine must be"):
        sweep(BASE, {}, replications=1, processes=1, progress=False, engine=engine)


def test_sweep_passes_the_engine_through_and_refuses_up_front():
    frame = sweep(BASE, {"concurrency": [1, 2]}, replications=2, processes=1, progress=False)
    assert frame["engine"].tolist() == ["kernel"] * 4
    slow = sweep(BASE, {"concurrency": [1]}, replications=1, processes=1, progress=False,
                 engine="asyncio")  # fmt: skip
    assert slow["engine"].tolist() == ["asyncio"]
    assert slow["wait_mean_s"].iloc[0] == pytest.approx(frame["wait_mean_s"].iloc[0], abs=1e-9)
    with pytest.raises(ValueError, match=r"grid point \{'max_wait_s': 1.0\}: engine="):
        sweep(BASE, {"max_wait_s": [1.0]}, replications=1, processes=1, progress=False,
              engine="kernel")  # fmt: skip
    assert simulate_replication(BASE, 1, engine="asyncio").summary["engine"] == "asyncio"


# -- the pieces that only matter for long runs, exercised on short ones -----------------------


@pytest.mark.parametrize("window", [1, 2, 5, 1 << 18])
def test_stream_series_equals_step_series_however_it_is_windowed(monkeypatch, window):
    from pipeline.events import EventKind
    from pipeline.sim.running import recorder
    from pipeline.sim.running.single import run_engine
    from pipeline.sim.vloop import run_virtual

    monkeypatch.setattr(recorder, "_WINDOW", window)
    scenarios = [
        BASE.replace(failures=IndependentFailures(0.3), queue_maxsize=2, drain_timeout_s=4.0),
        BASE.replace(
            on_full="reject", queue_maxsize=1, arrivals=Trace([0.0, 0.0, 1.0, 1.0, 2.0]), n_items=5
        ),
        BASE.replace(n_items=0),
    ]
    for scenario in scenarios:
        report, arrivals, log = run_virtual(run_engine(scenario, 0))
        kinds, times, _ = log.arrays()
        streams = [(recorder.ARRIVAL, arrivals)]
        streams += [(EventKind(k), np.sort(times[kinds == k])) for k in np.unique(kinds)]
        expected = recorder.step_series(arrivals, log, report.finished_s)
        got = recorder.stream_series(streams, report.finished_s)
        for name in ("time_s", *recorder.StepSeries.COLUMNS):
            assert np.array_equal(getattr(expected, name), getattr(got, name)), name
            assert getattr(expected, name).dtype == getattr(got, name).dtype


def test_long_run_chunks_give_the_same_run(monkeypatch):
    # The FCFS path converts items to Python floats a chunk at a time and builds the
    # series a window at a time; tiny chunks and windows must change nothing.
    from pipeline.sim.running import recorder
    from pipeline.sim.running.kernel import fcfs as _kernel_fcfs

    scenario = Scenario(
        arrivals=Poisson(rate=3.5),
        service=LogNormal(mean=1.0, cv=1.2),
        config=PipelineConfig(concurrency=4, queue_maxsize=3, drain_timeout_s=2.0),
        n_items=400,
        seed=9,
    )
    whole = simulate_once(scenario, 0, "kernel")
    monkeypatch.setattr(_kernel_fcfs, "_CHUNK", 7)
    monkeypatch.setattr(recorder, "_WINDOW", 5)
    chunked = simulate_once(scenario, 0, "kernel")
    pd.testing.assert_frame_equal(whole.items, chunked.items, check_exact=True)
    pd.testing.assert_frame_equal(whole.timeseries, chunked.timeseries, check_exact=True)
    assert_same_run(simulate_once(scenario, 0, "asyncio"), chunked)


# -- an initial backlog: items waiting at time 0, ahead of every arrival ---------------------


def _room(config: PipelineConfig) -> int | None:
    """The largest backlog a config takes (None: any), as Scenario checks it."""
    if config.on_full == "reject" and config.queue_maxsize is not None:
        return config.queue_maxsize + config.concurrency
    return None


@st.composite
def backlogged(draw, *, quiet: bool = False):
    """A random scenario with a backlog (ties at 0 with its arrivals and each other)."""
    scenario = draw(scenarios(quiet=quiet))
    backlog = draw(st.sampled_from([1, 1, 2, 3, 5, 8, 20, 45]))
    room = _room(scenario.config)
    if room is not None:
        backlog = min(backlog, room)
    service = scenario.service
    if isinstance(service, ServiceTrace):
        # Indexed by item id, the backlog's first: give its items their own times.
        extra = draw(st.lists(st.sampled_from(ROUND_S), min_size=backlog, max_size=backlog))
        service = ServiceTrace((*extra, *service.times_s))
    return scenario.replace(service=service, initial_backlog=backlog)


@pytest.mark.slow
@settings(max_examples=500, **SETTINGS)
@given(scenario=backlogged(), replication=st.integers(0, 3))
def test_kernel_equals_engine_with_an_initial_backlog(scenario, replication):
    assert_kernel_agrees(scenario, replication)
    slots = scenario.config.queue_maxsize or math.inf
    event(f"backlog beyond the queue: {scenario.initial_backlog > slots}")


@settings(max_examples=examples(200), **SETTINGS)
@given(scenario=backlogged(quiet=True), replication=st.integers(0, 3))
def test_kernel_equals_engine_with_an_initial_backlog_and_no_failures(scenario, replication):
    assert_kernel_agrees(scenario, replication)


@pytest.mark.parametrize("maxsize", [None, 1, 2, 3, 7, 50])
@pytest.mark.parametrize("concurrency", [1, 2, 5])
def test_the_fcfs_path_orders_a_backlog_at_zero_as_the_engine_does(concurrency, maxsize):
    # Continuous times: the one tie is the burst at 0.0 (the backlog and two arrivals),
    # which the FCFS path orders itself (the queue's peak within the instant included).
    for backlog in (1, 2, 3, 5, 13):
        for drain in (None, 0.0, 0.7, 3.0):
            scenario = Scenario(
                arrivals=Trace([0.0, 0.0, 0.5, 1.5, 3.0, 3.1, 8.0]),
                service=LogNormal(mean=1.0, cv=1.2),
                config=PipelineConfig(
                    concurrency=concurrency, queue_maxsize=maxsize, drain_timeout_s=drain
                ),
                n_items=7,
                seed=backlog,
                initial_backlog=backlog,
            )
            run_both(scenario)
            if drain is None:
                assert _fcfs_taken(scenario, 0)
