"""A script without ``if __name__ == "__main__":`` works or stops at once, in one line.

Worker processes (``spawn``, ``forkserver``) re-run the script that started
them; at its top level, an unguarded ``sweep(processes=2)`` would run again in
every worker and break the pool. Each script here runs in a subprocess with a
timeout, so a hang or a fork bomb fails the test instead of the machine.
"""

from __future__ import annotations

import ast
import os
import py_compile
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from pipeline.sim.executors.main_guard import _guarded, _main_is_rerun

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 120  # generous: a hang is what is tested, not speed

PRELUDE = """\
import multiprocessing
import pipeline.sim.executors.pool as pool
from pipeline import PipelineConfig, Scenario, simulate, sweep
from pipeline.sim import Exponential, Poisson

pool.context = lambda: multiprocessing.get_context({method!r})
base = Scenario(arrivals=Poisson(rate=3.2), service=Exponential(mean=1.0),
                config=PipelineConfig(concurrency=4), n_items=300, seed=1)
"""
SWEEP = 'frame = sweep(base, {"concurrency": [4, 5]}, replications=2, processes=2, progress=False)'
SIMULATE = "runs = simulate(base, replications=4, processes=2, progress=False)"
PLAN = (
    "from pipeline.sim import plan; "
    "answer = plan(base, {'concurrency': [4, 5]}, ['wait_mean_s<=5'], processes=2, progress=False)"
)


def run_script(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    return subprocess.run(
        [sys.executable, path.name],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def write(tmp_path: Path, body: str, method: str = "forkserver") -> Path:
    path = tmp_path / "planning_script.py"
    path.write_text(PRELUDE.format(method=method) + textwrap.dedent(body))
    return path


@pytest.mark.parametrize("call", [SWEEP, SIMULATE, PLAN], ids=["sweep", "simulate", "plan"])
# A script as a process each (0.7 s of CPU); "spawn"'s three run in make test only.
@pytest.mark.parametrize("method", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_an_unguarded_call_stops_at_once_with_one_line(tmp_path, call, method):
    done = run_script(write(tmp_path, call + "\nprint('finished')\n", method))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: ")
    assert "planning_script.py:9" in last  # the user's line
    assert 'if __name__ == "__main__":' in last and "processes=1" in last
    assert "BrokenProcessPool" not in done.stderr and "finished" not in done.stdout


def test_the_default_process_count_runs_here_with_a_warning(tmp_path):
    call = 'frame = sweep(base, {"concurrency": [4, 5]}, replications=2, progress=False)'
    done = run_script(write(tmp_path, call + "\nprint('rows', len(frame))\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["rows", "4"]
    assert "planning_script.py:9: RuntimeWarning: sweep runs in this process" in done.stderr


def test_a_plan_left_to_its_default_processes_runs_here_with_a_warning(tmp_path):
    # The planner starts a pool by default when its first round would take a few seconds
    # (the README's 100,000-item call); made to here, for a quick run on two CPUs.
    call = (
        "import os, pipeline.sim.analysis.planning.plan as p, "
        "pipeline.sim.analysis.planning.rounds as r; os.cpu_count = lambda: 2; "
        "r.POOL_WORTH_S = 0.0; "
        "answer = p.plan(base, {'concurrency': [4, 5]}, ['wait_mean_s<=5'], progress=False)"
    )
    done = run_script(
        write(tmp_path, call + "\nprint(answer.status, answer.chosen['concurrency'])\n")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["chosen", "4"]
    assert "planning_script.py:9: RuntimeWarning: plan runs in this process, not 2" in done.stderr
    assert "BrokenProcessPool" not in done.stderr and "Traceback" not in done.stderr


def test_a_guarded_script_uses_worker_processes(tmp_path):
    body = f"""
    def main():
        {SWEEP}
        print("rows", len(frame), multiprocessing.active_children() == [])

    if __name__ == "__main__":
        main()
    """
    done = run_script(write(tmp_path, body))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["rows", "4", "True"]
    assert "Warning" not in done.stderr


@pytest.mark.slow  # worker pools from a script, twice: 2.5 s
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_script_without_source_still_gets_the_hint_and_no_hang(tmp_path, method):
    # The parent cannot read a script run from its .pyc alone; the workers' own
    # check is the safety net: one line each, and the pool reports them.
    source = write(tmp_path, SWEEP + "\n", method)
    compiled = tmp_path / "compiled.pyc"
    py_compile.compile(str(source), cfile=str(compiled), doraise=True)
    source.unlink()
    done = run_script(compiled)
    assert done.returncode == 1
    assert "re-ran the script that started it and reached sweep again" in done.stderr
    assert "sweep: a worker process died. If it printed that it re-ran" in done.stderr
    assert "Traceback" in done.stderr  # the parent's BrokenProcessPool; workers print no traces
    assert done.stderr.count("Traceback") == 1


def test_an_unguarded_local_cluster_stops_before_starting(tmp_path):
    body = """
    from pipeline.sim.executors.cluster import scheduler_executor
    with scheduler_executor("local", workers=2) as executor:
        print("started")
    """
    done = run_script(write(tmp_path, body))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: scheduler_executor('local') at planning_script.py:11")
    assert "started" not in done.stdout


# -- reading the script: which lines run only as __main__ ------------------------------------

SOURCE = """\
import x
sweep()                                  # 2: unguarded
if __name__ == "__main__":
    sweep()                              # 4
if "__main__" == __name__ and ready:
    sweep()                              # 6
if __name__ != "__main__":
    pass
else:
    sweep()                              # 10
if __name__ == "__mp_main__":
    sweep()                              # 12: the workers' own name
if __name__ != "__main__":
    sweep()                              # 14
try:
    if __name__ == "__main__":
        sweep(
            1,
        )                                # 16-19, nested in a try
except Exception:
    pass
"""


@pytest.mark.parametrize(
    ("line", "guarded"),
    [(2, False), (4, True), (6, True), (10, True), (12, False), (14, False), (18, True)],
)
def test_which_lines_are_guarded(line, guarded):
    assert _guarded(ast.parse(SOURCE), line) is guarded


def module(name: str, **attributes: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attributes)
    return mod


def test_which_main_modules_workers_re_run():
    spec = types.SimpleNamespace
    assert _main_is_rerun(module("__main__", __file__="/tmp/job.py", __spec__=None))
    assert _main_is_rerun(module("__main__", __spec__=spec(name="tools.job")))
    # A package's __main__ (python -m pipeline) is never re-run; neither is -c or the REPL.
    assert not _main_is_rerun(module("__main__", __spec__=spec(name="pipeline.__main__")))
    assert not _main_is_rerun(module("__main__", __spec__=None))
    assert not _main_is_rerun(module("__main__", __file__="/usr/bin/ipython", __spec__=None))
