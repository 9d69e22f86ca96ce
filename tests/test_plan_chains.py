"""plan() on a chain: its cost order, what it chooses and which SLOs it takes.

A chain's default cost order is total workers over the stages searched, then
total queue slots; its SLOs bound the end-to-end summary (``items_held_max``
included) and never one stage's metric.
"""

from __future__ import annotations

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, simulate
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
