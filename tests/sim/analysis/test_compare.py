"""Paired comparisons under common random numbers: narrower, and right on Erlang C."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, compare
from pipeline.sim.analysis import theory
from pipeline.sim.analysis.compare import Comparison
from pipeline.sim.stats.intervals import paired_difference

# M/M/20 at 80% against M/M/21 (76%): close configurations, waits of a few hundredths of a second.
RATE, C = 16.0, 20
BASE = Scenario(
    arrivals=Poisson(rate=RATE),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=C, queue_maxsize=None, drain_timeout_s=None),
    n_items=20_000,
    seed=1,
    warmup_s=200.0,
)


@pytest.fixture(scope="module")
def latency():
    return compare(BASE, BASE.replace(concurrency=C + 1), metric="latency_mean_s", replications=10)


@pytest.fixture(scope="module")
def wait():
    return compare(BASE, BASE.replace(concurrency=C + 1), metric="wait_mean_s", replications=10)


def test_the_paired_interval_covers_erlang_c(wait):
    truth = theory.mmc(RATE, 1.0, C + 1).wait_mean_s - theory.mmc(RATE, 1.0, C).wait_mean_s
    assert wait.low <= truth <= wait.high, str(wait)
    assert wait.significant and wait.difference < 0


def test_common_random_numbers_cancel_the_service_times(wait, latency):
    # Both runs serve the same items in the same service times, so latency - wait (the mean
    # service time) is the same in both, and the two differences agree run by run.
    differences = np.subtract(latency.values_b, latency.values_a)
    assert differences == pytest.approx(np.subtract(wait.values_b, wait.values_a), abs=1e-9)
    # Unpaired, the mean service time's run-to-run noise (about 1/sqrt(20000) of a second)
    # stays in both means; paired, it is gone. Expected ratio here: about 2.
    assert latency.half_width < latency.unpaired_half_width / 1.5, str(latency)


def test_comparison_fields_agree_with_the_paired_t_interval(latency):
    assert isinstance(latency, Comparison)
    assert latency.replications == 10 and latency.metric == "latency_mean_s"
    expected = paired_difference(latency.values_a, latency.values_b)
    assert latency.interval == expected
    assert latency.mean_b - latency.mean_a == pytest.approx(latency.difference)
    assert "paired over 10 replications" in str(latency)


def test_replication_r_is_the_same_run_as_simulate_gives():
    from pipeline.sim import simulate_replication

    small = BASE.replace(n_items=500, warmup_s=0.0)
    c = compare(small, small.replace(concurrency=C + 1), replications=2)
    assert c.values_a[1] == simulate_replication(small, 1).summary["wait_mean_s"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"metric": "wait_mean"}, ValueError, "metric must be a numeric summary key"),
        ({"metric": "engine"}, ValueError, "metric must be a numeric summary key"),
        ({"replications": 1}, ValueError, "replications must be an integer >= 2"),
        ({"replications": True}, ValueError, "replications"),
        ({"level": 1.0}, ValueError, "level"),
        ({"level": math.nan}, ValueError, "level"),
        ({"engine": "simpy"}, ValueError, "engine"),
        ({"processes": 0}, ValueError, "processes"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    small = BASE.replace(n_items=50)
    with pytest.raises(error, match=match):
        compare(small, small, **kwargs)


def test_a_metric_without_a_value_is_refused():
    nothing_completes = BASE.replace(n_items=0)
    with pytest.raises(ValueError, match="has no value in replication 0"):
        compare(nothing_completes, nothing_completes, metric="latency_mean_s", replications=2)


def test_scenarios_are_checked():
    with pytest.raises(TypeError, match="b must be a Scenario"):
        compare(BASE, "BASE")  # type: ignore[arg-type]
