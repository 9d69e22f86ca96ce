"""Figures of a run with item classes: the queue by class and the waits by class."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.figure import Figure

from pipeline import PipelineConfig
from pipeline.sim import Exponential, ItemClass, Poisson, Scenario, simulate
from pipeline.viz import plot_class_depth, plot_class_waits
from pipeline.viz.figures.classes import class_waiting


@pytest.fixture(scope="module")
def run():
    return simulate(
        Scenario(
            arrivals=Poisson(rate=2.6),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=3, queue_maxsize=None, drain_timeout_s=None),
            classes=[
                ItemClass(name="high", share=1, priority=0),
                ItemClass(name="low", share=3, priority=1, patience=Exponential(mean=2.0)),
                ItemClass(name="idle", share=0),
            ],
            n_items=1500,
            seed=3,
        )
    )


def test_the_classes_waiting_add_up_to_the_queue_at_every_step(run):
    # With one attempt per item, items waiting to start are the queue, split by class.
    series = run.series
    total = np.zeros(len(series.time_s))
    for name in ("high", "low", "idle"):
        time_s, count = class_waiting(run, name)
        assert count.min() >= 0 and count[-1] == 0
        index = np.searchsorted(time_s, series.time_s, side="right") - 1
        total += count[index]
    assert np.array_equal(total, series.queue_depth)


def test_an_expired_item_leaves_the_waiting_count_when_it_expires(run):
    items = run.items
    gone = items[items["outcome"] == "expired"].iloc[0]
    time_s, count = class_waiting(run, "low")
    at = run.columns.expired_s[int(gone["item_id"])]
    assert at > gone["admitted_s"]
    before = count[np.searchsorted(time_s, at, side="left") - 1]
    after = count[np.searchsorted(time_s, at, side="right") - 1]
    assert after <= before - 1 or (items["start_s"] == at).any()


def test_plot_class_depth_draws_one_line_per_class(run):
    fig = plot_class_depth(run)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["high", "low", "idle"]
    thinned = plot_class_depth(run, max_points=50).axes[0]
    thin = thinned.get_lines()[1]
    assert len(thin.get_xdata()) <= 60 and "band min–max" in thin.get_label()
    _, low = class_waiting(run, "low")
    # The line is the mean; the band under it keeps the peak.
    assert max(thin.get_ydata()) <= low.max()
    peaks = [c.get_paths()[0].vertices[:, 1].max() for c in thinned.collections]
    assert low.max() in peaks


def test_plot_class_waits_labels_means_and_expiry_and_draws_theory(run):
    fig = plot_class_waits(run, theory={"high": 0.2, "low": 0.9})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0].startswith("high: mean") and "expired" not in labels[0]
    assert labels[1].startswith("low: mean") and "% expired" in labels[1]
    assert labels[2] == "idle: no item started"
    assert labels[-1] == "theory: mean wait"
    with pytest.raises(ValueError, match="theory names no class of this run: \\['mid'\\]"):
        plot_class_waits(run, theory={"mid": 1.0})


def test_a_run_without_classes_is_one_line_pointing_at_plot_depth():
    plain = simulate(
        Scenario(arrivals=Poisson(rate=1.0), service=Exponential(mean=0.5), n_items=20)
    )
    for plot in (plot_class_depth, plot_class_waits):
        with pytest.raises(ValueError, match="this run has no item classes"):
            plot(plain)
    with pytest.raises(ValueError, match="no class named 'x'"):
        class_waiting(simulate(plain.scenario.replace(classes=[ItemClass(name="a")])), "x")
