"""A plan's progress bar: drawn from its first run on, never an empty ``plan: 0run``."""

from __future__ import annotations

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.analysis.planning.rounds import RunBar

BASE = Scenario(
    arrivals=Poisson(rate=2.0),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4, queue_maxsize=20),
    n_items=300,
    seed=3,
)


def test_a_bar_told_of_no_run_draws_nothing(capsys):
    bar = RunBar(True)
    bar.update()
    bar.close()
    assert capsys.readouterr().err == ""
    bar = RunBar(True)
    bar.add(3)
    bar.update(3)
    bar.close()
    err = capsys.readouterr().err
    assert "plan: 100%" in err and "3/3" in err


def test_a_plan_that_can_run_nothing_shows_no_bar(capsys):
    # A budget of one run cannot pay for any candidate's first replications: no run at all.
    found = plan(BASE, {"concurrency": [3, 4]}, ["wait_mean_s<=5"], budget=1, progress=True)
    assert found.budget.runs_used == 0 and found.budget.exhausted
    assert "0run" not in capsys.readouterr().err


def test_a_plan_that_runs_shows_its_bar(capsys):
    plan(BASE, {"concurrency": [3, 4]}, ["wait_mean_s<=5"], progress=True)
    assert "plan: 100%" in capsys.readouterr().err
