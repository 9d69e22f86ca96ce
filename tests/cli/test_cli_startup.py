"""Start-up of the command line: single-threaded BLAS on every entry point, and no import
the command does not use.

Every entry point (``python -m pipeline``, ``python -m pipeline.cli`` and the
``pipeline-lab`` script that pip writes from ``pyproject.toml``) must set the
BLAS thread variables before numpy is first imported: OpenBLAS reads them once,
at its import, and otherwise starts a thread per core (about 0.05 s of CPU per
command on two cores). A probe records the environment at the moment numpy's
import begins. The kernel's ``simulate`` must not import what only other
commands or the asyncio engine need (the virtual loop, the OpenMetrics writer,
the output folders' ``tempfile``, pandas, matplotlib).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["simulate", "--arrivals", "poisson:rate=3", "--service", "exponential:mean=1",
        "--concurrency", "4", "--items", "200", "--seed", "1", "--json"]  # fmt: skip

# Runs an entry point with a finder that notes, when numpy's import starts, the thread
# variables then set; then reports them, the threads alive and the modules imported.
PROBE = """\
import json, os, runpy, sys

seen = {}

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not seen:
            seen.update({k: os.environ.get(k) for k in
                         ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
        return None

sys.meta_path.insert(0, Watch())
entry, args = sys.argv[1], sys.argv[2:]
sys.argv = ["pipeline", *args]
try:
    if entry.startswith("-m "):
        runpy.run_module(entry[3:], run_name="__main__")
    else:  # "module:function", called as pip's console script calls it
        module, function = entry.split(":")
        sys.exit(getattr(__import__(module, fromlist=[function]), function)())
except SystemExit as done:
    status = done.code
print(json.dumps({"status": status, "at_numpy_import": seen,
                  "threads": len(os.listdir("/proc/self/task")),
                  "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _console_script() -> str:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return scripts["pipeline-lab"]


def _probe(entry: str, env_extra: dict[str, str] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env.update(env_extra or {})
    done = subprocess.run(
        [sys.executable, "-c", PROBE, entry, *ARGS],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stderr.strip().splitlines()[-1])
    assert record["status"] in (0, None), done.stderr
    assert json.loads(done.stdout)["items_completed"] == 200
    return record


def test_the_console_script_is_the_command_that_sets_blas_threads():
    assert _console_script() == "pipeline.cli:run_as_command"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
@pytest.mark.parametrize("entry", ["-m pipeline", "-m pipeline.cli", "console script"])
def test_every_entry_point_sets_one_blas_thread_before_numpy_loads(entry):
    record = _probe(_console_script() if entry == "console script" else entry)
    assert record["at_numpy_import"] == {
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    assert record["threads"] == 1  # no BLAS pool was started


def test_a_thread_count_the_user_set_is_kept():
    record = _probe(_console_script(), {"OPENBLAS_NUM_THREADS": "2"})
    assert record["at_numpy_import"]["OPENBLAS_NUM_THREADS"] == "2"


def test_the_kernels_simulate_imports_only_what_it_uses():
    modules = set(_probe("-m pipeline")["modules"])
    assert "pipeline.sim.running.kernel.fcfs" in modules  # the kernel ran it
    unused = {
        "pipeline.sim.vloop",  # the asyncio engine's virtual clock
        "pipeline.sim.running.openmetrics",  # --openmetrics only
        "tempfile",  # --out folders and calibrate's files only
        "pandas",
        "matplotlib",
    }
    assert not unused & modules, sorted(unused & modules)


PLAN = ["plan", "--arrivals", "poisson:rate=50", "--service", "lognormal:p50=0.05,p99=1.2",
        "--search", "concurrency=1..16", "--slo", "latency_p95_s<=0.5", "--failure-rate", "0.02",
        "--max-attempts", "3", "--items", "20000", "--seed", "1", "--processes", "1",
        "--json"]  # fmt: skip


def _page_faults(env_extra: dict[str, str]) -> tuple[int, str]:
    """A plan's minor page faults as a command (``python -m pipeline``), and its answer."""
    import resource

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}  # ours alone
    env.update(env_extra)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *PLAN],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before, done.stdout


@pytest.mark.slow  # two plans as processes: 4 s of CPU
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_plan_keeps_freed_memory_for_its_next_run():
    # glibc's defaults (what a MALLOC_ variable the user sets leaves in force) hand freed
    # blocks back, and each run faults them in again: about four times the page faults.
    kept, answer = _page_faults({})
    returned, same = _page_faults({"MALLOC_TRIM_THRESHOLD_": str(128 * 1024)})
    assert same == answer
    assert kept < 0.6 * returned, (kept, returned)
