"""simulate(replications=k): the same numbers on a process pool as in this process, with a bar."""

from __future__ import annotations

import importlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, simulate

replications_module = importlib.import_module("pipeline.sim.running.replications")

BASE = Scenario(
    arrivals=Poisson(rate=3.0),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4, queue_maxsize=10),
    failures=IndependentFailures(0.1),
    n_items=2000,
    seed=5,
)


def same_numbers(a, b):
    assert len(a) == len(b)
    for x, y in zip(a.results, b.results, strict=True):
        assert list(x.summary) == list(y.summary)
        for key, value in x.summary.items():
            if key != "wall_time_s":
                other = y.summary[key]
                assert value == other or (math.isnan(value) and math.isnan(other)), key
        pd.testing.assert_frame_equal(x.items, y.items)
        pd.testing.assert_frame_equal(x.timeseries, y.timeseries)
        assert x.report.dead_letters == y.report.dead_letters


@pytest.mark.parametrize("engine", ["auto", "asyncio"])
def test_a_pool_gives_the_numbers_of_a_serial_run(engine):
    serial = simulate(BASE, replications=3, processes=1, engine=engine)
    pooled = simulate(BASE, replications=3, processes=2, engine=engine, progress=False)
    same_numbers(serial, pooled)
    assert [r.summary["engine"] for r in pooled.results] == [
        "kernel" if engine == "auto" else "asyncio"
    ] * 3
    # replication r is the run simulate_replication(scenario, r) gives, whatever the pool
    assert pooled.results[2].summary["wait_mean_s"] == serial.results[2].summary["wait_mean_s"]


def test_progress_bar_counts_replications(capsys):
    simulate(BASE.replace(n_items=50), replications=3, processes=1, progress=True)
    err = capsys.readouterr().err
    assert "replications" in err and "3/3" in err
    simulate(BASE.replace(n_items=50), replications=3, processes=1, progress=False)
    assert capsys.readouterr().err == ""


def test_small_runs_stay_in_this_process_and_quiet(monkeypatch, capsys):
    seen = {}

    def record(function, tasks, *, workers, bar, what, **options):
        seen["workers"] = workers
        seen["bar"] = not bar.disable
        return [function(*task) for task in tasks]

    monkeypatch.setattr("pipeline.sim.executors.pool.run_tasks", record)
    simulate(BASE.replace(n_items=100), replications=4)
    assert seen == {"workers": 1, "bar": False}
    # a long run (here, a long guess) is worth a pool and shows its progress
    monkeypatch.setattr(replications_module, "estimated_seconds", lambda *args: 60.0)
    simulate(BASE.replace(n_items=100), replications=4)
    assert seen["workers"] == min(4, os.cpu_count() or 1)
    assert seen["bar"] is True
    capsys.readouterr()


@pytest.mark.parametrize("processes", [0, -1, 1.5, True, "2"])
def test_bad_processes_are_named(processes):
    with pytest.raises(ValueError, match=r"processes must be an integer >= 1 or None"):
        simulate(BASE, replications=2, processes=processes)


def test_a_scenario_that_cannot_be_pickled_is_refused_before_the_pool():
    from pipeline.sim import TimeVarying

    varying = BASE.replace(
        arrivals=TimeVarying(lambda t: 0 * t + 1.0, max_rate=1.0, period_s=10.0), n_items=20
    )
    with pytest.raises(ValueError, match=r"simulate\(replications=...\) runs scenarios in 2"):
        simulate(varying, replications=2, processes=2)
    assert len(simulate(varying, replications=2, processes=1)) == 2


SCRIPT = """
from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate

scenario = Scenario(arrivals=Poisson(rate=3.0), service=Exponential(mean=1.0),
                    config=PipelineConfig(concurrency=2), n_items=200, seed=1)
{call}
"""
CALL = "print(len(simulate(scenario, replications=2, processes=2, progress=False)))"


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_the_main_guard_is_told_how_to_fix_it(tmp_path, guarded):
    call = f'if __name__ == "__main__":\n    {CALL}' if guarded else CALL
    script = tmp_path / "replicate.py"
    script.write_text(SCRIPT.format(call=call))
    root = str(Path(__file__).resolve().parents[3])
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": root},
    )
    if guarded:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "2"
    else:
        assert done.returncode != 0
        assert "put the call under 'if __name__ == \"__main__\":'" in done.stderr
