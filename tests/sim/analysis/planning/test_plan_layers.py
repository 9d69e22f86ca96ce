"""Planning decides; pipeline.viz draws. The simulation layer imports no matplotlib, and a
Plan is a frozen record of the decision its planner handed in."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.analysis.planning.candidate import Candidate
from pipeline.sim.analysis.planning.decision import decide, first_meeting, open_below
from pipeline.sim.analysis.planning.records import PlanStatus

SIM = Path(__file__).resolve().parents[4] / "pipeline" / "sim"


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every module ``path`` imports, at any depth (inside functions too), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            dots = "." * node.level
            found.append((dots + node.module, node.lineno))
    return found


def test_no_simulation_module_imports_matplotlib_even_inside_a_function():
    offenders = [
        f"{path.relative_to(SIM.parent.parent)}:{line} imports {name}"
        for path in sorted(SIM.rglob("*.py"))
        for name, line in _imports(path)
        if name.split(".")[0] == "matplotlib"
    ]
    assert offenders == []


def test_the_simulation_layer_reaches_pipeline_viz_only_through_the_drawing_methods():
    # Plan.figure(), Plan.to_html() and Sensitivity.figure() are the three doors.
    doors = set()
    for path in sorted(SIM.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and "viz" in (node.module or "").split("."):
                    doors.add((path.name, function.name, node.module))
        top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        assert not any("viz" in (getattr(n, "module", "") or "").split(".") for n in top), path
    assert doors == {
        ("result.py", "figure", "viz.figures.plan"),
        ("result.py", "to_html", "viz.report.page"),
        ("sensitivity.py", "figure", "viz.figures.tornado"),
    }


@pytest.mark.slow  # a plan in a process: 1.5 s of CPU
def test_importing_and_running_a_plan_loads_no_matplotlib():
    code = """
import json, sys
import pipeline.sim.analysis.planning
from pipeline.sim.analysis.planning import (arguments, candidate, check, cheapest, cost,
    decision, headroom, judgement, perturb, plan, records, report, result, rounds, search,
    sensitivity, slo, walk)
from pipeline.sim import Exponential, Poisson, Scenario
base = Scenario(arrivals=Poisson(rate=2), service=Exponential(mean=1.0), n_items=200, seed=1)
p = plan.plan(base, {"concurrency": [1, 2, 3, 4]}, ["wait_mean_s<=1"], processes=1,
              progress=False, headroom=True)
p.report(); p.to_dict()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"
                        or m.startswith("pipeline.viz"))))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


# -- the decision ---------------------------------------------------------------------


def _candidates(*verdicts: str) -> list[Candidate]:
    return [
        Candidate(rank, {"concurrency": rank + 1}, verdict=v) for rank, v in enumerate(verdicts)
    ]


def test_the_first_meeting_and_what_is_open_below_it():
    found = _candidates("fails", "undecided", "meets", "undecided", "meets")
    assert first_meeting(found) is found[2]
    assert open_below(found, found[2]) == [found[1]]
    assert open_below(found, None) == [found[1], found[3]]
    assert first_meeting(_candidates("fails", "unstable")) is None


def _calls(name: str) -> list[str]:
    """Where the package calls ``name``: ``module.py:line`` for each call."""
    return [
        f"{path.relative_to(SIM)}:{node.lineno}"
        for path in sorted(SIM.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name
    ]


def test_the_target_is_found_in_one_place_the_walk_and_read_everywhere_else():
    # The walk finds the first configuration meeting every SLO after each round it
    # runs (its own and the wait-cost search's); the cost search and the decision read it.
    assert _calls("first_meeting") == [_calls("first_meeting")[0]]
    assert _calls("first_meeting")[0].startswith("analysis/planning/walk.py:")


@pytest.mark.parametrize("wait_hour", [0.0, 40.0])
def test_the_decision_rests_on_the_first_configuration_meeting_every_slo(wait_hour):
    # With a wait cost the search goes on past the target, running more of the
    # configurations that meet (the target among them): the target is found again.
    base = Scenario(arrivals=Poisson(rate=2), service=Exponential(mean=1.0), n_items=300, seed=4)
    p = plan(
        base,
        {"concurrency": range(1, 9)},
        ["wait_mean_s<=2"],
        cost={"worker_hour": 1.0, "wait_hour": wait_hour},
        processes=1,
        progress=False,
    )
    assert p.status == "chosen"
    assert p.decision.cheapest is first_meeting(p.examined) is not None
    assert p.decision == decide(
        p.examined, p.total_candidates, first_meeting(p.examined), p.decision.choice
    )


@pytest.mark.parametrize(
    ("verdicts", "total", "status", "target"),
    [
        (("fails", "unstable", "meets"), 5, "chosen", 2),
        (("fails", "undecided", "meets"), 5, "undecided", 2),  # open below: the fallback
        (("fails", "unexamined", "meets"), 5, "undecided", 2),  # the budget left one unrun
        (("fails", "fails"), 5, "undecided", None),  # the search stopped short
        (("fails", "fails"), 2, "infeasible", None),
        (("undecided", "fails"), 2, "undecided", None),
    ],
)
def test_decide(verdicts, total, status, target):
    found = _candidates(*verdicts)
    decision = decide(found, total, first_meeting(found))
    assert decision.status == status
    assert decision.target is (None if target is None else found[target])
    assert decision.unrun == tuple(
        c.point
        for c in found[: decision.target.rank if decision.target else None]
        if c.verdict == "unexamined"
    )


def test_a_choice_of_least_total_cost_replaces_the_target_only_when_chosen():
    chosen = _candidates("fails", "meets", "meets")
    assert decide(chosen, 3, chosen[1], chosen[2]).target is chosen[2]
    open_ = _candidates("undecided", "meets", "meets")
    assert decide(open_, 3, open_[1], open_[2]).target is open_[1]  # the fallback, not the choice


def test_a_plan_is_a_frozen_record_of_the_decision_handed_in():
    base = Scenario(arrivals=Poisson(rate=1), service=Exponential(mean=1.0), n_items=300, seed=1)
    p = plan(base, {"concurrency": range(1, 6)}, ["wait_mean_s<=1"], processes=1, progress=False)
    assert p.status is p.decision.status and p.target is p.decision.target
    assert p.decision == decide(p.examined, p.total_candidates, first_meeting(p.examined))
    assert p.chosen["concurrency"] == p.target.point["concurrency"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.status = "infeasible"  # type: ignore[misc]
    # The record says what it was handed, not what it would decide again.
    other = dataclasses.replace(
        p, decision=decide(p.examined, p.total_candidates + 10, p.decision.cheapest)
    )
    assert p.status == "chosen" and other.status == "chosen"
    infeasible = dataclasses.replace(
        p, decision=dataclasses.replace(p.decision, status=PlanStatus.INFEASIBLE, target=None)
    )
    assert infeasible.status == "infeasible" and infeasible.chosen is None
