"""Overload controls in virtual time through ``simulate``: the engine runs, the kernel refuses."""

from __future__ import annotations

import pytest

from pipeline import AIMD, CoDel, Gradient2, PipelineConfig
from pipeline.sim import Constant, Poisson, Scenario, simulate


def backlog_scenario(**controls):
    # One worker, 30 ms per item, 10 items waiting at t=0: the hand trace of
    # test_engine_controls.codel_run (FIFO: i5 shed at 0.15 s, 9 completed).
    return Scenario(
        arrivals=Poisson(rate=0.001),
        service=Constant(value=0.03),
        config=PipelineConfig(concurrency=1, queue_maxsize=None, **controls),
        initial_backlog=10,
        n_items=0,
        seed=1,
    )


def test_codel_in_virtual_time_gives_the_hand_computed_counts():
    result = simulate(backlog_scenario(codel=CoDel(lifo=False)), engine="asyncio")
    summary = result.summary
    assert summary["engine"] == "asyncio"
    assert summary["items_completed"] == 9
    assert summary["items_shed"] == summary["codel_shed"] == 1
    assert summary["items_admitted"] == 10
    assert summary["concurrency_limit"] is None
    shed = result.items[result.items.outcome == "shed"]
    assert list(shed.item_id) == [5]
    # the shed item left the queue at 0.15 s: the queue depth series steps down there
    assert result.timeseries.queue_depth.min() == 0


@pytest.mark.parametrize(
    "controls",
    [dict(concurrency_limit=AIMD()), dict(concurrency_limit=Gradient2()), dict(codel=CoDel())],
)
def test_the_kernel_refuses_in_one_line_and_auto_runs_the_engine(controls):
    scenario = backlog_scenario(**controls)
    with pytest.raises(ValueError, match="engine='kernel' does not support") as caught:
        simulate(scenario, engine="kernel")
    assert "\n" not in str(caught.value)
    assert simulate(scenario).summary["engine"] == "asyncio"


def test_summaries_without_controls_have_no_control_keys():
    summary = simulate(backlog_scenario(), engine="asyncio").summary
    assert "codel_shed" not in summary and "concurrency_limit" not in summary


def test_a_limit_reports_where_it_ended():
    summary = simulate(backlog_scenario(concurrency_limit=AIMD()), engine="asyncio").summary
    assert summary["concurrency_limit"] == 1 and summary["codel_shed"] == 0
