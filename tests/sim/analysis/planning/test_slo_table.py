"""Which configurations of a sweep meet an SLO with confidence (slo_table), and the cheapest."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline.sim.analysis.planning.judgement import judge
from pipeline.sim.analysis.planning.slo import SLO
from pipeline.sim.analysis.planning.slo_table import slo_table, smallest_config_meeting
from pipeline.sim.stats.intervals import lognormal_mean_bounds, proportion_bound, t_quantile


def test_slo_table_uses_the_wider_of_the_t_and_lognormal_bounds(sweep_frame) -> None:
    frame = sweep_frame({(2, 50): [10.0, 12.0, 14.0]})
    row = slo_table(frame, "latency_p95_s", 20.0).iloc[0]
    t_bound = 12.0 + t_quantile(0.95, 2) * 2.0 / math.sqrt(3)
    expected = max(t_bound, lognormal_mean_bounds([10.0, 12.0, 14.0], 0.95)[1])
    assert expected > t_bound  # three values: the lognormal bound is the wider
    assert row["mean"] == pytest.approx(12.0)
    assert row["upper"] == pytest.approx(expected)
    assert row["meets"] == (expected <= 20.0)


def test_smallest_config_meeting_prefers_fewer_workers_then_smaller_queues(sweep_frame) -> None:
    frame = sweep_frame(
        {
            (2, 50): [100.0, 110.0, 120.0],
            (3, None): [10.0, 11.0, 12.0],
            (3, 200): [10.0, 11.0, 12.0],
            (4, 50): [5.0, 5.5, 6.0],
        }
    )
    choice = smallest_config_meeting(frame, "latency_p95_s", 30.0)
    assert (choice["concurrency"], choice["queue_maxsize"]) == (3, 200)


def test_smallest_config_meeting_returns_none_when_nothing_meets_the_slo(sweep_frame) -> None:
    frame = sweep_frame({(2, 50): [100.0, 110.0]})
    assert smallest_config_meeting(frame, "latency_p95_s", 30.0) is None


def test_a_single_replication_gives_no_bound_and_meets_nothing(sweep_frame) -> None:
    table = slo_table(sweep_frame({(2, 50): [1.0]}), "latency_p95_s", 30.0)
    assert math.isinf(table["upper"].iloc[0])
    assert not table["meets"].iloc[0]
    assert table["verdict"].iloc[0] == "undecided"


def test_slo_table_rejects_unknown_metrics_and_confidence_levels(sweep_frame) -> None:
    frame = sweep_frame({(2, 50): [1.0, 2.0]})
    with pytest.raises(ValueError, match="unknown metric"):
        slo_table(frame, "nope", 1.0)
    with pytest.raises(ValueError, match="confidence"):
        slo_table(frame, "latency_p95_s", 1.0, confidence=1.0)
    with pytest.raises(ValueError, match=r"needs the columns \['items_shed', 'items_offered'\]"):
        slo_table(frame, "shed_fraction", 0.01)


def test_an_empty_grid_is_one_point() -> None:
    # sweep(base, {}) runs base alone; the SLO helpers take it as a single grid point
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario
    from pipeline.sim.analysis.sweep import sweep

    base = Scenario(
        arrivals=Poisson(rate=1.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4),
        n_items=200,
        seed=3,
    )
    frame = sweep(base, {}, replications=3, processes=1, progress=False)
    table = slo_table(frame, "latency_p95_s", 1e6)
    assert list(table.columns) == [
        "replications", "mean", "upper", "meets", "verdict", "basis", "drain_timed_out"
    ]  # fmt: skip
    assert table["replications"].tolist() == [3] and table["meets"].tolist() == [True]
    choice = smallest_config_meeting(frame, "latency_p95_s", 1e6)
    assert choice is not None and choice["replications"] == 3
    assert smallest_config_meeting(frame, "latency_p95_s", 0.0) is None
    with pytest.raises(ValueError, match=r"cost columns \['concurrency'\] are not grid columns"):
        smallest_config_meeting(frame, "latency_p95_s", 1e6, cost=("concurrency",))


def test_default_cost_uses_the_grid_columns_there_are(sweep_frame) -> None:
    frame = sweep_frame({(2, 50): [100.0, 110.0], (3, 50): [10.0, 11.0], (4, 50): [5.0, 6.0]})
    frame = frame.drop(columns="queue_maxsize")
    frame.attrs["grid"] = ["concurrency"]
    assert smallest_config_meeting(frame, "latency_p95_s", 30.0)["concurrency"] == 3
    with pytest.raises(ValueError, match=r"cost columns \['queue_maxsize'\]"):
        smallest_config_meeting(frame, "latency_p95_s", 30.0, cost=("queue_maxsize",))


def test_slo_table_keeps_the_unbounded_queue_as_none(sweep_frame) -> None:
    table = slo_table(sweep_frame({(2, None): [1.0, 2.0], (2, 5): [1.0, 2.0]}), "latency_p95_s", 9)
    assert table["queue_maxsize"].tolist() == [None, 5]


def shed_frame(shed: dict[int, list[int]], offered: int) -> pd.DataFrame:
    """A sweep frame over concurrency: each replication's items shed, of ``offered``."""
    rows = [
        {"concurrency": c, "replication": r, "items_shed": k, "items_offered": offered}
        for c, ks in shed.items()
        for r, k in enumerate(ks)
    ]
    frame = pd.DataFrame(rows)
    frame.attrs["grid"] = ["concurrency"]
    return frame


def test_no_item_shed_in_any_replication_is_judged_by_the_exact_binomial_bound() -> None:
    # Three replications of 100 items, none shed: a t bound has no spread and said 0 <= 0.001
    # "meets"; 0 of 300 only bounds the share below 1 - 0.05**(1/300) = 0.99% at 95%.
    frame = shed_frame({2: [0, 0, 0], 3: [0, 0, 0]}, offered=100)
    table = slo_table(frame, "shed_fraction", 0.001)
    expected = proportion_bound(0, 300, 0.95)
    assert table["upper"].tolist() == [expected, expected]
    assert expected == pytest.approx(1 - 0.05 ** (1 / 300))
    assert table["basis"].tolist() == ["binomial", "binomial"]
    assert table["verdict"].tolist() == ["undecided", "undecided"]
    assert not table["meets"].any()
    assert smallest_config_meeting(frame, "shed_fraction", 0.001) is None
    # A limit the exact bound clears is met, by the cheapest point.
    assert smallest_config_meeting(frame, "shed_fraction", 0.01)["concurrency"] == 2


def test_slo_table_gives_judges_verdict_and_bound_at_every_grid_point() -> None:
    rng = np.random.default_rng(7)
    shed = {c: rng.binomial(200, 0.004, size=4).tolist() for c in range(1, 41)}
    frame = shed_frame(shed, offered=200)
    table = slo_table(frame, "shed_fraction", 0.01, confidence=0.9)
    slo = SLO("shed_fraction", "<=", 0.01)
    for c, ks in shed.items():
        row = table[table["concurrency"] == c].iloc[0]
        j = judge(slo, [k / 200 for k in ks], confidence=0.9, counts=[(k, 200) for k in ks])
        assert (row["verdict"], row["upper"], row["basis"]) == (j.verdict, j.bound, j.basis)


@pytest.mark.slow  # 2,000 grid points
def test_slo_table_meets_a_limit_the_share_sits_at_no_more_often_than_its_level() -> None:
    # The true shed share equals the limit, 0.2%, so "meets" is a false claim: at 95% it
    # may be made in at most 5% of grid points. With 3 replications of 100 items, 55% of
    # points shed nothing at all (0.998**300), the case a plain t bound called "meets".
    # 2,000 points: the claim rate's standard error at 5% is 0.49%; 3 of them are the
    # tolerance.
    rng = np.random.default_rng(11)
    points = 2000
    shed = {c: rng.binomial(100, 0.002, size=3).tolist() for c in range(points)}
    table = slo_table(shed_frame(shed, offered=100), "shed_fraction", 0.002)
    assert (table["basis"] == "binomial").mean() > 0.5
    assert table["meets"].mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / points)
