"""No printed interval reaches outside its quantity's range (no negative depth or wait)."""

from __future__ import annotations

import math

import pytest

from pipeline import PipelineConfig
from pipeline._units import metric_range
from pipeline.examples.ingest.twin import predict
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, simulate
from pipeline.sim.stats.intervals import MeanCI


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("queue_depth_max", (0.0, math.inf)),
        ("wait_mean_s", (0.0, math.inf)),
        ("items_shed", (0.0, math.inf)),
        ("throughput_per_s", (0.0, math.inf)),
        ("memory_peak_bytes", (0.0, math.inf)),
        ("shed_fraction", (0.0, 1.0)),
        ("utilisation", (0.0, 1.0)),
        ("classes.gold.expired_fraction", (0.0, 1.0)),
        ("write.queue_depth_mean", (0.0, math.inf)),
        ("a_column_of_my_own", (-math.inf, math.inf)),
    ],
)
def test_metric_range(metric, expected):
    assert metric_range(metric) == expected


def test_an_interval_is_cut_to_the_range_and_keeps_nan():
    assert MeanCI(60.0, 508.0).within(0.0) == (0.0, 568.0)
    assert MeanCI(0.5, 0.9).within(0.0, 1.0) == (0.0, 1.0)
    assert MeanCI(2.0, 1.0).within(0.0) == (1.0, 3.0)
    low, high = MeanCI(math.nan, math.nan).within(0.0, 1.0)
    assert math.isnan(low) and math.isnan(high)


def test_replications_summary_stays_in_each_metrics_range():
    runs = simulate(
        Scenario(
            arrivals=Poisson(8.0),
            service=Exponential(1.0),
            config=PipelineConfig(concurrency=10, queue_maxsize=20),
            n_items=300,
            seed=2,
        ),
        replications=3,
        progress=False,
    )
    table = runs.summary
    for metric, row in table.iterrows():
        floor, ceiling = metric_range(metric)
        if math.isfinite(row["half_width"]):
            assert floor <= row["low"] <= row["mean"] <= row["high"] <= ceiling, metric
    assert table.loc["queue_depth_max", "low"] >= 0


def test_the_twins_prediction_intervals_never_go_negative():
    # Three short runs of a two-stage chain: the t prediction interval of the p95 latency
    # reached -0.013 s (the ingest example's --json showed a peak queue of [-448, 568]).
    chain = Scenario(
        arrivals=Poisson(10.0),
        stages=[
            StageSpec(
                name="fetch", service=Exponential(0.05), config=PipelineConfig(concurrency=2)
            ),
            StageSpec(
                name="write", service=Exponential(0.09), config=PipelineConfig(concurrency=1)
            ),
        ],
        n_items=300,
        seed=4,
    )
    predicted = predict(chain, replications=3)
    for key in ("throughput_per_s", "latency_p95_s", "queue_depth_max"):
        low, high = predicted[f"{key}_interval"]
        assert 0.0 <= low <= predicted[key] <= high, (key, low, high)
