"""A simulated pipeline that autoscales: the asyncio engine runs it, its summary says so."""

from __future__ import annotations

import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.sim import Constant, Exponential, Poisson, Scenario, simulate


def scenario(**scaler) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=20.0),
        service=Exponential(mean=0.5),
        n_items=2000,
        seed=3,
        config=PipelineConfig(
            concurrency=2,
            queue_maxsize=None,
            autoscale=Autoscaler(max_workers=30, target=2.0, sync_s=5.0, **scaler),
        ),
    )


def test_the_summary_carries_the_pool_and_utilisation_divides_by_it():
    summary = simulate(scenario(scale_down_stabilization_s=30.0)).summary
    assert summary["engine"] == "asyncio"
    assert summary["scale_events"] >= 2 and 2 < summary["workers_max"] <= 30
    assert summary["workers_mean"] == pytest.approx(
        summary["worker_seconds"] / summary["sim_time_s"], rel=1e-12
    )
    # 20 items/s of 0.5 s keep about 10 workers busy, out of the pool's mean
    assert summary["utilisation"] == pytest.approx(10.0 / summary["workers_mean"], rel=0.1)


def test_a_fixed_pool_has_no_pool_keys():
    fixed = Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=0.5), n_items=50, seed=1)
    assert "workers_mean" not in simulate(fixed).summary


def test_the_kernel_refuses_an_autoscaler_in_one_line():
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support autoscaling"):
        simulate(scenario(), engine="kernel")


def test_a_burst_ramps_the_pool_as_the_rules_say():
    # 1,000 items waiting at 0 s and one more a second, each 100 s of work: syncs at 15,
    # 30 and 45 s grow the pool 1 -> 5 -> 10 -> 20 (its max), where it stays while items
    # arrive (the syncs stop when the drain begins, after the last arrival).
    burst = Scenario(
        arrivals=Poisson(rate=1.0),
        service=Constant(value=100.0),
        n_items=300,
        initial_backlog=1000,
        seed=1,
        config=PipelineConfig(
            concurrency=1,
            queue_maxsize=None,
            drain_timeout_s=None,
            autoscale=Autoscaler(max_workers=20),
        ),
    )
    summary = simulate(burst).summary
    assert summary["workers_max"] == 20 and summary["scale_events"] == 3
    assert summary["items_completed"] == 1300
    # Every second of work is a second of some worker's time.
    assert summary["worker_seconds"] >= 1300 * 100.0
    assert summary["workers_mean"] <= 20
