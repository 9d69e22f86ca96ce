"""Notebook 13: its exercises' checks pass right answers and hint at the likely slips.

The checks compute what they compare with (the HPA's policy, the seeded burst's runs) with
no lesson name bound, so the answers here are given as a student would compute them, and
otter asks the student notebook's own tests.
"""

from __future__ import annotations

import warnings

import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.sim import Exponential, LoadSpike, Poisson, Scenario, simulate
from tests.lessons.test_exercises import ROOT, _hints

with warnings.catch_warnings():  # as pipeline.lessons.exercises does: ipylab's import warns
    warnings.filterwarnings("ignore", "Traits should be given as instances", DeprecationWarning)
    import otter

STUDENT = ROOT / "notebooks" / "13-autoscaling.ipynb"


def _burst(config: PipelineConfig, replications: int | None = None):
    scenario = Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        faults=[LoadSpike(at_s=60.0, for_s=60.0, factor=10.0)],
        duration_s=600.0,
        seed=1,
        config=config,
    )
    return simulate(scenario, replications=replications)


def _autoscaled(**settings) -> PipelineConfig:
    scaler = Autoscaler(**{"min_workers": 3, "max_workers": 60, "cold_start_s": 30.0, **settings})
    return PipelineConfig(concurrency=3, queue_maxsize=None, drain_timeout_s=None, autoscale=scaler)


def _fixed(workers: int) -> PipelineConfig:
    return PipelineConfig(concurrency=workers, queue_maxsize=None, drain_timeout_s=None)


@pytest.fixture
def grader(monkeypatch):
    monkeypatch.chdir(STUDENT.parent)
    return otter.Notebook(STUDENT.name)


def test_the_ramp_s_slips_get_their_hints(grader):
    right = {"syncs_to_100": 5, "all_ready_at_s": 90.0}
    assert _hints(grader.check("exercise_1", global_env=right)) == []
    four_a_sync = {"syncs_to_100": 25, "all_ready_at_s": 60.0}
    hints = _hints(grader.check("exercise_1", global_env=four_a_sync))
    assert len(hints) == 2
    assert "That is 4 workers a sync" in hints[0] and "after their cold start" in hints[1]
    from_the_first_period = {"syncs_to_100": 6, "all_ready_at_s": 105.0}
    hints = _hints(grader.check("exercise_1", global_env=from_the_first_period))
    assert "count the syncs" in hints[0] and "(n - 1) x 15 s" in hints[1]


def test_the_window_s_slips_get_their_hints(grader):
    default, short = _burst(_autoscaled()), _burst(_autoscaled(scale_down_stabilization_s=60.0))
    right = {
        "short_window_worker_seconds": short.summary["worker_seconds"],
        "window_changes_wait": False,
    }
    assert _hints(grader.check("exercise_2", global_env=right)) == []
    slips = {"short_window_worker_seconds": default.summary["worker_seconds"]}
    hints = _hints(grader.check("exercise_2", global_env={**slips, "window_changes_wait": True}))
    assert len(hints) == 2
    assert "That is the HPA's defaults' bill" in hints[0]
    assert "When does the scale-down window act" in hints[1]


@pytest.mark.slow  # each slip's runs graded: 2 s of a core
def test_the_fixed_pool_s_slips_get_their_hints(grader):
    fewest = next(
        c for c in range(17, 25) if _burst(_fixed(c), 8).interval("wait_p95_s").mean <= 5.0
    )
    right = {"fixed_workers": fewest, "fixed_is_cheaper": True}
    assert _hints(grader.check("exercise_3", global_env=right)) == []
    for workers, hint in ((fewest - 1, "add workers"), (fewest + 1, "look for the fewest")):
        env = {"fixed_workers": workers, "fixed_is_cheaper": False}
        hints = _hints(grader.check("exercise_3", global_env=env))
        assert len(hints) == 2 and hint in hints[0] and "Compare the bills" in hints[1]
