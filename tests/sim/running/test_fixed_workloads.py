"""Replications of a scenario nothing in which is random (a replayed trace) are refused.

Every replication of a replayed trace is the same run: three of them gave a
95% interval of 0.0 and no warning. One recorded day is one sample.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    Constant,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    Trace,
    diagnose,
    simulate,
    simulate_replication,
    sweep,
)
from pipeline.sim.workloads.arrivals import Deterministic
from pipeline.sim.workloads.failures import ScriptedFailures
from pipeline.sim.workloads.randomness import fixed_workload
from pipeline.sim.workloads.traces.service import ServiceTrace

REFUSED = ("--replications", "3", "--out", "out", "--json")
REPO = Path(__file__).resolve().parents[3]
N = 400


def _replay(**kw) -> Scenario:
    rng = np.random.default_rng(5)
    arrivals = Trace(np.cumsum(rng.exponential(1 / 3.0, N)))
    service = ServiceTrace(tuple(rng.exponential(1.0, N)))
    return Scenario(
        arrivals=arrivals,
        service=service,
        config=kw.pop(
            "config", PipelineConfig(concurrency=4, queue_maxsize=None, drain_timeout_s=None)
        ),
        n_items=N,
        **kw,
    )


def test_replications_of_a_replayed_trace_are_refused_in_python():
    scenario = _replay()
    assert "recorded trace" in fixed_workload(scenario)
    with pytest.raises(ValueError, match=r"^replications=3: every replication .* same run"):
        simulate(scenario, replications=3)
    with pytest.raises(ValueError, match=r"^replication=1: every replication"):
        simulate_replication(scenario, 1)
    with pytest.raises(ValueError, match=r"^replications=2: .*one recorded day is one sample"):
        sweep(scenario, {"concurrency": [2, 4]}, replications=2, progress=False)
    # One run of it is what it is: allowed, as is a sweep of one replication a point.
    assert simulate(scenario, replications=1).results[0].summary["items_completed"] == N
    assert simulate_replication(scenario, 0).summary["items_completed"] == N
    assert len(sweep(scenario, {"concurrency": [2, 4]}, replications=1, progress=False)) == 2


@pytest.mark.parametrize(
    "random_part",
    [
        {"failures": IndependentFailures(p=0.2)},
        {
            "failures": ScriptedFailures((1,) * N),
            "config": PipelineConfig(
                concurrency=8,
                queue_maxsize=None,
                drain_timeout_s=None,
                backoff=Backoff.constant(0.5, jitter=True),
            ),
        },
    ],
    ids=["random-failures", "jittered-backoff"],
)
def test_a_replay_with_something_random_still_replicates(random_part):
    scenario = _replay(**random_part)
    assert fixed_workload(scenario) is None
    runs = simulate(scenario, replications=3)
    assert len(set(runs.values("latency_mean_s").tolist())) > 1


def test_recorded_arrivals_with_a_service_distribution_replicate():
    scenario = _replay().replace(service=Exponential(1.0))
    assert fixed_workload(scenario) is None
    assert len(set(simulate(scenario, replications=3).values("wait_mean_s").tolist())) == 3


def test_evenly_spaced_arrivals_and_constant_service_are_fixed_too():
    scenario = Scenario(arrivals=Deterministic(2.0), service=Constant(1.0), n_items=50)
    assert fixed_workload(scenario) is not None
    with pytest.raises(ValueError, match="nothing in it is random"):
        simulate(scenario, replications=2)
    assert fixed_workload(scenario.replace(arrivals=Poisson(2.0))) is None


def test_the_diagnostics_advise_no_replications_of_a_replay():
    replayed = diagnose(simulate(_replay()))
    (short,) = [f for f in replayed if f.code == "RUN_TOO_SHORT"]
    assert "replications=R" not in short.fix and "Record a longer trace" in short.fix
    modelled = diagnose(simulate(_replay().replace(service=Exponential(1.0))))
    (short,) = [f for f in modelled if f.code == "RUN_TOO_SHORT"]
    assert "replications=R" in short.fix


def test_the_command_line_refuses_before_any_work(tmp_path):
    rng = np.random.default_rng(3)
    rows = ["arrival_s,service_s"] + [
        f"{t:.6f},{s:.6f}"
        for t, s in zip(np.cumsum(rng.exponential(0.5, 50)), rng.exponential(1.0, 50), strict=True)
    ]
    (tmp_path / "day.csv").write_text("\n".join(rows) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "simulate", "--trace", "day.csv", *REFUSED],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pipeline: error: --replications 3: every")
    assert "one recorded day is one sample" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_plan_of_a_replayed_trace_is_refused_before_any_run(tmp_path):
    # A plan's verdicts are bounds across replications: of one recording there is no spread,
    # so "meets at 95%" would be a claim about one sample. Refused, as replications are.
    from pipeline.sim import plan

    with pytest.raises(ValueError, match=r"^a plan's replications \(3 to 192\): every "):
        plan(_replay(), {"concurrency": [2, 4]}, ["latency_p95_s<=5"], progress=False)
    modelled = _replay().replace(service=Exponential(1.0))
    found = plan(modelled, {"concurrency": [4]}, ["latency_p95_s<=50"], progress=False)
    assert found.chosen is not None
    trace = tmp_path / "day.csv"
    rng = np.random.default_rng(5)
    rows = zip(np.cumsum(rng.exponential(1 / 3.0, N)), rng.exponential(1.0, N), strict=True)
    trace.write_text("arrival_s,service_s\n" + "".join(f"{a},{s}\n" for a, s in rows))
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "plan", "--trace", str(trace),
         "--search", "concurrency=4..8", "--slo", "latency_p95_s<=5", "--out", "out"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "one recorded day is one sample" in line
    assert not (tmp_path / "out").exists()
