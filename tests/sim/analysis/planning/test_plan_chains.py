"""plan() on a chain: its cost order, what it chooses and which SLOs it takes.

A chain's default cost order is total workers over the stages searched, then
total queue slots; its SLOs bound the end-to-end summary (``items_held_max``
included) and never one stage's metric.
"""

from __future__ import annotations

import pytest

from pipeline import PipelineConfig
from pipeline.sim import DrainTimeoutWarning, Exponential, Poisson, Scenario, StageSpec, simulate
from pipeline.sim.analysis.planning.plan import plan
from pipeline.sim.analysis.planning.slo import CHAIN_METRICS, SLO


def chain(fan_out: int = 1, n_items: int = 100) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(
                name="fetch",
                service=Exponential(mean=0.4),
                config=PipelineConfig(concurrency=2, queue_maxsize=10),
                fan_out=fan_out,
            ),
            StageSpec(
                name="write",
                service=Exponential(mean=0.1),
                config=PipelineConfig(concurrency=2, queue_maxsize=None),
            ),
        ],
        n_items=n_items,
        seed=5,
    )


def quick_plan(base, search, slos, **options):
    return plan(base, search, slos, replications=2, processes=1, progress=False, **options)


def test_chain_metrics_are_the_numbers_of_its_end_to_end_summary():
    summary = simulate(chain(n_items=20)).summary
    numeric = {
        key
        for key, value in summary.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    assert set(CHAIN_METRICS) == numeric - {"wall_time_s", "stages"}


def test_the_cost_order_is_total_workers_then_total_queue_slots():
    # An SLO every run fails (100 items offered): each configuration is examined, in order.
    search = {
        "fetch.concurrency": [1, 3, 2],
        "write.concurrency": [1, 2],
        "write.queue_maxsize": [None, 5],
        "fetch.queue_maxsize": [4],
    }
    result = quick_plan(chain(), search, ["items_offered<=1"])
    assert result.status == "infeasible"
    assert result.cost == [
        "fetch.concurrency",
        "write.concurrency",
        "write.queue_maxsize",
        "fetch.queue_maxsize",
    ]
    points = [
        (p["fetch.concurrency"], p["write.concurrency"], p["write.queue_maxsize"])
        for p in result.candidates[list(search)].to_dict("records")
    ]
    # Within equal totals, lexicographic in the cost fields (fetch first).
    assert points == [
        (1, 1, 5), (1, 1, None),  # 2 workers; 9 queue slots, then unbounded
        (1, 2, 5), (2, 1, 5), (1, 2, None), (2, 1, None),  # 3 workers
        (2, 2, 5), (3, 1, 5), (2, 2, None), (3, 1, None),  # 4
        (3, 2, 5), (3, 2, None),  # 5
    ]  # fmt: skip


def test_an_explicit_cost_is_lexicographic_on_a_chain_too():
    search = {"fetch.concurrency": [1, 2], "write.concurrency": [1, 3]}
    result = quick_plan(chain(), search, ["items_offered<=1"], cost=list(search))
    points = [tuple(p.values()) for p in result.candidates[list(search)].to_dict("records")]
    assert points == [(1, 1), (1, 3), (2, 1), (2, 3)]


def test_the_choice_names_every_stage_config_and_its_cheaper_neighbours():
    result = quick_plan(
        chain(),
        {"fetch.concurrency": [1, 2, 3], "write.concurrency": [1, 2]},
        ["latency_p95_s<=1e6", "items_held_max<=1e6"],
    )
    assert result.status == "chosen"
    assert result.chosen == {
        "fetch.concurrency": 1,
        "write.concurrency": 1,
        "fetch.queue_maxsize": 10,
        "fetch.on_full": "block",
        "fetch.max_attempts": 3,
        "write.queue_maxsize": None,
        "write.on_full": "block",
        "write.max_attempts": 3,
    }
    assert "concurrency" not in result.chosen  # a chain has no one concurrency
    assert result.to_dict()["chosen"] == result.chosen


@pytest.mark.parametrize(
    ("slo", "fan_out", "message"),
    [
        ("wait_mean_s<=1", 1, "a chain's summary is end to end and has no wait_mean_s"),
        ("utilisation<=0.8", 1, "allowed on a chain: items_offered"),
        ("write.utilisation<=0.8", 1, "'write.utilisation' is one stage's metric"),
        ("completed_fraction>=0.9", 5, "a stage of this chain fans out"),
    ],
)
def test_slos_a_chain_cannot_judge_are_refused_before_any_run(slo, fan_out, message):
    with pytest.raises(ValueError, match=message):
        quick_plan(chain(fan_out), {"write.concurrency": [1, 2]}, [slo])


def test_a_fraction_is_allowed_on_a_chain_without_fan_out_but_not_when_fan_out_is_searched():
    result = quick_plan(chain(), {"write.concurrency": [1]}, ["completed_fraction>=0.5"])
    assert result.status == "chosen"
    with pytest.raises(ValueError, match="fans out"):
        quick_plan(chain(), {"write.fan_out": [1, 2]}, ["completed_fraction>=0.5"])


def test_items_held_max_is_a_chain_metric_only():
    assert SLO.parse("items_held_max<=100").metric == "items_held_max"
    single = Scenario(arrivals=Poisson(rate=1.0), service=Exponential(mean=0.5), n_items=20)
    with pytest.raises(ValueError, match="items_held_max is a chain's metric"):
        quick_plan(single, {"concurrency": [1, 2]}, ["items_held_max<=100"])


def backlogged(drain_timeout_s: float | None = 30.0) -> Scenario:
    """200 items in 20 s into a chain whose one writer needs about 60 s for them."""
    config = {"queue_maxsize": None, "drain_timeout_s": drain_timeout_s}
    return Scenario(
        arrivals=Poisson(rate=10.0),
        stages=[
            StageSpec(
                name="fetch",
                service=Exponential(mean=0.05),
                config=PipelineConfig(concurrency=4, **config),
            ),
            StageSpec(
                name="write",
                service=Exponential(mean=0.3),
                config=PipelineConfig(concurrency=1, **config),
            ),
        ],
        n_items=200,
        seed=1,
    )


@pytest.fixture(scope="module")
def cut_plans():
    """The backlogged chain's plan on each engine: "auto" runs the kernel where the drain
    finishes and falls back to the asyncio engine where it is cut (the kernel declines those)."""
    search, slos = {"write.concurrency": [1, 2, 3]}, ["latency_p95_s<=33"]
    plans = {}
    for engine in ("asyncio", "auto"):
        # 12 replications each: enough for the bound of the cut runs to clear the limit.
        options = dict(replications=12, processes=1, progress=False, engine=engine)
        with pytest.warns(DrainTimeoutWarning, match=r"in 12 of 36 plan runs: .* failing every"):
            plans[engine] = plan(backlogged(), search, slos, **options)
    return plans


def test_both_engines_plan_the_cut_runs_alike(cut_plans):
    runs = {engine: p.runs for engine, p in cut_plans.items()}
    assert runs["asyncio"]["drain_timed_out"].tolist() == runs["auto"]["drain_timed_out"].tolist()
    assert runs["asyncio"]["items_unfinished"].tolist() == runs["auto"]["items_unfinished"].tolist()
    assert runs["asyncio"]["latency_p95_s"].to_numpy() == pytest.approx(
        runs["auto"]["latency_p95_s"].to_numpy(), rel=1e-9, abs=1e-9
    )
    assert cut_plans["auto"].candidates["engine"].tolist() == ["asyncio", "kernel", "kernel"]


@pytest.mark.parametrize("engine", ["asyncio", "auto"])
def test_a_run_the_drain_cut_short_never_meets_a_latency_slo(cut_plans, engine):
    # One writer leaves 24-40 items unfinished: its p95 (about 31 s) leaves out the
    # slowest tail (about 34 s drained) and, judged as it stands, would meet <= 33.
    cut = cut_plans[engine]
    options = dict(replications=12, processes=1, progress=False, engine=engine)
    drained = plan(
        backlogged(None), {"write.concurrency": [1, 2, 3]}, ["latency_p95_s<=33"], **options
    )
    assert cut.chosen["write.concurrency"] == drained.chosen["write.concurrency"] == 2
    one = cut.candidates.iloc[0]
    assert one["verdict"] == "fails" and one["drain_timed_out"] == 12
    assert one["items_unfinished_max"] > 0
    assert one["latency_p95_s_bound"] <= 33  # the bound alone would have said "meets"
    assert one["latency_p95_s_note"].startswith("the drain timed out in 12 of 12 runs")
    assert "counted as failing" in one["latency_p95_s_note"]
    assert cut.to_dict()["runs_drain_timed_out"] == 12
    assert cut.to_dict()["candidates"][0]["drain_timed_out"] == 12
    assert cut.runs["drain_timed_out"].tolist() == [True] * 12 + [False] * 24
    text = cut.report()
    assert "(drain timed out) fails" in text and "in 12 of 36 runs" in text
    assert [str(slo) for slo in cut.binding.cheaper[0].failed] == ["latency_p95_s<=33"]
    figure = cut.figure()
    labels = figure.axes[0].get_legend_handles_labels()[1] + [
        t.get_text() for legend in figure.legends for t in legend.get_texts()
    ]
    assert "drain timed out: fails" in labels


def test_a_plan_without_latency_slos_still_says_its_drains_timed_out():
    with pytest.warns(DrainTimeoutWarning) as caught:
        result = quick_plan(backlogged(), {"write.concurrency": [1, 2]}, ["items_held_max<=1e6"])
    assert "as failing" not in str(caught[0].message)  # no latency SLO to fail
    assert result.chosen["write.concurrency"] == 1
    text = result.report()
    assert "its drain timed out in 2 of 2 runs" in text and "unfinished_fraction" in text
