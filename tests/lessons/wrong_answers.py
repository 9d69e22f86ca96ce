"""Wrong answers put to an exercise's graded tests, inside a solved notebook's kernel.

:func:`report` runs as one more cell after the last cell of a solutions notebook
(an otter master), where every lesson object and every worked answer is bound.
For each exercise it asks otter, with the student notebook's own tests, what a
student's answer cell would score:

- the worked answers: every test passes;
- each answer name in turn set to each of its plausible wrong values (the
  untouched ``...``, ``None``, a number as text, one off either way, twice or
  half, a sign turned, the other choices of a multiple choice, the worked
  answer of another exercise of the notebook, and what the caller adds), the
  other names right: every test that reads that name must fail;
- whole wrong answers (each name of the exercise wrong at once, alone and with
  the caller's consistent slips for some): the exercise earns 0 points.

It returns JSON. :func:`probe` is that cell's code for one notebook, with the slips
listed in :data:`SPEC`; the item ``tests/notebooks/after_the_run.py`` adds after a
solutions notebook's cells under nbval runs it in nbval's kernel (the notebook is
not run a second time for it), and :func:`problems` judges the report.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import numbers
import os
import warnings
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[2]

MARK = "WRONG-ANSWERS: "
"""What the report's line starts with in the cell's output."""


def answer_names(student: nbformat.NotebookNode) -> dict[str, list[str]]:
    """``exercise_N`` -> the names its untouched answer cell binds, in order."""
    found = {}
    for cell in student.cells:
        if "exercise-answer" in cell.metadata.get("tags", []):
            question = cell.id.removesuffix("-answer").replace("-", "_")
            names = [
                target.id
                for node in ast.parse(cell.source).body
                if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Name)
            ]
            found[question] = names
    return found


def test_parameters(source: str) -> dict[str, list[str]]:
    """An otter test file's test cases -> the names each reads (its parameters)."""
    return {
        node.name: [a.arg for a in node.args.args]
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }


def choices(source: str, right: str) -> list[str]:
    """The other options of a multiple choice: string tuples in the tests that hold ``right``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
        ):
            values = [e.value for e in node.elts]
            if right in values:
                found += [v for v in values if v != right and v not in found]
    return found


def same(a: Any, b: Any, rel: float = 1e-9, abs_: float = 1e-12) -> bool:
    """Whether a candidate is the right answer after all (then it is no wrong answer).

    Numbers are the same within ``rel`` and ``abs_``: a check's own tolerance, where the
    answer is a prediction from this machine's measurements.
    """
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real):
        # 917504.0 for 917504 bytes is the right number: no slip a grader should punish
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_)
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def generic(right: Any, source: str) -> list[tuple[str, Any]]:
    """Plausible wrong values of an answer whose right value is ``right``."""
    wrong: list[tuple[str, Any]] = [("...", ...), ("None", None)]
    if isinstance(right, bool):
        wrong += [(repr(not right), not right), ("text", str(right)), ("a number", int(right))]
    elif isinstance(right, numbers.Integral):
        r = int(right)
        wrong += [("one less", r - 1), ("one more", r + 1), ("text", str(r)), ("twice", 2 * r)]
    elif isinstance(right, numbers.Real):
        r = float(right)
        wrong += [("one less", r - 1), ("one more", r + 1), ("text", str(r))]
        wrong += [("twice", 2 * r), ("half", r / 2), ("sign turned", -r), ("zero", 0.0)]
    elif isinstance(right, str):
        wrong += [(f"{c!r}", c) for c in choices(source, right)]
        wrong += [("capitalised", right.upper())]
    elif isinstance(right, list):
        wrong += [("one left out", right[:-1]), ("a tuple", tuple(right))]
    return wrong


def first_slip(
    name: str, right: Any, source: str, skip: set[tuple[str, str]], tolerance: tuple[float, float]
) -> Any:
    """The first wrong value of :func:`generic` that is more than an unanswered one."""
    slips = [
        v
        for label, v in generic(right, source)[2:]
        if (name, label) not in skip and not same(v, right, *tolerance)
    ]
    return slips[0] if slips else None


def report(env: dict[str, Any], student_path: str, spec: dict[str, Any]) -> str:
    """What the tests of ``student_path`` say about wrong answers, as JSON (see the module).

    ``spec``: ``wrong`` maps an answer name to ``{label: expression}`` of more wrong
    values, evaluated in ``env``; ``whole`` maps ``exercise_N`` to a list of
    ``{name: expression}`` whole wrong answers; ``skip`` lists ``[name, label, why]``
    generic values that are no wrong answer for that name; ``ungraded`` maps a name to
    ``{test: why}``, the tests that read it without grading it; ``tolerance`` maps a
    name to its check's ``[rel, abs]`` tolerance, within which a value is right.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import otter

    student = nbformat.read(student_path, as_version=4)
    tests = student.metadata["otter"]["tests"]
    names = answer_names(student)
    right = {n: env[n] for question in names.values() for n in question}
    skip = {(name, label) for name, label, _why in spec.get("skip", [])}
    ungraded = spec.get("ungraded", {})

    def tolerance(name: str) -> tuple[float, float]:
        return tuple(spec.get("tolerance", {}).get(name, (1e-9, 1e-12)))

    out: dict[str, Any] = {"right": {}, "credited": [], "whole": [], "tried": 0}
    here = os.getcwd()
    os.chdir(Path(student_path).parent)  # otter finds the notebook by name, from its folder
    try:
        grader = otter.Notebook(Path(student_path).name)

        def check(question: str, values: dict[str, Any]) -> dict[str, bool]:
            with contextlib.redirect_stdout(None), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = grader.check(question, global_env={**env, **values})
            out["tried"] += 1
            # otter names the cases "exercise_N - i"; they run in the file's order
            cases = list(test_parameters(tests[question]))
            ran = zip(cases, result.test_case_results, strict=True)
            return {t: bool(c.passed) for t, c in ran}

        for question, own in names.items():
            parameters = test_parameters(tests[question])
            failed = [t for t, ok in check(question, {}).items() if not ok]
            if failed:
                out["right"][question] = failed
            for name in own:
                reading = [
                    t
                    for t, params in parameters.items()
                    if name in params and t not in ungraded.get(name, {})
                ]
                others = [(f"{n}'s answer", v) for n, v in right.items() if n != name]
                extra = [
                    (label, eval(expression, env))
                    for label, expression in spec.get("wrong", {}).get(name, {}).items()
                ]
                for label, value in generic(right[name], tests[question]) + others + extra:
                    if (name, label) in skip or same(value, right[name], *tolerance(name)):
                        continue
                    passed = check(question, {name: value})
                    credited = [t for t in reading if passed.get(t)]
                    if credited:
                        out["credited"].append([question, name, label, repr(value)[:60], credited])
            slips = {n: first_slip(n, right[n], tests[question], skip, tolerance(n)) for n in own}
            wholes = [slips] + [
                slips | {n: eval(e, env) for n, e in whole.items()}
                for whole in spec.get("whole", {}).get(question, [])
            ]
            for whole in wholes:
                passed = [t for t, ok in check(question, whole).items() if ok]
                if passed:
                    shown = {n: repr(v)[:40] for n, v in whole.items()}
                    out["whole"].append([question, shown, passed])
    finally:
        os.chdir(here)
    return MARK + json.dumps(out)


# Per notebook: "wrong" {name: {label: expression}}, more wrong values in the notebook's terms;
# "whole" {exercise: [{name: expression}]}, whole wrong answers (consistent slips); "skip"
# [[name, label, why]], a generic value that is no wrong answer for that name; "ungraded"
# {name: {test: why}}, a test that reads a name without grading it; "tolerance" {name: [rel,
# abs]}, a check's own tolerance for a prediction from this machine's measurements.
SPEC: dict[str, dict] = {
    "00-start-here": {
        "wrong": {
            "edge_erlang_wait_s": {"at 3.2 per second": "at_80"},
            "edge_simulated_wait_s": {"the first run's": "simulate(base).summary['wait_mean_s']"},
            "constant_wait_share": {"the inverse": "1 / constant_wait_share"},
        }
    },
    "01-backpressure": {
        "wrong": {
            "smaller_memory_peak_bytes": {"the 50-slot run's": "sb['memory_peak_bytes']"},
            "smaller_upstream_peak": {"the 50-slot run's": "sb['upstream_backlog_max']"},
            "five_workers_upstream_peak": {"4 workers'": "b.summary['upstream_backlog_max']"},
            "five_workers_blocked_s": {"4 workers'": "b.summary['producer_blocked_s']"},
        },
        "whole": {
            "exercise_2": [  # a queue one too small, and its own bound: the example
                {
                    "smallest_shedding_queue": "smallest_shedding_queue - 1",
                    "its_memory_bound_bytes": "(smallest_shedding_queue + 3) * 64 * 1024",
                },
                {
                    "smallest_shedding_queue": "smallest_shedding_queue + 1",
                    "its_memory_bound_bytes": "(smallest_shedding_queue + 5) * 64 * 1024",
                },
            ]
        },
    },
    "02-workers-and-littles-law": {
        "wrong": {"cv2_wait_factor": {"the inverse": "1 / cv2_wait_factor", "Erlang C": "1.0"}},
        # A log-normal with cv = 2 has a heavy tail: six replications of 10,000 items estimate
        # the factor 1.98 +- 0.59 (95%), single runs range from 1.4 to 3.3 (40 seeds), so the
        # check accepts 1.2 to 4.5, and these lie inside what a right method can give.
        "skip": [
            ["cv2_wait_factor", label, "inside the estimate's own spread"]
            for label in ("one more", "twice", "queue_L's answer", "queue_lambda_W's answer")
        ],
    },
    "03-retries-and-dead-letters": {
        # Any budget with which no item is dead-lettered answers the question (its cost is
        # graded by worst_item_delay_s, for the choice made).
        "skip": [
            ["outage_max_attempts", "one more", "a longer budget dead-letters nothing too"],
            ["outage_max_attempts", "twice", "a longer budget dead-letters nothing too"],
        ],
        # When a learner's coroutine does not deadlock as asked, these grade the numbers
        # against the pool the exercise gives (pipeline.examples.naive): one slip, one point.
        "ungraded": {
            "your_naive": {
                test: "falls back to naive_pool"
                for test in (
                    "test_naive_stops_at_s",
                    "test_naive_handler_calls",
                    "test_naive_tasks_waiting_on_put",
                )
            }
        },
    },
    "04-drain-and-shutdown": {
        "wrong": {
            "full_drain_8_s": {"4 workers'": "full4", "from the start": "full8 + stop_s"},
            "handed_back_8": {"4 workers'": "simulate(batch).summary['items_unfinished']"},
        }
    },
    "05-capacity-planning": {
        "wrong": {"twice_plan": {"today's plan": "p"}, "campaign_plan": {"today's": "priced"}},
    },
    "07-real-time": {
        "whole": {
            "exercise_2": [
                {
                    "never_blocking_maxsize": "never_blocking_maxsize + 1",
                    "never_blocking_memory_kib": "(never_blocking_maxsize + 2) * 2",
                }
            ]
        },
        "wrong": {"one_worker_twin": {"four workers": "one_worker_twin.replace(concurrency=4)"}},
    },
    "06-rate-limits-and-llm-batches": {
        "wrong": {"rpm_24_throughput_per_s": {"per minute": "240.0"}},
    },
    "08-where-is-the-bottleneck": {
        "wrong": {"two_fetchers_s": {"one fetcher's": "times[1]"}},
        # "About 100": where the two stages' rates cross, which a simulated sweep of pool sizes
        # finds within a few connections; the check accepts 90 to 110.
        "skip": [
            ["connections_needed", "one less", "within what a sweep can tell"],
            ["connections_needed", "one more", "within what a sweep can tell"],
        ],
    },
    "09-from-a-real-run-to-its-twin": {
        # The twins are calibrated from timings this machine measured: the checks compare with
        # their own predictions within a stated tolerance, and on a loaded machine the right
        # slowdown is near 0, where "twice" or "half" of it is still inside that tolerance.
        "tolerance": {"flaky_slowdown": [0.05, 0.005], "more_writers_speedup": [0.02, 0.0]},
    },
    "11-who-waits": {
        # The share a 300-s deadline loses is estimated from runs: about 0.00025, and a right
        # method gives anything from 0 to well under 2% (the exponential patience's 4.3% fails).
        "skip": [
            ["deadline_expired_fraction", label, "inside the estimate's spread near 0"]
            for label in ("twice", "half", "zero")
        ],
    },
    "12-retry-storms": {
        "wrong": {
            "default_budget_retries_per_s": {"the ratio's part alone": "0.2 * RATE"},
            "largest_ratio": {"without the floor": "(CAPACITY - RATE) / RATE"},
            "drain_at_0_2_per_s": {"without the floor": "CAPACITY - RATE - 0.2 * RATE"},
        },
    },
}


PROBE = """\
import sys
sys.path.insert(0, {root!r})
print(__import__("tests.lessons.wrong_answers", fromlist=["report"]).report(
    globals(), {student!r}, {spec!r}
))
"""


def probe(master: Path) -> str:
    """The code that prints :func:`report` on ``master``'s exercises, in the kernel that has
    just run ``master`` (a solutions notebook) from the top."""
    from pipeline.lessons.exercises import student_of

    name = master.name.removesuffix("-solutions.ipynb")
    return PROBE.format(root=str(ROOT), student=str(student_of(master)), spec=SPEC.get(name, {}))


def problems(found: dict[str, Any]) -> list[str]:
    """What a :func:`report` (parsed) shows wrong: a worked answer that fails a test, no
    wrong answer tried, a wrong answer that a test reading it credits, a whole wrong
    answer that earns points. Empty when the exercises grade as they should."""
    said = [f"right answers fail: {found['right']}"] if found["right"] else []
    if found["tried"] == 0:
        said.append("no answer was put to the tests")
    said += [
        f"{q} {name} = {shown} ({label}) passes {tests}"
        for q, name, label, shown, tests in found["credited"]
    ]
    said += [f"{q} wholly wrong {values} earns {tests}" for q, values, tests in found["whole"]]
    return said
