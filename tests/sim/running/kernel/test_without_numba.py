"""Without the ``[fast]`` extra the kernel gives the same runs: numba absent, nothing else moves.

``make test`` installs numba (``[test]`` has ``[fast]``) so the compiled paths
are tested; this test runs the same scenarios in a child process where numba
cannot be imported, as on an install without the extra, with ``auto`` choosing
and every threshold for the compiled paths crossed: the event path (failures,
retries, backoff) and a chain with failures. Every per-item column of the child's
runs equals this process's run on the compiled paths, to the last bit, as do the
summaries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    StageSpec,
    simulate,
)
from pipeline.sim.running.kernel import driver
from pipeline.sim.running.kernel.paths import kernel_path

ROOT = Path(__file__).resolve().parents[4]
JITTER = Backoff(kind="exponential", base_s=0.05, cap_s=2.0, jitter=True)

CHILD = """
import json, sys
sys.modules["numba"] = None  # importing numba now fails, as without the [fast] extra
from tests.sim.running.kernel.test_without_numba import fingerprints
print(json.dumps(fingerprints()))
"""


def scenarios() -> dict[str, Scenario]:
    """A single stage past the event path's compiled threshold, and a chain past the chain's."""
    single = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        failures=IndependentFailures(0.1),
        config=PipelineConfig(concurrency=4, max_attempts=3, backoff=JITTER),
        n_items=driver.LOAD_AFTER_ITEMS + 1_000,
        seed=7,
    )
    config = PipelineConfig(concurrency=3, queue_maxsize=8, max_attempts=3, backoff=JITTER)
    chain = Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(
                name="fetch",
                service=Exponential(mean=1.0),
                failures=IndependentFailures(0.05),
                config=config,
            ),
            StageSpec(name="write", service=Exponential(mean=0.8), config=config),
        ],
        n_items=driver.LOAD_AFTER_ITEMS // 2 + 1_000,
        seed=11,
    )
    return {"single": single, "chain": chain}


def fingerprints() -> dict[str, dict[str, object]]:
    """Each scenario's run on the kernel: its summary and every item column, as plain lists."""
    out: dict[str, dict[str, object]] = {}
    for name, scenario in scenarios().items():
        result = simulate(scenario, engine="kernel")
        items = result.items
        out[name] = {
            "summary": json.dumps(
                {k: v for k, v in result.summary.items() if k != "wall_time_s"},  # a stopwatch
                default=repr,
                sort_keys=True,
            ),
            "columns": {column: [repr(v) for v in items[column].tolist()] for column in items},
        }
    return out


@pytest.mark.skipif(
    driver.compiled() is None,
    reason="needs numba to compare against: pip install 'pipeline-lab[fast]'",
)
def test_the_kernel_without_numba_runs_as_it_does_compiled():
    with kernel_path("compiled"):
        here = fingerprints()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    child = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr[-2000:]
    there = json.loads(child.stdout.splitlines()[-1])
    assert there.keys() == here.keys()
    for name in here:
        assert there[name]["columns"].keys() == here[name]["columns"].keys(), name
        for column, values in here[name]["columns"].items():
            assert there[name]["columns"][column] == values, (name, column)
        assert there[name]["summary"] == here[name]["summary"], name
