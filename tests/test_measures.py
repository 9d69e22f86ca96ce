"""The tests that time real runs against a twin are marked ``measures`` and run alone.

``make test`` runs them in a step of their own, one at a time (beside a browser
test, the live Locust test's what-if p95 came out 34% above its twin's, where
25% is allowed); every other step deselects them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests import marked_files
from tests.measures import marks, measures_real_runs
from tests.together import make_test_steps

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").rglob("*.ipynb"))


def test_the_notebooks_that_measure_are_notebook_09_and_its_solutions():
    measuring = [p.relative_to(REPO).as_posix() for p in NOTEBOOKS if measures_real_runs(p)]
    assert measuring == [
        "notebooks/09-from-a-real-run-to-its-twin.ipynb",
        "notebooks/solutions/09-from-a-real-run-to-its-twin-solutions.ipynb",
    ]
    assert [m.name for m in marks(REPO / measuring[0])] == ["measures"]
    assert marks(REPO / "notebooks" / "05-capacity-planning.ipynb") == []
    assert not measures_real_runs(REPO / "tests" / "test_measures.py")


def _marked(function: ast.FunctionDef, module: ast.Module) -> bool:
    """Whether ``function`` (or its whole module) carries ``pytest.mark.measures``."""
    decorators = [ast.unparse(d) for d in function.decorator_list]
    pytestmark = [ast.unparse(n) for n in module.body if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)]  # fmt: skip
    return any("mark.measures" in text for text in decorators + pytestmark)


def test_every_test_that_checks_a_prediction_against_real_runs_is_marked():
    # The ingestion's loop judged within a tolerance (run_loop(..., tolerance=...)), or a
    # live Locust load test: real runs, timed, compared with a twin's prediction.
    unmarked = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        if path == Path(__file__):
            continue  # names what it looks for
        text = path.read_text(encoding="utf-8")
        module = ast.parse(text)
        load_test = '"-m", "locust"' in text  # starts Locust against a live service
        for function in ast.walk(module):
            if not isinstance(function, ast.FunctionDef) or not function.name.startswith("test"):
                continue
            calls = [n for n in ast.walk(function) if isinstance(n, ast.Call)]
            judged = any(
                getattr(c.func, "id", None) == "run_loop"
                and any(k.arg == "tolerance" for k in c.keywords)
                for c in calls
            )
            if (judged or load_test) and not _marked(function, module):
                unmarked.append(f"{path.relative_to(REPO).as_posix()}::{function.name}")
    assert unmarked == []


def test_make_test_runs_what_measures_alone_and_nowhere_else():
    steps = make_test_steps()
    beside = [c for step in steps if len(step) > 1 for c in step]  # run at the same time
    pytests = [c for [c] in (step for step in steps if len(step) == 1) if "$(BIN)/pytest" in c]
    alone = [s for s in pytests if "-m measures" in s]
    # a step of its own, no -n: one test at a time; the files that may hold them
    # (tests/marked_files.py)
    assert alone == ["$(BIN)/pytest -m measures $$($(BIN)/python -m tests.marked_files measures)"]
    # beside others: a run that deselects them, or of files that hold none
    measuring = set(marked_files.files(["measures"]))
    for command in (c for c in beside if "$(BIN)/pytest" in c):
        named = {word for word in command.split() if word.startswith(("tests/", "notebooks/"))}
        assert "not measures" in command or (named and not named & measuring), command
