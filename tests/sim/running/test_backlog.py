"""``Scenario(initial_backlog=N)``: N items waiting at time 0, on both engines, against theory.

Known truth for the drain (FIFO, c workers, exponential service at rate mu, no
failures), with ``w = N - c`` items waiting once the c workers took theirs:

- the last backlog item starts after ``w`` departures, all at rate ``c * mu``
  (every worker busy, nothing behind the backlog can start before it), and
  then the c items in service all finish: ``E[backlog_cleared_s] =
  w / (c * mu) + H_c / mu`` (``H_c`` the harmonic number), whatever arrives
  behind them; ``H_N / mu`` when ``N <= c``;
- the waiting count is a birth-death walk, up at ``lambda`` (Poisson
  arrivals), down at ``c * mu`` while it is positive: it first hits 0 after
  ``E[backlog_drained_s] = w / (c * mu - lambda)`` (Wald: it steps down by
  one at a time), about ``N / (c * mu - lambda)`` for large N.

Tolerances are confidence levels, never tuned: a coverage count must have
the nominal 95% inside its 99.9% Wilson band; a single mean must have the
exact value inside its 99.9% t interval.
"""

from __future__ import annotations

import decimal
import math
import tracemalloc

import numpy as np
import pytest

from pipeline import PipelineConfig, RateLimit
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    ScriptedFailures,
    StageSpec,
    Trace,
    detect_warmup,
    simulate,
)
from pipeline.sim.running.result import DrainTimeoutWarning
from pipeline.sim.running.single import simulate_once
from pipeline.sim.stats.intervals import proportion_ci
from pipeline.sim.workloads.scenario import MAX_N_ITEMS
from pipeline.sim.workloads.traces.replay import TraceWorkload
from pipeline.sim.workloads.traces.service import ServiceTrace

from .kernel.test_kernel_equality import assert_same_run


def backlog_scenario(n: int, *, concurrency: int = 4, arrivals: int = 0, rate: float = 1.0,
                     seed: int = 0, **config) -> Scenario:  # fmt: skip
    config.setdefault("drain_timeout_s", None)
    return Scenario(
        arrivals=Poisson(rate=rate),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=concurrency, **config),
        n_items=arrivals,
        seed=seed,
        initial_backlog=n,
    )


def both(scenario: Scenario):
    engine = simulate_once(scenario, 0, "asyncio")
    kernel = simulate_once(scenario, 0, "kernel")
    assert_same_run(engine, kernel)
    return kernel


def harmonic(n: int) -> float:
    return sum(1.0 / k for k in range(1, n + 1))


# -- what a backlog is ----------------------------------------------------------------------


def test_the_backlog_is_the_first_items_arrived_at_zero_ahead_of_an_arrival_at_zero():
    # One worker, two backlog items and two arrivals, the first of them at 0.0 too.
    scenario = Scenario(
        arrivals=Trace([0.0, 5.0]),
        service=ServiceTrace((1.0, 1.0, 1.0, 1.0)),
        config=PipelineConfig(concurrency=1, drain_timeout_s=None),
        n_items=2,
        initial_backlog=2,
    )
    result = both(scenario)
    items = result.items
    assert items["backlog"].tolist() == [True, True, False, False]
    assert items["arrival_s"].tolist() == [0.0, 0.0, 0.0, 5.0]
    assert items["start_s"].tolist() == [0.0, 1.0, 2.0, 5.0]  # FIFO: the backlog first
    s = result.summary
    assert s["items_offered"] == 4 and s["items_backlog"] == 2
    assert s["backlog_cleared_s"] == 2.0  # item 1 finished at 2.0
    assert s["backlog_drained_s"] == 2.0  # the arrival at 0.0 waited until then


def test_n_items_counts_the_arrivals_after_the_backlog_and_zero_only_drains_it():
    result = both(backlog_scenario(30, arrivals=0))
    assert result.summary["items_offered"] == 30 and len(result.items) == 30
    result = both(backlog_scenario(30, arrivals=20))
    assert result.summary["items_offered"] == 50
    assert result.items["backlog"].sum() == 30


def test_a_duration_bounded_run_adds_the_backlog_to_the_arrivals_of_that_duration():
    plain = simulate(Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=1.0),
                              duration_s=50.0, seed=4))  # fmt: skip
    backlog = simulate(plain.scenario.replace(initial_backlog=25))
    assert backlog.summary["items_offered"] == plain.summary["items_offered"] + 25
    # The arrivals are the same ones (their own stream), behind the backlog.
    np.testing.assert_array_equal(backlog.columns.arrival_s[25:], plain.columns.arrival_s)


def test_a_backlog_larger_than_the_queue_waits_upstream_as_a_burst_would():
    # 10 waiting, 2 workers take 2, the queue holds 3: 5 wait upstream, the producer blocks.
    result = both(backlog_scenario(10, concurrency=2, queue_maxsize=3))
    burst = both(Scenario(arrivals=Trace([0.0] * 10), service=Exponential(mean=1.0),
                          config=result.scenario.config, n_items=10))  # fmt: skip
    s = result.summary
    assert s["upstream_backlog_max"] == 5 and s["queue_depth_max"] == 3
    assert s["producer_blocked_s"] > 0
    for key in ("upstream_backlog_max", "queue_depth_max", "items_completed"):
        assert s[key] == burst.summary[key]


def test_without_a_backlog_the_summary_and_items_are_unchanged():
    result = simulate(backlog_scenario(0, arrivals=50))
    assert not any("backlog" in key for key in result.summary if key != "upstream_backlog_max")
    assert "backlog" not in result.items.columns


def test_on_full_reject_takes_a_backlog_that_fits_and_refuses_one_that_would_be_shed():
    # queue_maxsize + concurrency items fit at once (the workers take theirs): nothing is shed.
    fits = both(backlog_scenario(7, concurrency=2, queue_maxsize=5, on_full="reject"))
    assert fits.summary["items_shed"] == 0 and fits.summary["items_completed"] == 7
    with pytest.raises(ValueError, match=r"^initial_backlog \(8\) cannot be waiting") as caught:
        backlog_scenario(8, concurrency=2, queue_maxsize=5, on_full="reject")
    assert "\n" not in str(caught.value) and "on_full='block'" in str(caught.value)
    unbounded = simulate(backlog_scenario(500, queue_maxsize=None, on_full="reject"))
    assert unbounded.summary["items_shed"] == 0


# -- bad values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (-1, ValueError, "initial_backlog must be >= 0 (items waiting at time 0), got -1"),
        (math.nan, TypeError, "must be an integer (items waiting at time 0), got nan of type"),
        (3.5, TypeError, "got 3.5 of type float"),
        (5.0, TypeError, "got 5.0 of type float"),
        (True, TypeError, "initial_backlog must be an integer (items waiting at time 0), got True"),
        (decimal.Decimal(5), TypeError, "of type Decimal"),
        ("5", TypeError, "of type str"),
        (MAX_N_ITEMS + 1, ValueError, "initial_backlog must be <= 1_000_000_000"),
        (10**400, ValueError, "got 1e+400 (a number of 401 digits)"),
    ],
)
def test_bad_backlogs_are_refused_in_one_line(value, error, words):
    with pytest.raises(error) as caught:
        backlog_scenario(value)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_numpy_integer_is_taken_as_the_int_it_holds():
    scenario = backlog_scenario(np.int64(12))
    assert type(scenario.initial_backlog) is int and scenario.initial_backlog == 12
    assert simulate(scenario).summary["items_backlog"] == 12


def test_the_backlog_and_the_arrivals_together_stay_within_the_item_cap():
    with pytest.raises(ValueError, match=r"plus n_items .* must be at most 1_000_000_000"):
        backlog_scenario(10, arrivals=MAX_N_ITEMS - 5)


def test_a_chain_counts_the_backlog_in_what_reaches_its_last_stage():
    config = PipelineConfig(concurrency=2)
    stages = [
        StageSpec(name="split", service=Exponential(mean=0.1), config=config, fan_out=1000),
        StageSpec(name="write", service=Exponential(mean=0.1), config=config),
    ]
    Scenario(arrivals=Poisson(rate=1.0), stages=stages, n_items=10**6)
    with pytest.raises(ValueError, match=r"n_items \(1_000_000\) \+ initial_backlog \(1\) times"):
        Scenario(arrivals=Poisson(rate=1.0), stages=stages, n_items=10**6, initial_backlog=1)


def test_replace_sets_and_checks_the_backlog():
    base = backlog_scenario(0, arrivals=10)
    assert base.replace(initial_backlog=5).initial_backlog == 5
    with pytest.raises(ValueError, match="initial_backlog must be >= 0"):
        base.replace(initial_backlog=-3)


def test_a_trace_workload_refuses_a_backlog_it_has_no_service_times_for():
    workload = TraceWorkload(Trace([0.0, 1.0]), ServiceTrace((1.0, 1.0)),
                             ScriptedFailures((0, 0)))  # fmt: skip
    with pytest.raises(ValueError, match=r"^initial_backlog=3: a trace gives service times"):
        workload.scenario(initial_backlog=3)


def test_a_service_trace_is_indexed_by_item_id_the_backlog_first():
    scenario = Scenario(
        arrivals=Trace([1.0]), service=ServiceTrace((1.0, 1.0)), n_items=1, initial_backlog=2
    )
    with pytest.raises(ValueError, match="the service trace has 2 times but 3 items arrive"):
        simulate(scenario)


# -- the drain against theory ----------------------------------------------------------------


def test_a_backlog_within_the_workers_drains_at_once_and_clears_with_the_slowest():
    result = both(backlog_scenario(3, concurrency=4))
    s = result.summary
    assert s["backlog_drained_s"] == 0.0
    assert s["backlog_cleared_s"] == pytest.approx(result.columns.finish_s.max())


@pytest.mark.slow  # coverage of 400 experiments: 3.5 s
def test_the_clearing_time_interval_covers_its_exact_mean_at_its_stated_level():
    # N = 40 waiting, no arrivals, c = 4 exponential workers: E = 36 / 4 + H_4 (mu = 1).
    n, c, replications, experiments = 40, 4, 8, 400
    exact = (n - c) / c + harmonic(c)
    covered = 0
    for seed in range(experiments):
        runs = simulate(backlog_scenario(n, concurrency=c, seed=seed), replications=replications)
        covered += runs.interval("backlog_cleared_s", level=0.95).contains(exact)
    band = proportion_ci(covered, experiments, level=0.999)
    assert band.contains(0.95), f"coverage {covered / experiments:.3f}, 99.9% band {band}"


def test_arrivals_behind_the_backlog_do_not_change_when_it_clears():
    # FIFO: nothing behind the backlog starts before its last item, whatever the rate.
    n, c = 400, 4
    exact = (n - c) / c + harmonic(c)
    runs = simulate(backlog_scenario(n, concurrency=c, arrivals=400, rate=3.0), replications=30)
    assert runs.interval("backlog_cleared_s", level=0.999).contains(exact)


def test_the_drain_time_with_poisson_arrivals_is_the_walk_to_an_empty_queue():
    # lambda = 2 against c * mu = 4: E[drained] = (N - c) / (c * mu - lambda) = 996 / 2.
    n, c, rate = 1000, 4, 2.0
    exact = (n - c) / (c - rate)
    scenario = backlog_scenario(n, concurrency=c, arrivals=3000, rate=rate)
    runs = simulate(scenario, replications=30)
    assert runs.interval("backlog_drained_s", level=0.999).contains(exact)
    # The large-N form N / (c mu - lambda) is within a few workers' worth of it.
    assert abs(runs.interval("backlog_drained_s").mean - n / (c - rate)) < 0.05 * exact


def test_without_arrivals_the_queue_drains_after_n_minus_c_departures():
    n, c = 200, 4
    runs = simulate(backlog_scenario(n, concurrency=c, queue_maxsize=10), replications=30)
    assert runs.interval("backlog_drained_s", level=0.999).contains((n - c) / c)


# -- the transient, the drain's timeout and what the kernel does not model -----------------


def test_the_batch_means_half_widths_are_withheld_until_a_warm_up_cuts_off_the_drain():
    scenario = backlog_scenario(300, arrivals=12_000, rate=2.0)  # 10,000+ after the cut
    pilot = simulate(scenario)
    assert math.isnan(pilot.summary["wait_mean_ci95_s"])
    assert math.isnan(pilot.summary["latency_mean_ci95_s"])
    warm = detect_warmup(pilot)
    assert warm > 0  # never 0.0: the backlog's items all arrive at 0
    later = simulate(scenario.replace(warmup_s=pilot.summary["backlog_drained_s"]))
    assert not math.isnan(later.summary["wait_mean_ci95_s"])


def test_detect_warmup_never_keeps_the_backlog_even_when_mser_would():
    # No item ever waits: MSER drops nothing, yet the backlog's items (and an arrival at
    # 0, behind them) are left out: the warm-up is the first arrival after 0.
    scenario = Scenario(arrivals=Trace([0.0, 2.0, 4.0] + [6.0 + i for i in range(60)]),
                        service=Constant(0.5), config=PipelineConfig(concurrency=5),
                        n_items=63, initial_backlog=4)  # fmt: skip
    result = simulate(scenario)
    assert result.items["wait_s"].max() == 0.0
    assert detect_warmup(result) == 2.0
    with pytest.raises(ValueError, match="every item with a wait_s is one of the initial backlog"):
        detect_warmup(simulate(backlog_scenario(100)))


def test_a_drain_that_times_out_leaves_the_backlog_keys_undefined_and_warns():
    # Unbounded: intake ends at once, and the default 30 s drain cannot serve 500 items.
    scenario = backlog_scenario(500, queue_maxsize=None, drain_timeout_s=30.0)
    with pytest.warns(DrainTimeoutWarning):
        result = simulate(scenario)
    s = result.summary
    assert s["drain_timed_out"] and s["items_unfinished"] > 0
    assert math.isnan(s["backlog_cleared_s"]) and math.isnan(s["backlog_drained_s"])


def test_retries_and_failures_count_the_backlog_and_agree_on_both_engines():
    scenario = backlog_scenario(60, concurrency=3, queue_maxsize=5, arrivals=30, max_attempts=2)
    result = both(scenario.replace(failures=IndependentFailures(0.3)))
    s = result.summary
    assert s["items_completed"] + s["items_dead_lettered"] == 90
    dead = result.items[result.items["outcome"] == "dead_lettered"]
    assert dead["backlog"].any()
    backlog = result.items[result.items["backlog"]]
    assert s["backlog_cleared_s"] == pytest.approx(backlog["finish_s"].max())


def test_rate_limits_run_on_the_engine_with_a_backlog():
    scenario = backlog_scenario(30, rate_limit=RateLimit(requests_per_minute=600))
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support rate limits"):
        simulate(scenario, engine="kernel")
    result = simulate(scenario)
    assert result.summary["engine"] == "asyncio"
    # 10 requests per second: 30 items take about 3 s, not the 7.5 s of 4 free workers.
    assert result.summary["backlog_cleared_s"] >= 2.0


def test_a_chain_holds_the_backlog_at_its_first_stage_on_both_engines():
    config = PipelineConfig(concurrency=2, queue_maxsize=4, drain_timeout_s=None)
    scenario = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.5), config=config),
            StageSpec(name="write", service=Exponential(mean=0.2), config=config, fan_out=2),
        ],
        n_items=20,
        seed=5,
        initial_backlog=30,
    )
    engine = simulate_once(scenario, 0, "asyncio")
    kernel = simulate_once(scenario, 0, "kernel")
    assert engine.summary["engine"] == "asyncio" and kernel.summary["engine"] == "kernel"
    for key in ("items_offered", "items_backlog", "backlog_cleared_s", "backlog_drained_s"):
        assert engine.summary[key] == pytest.approx(kernel.summary[key], abs=1e-9), key
    fetch, write = kernel.stages["fetch"], kernel.stages["write"]
    assert fetch.summary["items_backlog"] == 30 and "items_backlog" not in write.summary
    assert fetch.summary["upstream_backlog_max"] > 0
    # Cleared when the last stage finished the backlog's 30 items (fan-out makes outputs).
    assert kernel.summary["backlog_cleared_s"] == pytest.approx(write.columns.finish_s[:30].max())
    assert kernel.summary["backlog_drained_s"] == fetch.summary["backlog_drained_s"]


@pytest.mark.slow  # runs under tracemalloc: 3 s
def test_a_large_backlog_takes_the_memory_per_item_that_as_many_arrivals_take():
    # The backlog is items like any others: one row each, produced lazily, none held twice;
    # on the kernel it takes the FCFS path, as Poisson arrivals do. Bytes per item are the
    # growth of the peak from n to 2n items (fixed costs cancel out).
    def peak(scenario, engine):
        peaks = []
        for _ in range(2):  # the smaller of two: a first run may pay for a cache or two
            tracemalloc.start()
            try:
                simulate_once(scenario, 0, engine)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
        return min(peaks)

    def per_item(make, n, engine):
        return (peak(make(2 * n), engine) - peak(make(n), engine)) / n

    config = PipelineConfig(concurrency=4, drain_timeout_s=None)

    def backlog(n):
        return Scenario(arrivals=Poisson(rate=1.0), service=Exponential(mean=1.0),
                        config=config, n_items=0, initial_backlog=n)  # fmt: skip

    def burst(n):
        return Scenario(arrivals=Trace([0.0] * n), service=Exponential(mean=1.0),
                        config=config, n_items=n)  # fmt: skip

    def overload(n):  # arrivals above capacity also keep the producer blocked on every item
        return Scenario(arrivals=Poisson(rate=8.0), service=Exponential(mean=1.0),
                        config=config, n_items=n)  # fmt: skip

    assert per_item(backlog, 3_000, "asyncio") <= 1.1 * per_item(burst, 3_000, "asyncio")
    assert per_item(backlog, 6_000, "kernel") <= 1.1 * per_item(overload, 6_000, "kernel")
