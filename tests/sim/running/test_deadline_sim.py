"""The simulator runs the engine's deadlines and priorities on the virtual clock (auto: asyncio)."""

from __future__ import annotations

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate


def scenario(**config):
    return Scenario(
        arrivals=Poisson(rate=10.0),
        service=Exponential(mean=0.3),
        config=PipelineConfig(concurrency=2, queue_maxsize=50, **config),
        n_items=400,
        seed=4,
    )


def test_expired_items_have_their_own_outcome_and_leave_the_queue_series():
    result = simulate(scenario(max_wait_s=1.0))
    assert result.summary["engine"] == "asyncio"
    counts = result.items["outcome"].value_counts()
    assert counts["expired"] == len(result.report.expired) > 0
    assert counts["completed"] == result.report.completed
    assert result.report.balanced
    # Every expiry took its item out of the queue: the step series end empty, never negative.
    assert result.series.queue_depth[-1] == 0 and result.series.queue_depth.min() >= 0
    assert result.series.in_system[-1] == 0


def test_the_same_seed_gives_the_same_expiries():
    first = simulate(scenario(max_wait_s=1.0, priority=lambda payload: 0))
    second = simulate(scenario(max_wait_s=1.0, priority=lambda payload: 0))
    assert first.report.expired == second.report.expired
    assert first.items.equals(second.items)
