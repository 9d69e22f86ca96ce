"""Figures name metrics in words: sweep heatmaps, the frontier, limits in their units."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline._units import (
    METRIC_LABELS,
    limit_text,
    metric_label,
    slo_text,
    value_text,
)
from pipeline.sim import SLO, DrainTimeoutWarning, Exponential, Poisson, Scenario, plan
from pipeline.sim.analysis.planning.slo import METRICS
from pipeline.viz import plot_sweep

matplotlib.use("Agg")


def test_every_metric_an_slo_may_name_has_words() -> None:
    assert set(METRICS) <= set(METRIC_LABELS)
    assert metric_label("latency_p95_s") == "p95 latency (s)"
    assert metric_label("memory_peak_bytes") == "peak memory (bytes)"
    assert metric_label("shed_fraction") == "shed fraction (0 to 1)"
    assert metric_label("memory_peak_mib") == "memory_peak_mib"  # a column of one's own


@pytest.mark.parametrize(
    ("metric", "value", "text"),
    [
        ("latency_p95_s", 30.0, "30 s"),
        ("memory_peak_bytes", 4 * 2**20, "4 MiB"),  # typed in binary units, read back so
        ("memory_peak_bytes", 200e6, "200 MB"),  # typed in decimal ones, likewise
        ("memory_peak_bytes", 1536, "1.5 KiB"),
        ("memory_peak_bytes", 999, "999 B"),
        ("shed_fraction", 0.01, "1%"),
        ("shed_fraction", 1e-4, "0.01%"),
        ("throughput_per_s", 49, "49 items/s"),
        ("attempts_per_item", 1.5, "1.5"),
        ("latency_p95_s", math.nan, "nan"),
        ("latency_p95_s", math.inf, "inf"),
        ("memory_peak_mib", 3.0, "3"),
    ],
)
def test_limits_are_written_in_their_unit(metric, value, text) -> None:
    assert limit_text(metric, value) == text


@pytest.mark.parametrize(
    ("metric", "value", "text"),
    [
        ("memory_peak_bytes", 1_835_008, "1.75 MiB"),  # measured sizes: binary, as memory is
        ("memory_peak_bytes", 200e6, "191 MiB"),
        ("memory_peak_bytes", 512, "512 B"),
        ("latency_p95_s", 18.0829, "18.1 s"),
        ("shed_fraction", 0.0026531, "0.265%"),
        ("latency_p95_s", math.nan, "nan"),
    ],
)
def test_measured_values_are_written_in_their_unit(metric, value, text) -> None:
    assert value_text(metric, value) == text


def test_an_slo_in_words() -> None:
    assert slo_text(SLO.parse("latency_p95_s<=0.5")) == "p95 latency ≤ 0.5 s"
    assert slo_text(SLO.parse("throughput_per_s>=49")) == "throughput ≥ 49 items/s"
    assert slo_text(SLO.parse("memory_peak_bytes<=200e6")) == "peak memory ≤ 200 MB"


def test_sweep_heatmaps_read_as_words_not_keys(sweep_frame) -> None:
    frame = sweep_frame(
        {(c, m): [c + m / 10 + r for r in (0, 1)] for c in (2, 4) for m in (10, 50)}
    )
    fig = plot_sweep(frame, "latency_p95_s")
    heat, bar = fig.axes
    assert heat.get_title() == "p95 latency (s): mean ± 95% half-width"
    assert bar.get_ylabel() == "p95 latency (s), mean over replications"
    own = plot_sweep(frame, "latency_p95_s", label="p95 latency, seconds")
    assert own.axes[1].get_ylabel() == "p95 latency, seconds, mean over replications"
    line = plot_sweep(frame[lambda f: f.queue_maxsize == 10], "latency_p95_s")
    assert line.axes[0].get_ylabel() == "p95 latency (s)"


@pytest.fixture(scope="module")
def plans():
    base = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(),
        item_size_bytes=64 * 1024,
        n_items=2000,
        seed=3,
    )
    search = {"concurrency": range(1, 9), "queue_maxsize": [10, 100]}
    slos = ["wait_mean_s<=0.5", "memory_peak_bytes<=8388608"]
    loose = plan(base, search, slos, processes=1, progress=False)
    tight = plan(base, search, ["wait_mean_s<=0.1", slos[1]], processes=1, progress=False)
    return loose, tight


def test_the_frontier_reads_in_words_and_units(plans) -> None:
    _, tight = plans
    fig = tight.figure()
    wait, memory = (ax for ax in fig.axes if ax.get_visible())
    assert [wait.get_title(), memory.get_title()] == ["mean wait ≤ 0.1 s", "peak memory ≤ 8 MiB"]
    assert wait.get_ylabel() == "mean wait (s)" and memory.get_ylabel() == "peak memory"
    fig.canvas.draw()
    ticks = [t.get_text() for t in memory.get_yticklabels() if t.get_text()]
    assert ticks and all(t.endswith(("MiB", "KiB", "B")) for t in ticks), ticks
    assert wait.get_yscale() == "log"  # waits from far above the limit to far below it
    # One legend for the figure, outside every panel; none inside.
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)


def test_the_frontier_shows_a_previous_answer_for_comparison(plans) -> None:
    loose, tight = plans
    assert loose.chosen["concurrency"] < tight.chosen["concurrency"]
    fig = tight.figure(previous=loose)
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "previous choice" in labels and "previous limit" in labels
    wait = fig.axes[0]
    star = next(line for line in wait.get_lines() if line.get_label() == "previous choice")
    assert list(star.get_xdata()) == [loose.chosen["concurrency"]]
    # Queueing theory rejects none of these for a utilisation SLO: 1-3 workers run, and
    # their drains time out.
    with pytest.warns(DrainTimeoutWarning):
        other = plan(loose.base, loose.search, ["utilisation<=0.9"], processes=1, progress=False)
    with pytest.raises(ValueError, match="previous must be a plan of the same metrics"):
        tight.figure(previous=other)


def test_a_zero_on_a_log_colour_scale_is_the_bottom_colour_not_a_blank() -> None:
    rows = [
        {"concurrency": c, "queue_maxsize": m, "replication": 0, "shed": shed}
        for (c, m), shed in {(2, 10): 0.5, (2, 50): 0.2, (4, 10): 0.001, (4, 50): 0.0}.items()
    ]
    frame = pd.DataFrame(rows)
    frame.attrs["grid"] = ["concurrency", "queue_maxsize"]
    heat = plot_sweep(frame, "shed", x="queue_maxsize", y="concurrency").axes[0]
    (image,) = heat.images
    colours = image.get_array()
    assert image.norm.vmin == pytest.approx(0.001)  # a log scale: the values span 500x
    assert not np.ma.getmaskarray(colours)[1, 1] and colours[1, 1] == pytest.approx(0.001)
    assert "0" in [t.get_text() for t in heat.texts]  # the cell still says what it holds


def test_one_vocabulary_one_byte_formatter() -> None:
    # One table, one formatter: every unit name of a byte count is spelled in pipeline._units.
    import ast
    from pathlib import Path

    import pipeline
    import pipeline.viz
    from pipeline import _units

    assert pipeline.viz.metric_label is metric_label
    assert pipeline.viz.human_bytes is _units.human_bytes
    assert metric_label("sim_time_s") == "simulated time (s)"
    root = Path(pipeline.__file__).parent
    spelled = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "_units.py"
        and any(
            isinstance(node, ast.Constant) and node.value in ("KiB", "MiB", "GiB")
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert spelled == []
    assert _units.human_bytes(1536) == "1.5 KiB" and _units.human_bytes(None) == "n/a"
    assert _units.human_bytes(3 * 2**40) == "3 TiB"
