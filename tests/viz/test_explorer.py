"""The ipywidgets explorer: every control change re-simulates and redraws."""

from __future__ import annotations

import base64
import importlib.util

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest

from pipeline import PipelineConfig
from pipeline.sim import (
    Exponential,
    Gamma,
    IndependentFailures,
    LogNormal,
    OnOff,
    Poisson,
    Scenario,
    diagnose,
)
from pipeline.sim.workloads.distributions import Uniform
from pipeline.viz.widgets.explorer import Explorer, explore

N_ITEMS = 400


@pytest.fixture
def explorer():
    return explore(n_items=N_ITEMS)


def figure_png(ex: Explorer) -> bytes:
    (output,) = ex.figure.outputs
    assert output["output_type"] == "display_data"
    return base64.b64decode(output["data"]["image/png"])


def test_layout_has_the_dom_classes_and_named_sliders(explorer):
    assert isinstance(explorer.widget, widgets.VBox)
    assert "pipeline-explorer" in explorer.widget._dom_classes
    assert "pipeline-explorer-figure" in explorer.figure._dom_classes
    assert "pipeline-explorer-summary" in explorer.summary._dom_classes
    c = explorer.controls
    assert c["concurrency"].description == "concurrency"
    assert (c["concurrency"].min, c["concurrency"].max) == (1, 32)
    assert c["max_attempts"].description == "max_attempts"
    assert (c["max_attempts"].min, c["max_attempts"].max) == (1, 10)
    maxsize = c["maxsize"]
    assert isinstance(maxsize, widgets.FloatLogSlider) and maxsize.description == "maxsize"
    assert 10**maxsize.min == pytest.approx(10) and 10**maxsize.max == pytest.approx(5000)
    assert c["failure_rate"].max == pytest.approx(0.9)
    assert (c["drain_timeout_s"].min, c["drain_timeout_s"].max) == (5, 300)
    for control in c.values():
        if isinstance(
            control, widgets.widgets.widget_int._Int | widgets.FloatSlider | widgets.FloatLogSlider
        ):
            assert control.continuous_update is False

    # Every control is somewhere inside the root box.
    def walk(w):
        yield w
        for child in getattr(w, "children", ()):
            yield from walk(child)

    inside = set(map(id, walk(explorer.widget)))
    assert all(id(control) in inside for control in c.values())


def test_first_figure_and_summary_are_there_at_once(explorer):
    assert figure_png(explorer).startswith(b"\x89PNG")
    assert explorer.last_png == figure_png(explorer)
    html = explorer.summary_html
    for word in (
        "mean wait",  # the words of pipeline._units, as every figure and table has them
        "p95 latency",
        "utilisation",
        "peak memory",
        "peak queue depth",
        "shed",
        "dead letters",
        "concurrency=4",
    ):
        assert word in html
    assert explorer.last_result.summary["items_offered"] == N_ITEMS
    assert explorer.previous_result is None
    assert len(explorer.timings_s) == 1


def test_moving_concurrency_redraws_and_keeps_the_previous_run(explorer):
    before_png, before_html = figure_png(explorer), explorer.summary_html
    first = explorer.last_result
    explorer.controls["concurrency"].value = 2
    assert explorer.last_result.scenario.config.concurrency == 2
    assert explorer.previous_result is first
    assert figure_png(explorer) != before_png
    assert explorer.summary_html != before_html
    assert "concurrency=2" in explorer.summary_html
    assert len(explorer.timings_s) == 2 and explorer.timings_s[-1] > 0


@pytest.mark.parametrize(
    ("name", "value", "check"),
    [
        ("maxsize", 1000.0, lambda sc: sc.config.queue_maxsize == 1000),
        ("max_attempts", 7, lambda sc: sc.config.max_attempts == 7),
        ("drain_timeout_s", 10, lambda sc: sc.config.drain_timeout_s == 10.0),
        ("on_full", "reject", lambda sc: sc.config.on_full == "reject"),
        ("arrival_rate", 2.0, lambda sc: sc.arrivals == Poisson(rate=2.0)),
        ("service_mean_s", 0.5, lambda sc: sc.service == Exponential(mean=0.5)),
        ("service_cv", 2.0, lambda sc: sc.service == LogNormal(mean=1.0, cv=2.0)),
        ("failure_rate", 0.3, lambda sc: sc.failures == IndependentFailures(0.3)),
        ("backoff_base_s", 2.0, lambda sc: sc.config.backoff.base_s == pytest.approx(2.0)),
    ],
)
def test_every_control_changes_summary_and_figure(explorer, name, value, check):
    before_png, before_html = figure_png(explorer), explorer.summary_html
    explorer.controls[name].value = value
    assert explorer.error is None
    assert check(explorer.last_result.scenario)
    assert explorer.summary_html != before_html
    assert figure_png(explorer) != before_png


def test_maxsize_is_rounded_from_the_log_slider(explorer):
    explorer.controls["maxsize"].value = 123.4
    assert explorer.last_result.scenario.config.queue_maxsize == 123


def test_unbounded_toggle_disables_maxsize_and_runs_unbounded(explorer):
    before_png, before_html = figure_png(explorer), explorer.summary_html
    explorer.controls["unbounded"].value = True
    assert explorer.controls["maxsize"].disabled
    assert explorer.last_result.scenario.config.queue_maxsize is None
    assert "maxsize=∞" in explorer.summary_html and explorer.summary_html != before_html
    assert figure_png(explorer) != before_png
    explorer.controls["unbounded"].value = False
    assert not explorer.controls["maxsize"].disabled
    assert explorer.last_result.scenario.config.queue_maxsize == 100


def test_bad_combinations_do_not_crash(explorer):
    c = explorer.controls
    c["failure_rate"].value = 0.9
    c["max_attempts"].value = 10
    c["concurrency"].value = 1
    c["maxsize"].value = 10.0
    c["on_full"].value = "reject"
    c["service_cv"].value = 0.0  # constant service times
    c["arrival_rate"].value = 100.0
    assert explorer.error is None
    s = explorer.last_result.summary
    assert s["items_offered"] == N_ITEMS
    assert s["items_shed"] > 0
    assert figure_png(explorer).startswith(b"\x89PNG")


def test_a_failing_simulation_is_reported_not_raised(explorer, monkeypatch):
    import pipeline.viz.widgets.explorer as module

    def broken(scenario):
        raise ValueError("nothing works")

    monkeypatch.setattr(module, "simulate", broken)
    last = explorer.last_result
    explorer.controls["concurrency"].value = 9
    assert explorer.error == "ValueError: nothing works"
    assert "nothing works" in explorer.summary_html
    assert explorer.last_result is last


def test_diagnostics_are_shown_in_words():
    ex = explore(
        Scenario(
            arrivals=Poisson(rate=8.0),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=2, queue_maxsize=20),
            n_items=10,
        ),
        n_items=N_ITEMS,
    )
    html = ex.summary_html
    findings = diagnose(ex.last_result)
    assert findings, "an overloaded run should have findings"
    for finding in findings:
        assert finding.title.split("<")[0][:20] in html.replace("&#x27;", "'")


def test_explore_takes_a_scenario_and_keeps_what_it_cannot_control():
    bursty = Scenario(
        arrivals=OnOff(rate_on=6.0, rate_off=0.0, mean_on_s=20.0, mean_off_s=20.0),
        service=LogNormal(mean=0.5, cv=2.0),
        config=PipelineConfig(concurrency=3, queue_maxsize=None, max_attempts=5),
        n_items=10,
        seed=7,
    )
    ex = explore(bursty, n_items=N_ITEMS, seed=2)
    c = ex.controls
    assert c["concurrency"].value == 3 and c["max_attempts"].value == 5
    assert c["unbounded"].value and c["maxsize"].disabled
    assert c["arrival_rate"].disabled
    assert c["service_cv"].value == pytest.approx(2.0)
    sc = ex.last_result.scenario
    assert sc.arrivals == bursty.arrivals and sc.n_items == N_ITEMS and sc.seed == 2
    c["concurrency"].value = 4
    assert ex.last_result.scenario.arrivals == bursty.arrivals


def test_uncontrollable_service_is_kept():
    uniform = Scenario(arrivals=Poisson(rate=2.0), service=Uniform(0.5, 1.5), n_items=10)
    ex = explore(uniform, n_items=N_ITEMS)
    assert ex.controls["service_mean_s"].disabled and ex.controls["service_cv"].disabled
    ex.controls["concurrency"].value = 2
    assert ex.last_result.scenario.service == Uniform(0.5, 1.5)


def test_gamma_service_stays_gamma():
    gamma = Scenario(arrivals=Poisson(rate=2.0), service=Gamma(mean=1.0, cv=0.5), n_items=10)
    ex = explore(gamma, n_items=N_ITEMS)
    ex.controls["service_cv"].value = 2.0
    assert ex.last_result.scenario.service == Gamma(mean=1.0, cv=2.0)


def test_displaying_shows_the_widget(explorer):
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == (
        explorer.widget.model_id
    )
    assert "Explorer" in repr(explorer)


def test_many_updates_keep_one_figure_and_no_pyplot_state(explorer):
    for value in range(2, 8):
        explorer.controls["concurrency"].value = value
    assert plt.get_fignums() == []
    assert len(explorer.timings_s) == 7
    assert len(explorer.figure.outputs) == 1
    assert set(explorer.last_breakdown) == {"simulate_s", "render_s", "total_s"}


@pytest.mark.slow
def test_a_change_after_many_keeps_memory_bounded():
    # A long session: one kept figure, no pyplot figures, and the text caches within
    # their bound however many different strings the titles and legends have shown.
    from pipeline.viz.figures import textcache

    ex = explore(n_items=100)
    for i in range(30):
        ex.controls["arrival_rate"].value = 0.5 + i * 0.05  # every title a new string
        ex.controls["concurrency"].value = 1 + i % 9
    assert ex.error is None
    assert plt.get_fignums() == []
    assert len(ex.figure.outputs) == 1
    caches = ex._figure.figure.canvas._text_caches
    assert all(len(kept) <= textcache._MAX_ENTRIES for kept in caches.values())


@pytest.mark.slow  # two explorers' runs and drawings: 2 s
def test_the_explorer_draws_the_same_figure_on_either_event_path(monkeypatch):
    # An explorer anticipates its runs: with numba installed, its first run on the replay
    # loads the compiled path. The figures are those of the plain replay.
    from pipeline.sim.running.kernel import driver
    from pipeline.sim.running.kernel.paths import kernel_path

    monkeypatch.setattr(driver, "_SEEN", [0])
    monkeypatch.setattr(driver, "_COMPILED", {})
    changes = [("failure_rate", 0.3), ("max_attempts", 5), ("drain_timeout_s", 5),
               ("backoff_base_s", 2.0), ("on_full", "reject")]  # fmt: skip
    with kernel_path("plain"):
        plain = explore(n_items=N_ITEMS)
    assert driver._COMPILED == {}  # anticipating loads nothing
    anticipating = explore(n_items=N_ITEMS)
    assert driver._COMPILED == {}  # no failures yet: the replay has not run
    for name, value in changes:
        with kernel_path("plain"):
            plain.controls[name].value = value
        anticipating.controls[name].value = value
        assert plain.error is None and anticipating.error is None
        assert (_pixels(figure_png(plain)) == _pixels(figure_png(anticipating))).all(), name
        assert (
            plain.summary_html.split("simulated in")[0]
            == (anticipating.summary_html.split("simulated in")[0])
        )
    if importlib.util.find_spec("numba") is not None:
        assert driver._COMPILED.get("replay") is not None  # it did run compiled
    else:
        assert driver._COMPILED.get("replay") is None


def test_a_short_drain_under_overload_hands_items_back(explorer):
    explorer.controls["arrival_rate"].value = 8.0  # twice what 4 workers finish
    explorer.controls["drain_timeout_s"].value = 5
    summary = explorer.last_result.summary
    assert summary["items_unfinished"] > 0 and summary["drain_timed_out"]
    assert "unfinished" in explorer.summary_html


def _drawn_afresh(ex: Explorer) -> bytes:
    """The explorer's figure as plot_depth, plot_lag and plot_memory draw it in a new figure."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pipeline.viz.figures.png import RETINA_SCALE
    from pipeline.viz.figures.run import plot_depth, plot_lag, plot_memory
    from pipeline.viz.widgets import explorer as module
    from pipeline.viz.widgets.explorer_figure import layout_explorer_axes

    result, compare = ex.last_result, ex.previous_result
    fig = Figure(figsize=module._FIGSIZE, dpi=module._DPI)
    FigureCanvasAgg(fig)
    axes = layout_explorer_axes(fig)
    points = module._MAX_POINTS
    plot_depth(result, axes[0], compare=compare, max_points=points)
    plot_lag(result, axes[1], compare=compare, max_points=points, panels=("distribution",))
    plot_memory(result, axes[2], compare=compare, max_points=points)
    fig.suptitle(
        ex._settings_text() + ("   (faded: previous run)" if compare else ""), fontsize="medium"
    )
    buffer = io.BytesIO()
    fig.savefig(
        buffer, format="png", dpi=module._DPI * RETINA_SCALE, pil_kwargs={"compress_level": 1}
    )
    return buffer.getvalue()


def _pixels(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def test_the_updated_figure_is_what_the_plot_functions_draw_afresh(explorer):
    # The explorer keeps one figure and updates its artists; every pixel must still
    # be what plots.py draws from scratch: lines, faded run, limits, legends, titles.
    changes = [
        ("concurrency", 6),  # the previous run peaks just under the new bound
        ("failure_rate", 0.5),  # dead letters: a second memory line and legend entry
        ("unbounded", True),  # no limit line, "unbounded" legend entries
        ("maxsize", 20.0),
        ("unbounded", False),
        ("on_full", "reject"),
        ("arrival_rate", 8.0),
        ("service_cv", 0.0),
    ]
    assert (_pixels(figure_png(explorer)) == _pixels(_drawn_afresh(explorer))).all()
    for name, value in changes:
        explorer.controls[name].value = value
        assert explorer.error is None
        new, fresh = _pixels(figure_png(explorer)), _pixels(_drawn_afresh(explorer))
        assert new.shape == fresh.shape
        assert (new == fresh).all(), f"after {name}={value!r}: {(new != fresh).any(-1).sum()} px"


# -- the figure: crisp, readable, truthful ----------------------------------------------------


def _texts(figure):
    from matplotlib.text import Text

    return [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]


def test_the_figure_is_crisp_fills_the_cell_and_is_sharp_on_retina(explorer):
    import io

    from PIL import Image

    (output,) = explorer.figure.outputs
    width, height = (
        output["metadata"]["image/png"]["width"],
        output["metadata"]["image/png"]["height"],
    )
    figure = explorer._figure.figure
    assert figure.dpi >= 100
    assert width >= 1000  # about a JupyterLab cell's width, in CSS pixels
    png = Image.open(io.BytesIO(figure_png(explorer)))
    assert png.size == (2 * width, 2 * height)  # two device pixels per CSS pixel


def test_every_text_in_the_figure_is_at_least_9_points(explorer):
    explorer.controls["failure_rate"].value = 0.3  # more legend entries: dead letters
    texts = _texts(explorer._figure.figure)
    assert any("p95" in t.get_text() for t in texts)  # the percentile annotation is among them
    small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < 9]
    assert small == []


def test_the_faded_previous_run_never_sets_the_axes(explorer):
    from pipeline.viz.widgets.explorer import _DPI, _FIGSIZE, _MAX_POINTS
    from pipeline.viz.widgets.explorer_figure import ExplorerFigure

    explorer.controls["concurrency"].value = 2  # overloaded: a queue of hundreds, big memory
    explorer.controls["concurrency"].value = 8  # then a quiet run, drawn over the faded big one
    big, small = explorer.previous_result, explorer.last_result
    assert big.summary["memory_peak_bytes"] > 10 * small.summary["memory_peak_bytes"]
    alone = ExplorerFigure(_FIGSIZE, _DPI, _MAX_POINTS)
    alone.render_png(small, None, "alone")
    for with_previous, without in zip(explorer._figure.axes, alone.axes, strict=True):
        assert with_previous.get_xlim() == without.get_xlim()
        assert with_previous.get_ylim() == without.get_ylim()
    memory = explorer._figure.axes[2]
    scale = {"B": 1, "KiB": 1024, "MiB": 1024**2}[memory.get_ylabel().split("(")[1].rstrip(")")]
    assert memory.get_ylim()[1] * scale < 1.5 * small.summary["memory_peak_bytes"]


def test_memory_shows_dead_letters_apart_and_names_the_bound(explorer):
    panel = explorer._figure.memory
    assert not panel.dead_letter_band.get_visible()
    explorer.controls["failure_rate"].value = 0.5
    explorer.controls["max_attempts"].value = 2
    assert explorer.last_result.summary["items_dead_lettered"] > 0
    assert panel.dead_letter_band.get_visible()
    texts = [t.get_text() for t in panel.ax.get_legend().get_texts()]
    assert any(t.startswith("dead letters kept") for t in texts)
    assert any("(maxsize + concurrency) × item size" in t for t in texts)


def test_a_widget_offers_jupyterlab_its_view_and_a_static_page_its_note(explorer):
    # What a real kernel shows of it is checked on the built site (tests/docs).
    from pipeline.viz.widgets.shown import STATIC_NOTE

    bundle = explorer._repr_mimebundle_()
    assert (
        bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.widget.model_id
    )
    assert bundle["text/html"] == STATIC_NOTE and "make lab" in STATIC_NOTE
