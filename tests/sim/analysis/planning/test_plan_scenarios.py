"""Scenario sets: one configuration that meets every SLO in every scenario.

Checked on M/M/c, where Erlang C gives the truth exactly
(:mod:`pipeline.sim.analysis.theory`): with a normal and a peak arrival rate,
the chosen concurrency is the smallest that meets the SLO at the peak, and the
peak is named as the binding scenario.
"""

import numpy as np
import pytest

from pipeline.sim import DrainTimeoutWarning, Exponential, Poisson, Scenario, StageSpec
from pipeline.sim.analysis.planning.plan import plan
from pipeline.sim.analysis.theory import mmc

LIMIT = 0.13  # seconds of mean wait: about 1.6x either side of c = 10 and 11 at rate 8


def _scenario(rate, n_items=5_000, seed=1):
    return Scenario(
        arrivals=Poisson(rate=rate), service=Exponential(mean=1.0), n_items=n_items, seed=seed
    )


def _smallest(rate):
    return next(c for c in range(1, 50) if rate < c and mmc(rate, 1.0, c).wait_mean_s <= LIMIT)


def test_the_peak_binds_and_the_choice_is_the_erlang_c_smallest_at_the_peak():
    normal, peak = _scenario(4.0), _scenario(8.0, seed=2)
    # Far from ties: the choice at the peak has room, the one below it fails clearly.
    c_star = _smallest(8.0)
    assert mmc(8.0, 1.0, c_star).wait_mean_s < LIMIT / 1.5
    assert mmc(8.0, 1.0, c_star - 1).wait_mean_s > 1.5 * LIMIT
    assert _smallest(4.0) < c_star
    p = plan(
        normal,
        {"concurrency": range(1, 20)},
        [f"wait_mean_s<={LIMIT}"],
        scenarios={"normal": normal, "peak": peak},
        progress=False,
        processes=1,
    )
    assert p.status == "chosen"
    assert p.chosen["concurrency"] == c_star
    assert p.binding_scenario == "peak"
    assert {name: v.verdict for name, v in p.scenarios.items()} == {
        "normal": "meets",
        "peak": "meets",
    }
    payload = p.to_dict()
    assert payload["binding_scenario"] == "peak"
    assert set(payload["scenarios"]) == {"normal", "peak"}
    assert payload["scenarios"]["peak"]["judgements"][0]["slo"] == f"wait_mean_s<={LIMIT}"
    # Bonferroni over 7 looks (3..192) and 2 scenarios.
    assert p.look_confidence == pytest.approx(1 - 0.05 / 14)
    text = p.report()
    assert "in scenario 'peak'" in text and "scenarios at the chosen configuration" in text
    runs = p.runs
    assert set(runs["scenario"]) == {"normal", "peak"}


@pytest.mark.slow  # a plan, its headroom and sensitivity: 3 s
def test_headroom_and_sensitivity_follow_the_binding_scenario():
    normal, peak = _scenario(4.0, n_items=2_000), _scenario(8.0, n_items=2_000, seed=2)
    p = plan(
        normal,
        {"concurrency": range(10, 14)},
        [f"wait_mean_s<={LIMIT}"],
        scenarios={"normal": normal, "peak": peak},
        headroom=True,
        progress=False,
        processes=1,
    )
    assert p.status == "chosen" and p.binding_scenario == "peak"
    # The peak's headroom: the factor is bounded by the peak's own Erlang C limit,
    # far below the normal scenario's (rate 4 could more than double).
    exact = next(
        f / 100 for f in range(100, 300) if mmc(8.0 * f / 100, 1.0, 11).wait_mean_s > LIMIT
    )
    assert exact < 1.2 < 2 * 0.8  # the normal scenario's limit is above 2
    assert p.headroom.arrival_rate.low <= exact
    assert p.headroom.arrival_rate.high is not None and p.headroom.arrival_rate.high < 1.6
    assert "headroom (peak)" in p.report()
    found = p.sensitivity(inputs=["arrival_rate"], change=0.2)
    assert found.scenario == "peak" and found.to_dict()["scenario"] == "peak"
    assert found.rows[0].base == pytest.approx(p.scenarios["peak"].judgements[0].mean)
    assert "in scenario 'peak'" in found.report()


def test_a_set_of_one_scenario_is_the_plan_of_that_scenario():
    peak = _scenario(8.0, n_items=2_000)
    alone = plan(peak, {"concurrency": range(8, 14)}, [f"wait_mean_s<={LIMIT}"], progress=False)
    as_set = plan(
        peak,
        {"concurrency": range(8, 14)},
        [f"wait_mean_s<={LIMIT}"],
        scenarios={"peak": peak},
        progress=False,
    )
    assert as_set.chosen == alone.chosen
    assert [c.values for c in as_set.examined] == [c.values for c in alone.examined]


def test_both_engines_give_the_same_plan_over_a_set():
    normal, peak = _scenario(4.0, n_items=500), _scenario(8.0, n_items=500, seed=2)
    plans = [
        plan(
            normal,
            {"concurrency": range(9, 13)},
            ["wait_mean_s<=0.5"],
            scenarios={"normal": normal, "peak": peak},
            replications=3,
            engine=engine,
            progress=False,
            processes=1,
        )
        for engine in ("asyncio", "kernel")
    ]
    assert plans[0].chosen == plans[1].chosen
    for a, b in zip(plans[0].examined, plans[1].examined, strict=True):
        assert np.allclose(a.values, b.values, rtol=1e-9, atol=1e-9)
    assert {c for p in plans for c in p.examined[0].engines} == {"asyncio", "kernel"}


@pytest.mark.parametrize(
    "scenarios, message",
    [
        ({}, "scenarios is empty"),
        ([1], "scenarios must be a dict"),
        ({"": None}, "a scenario name must be a non-empty string"),
        ({"peak": "peak.toml"}, "scenarios['peak'] must be a Scenario"),
    ],
)
def test_a_bad_set_is_refused_before_any_run(scenarios, message):
    with pytest.raises((TypeError, ValueError), match=message.replace("[", r"\[")):
        plan(_scenario(4.0), {"concurrency": [5]}, ["wait_mean_s<=1"], scenarios=scenarios)


def test_a_chain_mixed_with_a_single_stage_is_refused():
    chain = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[StageSpec(name="write", service=Exponential(mean=0.1))],
        n_items=100,
    )
    with pytest.raises(ValueError, match="mix a chain"):
        plan(
            chain,
            {"write.concurrency": [1]},
            ["latency_p95_s<=1"],
            scenarios={"normal": chain, "flat": _scenario(4.0)},
        )


def test_a_searched_field_a_scenario_lacks_is_named():
    def chain(*names):
        return Scenario(
            arrivals=Poisson(rate=1.0),
            stages=[StageSpec(name=n, service=Exponential(mean=0.1)) for n in names],
            n_items=100,
        )

    base = chain("fetch", "write")
    with pytest.raises(ValueError, match=r"scenario 'short'.*fetch\.concurrency"):
        plan(
            base,
            {"fetch.concurrency": [1]},
            ["latency_p95_s<=1"],
            scenarios={"normal": base, "short": chain("write")},
        )


def test_a_set_plans_the_same_on_a_process_pool():
    normal, peak = _scenario(4.0, n_items=1_000), _scenario(8.0, n_items=1_000, seed=2)
    plans = [
        plan(
            normal,
            {"concurrency": range(9, 13)},
            [f"wait_mean_s<={LIMIT}"],
            scenarios={"normal": normal, "peak": peak},
            progress=False,
            processes=processes,
        )
        for processes in (1, 2)
    ]
    assert plans[0].to_dict() == plans[1].to_dict()


def test_a_drain_cut_in_one_scenario_fails_only_that_scenarios_latency_slo():
    normal = _scenario(4.0, n_items=500)
    peak = _scenario(8.0, n_items=500, seed=2).replace(drain_timeout_s=0.5)
    with pytest.warns(DrainTimeoutWarning, match="3 of 3 plan runs"):
        p = plan(
            normal,
            {"concurrency": [7]},
            ["wait_mean_s<=1000"],
            scenarios={"normal": normal, "peak": peak},
            replications=3,
            skip_unstable=False,
            progress=False,
        )
    found = p.scenarios
    assert found["peak"].verdict == "fails"
    assert found["peak"].judgements[0].drain_timed_out == 3
    assert found["normal"].verdict == "meets"
    assert found["normal"].judgements[0].drain_timed_out == 0
    assert set(p.runs.loc[p.runs["scenario"] == "peak", "drain_timed_out"]) == {True}
