"""One vocabulary of units: a size, a time or a share reads the same in every figure and table."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from pipeline._units import value_text
from pipeline.viz.figures.sweep import plot_sweep
from pipeline.viz.figures.tornado import tornado_figure
from pipeline.viz.figures.units import metric_axis, metric_words

BINARY = re.compile(r"^-?[\d.]+ (B|KiB|MiB|GiB)$")
PERCENT = re.compile(r"^-?[\d.]+%$")


def _sweep(metric: str, values: list[float]) -> pd.DataFrame:
    grid = [(x, y) for x in (1, 2) for y in (10, 20)]
    rows = []
    for (x, y), value in zip(grid, values, strict=True):
        for replication, wobble in enumerate((0.98, 1.02)):
            rows.append({"x": x, "y": y, "replication": replication, metric: value * wobble})
    frame = pd.DataFrame(rows)
    frame.attrs["grid"] = ["x", "y"]
    return frame


def _ticks(axis) -> list[str]:
    axis.get_figure(root=True).canvas.draw()
    return [t.get_text().replace("−", "-") for t in axis.get_ticklabels() if t.get_text()]


def test_a_heatmap_writes_sizes_as_the_tables_do():
    frame = _sweep("memory_peak_bytes", [35_021.0, 70_000.0, 1.5 * 2**20, 3 * 2**20])
    fig = plot_sweep(frame, "memory_peak_bytes", x="x", y="y", log=False)
    try:
        heat, bar = fig.axes
        cells = [t.get_text().split("\n")[0] for t in heat.texts]
        mean = frame[(frame.x == 1) & (frame.y == 10)]["memory_peak_bytes"].mean()
        assert value_text("memory_peak_bytes", mean) in cells  # "34.2 KiB", never "3.5e+04"
        assert not [c for c in cells if "e+" in c]
        assert all(BINARY.match(c) for c in cells), cells
        assert all(BINARY.match(t) for t in _ticks(bar.yaxis)), _ticks(bar.yaxis)
        assert bar.get_ylabel().startswith("peak memory, mean")
    finally:
        plt.close(fig)


def test_a_share_is_a_percentage_on_every_axis():
    frame = _sweep("shed_fraction", [0.0, 0.01, 0.2, 0.45])
    fig = plot_sweep(frame, "shed_fraction", x="x", y="y", log=False)
    try:
        heat, bar = fig.axes
        assert all(PERCENT.match(t) for t in _ticks(bar.yaxis)), _ticks(bar.yaxis)
        assert "(0 to 1)" not in bar.get_ylabel()
        assert [t.get_text().split("\n")[0] for t in heat.texts][-1] == "45%"
    finally:
        plt.close(fig)
    line = plot_sweep(frame[frame.y == 10].drop(columns="y"), "shed_fraction", x="x", log=False)
    try:
        assert all(PERCENT.match(t) for t in _ticks(line.axes[0].yaxis))
    finally:
        plt.close(line)


def test_the_sensitivity_chart_writes_memory_in_binary_units():
    rows = [
        {
            "slo": "memory_peak_bytes<=4194304",
            "input": name,
            "base": 2.0 * 2**20,
            "low": low,
            "high": high,
            "verdict_low": "meets",
            "verdict_high": "misses",
            "factor_low": 0.8,
            "factor_high": 1.2,
        }
        for name, low, high in (
            ("arrival rate", 1.6 * 2**20, 4.5 * 2**20),
            ("service", 1.9e6, 2.4e6),
        )
    ]
    fig = tornado_figure({"change": 0.2, "rows": rows})
    try:
        (axis,) = fig.axes
        ticks = _ticks(axis.xaxis)
        assert ticks and all(BINARY.match(t) for t in ticks), ticks  # not "1e6"
        assert axis.get_xlabel() == metric_words("memory_peak_bytes") == "peak memory"
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    ("metric", "top", "pattern", "words"),
    [
        ("memory_peak_bytes", 3 * 2**20, BINARY, "peak memory"),
        ("shed_fraction", 0.3, PERCENT, None),
        ("latency_p95_s", 12.0, re.compile(r"^-?[\d.]+$"), "p95 latency (s)"),
    ],
)
def test_metric_axis_ticks_each_unit_one_way(metric, top, pattern, words):
    fig, ax = plt.subplots()
    try:
        ax.plot([0, 1], [0, top])
        label = metric_axis(ax.yaxis, metric, top)
        assert all(pattern.match(t) for t in _ticks(ax.yaxis)), _ticks(ax.yaxis)
        assert label == metric_words(metric) and (words is None or label == words)
        assert np.isfinite(top)
    finally:
        plt.close(fig)
