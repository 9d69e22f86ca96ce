"""``python -m pipeline simulate``: batch-means half-widths, drain warnings, run-length advice."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from pipeline.cli import main
from pipeline.sim.analysis import theory

MM4 = ["--arrivals", "poisson:rate=3.2", "--service", "exponential:mean=1.0"]
# Twice what 4 workers serve, into an unbounded queue: the backlog outlasts the default
# 30-second drain.
OVERLOAD = ["--arrivals", "poisson:rate=8", "--service", "exponential:mean=1.0", "--maxsize",
            "unbounded"]  # fmt: skip


def run(capsys, *args):
    assert main(["simulate", *map(str, args)]) == 0
    return capsys.readouterr()


def test_json_has_batch_means_half_widths(capsys):
    done = run(capsys, *MM4, "--items", 20_000, "--seed", 1, "--maxsize", "unbounded", "--json")
    out = json.loads(done.out)
    # One run's half-width: about 10-20% of the mean at 80% load, and it covers Erlang C.
    wait, half = out["wait_mean_s"], out["wait_mean_ci95_s"]
    assert 0 < half < wait
    assert abs(wait - theory.mmc(3.2, 1.0, 4).wait_mean_s) <= half
    assert 0 < out["latency_mean_ci95_s"] < out["latency_mean_s"]
    assert done.err == ""


def test_too_few_items_for_batch_means_is_null(capsys):
    out = json.loads(run(capsys, *MM4, "--items", 150, "--json").out)
    assert out["wait_mean_ci95_s"] is None and out["latency_mean_ci95_s"] is None
    table = run(capsys, *MM4, "--items", 150).out
    assert "too few items for batch means" in table


def test_table_shows_the_half_width_on_the_mean_row(capsys):
    table = run(capsys, *MM4, "--items", 20_000, "--seed", 1).out
    (row,) = [line for line in table.splitlines() if line.strip().startswith("wait_mean_s ")]
    assert "(95%, batch means)" in row
    assert "wait_mean_ci95_s" not in table  # folded into the row above, not repeated


def test_a_drain_timeout_is_a_warning_on_stderr(capsys):
    done = run(capsys, *OVERLOAD, "--items", 3000, "--json")
    out = json.loads(done.out)
    assert out["drain_timed_out"] is True and out["items_unfinished"] > 0
    (line,) = done.err.splitlines()
    assert line.startswith("pipeline: warning: the drain timed out (--drain-timeout 30)")
    assert f"{out['items_unfinished']:,} item(s) were left unfinished" in line
    # The command line's words (its flags), not Python's keywords.
    assert "use --drain-timeout none" in line and "drain_timeout_s" not in line
    table = run(capsys, *OVERLOAD, "--items", 3000)
    diagnosis = table.out[table.out.index("DRAIN_TIMEOUT") :]
    assert "--drain-timeout none in a simulation), raise --drain-timeout from 30 s" in diagnosis
    assert "drain_timeout_s=" not in diagnosis
    # A drain that may take as long as it needs: no warning.
    done = run(capsys, *OVERLOAD, "--items", 3000, "--drain-timeout", "none", "--json")
    assert done.err == ""


def test_replications_count_the_runs_whose_drain_timed_out(capsys):
    done = run(capsys, *OVERLOAD, "--items", 1000, "--replications", 3, "--json")
    assert "pipeline: warning: the drain timed out (--drain-timeout 30) in 3 of 3 replications" in (
        done.err
    )


def test_wide_replication_intervals_get_advice(capsys):
    heavy = ["--arrivals", "poisson:rate=3.8", "--service", "exponential:mean=1.0"]
    done = run(capsys, *heavy, "--items", 2000, "--replications", 3, "--maxsize", "unbounded",
               "--drain-timeout", "none", "--json")  # fmt: skip
    out = json.loads(done.out)
    advice = [line for line in done.err.splitlines() if line.startswith("pipeline: advice: ")]
    assert len(advice) == 2
    for key, line in zip(("latency_mean_s", "latency_p95_s"), advice, strict=True):
        relative = out["ci95"][key] / out[key]
        assert relative > 0.10
        assert f"{key} = " in line and f"±{relative:.0%} of its mean" in line
        needed = math.ceil(3 * (relative / 0.10) ** 2 * (1 - 1e-9))
        assert f"about {needed:,} replications (now 3)" in line
        assert "rho near 1" in line  # utilisation 0.95


def test_precise_replications_get_no_advice(capsys):
    light = ["--arrivals", "poisson:rate=1", "--service", "constant:value=1"]
    done = run(capsys, *light, "--items", 5000, "--replications", 3, "--json")
    assert done.err == ""


def test_the_json_path_still_imports_neither_pandas_nor_matplotlib():
    code = """
import contextlib, io, json, sys
from pipeline.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(["simulate", "--arrivals", "poisson:rate=8", "--service", "exponential:mean=1.0",
          "--items", "3000", "--replications", "2", "--json"])
print(json.dumps(sorted({"pandas", "matplotlib"} & set(sys.modules))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("replications", [1, 2])
def test_the_drain_warning_is_one_line_in_a_subprocess(replications):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "simulate", *OVERLOAD, "--items", "2000",
         "--replications", str(replications), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("pipeline: ") for line in lines), done.stderr
    assert "Traceback" not in done.stderr and "DrainTimeoutWarning" not in done.stderr
