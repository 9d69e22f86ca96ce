"""The notebooks' small widgets: FocusedWidget's contract, and each lesson's widget redraws."""

from __future__ import annotations

import asyncio
import base64
import io
import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from pipeline import Backoff, PipelineConfig
from pipeline.lessons import widgets as lessons
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    LogNormal,
    OnOff,
    Poisson,
    Scenario,
    simulate,
)
from pipeline.viz.widgets.focused import FocusedWidget, slider

BASE = Scenario(
    arrivals=Poisson(rate=3.2),
    service=Exponential(mean=1.0),
    # No drain timeout: a slider down to 2 workers overloads the run, and its tail counts.
    config=PipelineConfig(concurrency=4, queue_maxsize=100, drain_timeout_s=None),
    n_items=300,
    seed=1,
)


def png_of(widget) -> bytes:
    (output,) = widget.figure.outputs
    return base64.b64decode(output["data"]["image/png"])


def tiny(debounce_s=0.0, **kw):
    """A widget over BASE with one concurrency slider: depth drawn, two numbers summarised."""
    from pipeline.viz.figures.run import plot_depth

    return FocusedWidget(
        {"concurrency": slider("concurrency", 4, 1, 8)},
        run=lambda s: simulate(BASE.replace(concurrency=s["concurrency"])),
        draw=lambda axes, r, prev: plot_depth(r, axes[0], compare=prev),
        summarise=lambda r: [("p95 latency", f"{r.summary['latency_p95_s']:.3g} s")],
        panels=1,
        debounce_s=debounce_s,
        **kw,
    )


pytestmark = pytest.mark.usefixtures("no_open_figures")


def test_first_draw_at_once_with_dom_classes_and_a_retina_png():
    w = tiny()
    assert "pipeline-widget" in w.widget._dom_classes
    assert "pipeline-widget-figure" in w.figure._dom_classes
    assert "pipeline-widget-summary" in w.summary._dom_classes
    (output,) = w.figure.outputs
    size = output["metadata"]["image/png"]
    assert Image.open(io.BytesIO(png_of(w))).size == (2 * size["width"], 2 * size["height"])
    assert w.last_result is not None and w.previous_result is None
    assert "p95 latency" in w.summary_html and "concurrency=4" in w.summary_html
    assert w.error is None and len(w.timings_s) == 1


def test_a_change_redraws_and_keeps_the_previous_run_for_comparison():
    w = tiny()
    first, before_png, before_html = w.last_result, png_of(w), w.summary_html
    w.controls["concurrency"].value = 2
    assert w.previous_result is first
    assert w.last_result.scenario.config.concurrency == 2
    assert png_of(w) != before_png and w.summary_html != before_html
    assert "was " in w.summary_html  # the previous run's value beside the new one
    faded = [ln for ln in w.axes[0].get_lines() if ln.get_visible() and ln.get_alpha() == 0.3]
    assert faded, "the previous run is drawn, faded"
    assert set(w.last_breakdown) == {"run_s", "render_s"}


def test_a_failing_run_is_reported_in_the_summary_not_raised():
    def run(settings):
        if settings["concurrency"] == 3:
            raise ValueError("no such thing")
        return simulate(BASE.replace(concurrency=settings["concurrency"]))

    w = FocusedWidget(
        {"concurrency": slider("concurrency", 4, 1, 8)},
        run=run,
        draw=lambda axes, r, prev: None,
        panels=1,
        debounce_s=0,
    )
    last = w.last_result
    w.controls["concurrency"].value = 3
    assert w.error == "ValueError: no such thing"
    assert "no such thing" in w.summary_html and w.last_result is last
    w.controls["concurrency"].value = 5
    assert w.error is None and w.last_result.scenario.config.concurrency == 5


def test_a_burst_of_changes_in_a_running_loop_makes_one_update():
    async def burst():
        w = tiny(debounce_s=0.05)
        for value in (5, 6, 7, 8):
            w.controls["concurrency"].value = value
        assert len(w.timings_s) == 1  # nothing yet: waiting for quiet
        await asyncio.sleep(0.3)
        return w

    w = asyncio.run(burst())
    assert len(w.timings_s) == 2
    assert w.last_result.scenario.config.concurrency == 8


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"controls": {}}, ValueError, "controls"),
        ({"controls": {"x": object()}}, TypeError, "control 'x'"),
        ({"run": None}, TypeError, "run must be callable"),
        ({"draw": 3}, TypeError, "draw must be callable"),
        ({"panels": 0}, ValueError, "panels"),
        ({"panels": True}, ValueError, "panels"),
        ({"debounce_s": math.nan}, ValueError, "debounce_s"),
        ({"debounce_s": math.inf}, ValueError, "debounce_s"),
        ({"debounce_s": -1}, ValueError, "debounce_s"),
        ({"debounce_s": "fast"}, ValueError, "debounce_s"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    arguments = {
        "controls": {"c": widgets.IntSlider(1)},
        "run": lambda s: s,
        "draw": lambda axes, r, p: None,
        **kwargs,
    }
    controls, run, draw = arguments.pop("controls"), arguments.pop("run"), arguments.pop("draw")
    with pytest.raises(error, match=match):
        FocusedWidget(controls, run, draw, **arguments)


def test_slider_picks_int_or_float_and_updates_on_release():
    assert isinstance(slider("n", 4, 1, 8), widgets.IntSlider)
    s = slider("p", 0.3, 0.0, 0.9, 0.05)
    assert isinstance(s, widgets.FloatSlider) and s.continuous_update is False


# -- each lesson's widget ----------------------------------------------------------------------


def _llm_batch():
    from pathlib import Path

    from pipeline.sim.workloads.traces.replay import load_trace

    data = Path(__file__).resolve().parents[2] / "data" / "llm_batch.csv"
    return load_trace(data), pd.read_csv(data)["tokens"].to_numpy()


def _widgets():
    bursty = Scenario(
        arrivals=OnOff(rate_on=8.0, rate_off=1.0, mean_on_s=60, mean_off_s=120),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=50, drain_timeout_s=None),
        n_items=3000,
        seed=3,
        item_size_bytes=64 * 1024,
    )
    retries = BASE.replace(arrivals=Poisson(rate=2.0), failures=IndependentFailures(0.3))
    drain = Scenario(
        arrivals=Poisson(rate=0.16),
        service=LogNormal(mean=20.0, cv=1.5),
        config=PipelineConfig(concurrency=4, backoff=Backoff.constant(5.0), drain_timeout_s=30.0),
        failures=IndependentFailures(p=0.2),
        duration_s=600,
        seed=4,
    )
    batch, tokens = _llm_batch()
    llm = PipelineConfig(
        concurrency=8,
        queue_maxsize=200,
        max_attempts=8,
        drain_timeout_s=None,
        backoff=Backoff(base_s=1.0, factor=2.0, cap_s=30.0, jitter=True),
    )
    return {
        "burst": (lambda: lessons.burst_widget(bursty), "maxsize", 20.0),
        "knee": (lambda: lessons.knee_widget(BASE, n_items=1000), "concurrency", 5),
        "retry": (lambda: lessons.retry_widget(retries, n_items=1000), "max_attempts", 5),
        "drain": (lambda: lessons.drain_widget(drain), "drain_timeout_s", 60),
        "provider": (
            lambda: lessons.provider_widget(batch, tokens, config=llm, n_items=200),
            "concurrency",
            32,
        ),
    }


@pytest.mark.parametrize("name", ["burst", "knee", "retry", "drain", "provider"])
def test_each_lesson_widget_draws_and_redraws_on_its_knob(name):
    build, control, value = _widgets()[name]
    w = build()
    assert w.error is None, w.error
    before_png, before_html = png_of(w), w.summary_html
    w.controls[control].value = value
    assert w.error is None, w.error
    assert w.settings[control] == value
    assert png_of(w) != before_png and w.summary_html != before_html
    assert w.previous_result is not None


def test_the_burst_widget_sheds_with_reject_and_blocks_otherwise():
    build, _, _ = _widgets()["burst"]
    w = build()
    w.controls["maxsize"].value = 20.0
    blocked = w.last_result.summary
    assert blocked["items_shed"] == 0 and blocked["upstream_backlog_max"] > 0
    w.controls["on_full"].value = "reject"
    shed = w.last_result.summary
    assert shed["items_shed"] > 0 and shed["upstream_backlog_max"] == 0
    assert shed["queue_depth_max"] <= 20


def test_the_knee_widget_overlays_erlang_c_at_its_settings():
    from pipeline.sim import theory

    w = lessons.knee_widget(BASE, n_items=1000)
    curve = next(ln for ln in w.axes[0].get_lines() if ln.get_label() == "Erlang C (M/M/c)")
    xs, ys = curve.get_xdata(), curve.get_ydata()
    assert ys[list(xs).index(4)] == pytest.approx(theory.mmc(3.2, 1.0, 4).wait_mean_s)
    w.controls["arrival_rate"].value = 4.5  # past four workers' capacity: no steady state
    assert w.error is None and "ρ ≥ 1" in w.summary_html


def test_the_drain_widget_rings_the_current_timeout_on_the_trade_off():
    build, _, _ = _widgets()["drain"]
    w = build()
    w.controls["drain_timeout_s"].value = 60
    ring = [ln for ln in w.axes[1].get_lines() if ln.get_label() == "this setting"]
    assert len(ring) == 1
    run, _, current = w.last_result
    assert current == 60 and run.scenario.config.drain_timeout_s == 60
    shutdown = run.summary["sim_time_s"] - run.columns.arrival_s.max()
    assert ring[0].get_xdata()[0] == pytest.approx(shutdown)
    assert np.isclose(ring[0].get_ydata()[0], run.summary["items_unfinished"])


# -- the live run ------------------------------------------------------------------------------


def test_the_live_widget_starts_a_real_run_and_stop_drains_it():
    from pipeline.examples.approval import approval_widget
    from pipeline.viz.widgets.live_run import LiveRunWidget

    async def two_runs():
        w = approval_widget(capacity_per_s=40.0, duration_s=0.5)
        w.every_s = 0.05
        assert not w.running and "Start" in w.summary.value
        first = w.start()
        assert w.start() is None  # one run at a time
        assert w.start_button.disabled and not w.stop_button.disabled
        await first
        report = w.last_report
        assert report.balanced and report.offered > 0 and "completed" in w.summary.value
        w.controls["concurrency"].value = 1
        second = w.start()
        await asyncio.sleep(0.1)
        w.stop()  # intake closes: fewer items offered than the source holds
        await second
        return w, report

    w, first = asyncio.run(two_runs())
    assert w.previous_samples is not None and w.last_report is not first
    assert w.last_report.balanced and w.last_report.offered < first.offered
    assert "was " in w.summary.value and not w.start_button.disabled
    assert w.error is None
    with pytest.raises(TypeError, match="start must be callable"):
        LiveRunWidget({}, start=None)


# -- kept runs and kept axes (notebook 06's widget redraws within the explorer's budget) -------


def counting_widget(**kw):
    """A widget whose run returns a fresh object per call and counts the calls."""
    calls = []

    def run(settings):
        calls.append(dict(settings))
        return {"c": settings["c"], "call": len(calls)}

    w = FocusedWidget(
        {"c": widgets.IntSlider(1, min=1, max=9)},
        run=run,
        draw=lambda axes, r, prev: axes[0].plot([0, 1], [0, r["c"]]),
        panels=1,
        debounce_s=0.0,
        **kw,
    )
    return w, calls


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2", None])
def test_keep_runs_must_be_a_count(bad):
    with pytest.raises(ValueError, match=r"keep_runs must be an int >= 0 \(runs kept\), got"):
        counting_widget(keep_runs=bad)


def test_a_kept_run_is_shown_again_without_running_and_the_least_recent_is_forgotten():
    w, calls = counting_widget(keep_runs=2)
    first = w.last_result
    w.controls["c"].value = 2
    w.controls["c"].value = 1  # kept: shown again, not run
    assert len(calls) == 2 and w.last_result is first
    assert w.previous_result["c"] == 2  # the comparison is still with the run shown before
    w.controls["c"].value = 3  # three settings, two kept: c=2 (least recently shown) goes
    w.controls["c"].value = 1
    assert len(calls) == 3 and w.last_result is first
    w.controls["c"].value = 2
    assert len(calls) == 4 and w.last_result is not None and w.last_result["call"] == 4


def test_without_keep_runs_every_change_runs():
    w, calls = counting_widget()
    for value in (2, 1, 2):
        w.controls["c"].value = value
    assert len(calls) == 4 and w.error is None


def test_settings_that_cannot_be_a_key_are_run_every_time():
    knob = widgets.ValueWidget(value=[1])  # a list: unhashable
    calls = []
    w = FocusedWidget(
        {"knob": knob},
        run=lambda s: calls.append(1) or len(calls),
        draw=lambda axes, r, prev: axes[0].plot([0, 1], [0, r]),
        panels=1,
        debounce_s=0.0,
        keep_runs=4,
    )
    knob.value = [2]
    knob.value = [1]
    assert len(calls) == 3 and w.error is None


def test_kept_axes_keep_the_artists_draw_made():
    made = []

    def draw(axes, result, previous):
        if not made:
            made.extend(axes[0].plot([0, 1], [0, 0]))
        made[0].set_ydata([0, result])

    w = FocusedWidget(
        {"c": widgets.IntSlider(1, min=1, max=9)},
        run=lambda s: s["c"],
        draw=draw,
        panels=1,
        debounce_s=0.0,
        clear_axes=False,
    )
    w.controls["c"].value = 5
    assert w.axes[0].get_lines() == made and list(made[0].get_ydata()) == [0, 5]
    cleared, _ = counting_widget()
    line = cleared.axes[0].get_lines()[0]
    cleared.controls["c"].value = 2
    assert cleared.axes[0].get_lines()[0] is not line  # cleared: the line was drawn anew


def _notebook_provider(**kw):
    batch, tokens = _llm_batch()
    llm = PipelineConfig(
        concurrency=8,
        queue_maxsize=200,
        max_attempts=8,
        drain_timeout_s=None,
        backoff=Backoff(base_s=1.0, factor=2.0, cap_s=30.0, jitter=True),
    )
    return lessons.provider_widget(batch, tokens, config=llm, **kw), tokens


def test_the_provider_widget_redraws_in_place_and_moves_the_limit_line():
    w, _ = _notebook_provider(n_items=200)
    lines = [list(ax.get_lines()) for ax in w.axes]
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in w.axes]
    assert legends == [["calls in flight", "provider's limit"], ["completed", "dead-lettered"]]
    faded = [ln for ln in w.axes[0].get_lines() if ln.get_alpha() == 0.3]
    assert len(faded) == 1 and not faded[0].get_visible()  # no previous run yet
    w.controls["concurrency"].value = 32
    w.controls["limit"].value = 12
    assert [list(ax.get_lines()) for ax in w.axes] == lines  # the same artists, new data
    assert faded[0].get_visible()
    limit_line = next(ln for ln in lines[0] if ln.get_label() == "provider's limit")
    assert list(limit_line.get_ydata()) == [12, 12]
    assert w.axes[1].get_ylim() == pytest.approx((0, 200 * 1.05))
    current = next(ln for ln in lines[0] if ln.get_label() == "calls in flight")
    peak = w.last_result.series.in_flight.max()
    # A long run is drawn as bucket means with their min-max band: the band reaches the peak.
    band = next(c for c in w.axes[0].collections if c.get_visible() and c.get_alpha() == 0.25)
    tops = band.get_paths()[0].vertices[:, 1]
    assert tops.max() == peak and current.get_ydata().max() <= peak
    assert w.axes[0].get_ylim()[1] >= peak
    assert "band min–max" in w.axes[0].get_legend().get_texts()[0].get_text()
    before = w.last_result
    w.controls["limit"].value = 24
    w.controls["limit"].value = 12  # shown before: the kept run, drawn again
    assert w.last_result is before and w.error is None


def test_the_provider_widgets_400_prompts_outrun_the_token_quota_and_keep_the_lesson():
    w, tokens = _notebook_provider()
    assert tokens[:400].sum() > 400_000  # more than a minute's quota: it has to bind
    below = w.last_result.summary  # 16 workers, under the quota's knee (about 20)
    assert below["items_completed"] == 400 and below["items_dead_lettered"] == 0
    w.controls["concurrency"].value = 32  # past the knee: 429s and lost prompts
    past = w.last_result.summary
    assert past["items_dead_lettered"] > 0
    assert past["attempts_total"] / past["items_admitted"] > 2
