"""Plots of simulation results: each returns a Figure with the expected content."""

from __future__ import annotations

import gc
import io
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from pipeline import Backoff, PipelineConfig
from pipeline._units import human_bytes, metric_label
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    OnOff,
    Poisson,
    Scenario,
    simulate,
)
from pipeline.sim.analysis.theory import mmc
from pipeline.viz.figures.run import (
    oldest_unfinished_age,
    plot_depth,
    plot_lag,
    plot_memory,
    plot_retries,
    report_figure,
)
from pipeline.viz.figures.series import memory_bound_bytes
from pipeline.viz.figures.sweep import plot_sweep
from pipeline.viz.figures.theory import (
    plot_dead_letters_vs_theory,
    plot_shed_vs_theory,
    plot_wait_vs_theory,
    theory_for,
)


def scenario(n_items=400, rate=3.2, failures=None, **config):
    cfg = {
        "concurrency": 4,
        "queue_maxsize": 20,
        "max_attempts": 3,
        "backoff": Backoff.constant(0.5),
        **config,
    }
    extra = {} if failures is None else {"failures": failures}
    return Scenario(
        arrivals=Poisson(rate=rate),
        service=Exponential(mean=1.0),
        config=PipelineConfig(**cfg),
        n_items=n_items,
        seed=3,
        **extra,
    )


@pytest.fixture(scope="module")
def runs():
    base = scenario()
    return {
        "plain": simulate(base),
        "unbounded": simulate(base.replace(queue_maxsize=None, arrivals=Poisson(rate=5.0))),
        "shed": simulate(
            base.replace(on_full="reject", queue_maxsize=5, arrivals=Poisson(rate=6.0))
        ),
        "dead": simulate(base.replace(failures=IndependentFailures(0.5))),
        "tiny": simulate(base.replace(n_items=1)),
        "empty": simulate(base.replace(n_items=0)),
    }


pytestmark = pytest.mark.usefixtures("no_open_figures")


def labels(ax):
    return [line.get_label() for line in ax.get_lines()]


def legend_texts(ax):
    legend = ax.get_legend()
    return [] if legend is None else [text.get_text() for text in legend.get_texts()]


def assert_legend_outside(ax):
    """The legend's box and the axes' data area do not overlap (drawn at the figure's dpi)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ax.get_figure(root=True)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    legend = ax.get_legend()
    assert legend is not None, "no legend"
    box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert not box.overlaps(area), f"legend {box} overlaps the axes {area}"


def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=30)
    return buffer.getvalue()


# -- helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (5 * 1024**2, "5 MiB"),
        (3 * 1024**3, "3 GiB"),
        (-2048, "-2 KiB"),
    ],
)
def test_human_bytes_uses_binary_units(n, text):
    assert human_bytes(n) == text


def test_memory_bound_is_queue_plus_workers_times_item_size(runs):
    r = runs["plain"]
    assert memory_bound_bytes(r) == (20 + 4) * 1024
    assert memory_bound_bytes(runs["unbounded"]) is None


def test_oldest_unfinished_age_peaks_at_the_longest_latency(runs):
    r = runs["plain"]
    t, age = oldest_unfinished_age(r)
    assert np.all(np.diff(t) >= 0)
    assert age.min() >= 0
    # Every item is completed, so the oldest item's age peaks when the slowest finishes
    # (or earlier: a younger item may take longer than all the items before it).
    assert age.max() == pytest.approx(r.items["latency_s"].max())


def test_oldest_unfinished_age_of_an_empty_run_is_zero(runs):
    _, age = oldest_unfinished_age(runs["empty"])
    assert not age.any()


@pytest.fixture(scope="module")
def bursty():
    """A bounded bursty run: long stretches with many items inside, the oldest changing often."""
    return simulate(
        Scenario(
            arrivals=OnOff(rate_on=8.0, rate_off=1.0, mean_on_s=60, mean_off_s=120),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=4, queue_maxsize=50, drain_timeout_s=None),
            n_items=3000,
            seed=3,
        )
    )


def lag_around(result, t):
    """``lag_items`` just before and just after each instant in ``t`` (0 before the start)."""
    s = result.series
    lag = np.append(s.lag_items, 0)  # index -1: nothing has arrived before the series starts
    before = lag[np.searchsorted(s.time_s, t, side="left") - 1]
    after = lag[np.searchsorted(s.time_s, t, side="right") - 1]
    return before, after


def age_at(t_curve, age_curve, t):
    """The piecewise-linear age curve at instants strictly between its drops."""
    j = np.clip(np.searchsorted(t_curve, t, side="right") - 1, 0, len(t_curve) - 2)
    span = t_curve[j + 1] - t_curve[j]
    slope = np.divide(
        age_curve[j + 1] - age_curve[j], span, out=np.zeros_like(span), where=span > 0
    )
    return age_curve[j] + (t - t_curve[j]) * slope


def test_oldest_unfinished_age_is_zero_only_when_nothing_is_inside(bursty):
    t, age = oldest_unfinished_age(bursty)
    assert np.all(np.diff(t) >= 0)
    # At every vertex: items inside on both sides of the instant means a positive age. (A
    # vertex at 0 with items inside was the bug: the curve fell to 0 at each change of oldest.)
    before, after = lag_around(bursty, t)
    inside = (before > 0) & (after > 0)
    assert inside.sum() > 1000  # the run really is busy at most vertices
    assert np.all(age[inside] > 0)
    # Between events: the age is positive exactly where lag_items is.
    s = bursty.series
    ends = np.append(s.time_s[1:], s.end_s)
    open_rows = ends > s.time_s
    middle = (s.time_s + ends)[open_rows] / 2
    assert np.array_equal(age_at(t, age, middle) > 0, s.lag_items[open_rows] > 0)


def test_plot_lag_thinning_keeps_the_true_maximum_age(bursty):
    t, age = oldest_unfinished_age(bursty)
    max_points = 50  # the age panel keeps about 4 * max_points vertices, far fewer than len(t)
    assert len(t) > 8 * max_points
    fig = plot_lag(bursty, panels=("age",), max_points=max_points)
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "oldest unfinished item"]
    kept = np.asarray(line.get_ydata())
    assert len(kept) <= 4 * max_points + 2
    assert kept.max() == age.max()
    # Troughs survive too, so the sawtooth still drops to 0 where the run empties.
    assert kept.min() == 0.0


# -- one figure per kind -----------------------------------------------------------------


def test_plot_depth_draws_queue_in_flight_and_the_bound(runs):
    fig = plot_depth(runs["plain"])
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    names = labels(ax)
    assert "queued" in names and "in flight" in names
    # The queue reaches its bound of 20 in this run, so the bound is a line.
    assert runs["plain"].summary["queue_depth_max"] >= 10
    assert "maxsize = 20" in names and "maxsize = 20" in legend_texts(ax)
    bound = next(line for line in ax.get_lines() if line.get_label() == "maxsize = 20")
    assert bound.get_linestyle() == "--" and bound.get_visible()
    assert "(s)" in ax.get_xlabel()
    queued = next(line for line in ax.get_lines() if line.get_label() == "queued")
    assert queued.get_drawstyle() == "steps-post"
    assert queued.get_xdata()[-1] == pytest.approx(runs["plain"].series.end_s)


def test_plot_depth_unbounded_says_so_and_shows_upstream_backlog(runs):
    fig = plot_depth(runs["unbounded"])
    assert any("∞" in n for n in legend_texts(fig.axes[0]))
    # Unbounded: nothing waits upstream, so no backlog line is drawn.
    assert "upstream backlog" not in legend_texts(fig.axes[0])
    assert not [
        line
        for line in fig.axes[0].get_lines()
        if line.get_visible() and line.get_linestyle() == "--"
    ]


def test_plot_depth_compare_draws_a_faded_previous_run(runs):
    fig = plot_depth(runs["plain"], compare=runs["unbounded"])
    ax = fig.axes[0]
    faded = [
        line
        for line in ax.get_lines()
        if line.get_visible() and line.get_alpha() == pytest.approx(0.3)
    ]
    assert len(faded) >= 2
    assert all(line.get_label().startswith("_") for line in faded)  # not in the legend
    legend = ax.get_legend()
    assert not set(map(id, faded)) & set(map(id, legend.legend_handles))


def test_the_memory_legend_names_the_faded_run_by_what_differs(runs):
    fig = plot_memory(runs["plain"], compare=runs["dead"])
    [entry] = [t for t in legend_texts(fig.axes[0]) if "(faded)" in t]
    assert entry.startswith("failures=IndependentFailures(")  # not "previous run"
    plt.close(fig)
    fig = plot_memory(runs["plain"], compare=runs["plain"])  # nothing differs: a rerun
    assert any(t.startswith("previous run, in all (faded)") for t in legend_texts(fig.axes[0]))
    plt.close(fig)
    fig = plot_memory(runs["plain"], compare=runs["unbounded"])  # two settings differ
    [entry] = [t for t in legend_texts(fig.axes[0]) if "(faded)" in t]
    assert "queue_maxsize=None" in entry and "arrivals=Poisson(" in entry
    plt.close(fig)


def test_plot_depth_draws_into_a_given_axes(runs):
    fig, ax = plt.subplots()
    try:
        assert plot_depth(runs["plain"], ax) is fig
        assert labels(ax)
    finally:
        plt.close(fig)


def test_plot_lag_has_distribution_and_age_panels(runs):
    fig = plot_lag(runs["plain"], compare=runs["dead"])
    assert len(fig.axes) == 2
    dist, age = fig.axes
    assert {"wait", "latency"} <= set(labels(dist))
    assert dist.get_ylim()[1] == pytest.approx(1.02)
    assert "oldest unfinished item" in labels(age)
    assert age.get_ylabel() == "age (s)"
    # p50/p95/p99 markers of wait and latency
    markers = [line for line in dist.get_lines() if line.get_marker() == "o"]
    assert len(markers) == 2 and all(len(m.get_xdata()) == 3 for m in markers)
    # The percentiles are named in the legend, outside the data, in readable type.
    notes = [text for text in dist.get_legend().get_texts() if "p95" in text.get_text()]
    assert len(notes) == 2 and all(text.get_fontsize() >= 9 for text in notes)
    assert_legend_outside(dist)


def test_plot_lag_single_axes_and_panel_choice(runs):
    fig = plot_lag(runs["plain"], panels=("age",))
    assert len(fig.axes) == 1 and fig.axes[0].get_ylabel() == "age (s)"
    with pytest.raises(ValueError, match="panels"):
        plot_lag(runs["plain"], panels=("nope",))


def test_plot_memory_uses_human_units_and_the_bound(runs):
    fig = plot_memory(runs["plain"])
    ax = fig.axes[0]
    assert ax.get_ylabel() == "memory (KiB)"
    bound = [
        line
        for line in ax.get_lines()
        if line.get_label().startswith("bound") and line.get_visible()
    ]
    assert len(bound) == 1
    assert bound[0].get_ydata()[0] == pytest.approx(24.0)  # (20 + 4) x 1 KiB, in KiB
    # The bound's legend entry says what it bounds.
    (entry,) = [text for text in legend_texts(ax) if "item size" in text]
    assert "(maxsize + concurrency) × item size" in entry and "24 KiB" in entry
    memory = next(
        line for line in ax.get_lines() if line.get_label() == "queued + running + retrying"
    )
    assert max(memory.get_ydata()) * 1024 == pytest.approx(
        runs["plain"].summary["memory_peak_bytes"]
    )


def test_plot_memory_unbounded_has_no_bound_line(runs):
    ax = plot_memory(runs["unbounded"]).axes[0]
    assert not [
        line
        for line in ax.get_lines()
        if line.get_label().startswith("bound") and line.get_visible()
    ]
    assert any("unbounded" in name for name in legend_texts(ax))


def test_plot_memory_scales_to_mebibytes_for_big_items(runs):
    big = simulate(scenario(n_items=200).replace(item_size_bytes=4 * 1024**2))
    assert plot_memory(big).axes[0].get_ylabel() == "memory (MiB)"


def test_plot_memory_shows_dead_letters_apart_from_the_bounded_part(runs):
    r = runs["dead"]
    ax = plot_memory(r).axes[0]
    assert any("dead letters kept" in name for name in legend_texts(ax))
    # The line is what the bound bounds; the dead letters are a band stacked on it.
    (band,) = [c for c in ax.collections if c.get_visible() and "dead" in c.get_label()]
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "queued + running + retrying")
    size = r.scenario.item_size_bytes
    assert max(line.get_ydata()) * 1024 == pytest.approx(r.series.in_system.max() * size)
    assert max(line.get_ydata()) * 1024 <= memory_bound_bytes(r)
    top = max(v[:, 1].max() for v in (p.vertices for p in band.get_paths()))
    assert top * 1024 == pytest.approx(r.summary["memory_peak_bytes"])
    assert r.summary["memory_peak_bytes"] > memory_bound_bytes(r)  # only the band exceeds it


def test_plot_retries_attempts_histogram_and_timeline(runs):
    r = runs["dead"]
    fig = plot_retries(r)
    hist, timeline = fig.axes
    heights = [patch.get_height() for patch in hist.patches]
    assert sum(heights) == (r.columns.attempts > 0).sum()
    assert len(heights) == 3  # one bar per attempt count, 1..max_attempts
    assert "dead letters (cumulative)" in labels(timeline)
    assert "waiting for a retry" in labels(timeline)
    dead = next(line for line in timeline.get_lines() if line.get_label().startswith("dead"))
    assert dead.get_ydata()[-1] == r.summary["items_dead_lettered"]
    assert "dead letters" in hist.get_title()


def test_plot_retries_single_axes_draws_the_timeline(runs):
    fig = plot_retries(runs["plain"], panels=("timeline",))
    assert len(fig.axes) == 1


@pytest.mark.parametrize("name", ["plain", "unbounded", "shed", "dead", "tiny", "empty"])
def test_every_plot_handles_every_kind_of_run(runs, name):
    r = runs[name]
    for fig in (plot_depth(r, compare=runs["plain"]), plot_memory(r)):
        assert isinstance(fig, Figure)
    # Drawing is what finds most problems (warnings are errors here); the dashboard
    # draws depth, lag, memory and retries, and the two-panel figures the other panels.
    figures = [report_figure(r, compare=runs["plain"])]
    if name in ("dead", "tiny", "empty"):
        figures += [plot_lag(r), plot_retries(r)]
    for fig in figures:
        assert isinstance(fig, Figure)
        assert png_bytes(fig).startswith(b"\x89PNG")


def test_report_figure_is_a_two_by_two_dashboard_saved_as_png(runs, tmp_path):
    fig = report_figure(runs["shed"])
    assert len(fig.axes) == 4
    titles = " ".join(ax.get_title() for ax in fig.axes)
    for word in ("Queue depth", "Lag", "Memory", "Retries"):
        assert word in titles
    path = tmp_path / "report.png"
    fig.savefig(path)
    assert path.read_bytes().startswith(b"\x89PNG")


def test_figures_are_freed_when_dropped(runs):
    import weakref

    ref = weakref.ref(plot_depth(runs["plain"]))
    gc.collect()
    assert ref() is None


def test_many_figures_do_not_warn():
    r = simulate(scenario(n_items=50))
    for _ in range(25):  # pyplot warns past 20 open figures; warnings are errors here
        plot_depth(r)


# -- sweeps and theory --------------------------------------------------------------------


@pytest.fixture
def waits(sweep_frame):
    """Mean waits on a 3 x 2 grid (one queue unbounded), two replications each."""
    return sweep_frame(
        {(c, m): [c + r + (m or 1000) for r in range(2)] for m in (10, 100, None) for c in (2, 4)},
        metric="wait_mean_s",
    )


def test_sweep_heatmap_means_over_replications_and_shows_unbounded_as_infinity(waits):
    fig = plot_sweep(waits, "wait_mean_s", x="queue_maxsize", y="concurrency", log=False)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "100", "∞"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["2", "4"]
    data = ax.images[0].get_array()
    assert data.shape == (2, 3)
    assert data[0, 0] == pytest.approx(2 + 0.5 + 10)  # mean of replications 0 and 1
    assert data[1, 2] == pytest.approx(4 + 0.5 + 1000)
    first_lines = {t.get_text().split("\n")[0] for t in ax.texts}
    assert "12.5" in first_lines and "1e+03" in first_lines


def test_sweep_heatmap_log_colour_scale(waits):
    fig = plot_sweep(waits, "wait_mean_s", x="queue_maxsize", y="concurrency", log=True)
    assert fig.axes[0].images[0].norm.__class__.__name__ == "LogNorm"


def annotation_colours(fig):
    return {t.get_text(): t.get_color() for t in fig.axes[0].texts}


@pytest.mark.parametrize(
    ("log", "hundred"),
    [
        # Linear scale 1..1000: 100 sits at (100 - 1) / 999 = 0.1 of the scale, dark: white.
        (False, "white"),
        # Log scale: 100 sits at log(100) / log(1000) = 2/3 of the scale, light: black
        # (the linear midpoint, 500.5, would have made it white on a light cell).
        (True, "black"),
    ],
)
def test_sweep_heatmap_text_colour_follows_the_colour_scale(log, hundred):
    frame = pd.DataFrame(
        {
            "x": [1, 2, 3, 4, 5, 1],
            "y": [0] * 5 + [1],
            "replication": [0] * 6,
            "v": [1.0, 10.0, 100.0, 1000.0, float("nan"), 1.0],
        }
    )
    frame.attrs["grid"] = ["x", "y"]
    colours = annotation_colours(plot_sweep(frame, "v", x="x", y="y", log=log))
    # One replication: each cell shows its mean alone; a missing value reads n/a.
    assert {k: colours[k] for k in ("1", "10", "100", "1e+03", "n/a")} == {
        "1": "white",
        "10": "white",
        "100": hundred,
        "1e+03": "black",
        "n/a": "black",
    }


def test_theory_for_picks_the_formulas_that_apply(runs):
    expected = mmc(3.2, 1.0, 4).wait_mean_s
    assert theory_for(runs["plain"]) == {"wait_mean_s": pytest.approx(expected)}
    assert set(theory_for(runs["shed"])) == {"shed_fraction"}
    assert theory_for(runs["dead"]) == {"dead_letter_fraction": pytest.approx(0.125)}
    assert theory_for(runs["unbounded"]) == {}  # rate 5 > 4 workers: no steady state


def test_wait_vs_theory_overlays_erlang_c():
    by_rate = {rate: simulate(scenario(n_items=300, rate=rate)) for rate in (2.0, 3.0)}
    fig = plot_wait_vs_theory(by_rate, xlabel="arrival rate (items/s)")
    ax = fig.axes[0]
    theory = next(line for line in ax.get_lines() if "Erlang C" in line.get_label())
    assert list(theory.get_xdata()) == [2.0, 3.0]
    assert theory.get_ydata()[1] == pytest.approx(mmc(3.0, 1.0, 4).wait_mean_s)
    assert ax.get_xlabel() == "arrival rate (items/s)"


def test_shed_and_dead_letter_overlays_accept_replications():
    base = scenario(n_items=200, rate=6.0, on_full="reject", queue_maxsize=5)
    shed = {c: simulate(base.replace(concurrency=c), replications=2) for c in (3, 5)}
    ax = plot_shed_vs_theory(shed, xlabel="concurrency").axes[0]
    assert any("M/M/c/K" in name for name in labels(ax))
    dead = {
        k: [simulate(scenario(n_items=200, max_attempts=k, failures=IndependentFailures(0.4)))]
        for k in (1, 2, 3)
    }
    ax = plot_dead_letters_vs_theory(dead, xlabel="max_attempts").axes[0]
    line = next(line for line in ax.get_lines() if "p**k" in line.get_label())
    assert np.allclose(line.get_ydata(), [0.4, 0.16, 0.064])
    assert ax.get_yscale() == "log"
    assert not math.isnan(ax.get_ylim()[0])


def test_dead_letter_overlay_with_no_failures_falls_back_to_a_linear_axis():
    clean = {k: simulate(scenario(n_items=50, max_attempts=k)) for k in (1, 2)}
    ax = plot_dead_letters_vs_theory(clean).axes[0]
    assert ax.get_yscale() == "linear"
    png_bytes(ax.get_figure())


# -- figures that tell the truth at a glance ----------------------------------------------


def visible_peak(ax, label_prefix=""):
    """Highest y of the visible, non-faded lines whose label starts with ``label_prefix``."""
    peaks = [
        np.max(line.get_ydata())
        for line in ax.get_lines()
        if line.get_visible()
        and len(line.get_ydata())
        and not line.get_label().startswith("_")
        and line.get_label().startswith(label_prefix)
    ]
    return max(peaks)


def test_the_current_run_sets_the_axes_and_the_faded_one_does_not(runs):
    small, big = runs["plain"], runs["unbounded"]  # big: rate 5 on 4 workers, the queue grows
    assert big.series.queue_depth.max() > 3 * small.series.queue_depth.max()
    depth = plot_depth(small, compare=big).axes[0]
    alone = plot_depth(small).axes[0]
    assert depth.get_ylim() == alone.get_ylim() and depth.get_xlim() == alone.get_xlim()
    assert depth.get_xlim()[1] == pytest.approx(small.series.end_s)
    assert depth.get_ylim()[1] <= 1.07 * max(visible_peak(depth), 20)
    memory = plot_memory(small, compare=big).axes[0]
    assert memory.get_ylim() == plot_memory(small).axes[0].get_ylim()
    lag = plot_lag(small, compare=big)
    assert [ax.get_xlim() for ax in lag.axes] == [ax.get_xlim() for ax in plot_lag(small).axes]
    retries = plot_retries(runs["plain"], compare=runs["dead"])
    alone = plot_retries(runs["plain"])
    assert [ax.get_ylim() for ax in retries.axes] == [ax.get_ylim() for ax in alone.axes]


def test_maxsize_is_a_line_only_where_the_data_come_near_it(runs):
    far = simulate(scenario(queue_maxsize=5000))
    peak = far.series.queue_depth.max()
    ax = plot_depth(far).axes[0]
    dashed = [ln for ln in ax.get_lines() if ln.get_visible() and ln.get_linestyle() == "--"]
    assert dashed == []
    assert ax.get_ylim()[1] < 5000 and ax.get_ylim()[1] <= 1.07 * max(peak, 4)
    assert "maxsize = 5000 (above this scale)" in legend_texts(ax)
    # At its bound (the reject run fills its queue of 5), the bound is a line again.
    shed = plot_depth(runs["shed"]).axes[0]
    assert [
        ln.get_ydata()[0]
        for ln in shed.get_lines()
        if ln.get_visible() and ln.get_linestyle() == "--"
    ] == [5]


@pytest.mark.parametrize(
    "draw",
    [
        lambda r: plot_depth(r).axes,
        lambda r: plot_memory(r).axes,
        lambda r: plot_lag(r).axes,
        lambda r: plot_retries(r).axes,
        lambda r: report_figure(r).axes,
    ],
    ids=["depth", "memory", "lag", "retries", "report"],
)
def test_legends_sit_outside_the_data(runs, draw):
    for ax in draw(runs["dead"]):
        assert_legend_outside(ax)
        for text in ax.get_legend().get_texts():
            assert text.get_fontsize() >= 9


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("latency_p95_s", "p95 latency (s)"),
        ("wait_p99_s", "p99 wait (s)"),
        ("wait_mean_s", "mean wait (s)"),
        ("memory_peak_bytes", "peak memory (bytes)"),
        ("items_shed", "items shed"),
        ("throughput_per_s", "throughput (items/s)"),
        ("backlog_bytes", "backlog (bytes)"),
        ("sim_time_s", "simulated time (s)"),
        ("mystery_key", "mystery_key"),  # a column of one's own keeps its name
        ("", ""),
    ],
)
def test_metric_labels_read_as_words(key, label):
    assert metric_label(key) == label


# -- trade-offs across runs --------------------------------------------------------------------


@pytest.fixture(scope="module")
def drains():
    from pipeline.sim import LogNormal

    batch = Scenario(
        arrivals=Poisson(rate=0.16),
        service=LogNormal(mean=20.0, cv=1.5),
        config=PipelineConfig(concurrency=4, drain_timeout_s=30.0),
        duration_s=600,
        seed=4,
    )
    from pipeline.sim import DrainTimeoutWarning

    # Cutting the drain short is what this figure shows: the warning is expected.
    with pytest.warns(DrainTimeoutWarning):
        return {t: simulate(batch.replace(drain_timeout_s=t)) for t in (0, 30, 120, None)}


def test_drain_tradeoff_has_a_title_a_point_for_none_and_no_clipped_label(drains):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pipeline.viz.figures.tradeoffs import drain_tradeoff_table, plot_drain_tradeoff

    fig = plot_drain_tradeoff(drains)
    ax = fig.axes[0]
    assert ax.get_title()
    rows = drain_tradeoff_table(drains)
    assert [row["timeout_s"] for row in rows] == [0, 30, 120, None]
    assert rows[-1]["unfinished"] == 0 and rows[0]["unfinished"] > 0
    star = next(ln for ln in ax.get_lines() if ln.get_marker() == "*")
    assert star.get_xdata()[0] == pytest.approx(rows[-1]["shutdown_s"])
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    area = ax.get_window_extent(canvas.get_renderer())
    labels = [t for t in ax.texts if t.get_text()]
    assert {"0 s", "None"} <= {t.get_text() for t in labels} | {
        part for t in labels for part in t.get_text().split(", ")
    }
    for text in labels:
        box = text.get_window_extent(canvas.get_renderer())
        assert area.contains(box.x0, box.y0) and area.contains(box.x1, box.y1), text.get_text()
    assert_legend_outside(ax)


def test_drain_tradeoff_needs_runs():
    from pipeline.viz.figures.tradeoffs import plot_drain_tradeoff

    with pytest.raises(ValueError, match="runs"):
        plot_drain_tradeoff({})


def batch_frame():
    return pd.DataFrame(
        {
            "concurrency": [8, 16, 24, 32],
            "items_completed": [100, 100, 90, 60],
            "items_dead_lettered": [0, 0, 10, 40],
            "attempts_total": [100, 101, 300, 600],
            "items_admitted": [100, 100, 100, 100],
            "sim_time_s": [400.0, 200.0, 150.0, 120.0],
        }
    ).set_index("concurrency")


def test_batch_completion_plots_only_complete_runs_as_times():
    from pipeline.viz.figures.tradeoffs import plot_batch_completion

    fig = plot_batch_completion(batch_frame(), batch_size=100, knee=20, limit=24)
    left, right = fig.axes
    times = next(ln for ln in left.get_lines() if ln.get_label() == "every item completed")
    # The runs that gave up on items are not drawn at their (shorter) run times ...
    assert list(times.get_xdata()) == [8, 16] and list(times.get_ydata()) == [400.0, 200.0]
    # ... but marked as not finished, with the number of items they lost.
    assert {t.get_text() for t in left.texts} == {"10\nlost", "40\nlost"}
    attempts = next(ln for ln in right.get_lines() if ln.get_label() == "attempts per item")
    assert np.allclose(attempts.get_ydata(), [1.0, 1.01, 3.0, 6.0])
    for ax in (left, right):
        assert_legend_outside(ax)


def test_batch_completion_names_missing_columns():
    from pipeline.viz.figures.tradeoffs import plot_batch_completion

    with pytest.raises(KeyError, match="sim_time_s"):
        plot_batch_completion(batch_frame().drop(columns="sim_time_s"), batch_size=100)
