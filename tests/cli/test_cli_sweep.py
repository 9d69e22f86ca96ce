"""``python -m pipeline sweep``: the tidy CSV, the heatmaps, the JSON summary and its errors."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario
from pipeline.sim.analysis.sweep import summarise_sweep, sweep

MM = ["--arrivals", "poisson:rate=3.2", "--service", "exponential:mean=1.0"]
SMALL = [*MM, "--items", "300", "--seed", "3", "--replications", "2", "--processes", "1"]
PNG = b"\x89PNG\r\n\x1a\n"


def sweep_json(run_main, args, cwd):
    status, out, err = run_main("sweep", *args, "--json", cwd=cwd)
    assert status == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def two_axes(tmp_path_factory):
    """One sweep of 2 x 2 points x 2 replications as a subprocess: its JSON and its files."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "sweep", *SMALL, "--grid", "concurrency=4..5",
         "--grid", "maxsize=3,unbounded", "--metrics", "wait_mean_s,memory_peak_bytes",
         "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out, done.stderr


def test_the_csv_is_tidy_and_equals_the_python_sweep(two_axes):
    _, out, _ = two_axes
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 2
    columns = list(rows[0])
    assert columns[:3] == ["concurrency", "maxsize", "replication"]
    assert {"wait_mean_s", "latency_p95_s", "memory_peak_bytes", "engine"} <= set(columns)
    assert [r["maxsize"] for r in rows] == ["3", "3", "unbounded", "unbounded"] * 2
    base = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(),
        n_items=300,
        seed=3,
    )
    grid = {"concurrency": [4, 5], "queue_maxsize": [3, None]}
    expected = sweep(base, grid, replications=2, processes=1, progress=False)
    for row, (_, want) in zip(rows, expected.iterrows(), strict=True):
        assert float(row["wait_mean_s"]) == pytest.approx(want["wait_mean_s"], rel=1e-12)
        assert int(row["memory_peak_bytes"]) == want["memory_peak_bytes"]


def test_the_json_has_means_and_half_widths_per_point(two_axes):
    summary, out, _ = two_axes
    assert summary["grid"] == {"concurrency": [4, 5], "maxsize": [3, None]}
    assert summary["replications"] == 2 and summary["out"] == str(out)
    assert summary["metrics"] == ["wait_mean_s", "memory_peak_bytes"]
    assert summary["engine"] == "kernel"
    assert summary["files"] == [
        "sweep.csv",
        "heatmap_wait_mean_s.png",
        "heatmap_memory_peak_bytes.png",
    ]
    frame = pd.read_csv(out / "sweep.csv")
    frame.attrs["grid"] = ["concurrency", "maxsize"]
    table = summarise_sweep(frame, metrics=["wait_mean_s"])
    assert [p["point"] for p in summary["points"]] == [
        {"concurrency": 4, "maxsize": 3},
        {"concurrency": 4, "maxsize": None},
        {"concurrency": 5, "maxsize": 3},
        {"concurrency": 5, "maxsize": None},
    ]
    for point, (_, row) in zip(summary["points"], table.iterrows(), strict=True):
        assert point["replications"] == 2
        assert point["mean"]["wait_mean_s"] == pytest.approx(row["wait_mean_s_mean"])
        assert point["ci95"]["wait_mean_s"] == pytest.approx(row["wait_mean_s_ci95"])


def test_one_heatmap_per_metric_and_a_progress_bar(two_axes):
    _, out, stderr = two_axes
    for metric in ("wait_mean_s", "memory_peak_bytes"):
        assert (out / f"heatmap_{metric}.png").read_bytes()[:8] == PNG
    assert "sweep: 100%" in stderr and "8/8" in stderr


def test_heatmap_cells_say_mean_and_half_width():
    from pipeline.viz import plot_sweep

    frame = pd.DataFrame(
        {
            "concurrency": [2, 2, 4, 4, 2, 2, 4, 4],
            "maxsize": [10, 10, 10, 10, None, None, None, None],
            "replication": [0, 1] * 4,
            "wait_mean_s": [1.0, 3.0, 0.5, 0.5, 2.0, 2.0, 4.0, float("nan")],
        }
    )
    frame["maxsize"] = frame["maxsize"].astype(object).where(frame["maxsize"].notna(), None)
    frame.attrs["grid"] = ["concurrency", "maxsize"]
    ax = plot_sweep(frame, "wait_mean_s").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["10", "∞"]
    texts = sorted(t.get_text() for t in ax.texts)
    # mean 2 +- t(0.975, 1) * s / sqrt(2) = 12.706 * 1.414 / 1.414 = 12.7; no spread: +- 0;
    # a missing replication: the mean of the one left, and no interval
    assert texts == ["0.5 s\n± 0 s", "2 s\n± 0 s", "2 s\n± 12.7 s", "4 s"]


def test_one_axis_draws_error_bars_and_three_axes_draw_panels():
    from pipeline.viz import plot_sweep

    rows = [
        {"concurrency": c, "maxsize": m, "max_attempts": a, "replication": r, "v": c + r}
        for c in (2, 4)
        for m in (5, 10)
        for a in (1, 2, 3)
        for r in (0, 1)
    ]
    frame = pd.DataFrame(rows)
    frame.attrs["grid"] = ["concurrency", "maxsize", "max_attempts"]
    fig = plot_sweep(frame, "v", x="concurrency", y="maxsize")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["max_attempts=1", "max_attempts=2", "max_attempts=3"]
    # a slice at one value of the other axes is a line over the axis left
    line = plot_sweep(frame[(frame.maxsize == 5) & (frame.max_attempts == 1)], "v")
    assert line.axes[0].get_xlabel() == "concurrency" and not line.axes[0].images
    x, y = line.axes[0].lines[0].get_data()
    assert list(x) == [2, 4] and list(y) == [2.5, 4.5]
    with pytest.raises(ValueError, match="not a grid axis"):
        plot_sweep(frame, "v", x="workers")
    with pytest.raises(ValueError, match="metric 'nope' is not a column"):
        plot_sweep(frame, "nope")


def test_a_one_axis_sweep_from_a_scenario_file(run_main, tmp_path):
    (tmp_path / "scenario.toml").write_text(
        'arrivals = "poisson:rate=3.2"\nservice = "exponential:mean=1.0"\nitems = 200\n'
        'replications = 2\nout = "files"\n\n[grid]\nconcurrency = [4, "5..6"]\n'
        'maxsize = "10,unbounded"\n'
    )
    # the flag replaces the file's axis of the same name; the file's other axis stays
    args = ["scenario.toml", "--grid", "maxsize=7", "--processes", "1", "--metrics", "utilisation"]
    summary = sweep_json(run_main, args, tmp_path)
    assert summary["grid"] == {"concurrency": [4, 5, 6], "maxsize": [7]}
    assert (tmp_path / "files" / "sweep.csv").exists()  # relative to the file
    assert (tmp_path / "files" / "heatmap_utilisation.png").read_bytes()[:8] == PNG


def test_three_axes_and_a_spec_axis_without_json(run_main, tmp_path):
    args = [
        *SMALL,
        "--grid", "concurrency=4,5",
        "--grid", "service=exponential:mean=1.0;lognormal:mean=1.0,cv=2",
        "--grid", "on-full=block,reject",
        "--axes", "service,concurrency",
        "--metrics", "latency_p95_s",
        "--out", "out",
    ]  # fmt: skip
    status, out, err = run_main("sweep", *args, cwd=tmp_path)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "8 grid points x 2 replications (mean ± 95% half-width)"
    assert lines[1].split() == ["concurrency", "service", "on_full", "latency_p95_s"]
    assert "LogNormal(mean=1.0, cv=2.0)" in out and " ± " in out
    assert lines[-1] == "wrote sweep.csv, heatmap_latency_p95_s.png to out/"
    with open(tmp_path / "out" / "sweep.csv", newline="") as f:
        services = {row["service"] for row in csv.DictReader(f)}
    assert services == {"Exponential(mean=1.0)", "LogNormal(mean=1.0, cv=2.0)"}


def test_without_out_a_new_directory_is_made_and_named(run_main, tmp_path):
    args = [*SMALL, "--grid", "concurrency=4", "--metrics", "wait_mean_s"]
    first = sweep_json(run_main, args, tmp_path)
    second = sweep_json(run_main, args, tmp_path)
    assert first["out"].startswith("sweep-") and first["out"] != second["out"]
    assert (tmp_path / first["out"] / "sweep.csv").exists()
    assert (tmp_path / second["out"] / "heatmap_wait_mean_s.png").exists()


def test_a_scheduler_that_cannot_be_reached_is_one_line(run_main, tmp_path, monkeypatch):
    import contextlib

    import pipeline.sim.executors.cluster as cluster

    @contextlib.contextmanager
    def unreachable(address, **kwargs):
        raise OSError(f"Timed out trying to connect to {address} after 10 s")
        yield

    monkeypatch.setattr(cluster, "scheduler_executor", unreachable)
    args = [*MM, "--items", "50", "--grid", "concurrency=4,5", "--out", "never"]
    status, out, err = run_main("sweep", *args, "--scheduler", "tcp://127.0.0.1:9", cwd=tmp_path)
    assert status == 2 and out == ""
    assert err == (
        "pipeline: error: --scheduler tcp://127.0.0.1:9: Timed out trying to connect to "
        "tcp://127.0.0.1:9 after 10 s\n"
    )
    assert not (tmp_path / "never").exists()  # no empty directory left behind


BAD = [
    (["--grid", "workers=1..4"], "--grid workers: cannot vary 'workers'; this scenario's axes:"),
    (["--grid", "concurrency=0..4"], "--grid: concurrency=0..4: expected an integer >= 1"),
    (["--grid", "concurrency=8..2"], "needs integers LOW <= HIGH"),
    (["--grid", "concurrency=1..100000"], "holds more than 10,000 values"),
    (["--grid", "concurrency=1..1000000000"], "<= 100_000 (workers)"),
    (["--grid", "maxsize=abc"], "maxsize=abc: expected an integer >= 1"),
    (["--grid", "failure-rate=nan"], "failure_rate=nan: expected a number >= 0 and <= 1"),
    (["--grid", "failure-rate=inf"], "failure_rate=inf"),
    (["--grid", "drain-timeout=-1"], "drain_timeout=-1"),
    (["--grid", "concurrency="], "concurrency: no values given"),
    (["--grid", "concurrency"], "expected NAME=VALUES"),
    (["--grid", "concurrency=2", "--grid", "concurrency=3"], "--grid concurrency given twice"),
    (["--grid", "concurrency=2,2"], "grid axis concurrency: value 2 given twice"),
    (
        ["--grid", "concurrency=1..10000", "--grid", "maxsize=1..11"],
        "the grid has 110,000 points, more than 100,000",
    ),
    (
        ["--grid", "concurrency=1..10000", "--replications", "101"],
        "1,010,000 runs (grid points x replications) are more than 1,000,000",
    ),
    ([], "no grid: give --grid NAME=VALUES"),
    (["--grid", "concurrency=2", "--metrics", "wait,latency_p95_s"], "unknown metric(s) ['wait']"),
    (["--grid", "concurrency=2", "--metrics", "engine"], "unknown metric(s) ['engine']"),
    (["--grid", "concurrency=2", "--metrics", "wait_mean_s,"], "expected METRIC[,METRIC...]"),
    (["--grid", "concurrency=2", "--metrics", "utilisation,utilisation"], "given twice"),
    (["--grid", "concurrency=2", "--processes", "0"], "--processes: expected an integer >= 1"),
    (["--grid", "concurrency=2", "--processes", "2", "--scheduler", "local"], "not allowed with"),
    (["--grid", "concurrency=2", "--scheduler", " "], "expected 'local' or an address"),
    (["--grid", "concurrency=2", "--axes", "maxsize"], "--axes maxsize: not a grid axis"),
    (
        ["--grid", "concurrency=2,3", "--grid", "maxsize=5", "--axes", "maxsize,maxsize"],
        "two different grid axes",
    ),
    (
        ["--grid", "concurrency=2,3", "--grid", "maxsize=5", "--axes", "maxsize"],
        "--axes needs two grid axes X,Y",
    ),
    (
        [
            "--grid",
            "concurrency=2",
            "--grid",
            "maxsize=5",
            "--grid",
            "max-attempts=1..5",
            "--grid",
            "item-size=1,2,3,4",
        ],
        "would need 20 panels (one per value of max_attempts, item_size), more than 16",
    ),
    (["--grid", "concurrency=2", "--out", "a_file"], "--out a_file: exists and is not a directory"),
    (["--grid", "concurrency=2", "--out", "a_file/sub"], "cannot use a_file/sub"),
    (["grid_list.toml"], "[grid] concurrency: values must be strings or numbers, got bool True"),
    (["grid_empty.toml"], "[grid] concurrency: expected a list of values"),
    (["grid_scalar.toml"], "grid must be a table ([grid]), got 4"),
    (["grid_bad.toml"], "grid_bad.toml: [grid] workers: cannot vary 'workers'"),
]


@pytest.mark.parametrize(("args", "words"), BAD)
def test_bad_input_is_one_line_exit_2_and_runs_nothing(
    run_main, bad_files, monkeypatch, args, words
):
    import pipeline.sim.analysis.sweep as sweep_module

    def never(*args, **kwargs):
        raise AssertionError("the sweep ran before the input was checked")

    monkeypatch.setattr(sweep_module, "sweep", never)
    before = sorted(p.name for p in bad_files.iterdir())
    if not args or not args[0].endswith(".toml"):
        args = [*MM, "--items", "5", *args]
    status, out, err = run_main("sweep", *args, cwd=bad_files)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pipeline: error: ") and words in lines[0]
    assert sorted(p.name for p in bad_files.iterdir()) == before  # no directory made


def test_a_bad_flag_as_a_process_has_no_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "sweep", *MM, "--items", "5", "--grid", "maxsize=0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("pipeline: error: argument --grid: maxsize=0")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.slow  # starts a Dask local cluster: 2 s of CPU
def test_on_a_local_cluster_the_csv_is_the_same(run_main, tmp_path):
    grid = ["--grid", "concurrency=4,5", "--metrics", "wait_mean_s"]
    args = [*MM, "--items", "300", "--seed", "3", "--replications", "2", *grid]
    sweep_json(run_main, [*args, "--processes", "1", "--out", "here"], tmp_path)
    sweep_json(run_main, [*args, "--scheduler", "local", "--out", "dask"], tmp_path)
    here = pd.read_csv(tmp_path / "here" / "sweep.csv").drop(columns="wall_time_s")
    dask = pd.read_csv(tmp_path / "dask" / "sweep.csv").drop(columns="wall_time_s")
    pd.testing.assert_frame_equal(here, dask)
    assert not math.isnan(here["wait_mean_s"].iloc[0])


WHO = """\
arrivals = "poisson:rate=1.6"
service = "exponential:mean=1.0"
concurrency = 2
maxsize = "unbounded"
items = 300
seed = 4

[[classes]]
name = "premium"
priority = 0

[[classes]]
name = "standard"
share = 2
priority = 1
patience = "exponential:mean=5.0"
"""


@pytest.mark.parametrize("where", ["flag", "file"])
def test_a_class_axis_runs_as_the_python_sweep_does(run_main, tmp_path, where):
    # One axis grammar: classes.CLASS.FIELD from the command line (a flag, or the file's
    # [grid], where TOML nests it two tables deep), as sweep() takes it in Python.
    from pipeline.sim import ItemClass

    text = WHO + ("\n[grid]\nclasses.standard.share = [1, 4]\n" if where == "file" else "")
    (tmp_path / "who.toml").write_text(text)
    flags = ["--grid", "classes.standard.share=1,4"] if where == "flag" else []
    out = tmp_path / "out"
    status, _, err = run_main(
        "sweep", "who.toml", *flags, "--replications", "2", "--processes", "1", "--out", out,
        cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, err
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["classes.standard.share"] for r in rows] == ["1", "1", "4", "4"]
    base = Scenario(
        arrivals=Poisson(rate=1.6),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=2, queue_maxsize=None),
        classes=[
            ItemClass(name="premium", priority=0),
            ItemClass(name="standard", share=2, priority=1, patience=Exponential(mean=5.0)),
        ],
        n_items=300,
        seed=4,
    )
    grid = {"classes.standard.share": [1, 4]}
    expected = sweep(base, grid, replications=2, processes=1, progress=False)
    for row, (_, want) in zip(rows, expected.iterrows(), strict=True):
        assert float(row["wait_mean_s"]) == pytest.approx(want["wait_mean_s"], rel=1e-12)
        assert int(row["items_expired"]) == want["items_expired"]


def test_the_python_spelling_of_a_field_is_the_same_axis(run_main, tmp_path):
    args = [*SMALL, "--grid", "concurrency=4"]
    flag = sweep_json(run_main, [*args, "--grid", "maxsize=3,unbounded"], tmp_path)
    field = sweep_json(run_main, [*args, "--grid", "queue_maxsize=3,unbounded"], tmp_path)
    assert field["grid"] == flag["grid"] == {"concurrency": [4], "maxsize": [3, None]}
    assert field["points"] == flag["points"]


CHAIN_WITH_CLASSES = """\
arrivals = "poisson:rate=1"
items = 5

[[stages]]
name = "fetch"
service = "exponential:mean=0.5"

[[stages]]
name = "write"
service = "exponential:mean=0.5"

[[classes]]
name = "gold"
"""


@pytest.mark.parametrize(
    ("file", "axis", "words", "never"),
    [
        # A file with neither stages nor classes: its own axes, not a stage's settings.
        ("plain", "classes.standard.share=1,4", "names class 'standard', but the scenario has "
         "no item classes ([[classes]] tables make them); this scenario's axes: concurrency, "
         "maxsize,", "STAGE"),
        ("plain", "workers=1..4", "workers: cannot vary 'workers'; this scenario's axes: "
         "concurrency, maxsize, on-full,", "STAGE"),
        ("plain", "fetch.workers=1", "this scenario's axes: concurrency,", "a stage's settings"),
        ("who", "classes.nobody.share=1", "classes.nobody.share: no class named "
         "'nobody'; classes: premium, standard", "STAGE"),
        ("who", "classes.standard.colour=1", "cannot vary 'classes.standard.colour'; this "
         "scenario's axes: concurrency, maxsize, on-full, max-attempts, backoff, "
         "attempt-timeout, drain-timeout, autoscale, failure-rate, item-size, backlog, "
         "arrivals, service, or classes.CLASS.FIELD (classes: premium, standard; FIELD: share, "
         "priority, service, patience)", "STAGE"),
        ("who", "classes.standard.share=x", "classes.standard.share=x: expected a number", None),
        ("chain", "write.workers=1", "cannot vary 'write.workers'; this scenario's axes: "
         "arrivals, item-size, backlog, or STAGE.NAME (stages: fetch, write; NAME: service, "
         "concurrency,", None),
        ("chain", "classes.gold.service=constant:value=1", "in a chain each stage has its own "
         "service, not each class", None),
        ("chain", "classes.gold.bogus=1", "or classes.CLASS.FIELD (classes: gold; FIELD: share, "
         "priority, patience)", None),
    ],
)  # fmt: skip
def test_an_axis_that_does_not_fit_says_which_axes_the_file_has(
    run_main, tmp_path, monkeypatch, file, axis, words, never
):
    import pipeline.sim.analysis.sweep as sweep_module

    def refuse(*args, **kwargs):
        raise AssertionError("the sweep ran before the input was checked")

    monkeypatch.setattr(sweep_module, "sweep", refuse)
    head = 'arrivals = "poisson:rate=1"\nservice = "constant:value=1"\nitems = 5\n'
    texts = {"plain": head, "who": WHO, "chain": CHAIN_WITH_CLASSES}
    (tmp_path / f"{file}.toml").write_text(texts[file])
    for where in ("flag", "file"):
        name, _, values = axis.partition("=")
        if where == "flag":
            args = [f"{file}.toml", "--grid", axis]
        else:
            (tmp_path / "g.toml").write_text(texts[file] + f'\n[grid]\n"{name}" = ["{values}"]\n')
            args = ["g.toml"]
        status, out, err = run_main("sweep", *args, cwd=tmp_path)
        assert status == 2 and out == "", err
        assert len(err.splitlines()) == 1, err
        assert words in err, err
        if never is not None:
            assert never not in err, err


@pytest.mark.parametrize(
    ("length", "words"),
    [
        (["--items", "50"], "--warmup 1000 s is not shorter than 4 of 4 sweep runs (the shortest "
         "ended at "),
        (["--duration", "50"], "--warmup 1000 s is not shorter than the arrivals' 50 s "
         "(--duration)"),
    ],
)  # fmt: skip
def test_a_warmup_past_the_runs_is_refused_not_a_table_of_dashes(run_main, tmp_path, length, words):
    out = tmp_path / "out"
    status, stdout, err = run_main(
        "sweep", *MM, *length, "--warmup", "1000", "--grid", "concurrency=2,4", "--replications",
        "2", "--processes", "1", "--out", out,
    )  # fmt: skip
    assert (status, stdout) == (2, ""), err
    (line,) = [each for each in err.splitlines() if each.startswith("pipeline: ")]
    assert line.startswith("pipeline: error: ") and words in line
    assert not out.exists()
