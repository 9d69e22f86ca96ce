"""The plan explorer: SLO sliders re-plan with cached runs and keep the previous answer in view."""

from __future__ import annotations

import matplotlib
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.executors import RunCache
from pipeline.viz import explore_plan
from pipeline.viz.widgets.plan_explorer import PlanExplorer

matplotlib.use("Agg")

SEARCH = {"concurrency": range(1, 9), "queue_maxsize": [10, 100]}
SLOS = ["wait_mean_s<=0.5", "memory_peak_bytes<=8388608"]


def base() -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(),
        item_size_bytes=64 * 1024,
        n_items=2000,
        seed=3,
    )


@pytest.fixture
def panel() -> PlanExplorer:
    return explore_plan(base(), SEARCH, SLOS, ranges={"wait_mean_s": (0.05, 2.0)})


def test_the_first_draw_is_the_plan_with_the_given_limits(panel) -> None:
    fresh = plan(base(), SEARCH, SLOS, processes=1, progress=False)
    assert panel.plan.to_dict() == fresh.to_dict() and panel.previous is None
    assert panel.last_png.startswith(b"\x89PNG") and panel.error is None
    assert panel.new_runs == [fresh.runs_total]
    assert "chosen: <b>concurrency=" in panel.summary.value
    assert "mean wait ≤ 0.5 s" in panel.summary.value  # limits in words, not keys
    assert [c.description for c in panel.controls.values()] == [
        "mean wait (s) ≤",
        "peak memory (bytes) ≤",
    ]
    assert [s.limit for s in panel.current_slos()] == [0.5, 8388608.0]  # 8 MiB stays exact


def test_moving_a_slider_replans_reusing_runs_and_keeps_the_previous_answer(panel) -> None:
    before, png = panel.plan, panel.last_png
    panel.controls["wait_mean_s"].value = 0.1
    assert panel.error is None and panel.previous is before
    assert panel.plan.slos[0].limit == pytest.approx(0.1, rel=1e-2)
    fresh = plan(base(), SEARCH, panel.current_slos(), processes=1, progress=False)
    assert panel.plan.to_dict() == fresh.to_dict()  # the cache changes the speed only
    assert panel.plan.chosen["concurrency"] > before.chosen["concurrency"]
    assert panel.new_runs[-1] < panel.plan.runs_total  # the runs both plans need ran once
    assert panel.last_png != png and "before: <b>concurrency=" in panel.summary.value
    panel.controls["wait_mean_s"].value = 0.5  # back: every run is in the cache
    assert panel.new_runs[-1] == 0 and len(panel.timings_s) == 3


def test_a_plan_with_no_answer_says_so_in_the_panel() -> None:
    panel = explore_plan(base(), {"concurrency": [1, 2, 3]}, ["wait_mean_s<=0.5"])
    assert panel.plan.status == "infeasible"
    assert "<b>infeasible</b>" in panel.summary.value


def test_a_failure_during_a_move_is_shown_not_raised(panel, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("the cluster went away")

    monkeypatch.setattr("pipeline.viz.widgets.plan_explorer.plan", broken)
    panel.controls["wait_mean_s"].value = 0.2
    assert panel.error == "RuntimeError: the cluster went away"
    assert "Cannot plan" in panel.summary.value and panel.previous is None


def test_a_shared_cache_makes_the_first_draw_free() -> None:
    cache = RunCache()
    plan(base(), SEARCH, SLOS, executor=cache, progress=False)
    panel = explore_plan(base(), SEARCH, SLOS, cache=cache)
    assert panel.new_runs == [0]


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ({"wait_mean_s": (1.0, 2.0)}, r"must contain the limit of wait_mean_s<=0.5"),
        ({"wait_mean_s": (2.0, 1.0)}, r"two finite numbers, low < high"),
        ({"wait_mean_s": (0.1, float("nan"))}, r"two finite numbers, low < high"),
        ({"wait_mean_s": 5}, r"ranges\['wait_mean_s'\] must be two finite numbers"),
        ({"wait_mean_s": (0.1, 1, 2)}, r"two finite numbers, low < high, got \(0.1, 1, 2\)"),
        ({"latency_p99_s": (1, 2)}, r"ranges names no SLO of this plan: \['latency_p99_s'\]"),
    ],
)
def test_bad_ranges_are_refused_in_one_line(ranges, message) -> None:
    with pytest.raises(ValueError, match=message):
        explore_plan(base(), SEARCH, SLOS, ranges=ranges)


def test_a_limit_of_zero_needs_a_range_and_gets_a_linear_slider() -> None:
    with pytest.raises(ValueError, match=r"give ranges\['shed_fraction'\]"):
        explore_plan(base(), SEARCH, ["shed_fraction<=0"])
    panel = explore_plan(
        base(), {"concurrency": [4, 5]}, ["shed_fraction<=0"], ranges={"shed_fraction": (0, 0.1)}
    )
    assert type(panel.controls["shed_fraction"]).__name__ == "FloatSlider"


def test_bad_plan_arguments_raise_at_once() -> None:
    with pytest.raises(ValueError, match="the search space is empty"):
        explore_plan(base(), {}, SLOS)
    with pytest.raises(TypeError, match="cache must be a RunCache"):
        explore_plan(base(), SEARCH, SLOS, cache=object())


def test_a_bound_far_beyond_the_means_does_not_set_the_scale() -> None:
    # c = 6 and 7 stop at 3 skewed runs whose memory bound is up to 10,000 times their mean:
    # drawn whole, a byte axis ticked in MiB steps up to 15 GB took minutes and hid the means.
    result = plan(base(), SEARCH, SLOS, processes=1, progress=False)
    ran = result.candidates.dropna(subset=["memory_peak_bytes_mean"])
    means = ran["memory_peak_bytes_mean"]
    assert ran["memory_peak_bytes_bound"].max() > 1000 * means.max()  # the case is really here
    fig = result.figure()
    try:
        for axis in fig.axes[: len(result.slos)]:
            assert axis.get_ylim()[0] >= 0 and len(axis.yaxis.get_majorticklocs()) <= 20
        axis = fig.axes[1]
        assert axis.get_ylim()[1] <= 10 * max(8388608, means.max())  # limit and means rule
        marked = [line for line in axis.get_lines() if line.get_marker() == "^"]
        assert marked and "beyond the scale" in marked[0].get_label()
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
