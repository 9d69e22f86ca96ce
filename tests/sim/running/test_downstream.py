"""The downstream a simulated handler calls: validation, orphaned work on a hand-computed
trace, a full queue, capacity drops at their boundaries, and the kernel's refusal."""

from __future__ import annotations

import decimal
import math

import numpy as np
import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    CapacityDrop,
    Constant,
    Downstream,
    DrainTimeoutWarning,
    Exponential,
    LoadSpike,
    NoFailures,
    Poisson,
    Scenario,
    Trace,
    simulate,
)
from pipeline.sim.workloads.arrivals import Deterministic
from pipeline.sim.workloads.failures import IndependentFailures
from pipeline.sim.workloads.faults import SpeedProfile

BAD_REALS = [
    (math.nan, ValueError),
    (math.inf, ValueError),
    (-math.inf, ValueError),
    (decimal.Decimal("NaN"), ValueError),
    (True, TypeError),
    ("1", TypeError),
    (None, TypeError),
]


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError),
     (np.float64(2.0), TypeError), (decimal.Decimal(2), TypeError), (10**7, ValueError),
     (None, TypeError)],
)  # fmt: skip
def test_downstream_concurrency_is_checked(value, error):
    with pytest.raises(error, match=r"^concurrency must be .*got"):
        Downstream(concurrency=value, service=Constant(1.0))


def test_downstream_takes_numpy_integers_as_plain_ints():
    spec = Downstream(concurrency=np.int64(3), service=Constant(1.0), queue_maxsize=np.int32(5))
    assert (type(spec.concurrency), type(spec.queue_maxsize)) == (int, int)
    assert spec == Downstream(concurrency=3, service=Constant(1.0), queue_maxsize=5)


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-3, ValueError), (2.0, TypeError), (False, TypeError),
     (math.nan, TypeError), ("big", TypeError)],
)  # fmt: skip
def test_downstream_queue_maxsize_is_checked(value, error):
    with pytest.raises(error, match=r"^queue_maxsize must be .*got"):
        Downstream(concurrency=1, service=Constant(1.0), queue_maxsize=value)


def test_downstream_service_must_be_a_distribution():
    with pytest.raises(TypeError, match=r"^service must be a distribution .*got 0\.1"):
        Downstream(concurrency=1, service=0.1)


@pytest.mark.parametrize("kind", [CapacityDrop, LoadSpike])
@pytest.mark.parametrize("field", ["at_s", "for_s", "factor"])
@pytest.mark.parametrize(("value", "error"), BAD_REALS)
def test_fault_fields_refuse_non_finite_and_non_numbers(kind, field, value, error):
    given = {"at_s": 1.0, "for_s": 2.0, "factor": 0.5, field: value}
    with pytest.raises(error, match=rf"^{field} must be"):
        kind(**given)


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("at_s", -1.0, ">= 0"), ("for_s", 0.0, "> 0"), ("for_s", -2, "> 0"),
     ("factor", 0.0, "> 0"), ("factor", -0.5, "> 0")],
)  # fmt: skip
def test_fault_fields_name_what_is_allowed(field, value, allowed):
    given = {"at_s": 1.0, "for_s": 2.0, "factor": 0.5, field: value}
    with pytest.raises(ValueError, match=rf"^{field} must be {allowed} .*got"):
        CapacityDrop(**given)


def test_faults_take_numpy_and_decimal_numbers_as_floats():
    fault = CapacityDrop(at_s=np.float32(1.5), for_s=decimal.Decimal("2.5"), factor=np.int64(2))
    assert fault == CapacityDrop(at_s=1.5, for_s=2.5, factor=2.0)
    assert fault.end_s == 4.0


def test_a_fault_ending_beyond_the_largest_float_is_refused():
    with pytest.raises(ValueError, match=r"^at_s \+ for_s must be finite"):
        CapacityDrop(at_s=1e308, for_s=1e308, factor=0.5)


def _scenario(**changes):
    given = {
        "arrivals": Poisson(rate=1.0),
        "n_items": 10,
        "downstream": Downstream(concurrency=1, service=Constant(0.1)),
    }
    given.update(changes)
    return Scenario(**given)


def test_a_capacity_drop_needs_a_downstream():
    with pytest.raises(ValueError, match=r"^faults\[0\] is CapacityDrop.*Downstream"):
        _scenario(
            service=Constant(1.0),
            downstream=None,
            faults=[CapacityDrop(at_s=1, for_s=1, factor=0.5)],
        )


def test_a_load_spike_needs_a_poisson_rate():
    with pytest.raises(ValueError, match=r"^faults\[0\] is LoadSpike.*Poisson or TimeVarying"):
        _scenario(arrivals=Deterministic(rate=2.0), faults=[LoadSpike(at_s=1, for_s=1, factor=2)])


@pytest.mark.parametrize("faults", ["CapacityDrop", CapacityDrop(at_s=1, for_s=1, factor=0.5), 3])
def test_faults_must_be_a_list_of_faults(faults):
    with pytest.raises(TypeError, match=r"^faults must be a list"):
        _scenario(faults=faults)


def test_faults_entries_are_checked():
    with pytest.raises(TypeError, match=r"^faults\[1\] must be a CapacityDrop or a LoadSpike"):
        _scenario(faults=[CapacityDrop(at_s=1, for_s=1, factor=0.5), "spike"])


def test_a_downstream_refuses_failure_models_classes_and_stages():
    with pytest.raises(ValueError, match=r"^downstream is set, and failures="):
        _scenario(failures=IndependentFailures(p=0.1))
    with pytest.raises(TypeError, match=r"^downstream must be a Downstream"):
        _scenario(downstream="db")


def test_auto_runs_a_downstream_and_faults_on_the_kernel_with_the_engines_summary():
    spike = Scenario(arrivals=Poisson(rate=1.0), service=Constant(0.1), n_items=5,
                     faults=[LoadSpike(at_s=1, for_s=1, factor=2)])  # fmt: skip
    for scenario in (_scenario(), spike):
        kernel, engine = simulate(scenario).summary, simulate(scenario, engine="asyncio").summary
        assert (kernel["engine"], engine["engine"]) == ("kernel", "asyncio")
        for key, value in engine.items():
            if key not in ("wall_time_s", "engine"):
                assert kernel[key] == pytest.approx(value, abs=1e-9, nan_ok=True), key


# -- a hand-computed trace ----------------------------------------------------------------


def hand_computed_trace() -> Scenario:
    """One server, 2 s of work per request, client timeout 3 s, 2 attempts, retries after
    0.25 s; arrivals at 0, 0.5 and 1.25 s."""
    config = PipelineConfig(concurrency=100, max_attempts=2, attempt_timeout_s=3.0,
                            backoff=Backoff(kind="constant", base_s=0.25))  # fmt: skip
    return Scenario(arrivals=Trace([0.0, 0.5, 1.25]), config=config, n_items=3,
                    downstream=Downstream(concurrency=1, service=Constant(2.0)))  # fmt: skip


def test_orphaned_work_on_a_hand_computed_trace():
    # One server, 2 s of work per request, client timeout 3 s, 2 attempts, retries after
    # 0.25 s. Arrivals 0, 0.5, 1.25:
    #   0    item 0 on the server (ends 2)          0.5  item 1 waits   1.25 item 2 waits
    #   2    item 0 completes; item 1's request on the server (ends 4)
    #   3.5  item 1 times out (3 s after 0.5); its request stays on the server
    #   3.75 item 1's retry joins the queue behind item 2
    #   4    item 1's first request ends, for nobody: orphaned 1; item 2 on (ends 6)
    #   4.25 item 2 times out; its retry joins at 4.5
    #   6    item 2's first request ends: orphaned 2; item 1's retry on (ends 8)
    #   6.75 item 1's retry times out (3.75 + 3): dead-lettered after 2 attempts
    #   7.5  item 2's retry times out (4.5 + 3): dead-lettered; the run ends at 7.5
    # Requests 5; served by 7.5: 3, of them orphaned 2; the server is busy throughout.
    # Waiting requests: 1 on [0.5,1.25), 2 on [1.25,2), 1 on [2,3.75), 2 on [3.75,4),
    # 1 on [4,4.5), 2 on [4.5,6), 1 on [6,7.5): area 9.5 over 7.5 s.
    result = simulate(hand_computed_trace())
    items = result.items
    assert items.outcome.tolist() == ["completed", "dead_lettered", "dead_lettered"]
    assert items.finish_s.tolist()[0] == 2.0
    assert items.attempts.tolist() == [1, 2, 2]
    s = result.summary
    assert s["sim_time_s"] == 7.5
    assert (s["downstream_requests"], s["downstream_served"]) == (5, 3)
    assert (s["downstream_orphaned"], s["downstream_rejected"]) == (2, 0)
    assert s["downstream_queue_mean"] == pytest.approx(9.5 / 7.5, rel=1e-12)
    assert s["downstream_in_system_mean"] == pytest.approx(9.5 / 7.5 + 1.0, rel=1e-12)
    letters = {letter.payload: letter for letter in result.dead_letters}
    assert [e.type for e in letters[1].errors] == ["TimeoutError", "TimeoutError"]


def test_the_log_dates_every_request_of_the_hand_computed_trace():
    # The trace above, request by request (in the order they reached the downstream):
    # sent, taken by the server, service end, and when the client gave up on it.
    log = simulate(hand_computed_trace()).downstream.log
    nan = math.nan
    np.testing.assert_array_equal(log.sent_s, [0.0, 0.5, 1.25, 3.75, 4.5])
    np.testing.assert_array_equal(log.start_s, [0.0, 2.0, 4.0, 6.0, nan])
    np.testing.assert_array_equal(log.end_s, [2.0, 4.0, 6.0, 8.0, nan])
    # The first got its answer; the others' clients timed out (the last at the run's end).
    np.testing.assert_array_equal(log.abandoned_s, [nan, 3.5, 4.25, 6.75, 7.5])


def test_the_log_agrees_with_the_counts_and_the_time_weighted_queue():
    config = PipelineConfig(concurrency=40, queue_maxsize=None, max_attempts=4,
                            attempt_timeout_s=1.0, drain_timeout_s=None,
                            backoff=Backoff(kind="constant", base_s=0.1))  # fmt: skip
    scenario = Scenario(arrivals=Poisson(rate=25.0), config=config, duration_s=30.0, seed=1,
                        downstream=Downstream(concurrency=3, service=Exponential(mean=0.1)),
                        faults=[CapacityDrop(at_s=10.0, for_s=4.0, factor=0.2)])  # fmt: skip
    stats = simulate(scenario).downstream
    log, end = stats.log, stats.end_s
    assert len(log.sent_s) == stats.requests
    served = log.end_s <= end
    assert served.sum() == stats.served
    assert (served & (log.abandoned_s < log.end_s)).sum() == stats.orphaned > 0
    # Waiting requests as a step function of the log's own instants, over [0, end].
    times = np.unique(np.concatenate([[0.0, end], log.sent_s, log.start_s]))
    times = times[times <= end]
    waiting = [np.sum((log.sent_s <= t) & ~(log.start_s <= t)) for t in times]
    area = np.sum(np.array(waiting[:-1]) * np.diff(times))
    assert area / end == pytest.approx(stats.queue_mean, rel=1e-9)


def test_client_side_time_comes_before_the_call():
    # 0.5 s on the client, then 1 s downstream: done at 1.5, the second (arrived at 0.2,
    # called at 0.7) waits for the server until 1.5 and is done at 2.5.
    scenario = Scenario(arrivals=Trace([0.0, 0.2]), service=Constant(0.5), n_items=2,
                        config=PipelineConfig(concurrency=10),
                        downstream=Downstream(concurrency=1, service=Constant(1.0)))  # fmt: skip
    assert simulate(scenario).items.finish_s.tolist() == [1.5, 2.5]


def test_a_full_queue_fails_an_attempt_at_once():
    # One server busy until 1, one request waiting (the queue holds 1): the third
    # call, at 0.2, fails at once; with one attempt the item is dead-lettered at 0.2.
    scenario = Scenario(arrivals=Trace([0.0, 0.1, 0.2]), n_items=3,
                        config=PipelineConfig(concurrency=10, max_attempts=1),
                        downstream=Downstream(concurrency=1, service=Constant(1.0),
                                              queue_maxsize=1))  # fmt: skip
    result = simulate(scenario)
    assert result.items.outcome.tolist() == ["completed", "completed", "dead_lettered"]
    assert result.items.finish_s.tolist()[:2] == [1.0, 2.0]
    (letter,) = result.dead_letters
    assert (letter.payload, letter.attempts) == (2, 1)
    assert letter.errors[0].type == "DownstreamFull"
    assert letter.errors[0].at_s == 0.2
    s = result.summary
    assert (s["downstream_requests"], s["downstream_rejected"], s["downstream_served"]) == (2, 1, 2)


def test_a_full_queue_rejection_is_retried_by_the_policy():
    # The same, with 2 attempts and a 1 s backoff: the retry at 1.2 finds room (the
    # second request went on the server at 1), and ends at 3.
    scenario = Scenario(arrivals=Trace([0.0, 0.1, 0.2]), n_items=3,
                        config=PipelineConfig(concurrency=10, max_attempts=2,
                                              backoff=Backoff(kind="constant", base_s=1.0)),
                        downstream=Downstream(concurrency=1, service=Constant(1.0),
                                              queue_maxsize=1))  # fmt: skip
    result = simulate(scenario)
    assert result.items.outcome.tolist() == ["completed"] * 3
    assert result.items.finish_s.tolist() == [1.0, 2.0, 3.0]
    assert result.items.attempts.tolist() == [1, 1, 2]


# -- capacity drops --------------------------------------------------------------------


def _one_request(faults, work=2.0, servers=1, arrivals=(0.0,)):
    scenario = Scenario(arrivals=Trace(list(arrivals)), n_items=len(arrivals),
                        config=PipelineConfig(concurrency=10), faults=faults,
                        downstream=Downstream(concurrency=servers,
                                              service=Constant(work)))  # fmt: skip
    return simulate(scenario).items.finish_s.tolist()


def test_a_drop_slows_work_in_progress_at_its_boundaries():
    # 2 s of work from 0; half speed on [1, 3): 1 s done by 1, the other 1 s takes 2 s.
    assert _one_request([CapacityDrop(at_s=1.0, for_s=2.0, factor=0.5)]) == [3.0]
    # A quarter speed on [0.5, 1.5): 0.5 + 0.25 done by 1.5, the other 1.25 at full speed.
    assert _one_request([CapacityDrop(at_s=0.5, for_s=1.0, factor=0.25)]) == [2.75]
    # A service that starts inside the drop and ends after it: 0.5 + 1.5 (at 0.25: 0.375
    # done by 3), then 1.625 at full speed: 4.625.
    assert _one_request([CapacityDrop(at_s=1.0, for_s=2.0, factor=0.25)], arrivals=(1.5,)) == [
        1.5 + 1.5 + 1.625
    ]


def test_a_boost_speeds_work_up_and_a_drop_after_the_service_changes_nothing():
    assert _one_request([CapacityDrop(at_s=1.0, for_s=0.25, factor=2.0)]) == [1.75]
    assert _one_request([CapacityDrop(at_s=2.0, for_s=5.0, factor=0.1)]) == [2.0]


def test_overlapping_drops_multiply():
    # Speeds: 1 on [0, .5), .5 on [.5, 1), .25 on [1, 1.5), .5 on [1.5, 2), then 1:
    # work done by 2 is .5 + .25 + .125 + .25 = 1.125; the other .875 ends at 2.875.
    faults = [CapacityDrop(at_s=0.5, for_s=1.0, factor=0.5),
              CapacityDrop(at_s=1.0, for_s=1.0, factor=0.5)]  # fmt: skip
    assert _one_request(faults) == [2.875]
    profile = SpeedProfile(faults)
    assert [profile.factor_at(t) for t in (0.0, 0.5, 1.0, 1.5, 2.0)] == [1, 0.5, 0.25, 0.5, 1]


def test_a_drop_slows_every_server():
    # Two servers, two requests at 0, each 2 s; a third at 0 waits for the first free one.
    finish = _one_request([CapacityDrop(at_s=1.0, for_s=2.0, factor=0.5)], servers=2,
                          arrivals=(0.0, 0.0, 0.0))  # fmt: skip
    # The first two end at 3; the third starts at 3 (after the drop) and ends at 5.
    assert finish == [3.0, 3.0, 5.0]


def test_the_speed_profile_walks_many_pieces_exactly():
    faults = [CapacityDrop(at_s=float(k), for_s=0.5, factor=0.5) for k in range(10)]
    profile = SpeedProfile(faults)
    # Each second does 0.5 + 0.25 = 0.75 s of work: 7.5 by 10, then full speed.
    assert profile.finish_s(0.0, 7.5) == 10.0
    assert profile.finish_s(0.0, 8.0) == 10.5
    assert profile.finish_s(0.25, 0.125) == 0.5  # inside the first (half-speed) piece
    assert profile.finish_s(0.5, 0.25) == 0.75  # inside a full-speed piece
    assert profile.finish_s(0.75, 0.5) == 1.5  # .25 at full speed, .25 at half
    assert SpeedProfile([]).constant and not profile.constant


def test_a_downstream_keeps_the_runs_other_draws():
    # The downstream's stream is a sixth child of the seed: arrivals stay those of the
    # same scenario without it (common random numbers across a what-if).
    without = Scenario(
        arrivals=Poisson(rate=3.0), service=Exponential(mean=0.1), n_items=50, seed=4
    )
    with_it = Scenario(arrivals=Poisson(rate=3.0), n_items=50, seed=4,
                       downstream=Downstream(concurrency=2,
                                             service=Exponential(mean=0.1)))  # fmt: skip
    assert simulate(without).items.arrival_s.tolist() == simulate(with_it).items.arrival_s.tolist()
    assert isinstance(with_it.failures, NoFailures)
    assert with_it.offered_load == pytest.approx(0.3)


# -- the rest of the toolkit on a downstream scenario -------------------------------------


def test_diagnose_and_the_plan_scalings_read_the_downstreams_service():
    from pipeline.sim import diagnose
    from pipeline.sim.analysis.planning.headroom import scale_service, service_refusal
    from pipeline.sim.analysis.planning.perturb import perturbed

    scenario = Scenario(arrivals=Poisson(rate=5.0), n_items=200, seed=1,
                        config=PipelineConfig(concurrency=50, attempt_timeout_s=1.0),
                        downstream=Downstream(concurrency=1,
                                              service=Exponential(mean=0.1)))  # fmt: skip
    diagnose(simulate(scenario))  # no service of its own: the lease check stands aside
    assert service_refusal(scenario) is None
    slower = scale_service(scenario, 2.0)
    assert slower.downstream.service.mean == pytest.approx(0.2)
    assert slower.service is None
    with_client = scenario.replace(service=Constant(0.05))
    assert scale_service(with_client, 2.0).service.mean == pytest.approx(0.1)
    assert perturbed(scenario, "service_mean", 1.5).downstream.service.mean == pytest.approx(0.15)


@pytest.mark.slow  # a long run to count completions, about 8 s
def test_completions_during_a_drop_are_poisson_at_the_reduced_rate():
    # Two exponential servers (10/s each) kept busy by 2,000 requests waiting at time 0;
    # a drop to a quarter on [10, 30). Exponential work is memoryless, so at speed 0.25
    # each busy server completes at 2.5/s: the completions in [10, 30) are Poisson with
    # mean 2 x 2.5 x 20 = 100 (and 200 in [0, 10)). Over 40 seeds the totals are Poisson
    # with 40 times those means: a two-sided z-test at the 99.9% level each.
    totals = np.zeros(2)
    for seed in range(40):
        scenario = Scenario(arrivals=Trace([0.0] * 2000), n_items=2000, seed=seed,
                            config=PipelineConfig(concurrency=2000, queue_maxsize=None,
                                                  drain_timeout_s=None),
                            faults=[CapacityDrop(at_s=10.0, for_s=20.0, factor=0.25)],
                            downstream=Downstream(concurrency=2,
                                                  service=Exponential(mean=0.1)))  # fmt: skip
        finish = simulate(scenario).items.finish_s.to_numpy()
        totals += np.histogram(finish, bins=[0.0, 10.0, 30.0])[0]
    for total, mean in zip(totals, (40 * 200.0, 40 * 100.0), strict=True):
        assert abs(total - mean) / math.sqrt(mean) < 3.2905, (total, mean)


def test_a_drain_that_times_out_behind_a_downstream_loses_nothing():
    # A slow downstream and a 1 s drain: what is still waiting or running when the drain
    # gives up is handed back unfinished; every item is accounted for exactly once.
    scenario = Scenario(arrivals=Poisson(rate=20.0), n_items=200, seed=2,
                        config=PipelineConfig(concurrency=50, drain_timeout_s=1.0,
                                              attempt_timeout_s=2.0, max_attempts=2),
                        downstream=Downstream(concurrency=1, service=Constant(0.2),
                                              queue_maxsize=20))  # fmt: skip
    with pytest.warns(DrainTimeoutWarning):
        result = simulate(scenario)
    s = result.summary
    assert s["items_offered"] == 200
    assert s["items_offered"] == (s["items_completed"] + s["items_dead_lettered"]
                                  + s["items_unfinished"] + s["items_shed"])  # fmt: skip
    assert s["items_unfinished"] > 0
    assert s["downstream_served"] <= s["downstream_requests"]
    assert s["downstream_orphaned"] <= s["downstream_served"]
