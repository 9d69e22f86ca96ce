"""A run whose drain timed out says so: ``DrainTimeoutWarning`` from ``simulate()``, and
once for all their runs, with how many timed out, from ``sweep()``, ``plan()`` and ``compare()``."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from pipeline import PipelineConfig
from pipeline.sim import DrainTimeoutWarning, Exponential, Poisson, Scenario, simulate, sweep
from pipeline.sim.analysis.compare import compare
from pipeline.sim.analysis.planning.plan import plan
from pipeline.sim.analysis.planning.slo_table import slo_table, smallest_config_meeting
from pipeline.sim.analysis.sweep import summarise_sweep

# Twice what 4 workers serve, into an unbounded queue: about 750 items are still queued when
# the arrivals end, far more than 30 seconds of work.
OVERLOADED = Scenario(
    arrivals=Poisson(rate=8.0),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4, queue_maxsize=None),
    n_items=1500,
    seed=2,
)


def test_a_timed_out_drain_warns_with_the_count_and_the_remedy():
    with pytest.warns(DrainTimeoutWarning) as caught:
        result = simulate(OVERLOADED)
    (warning,) = caught
    left = len(result.report.unfinished)
    assert result.summary["drain_timed_out"] and left == result.summary["items_unfinished"] > 0
    message = str(warning.message)
    assert f"{left:,} item(s) were left unfinished" in message
    assert "missing from the latency statistics" in message
    assert "drain_timeout_s=None" in message and "fewer items" in message
    assert warning.filename == __file__  # points at the caller of simulate()
    assert issubclass(DrainTimeoutWarning, UserWarning)


def test_replications_name_how_many_runs_timed_out():
    with pytest.warns(DrainTimeoutWarning, match=r"in 2 of 2 replications: [\d,]+ item\(s\)"):
        runs = simulate(OVERLOADED, replications=2, processes=1, progress=False)
    total = sum(len(r.report.unfinished) for r in runs.results)
    with pytest.warns(DrainTimeoutWarning, match=f"{total:,} item"):
        simulate(OVERLOADED, replications=2, processes=1, progress=False)


def test_a_drain_that_finishes_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = simulate(OVERLOADED.replace(drain_timeout_s=None))
        assert not result.summary["drain_timed_out"]
        assert result.summary["items_completed"] == 1500


def test_the_warning_can_be_silenced_on_purpose():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DrainTimeoutWarning)
        assert simulate(OVERLOADED).summary["drain_timed_out"]


def test_the_unfinished_tail_is_what_the_statistics_miss():
    # Why it matters: the items cut off are the latest, longest-waiting ones.
    with pytest.warns(DrainTimeoutWarning):
        cut = simulate(OVERLOADED)
    whole = simulate(OVERLOADED.replace(drain_timeout_s=None))
    assert cut.summary["latency_p99_s"] < whole.summary["latency_p99_s"]
    assert cut.summary["latency_mean_s"] < whole.summary["latency_mean_s"]


# -- sweeps, plans and comparisons count their timed-out runs and warn once ----------------


@pytest.mark.parametrize("engine", ["asyncio", "kernel"])
def test_a_sweep_warns_once_with_how_many_runs_timed_out(engine):
    # 4 workers cannot clear the backlog within 30 s; 20 can (no drain timeout there).
    grid = {"concurrency": [4, 20]}
    with pytest.warns(DrainTimeoutWarning) as caught:
        frame = sweep(OVERLOADED, grid, replications=2, processes=1, progress=False, engine=engine)
    (warning,) = caught
    cut = frame[frame["drain_timed_out"]]
    assert cut["concurrency"].tolist() == [4, 4] and set(frame["engine"]) == {engine}
    left = int(cut["items_unfinished"].sum())
    message = str(warning.message)
    assert f"in 2 of 4 sweep runs: {left:,} item(s) were left unfinished" in message
    assert "drain_timeout_s=30.0" in message and "drain_timed_out column" in message
    assert warning.filename == __file__
    table = summarise_sweep(frame, metrics=["latency_p95_s"])
    assert table["drain_timed_out"].tolist() == [2, 0]
    assert slo_table(frame, "latency_p95_s", 1e9)["drain_timed_out"].tolist() == [2, 0]


def test_a_sweep_whose_drains_finish_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = sweep(
            OVERLOADED, {"concurrency": [20]}, replications=2, processes=1, progress=False
        )
    assert not frame["drain_timed_out"].any()


def test_a_sweep_slo_table_never_meets_a_latency_slo_on_a_cut_run():
    # The cut runs' p95 leaves out the slowest items: without the rule it would "meet".
    with pytest.warns(DrainTimeoutWarning):
        frame = sweep(OVERLOADED, {"concurrency": [4]}, replications=3, processes=1, progress=False)
    whole = float(frame["latency_p95_s"].max()) * 10
    latency = slo_table(frame, "latency_p95_s", whole)
    assert latency["upper"].iloc[0] <= whole and not latency["meets"].iloc[0]
    assert smallest_config_meeting(frame, "latency_p95_s", whole) is None
    # A metric the drain does not cut keeps its verdict.
    memory = slo_table(frame, "memory_peak_bytes", 1e12)
    assert memory["meets"].iloc[0] and memory["drain_timed_out"].iloc[0] == 3


def test_plan_and_compare_warn_once_with_the_count():
    with pytest.warns(DrainTimeoutWarning) as caught:
        result = plan(
            OVERLOADED, {"concurrency": [4, 20]}, ["latency_p95_s<=1e6"],
            replications=2, skip_unstable=False, processes=1, progress=False,
        )  # fmt: skip
    (warning,) = caught
    assert warning.filename == __file__  # points at the caller of plan()
    assert "in 2 of 4 plan runs" in str(warning.message)
    assert "the plan counts those runs as failing every latency and wait SLO" in str(
        warning.message
    )
    assert result.runs_drain_timed_out == 2 and result.to_dict()["runs_drain_timed_out"] == 2
    assert result.chosen["concurrency"] == 20
    with pytest.warns(DrainTimeoutWarning, match=r"in 2 of 4 compare runs: .* so the difference"):
        compare(OVERLOADED, OVERLOADED.replace(concurrency=20), metric="latency_mean_s",
                replications=2)  # fmt: skip


@pytest.fixture()
def everything_cut(tmp_path):
    # 3 items of 40 s each: every run's drain (30 s) cuts them, whatever the workers.
    return [
        sys.executable, "-m", "pipeline", "sweep", "--arrivals", "poisson:rate=10",
        "--service", "constant:value=40", "--items", "3", "--grid", "concurrency=1,3",
        "--replications", "2", "--processes", "1", "--out", str(tmp_path / "out"),
    ]  # fmt: skip


@pytest.mark.slow  # two sweeps as processes: 4 s of CPU
def test_the_cli_sweep_prints_one_warning_line_with_the_count(everything_cut):
    done = subprocess.run([*everything_cut, "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    # One line for the sweep's 4 runs (none for its one-item metrics probe).
    assert len(warned) == 1, done.stderr
    # In the command line's words: its flags, not Python's keywords.
    assert warned[0].startswith("pipeline: warning: the drain timed out (--drain-timeout 30) ")
    assert "use --drain-timeout none" in warned[0] and "drain_timeout_s" not in warned[0]
    assert "in 4 of 4 sweep runs:" in warned[0]
    points = json.loads(done.stdout)["points"]
    assert [p["drain_timed_out"] for p in points] == [2, 2]
    table = subprocess.run(everything_cut, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "drain_timed_out" in table.stdout.splitlines()[1]
    assert "2 of 2" in table.stdout.splitlines()[2]
