"""A sweep marks the waits and latencies a timed-out drain cut, as a plan fails them.

A grid point whose runs' drains timed out reports only the items that
finished: its latency leaves out the slowest tail and looked better than a
point whose drain finished (a heatmap showed ``10/unbounded`` better than
``10/80`` for that reason alone). One rule, ``drain_cut``, says which metrics
are cut; the plan's ``DRAIN_CUT_METRICS`` and every sweep output use it.
"""

from __future__ import annotations

import json
import warnings

import pytest
from matplotlib.patches import Rectangle

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario
from pipeline.sim.analysis.planning.slo import DRAIN_CUT_METRICS, SUMMARY_METRICS
from pipeline.sim.analysis.sweep import summarise_sweep, sweep
from pipeline.sim.running.drain_warning import drain_cut
from pipeline.viz.figures.sweep import plot_sweep

# Overloaded at 4 workers (rate 5, 4 served a second) with a 5 s drain: the unbounded
# queue's drain times out in every run; 8 workers keep up.
BASE = Scenario(
    arrivals=Poisson(5.0),
    service=Exponential(1.0),
    config=PipelineConfig(concurrency=4, drain_timeout_s=5.0),
    n_items=400,
    seed=1,
)
GRID = {"concurrency": [4, 16], "queue_maxsize": [10, None]}


@pytest.fixture(scope="module")
def frame():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the DrainTimeoutWarning is the point here
        return sweep(BASE, GRID, replications=3, progress=False)


def test_one_rule_for_the_plan_and_the_sweep():
    assert tuple(m for m in SUMMARY_METRICS if drain_cut(m)) == DRAIN_CUT_METRICS
    assert {"wait_mean_s", "latency_p95_s"} <= set(DRAIN_CUT_METRICS)
    assert drain_cut("classes.gold.latency_p95_s") and drain_cut("write.wait_mean_s")
    assert not any(drain_cut(m) for m in ("items_shed", "queue_depth_max", "throughput_per_s"))


def test_the_summary_table_counts_the_cut_runs_per_metric(frame):
    table = summarise_sweep(frame, ["latency_p95_s", "items_shed"])
    assert "items_shed_drain_cut" not in table.columns  # a count is not cut
    cut = frame.groupby(["concurrency"], sort=False)["drain_timed_out"].sum()
    assert cut[4] > 0 and cut[16] == 0, cut
    for _, row in table.iterrows():
        assert row["latency_p95_s_drain_cut"] == row["drain_timed_out"]
        assert (row["latency_p95_s_drain_cut"] > 0) == (row["concurrency"] == 4)


def _hatched_cells(ax) -> set[tuple[int, int]]:
    return {
        (round(p.get_x() + 0.5), round(p.get_y() + 0.5))
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_hatch()
    }


def test_the_heatmap_hatches_and_names_the_cut_cells(frame):
    figure = plot_sweep(frame, "latency_p95_s", x="concurrency", y="queue_maxsize")
    ax = figure.axes[0]
    # Columns: concurrency 4, 16; rows: maxsize 10, unbounded. 4 workers are cut.
    assert _hatched_cells(ax) == {(0, 0), (0, 1)}
    cells = {(round(t.get_position()[0]), round(t.get_position()[1])): t for t in ax.texts}
    for (col, _row), text in cells.items():
        assert ("drain cut" in text.get_text()) == (col == 0), text.get_text()
    assert "slowest tail" in figure.get_supxlabel().replace("\n", " ")
    # A metric a timed-out drain does not cut is drawn plain.
    plain = plot_sweep(frame, "items_shed", x="concurrency", y="queue_maxsize")
    assert not _hatched_cells(plain.axes[0]) and not plain.get_supxlabel()


def test_the_line_plot_crosses_out_the_cut_points(frame):
    line = plot_sweep(frame[frame["queue_maxsize"] == 10], "latency_mean_s", x="concurrency")
    (ax,) = line.axes
    crosses = [c for c in ax.lines if c.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [4.0]
    assert "slowest tail" in line.get_supxlabel().replace("\n", " ")


@pytest.mark.filterwarnings("ignore::pipeline.sim.running.result.DrainTimeoutWarning")
def test_the_command_line_marks_cut_cells_in_its_table_and_json(run_main, tmp_path):
    args = [
        "sweep", "--arrivals", "poisson:rate=5", "--service", "exponential:mean=1.0",
        "--items", "400", "--seed", "1", "--drain-timeout", "5", "--replications", "3",
        "--processes", "1", "--grid", "concurrency=4,16", "--grid", "maxsize=10,unbounded",
        "--metrics", "latency_p95_s,items_shed", "--out", tmp_path / "out",
    ]  # fmt: skip
    status, out, err = run_main(*args)
    assert status == 0, err
    lines = out.splitlines()
    rows = [
        line
        for line in lines
        if line.split()[:2] in (["4", "10"], ["4", "unbounded"], ["16", "10"], ["16", "unbounded"])
    ]
    assert len(rows) == 4
    for row in rows:
        assert ("[cut]" in row) == row.startswith("4 "), row
    assert any(line.startswith("[cut]: the drain timed out") for line in lines)
    status, out, _ = run_main(*args[:-1], tmp_path / "json", "--json")
    points = json.loads(out)["points"]
    for point in points:
        expected = ["latency_p95_s"] if point["point"]["concurrency"] == 4 else []
        assert point["drain_cut"] == expected
