"""The notebooks read as prose with short code between: the house rules, checked.

- **Narrative cells hide their source.** A code cell that writes prose
  (calls ``say``) or only shows a picture is *narrative*: it carries the
  standard metadata ``"jupyter": {"source_hidden": true}``, so JupyterLab
  shows the sentence, not the f-string that builds it.
- **Hidden cells hide no lesson.** A hidden cell may compute what its prose
  says, assert it and draw an illustration (its figure is shown), but it
  runs nothing the notebook teaches (a simulation, a sweep, a plan, a
  pipeline, a widget) and defines no function or class: those stay visible.
- **Short code cells.** A visible code cell has at most
  :data:`MAX_CODE_LINES` non-blank lines: one idea per cell. A solution
  whose code is the lesson (a whole handler, the naive worker) may be longer
  when its cell is tagged :data:`LESSON_TAG`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").rglob("*.ipynb"))
NOTEBOOKS = [path for path in NOTEBOOKS if ".ipynb_checkpoints" not in path.parts]

MAX_CODE_LINES = 12
LESSON_TAG = "lesson-code"
"""Cell tag, allowed in solutions only, for a long cell whose code is the lesson."""

# Calls that run what a notebook teaches, so a hidden cell may not make them: runs,
# sweeps, plans, pipelines, widgets. (A hidden cell may draw: its figure is shown.)
LESSON_CALLS = (
    "simulate",
    "sweep",
    "plan",
    "run",
    "compare",
    "replay",
    "explore",
    "Pipeline",
    "Chain",
    "Scenario",
    "interact",
    "widgets",
)


def _code(source: str) -> ast.Module | None:
    """The cell's Python (IPython magics and shell lines dropped), or None if it does not parse."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _called(tree: ast.AST) -> set[str]:
    """Names of the functions a piece of code calls (``f(...)`` and ``x.f(...)``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def _is_narrative(tree: ast.Module) -> bool:
    """Writes prose (``say``), or only shows a picture (imports and an SVG/Image display)."""
    if "say" in _called(tree):
        return True
    body = [node for node in tree.body if not isinstance(node, ast.Import | ast.ImportFrom)]
    return (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and _called(body[0]) <= {"SVG", "Image", "display"}
        and bool(_called(body[0]))
    )


def _hides_a_lesson(tree: ast.Module) -> list[str]:
    """Statements of a hidden cell that run or draw something: what the reader would miss."""
    missed = []
    for node in tree.body:
        lessons = {name for name in _called(node) if name.startswith(LESSON_CALLS)}
        if lessons or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            missed.append(ast.unparse(node).splitlines()[0])
    return missed


def _cells(path: Path) -> list[tuple[int, dict]]:
    notebook = nbformat.read(path, as_version=4)
    return [(i, cell) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]


def _hidden(cell: dict) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden", False))


def _problems(path: Path) -> list[str]:
    solutions = path.parent.name == "solutions"
    problems = []
    for index, cell in _cells(path):
        tree = _code(cell.source)
        where = f"{path.name} cell {index}"
        tags = set(cell.get("metadata", {}).get("tags", []))
        if LESSON_TAG in tags and not solutions:
            problems.append(f"{where}: the {LESSON_TAG!r} tag is for solutions only")
        if tree is None:
            continue
        if _is_narrative(tree) and not _hidden(cell):
            problems.append(f"{where}: narrative cell (calls say) shows its source")
        if _hidden(cell):
            for statement in _hides_a_lesson(tree):
                problems.append(f"{where}: hidden cell hides code: {statement}")
            continue
        lines = [line for line in cell.source.splitlines() if line.strip()]
        if len(lines) > MAX_CODE_LINES and LESSON_TAG not in tags:
            problems.append(f"{where}: {len(lines)} lines of code (at most {MAX_CODE_LINES})")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_follows_the_house_rules(path):
    problems = _problems(path)
    assert not problems, "\n".join(problems)


def test_the_rules_catch_what_they_are_for(tmp_path):
    notebook = nbformat.v4.new_notebook()
    shown_prose = nbformat.v4.new_code_cell('x = 1\nsay(f"x is {x}")')
    hidden_plot = nbformat.v4.new_code_cell("result = simulate(scenario)\nsay('ok')")
    hidden_plot.metadata["jupyter"] = {"source_hidden": True}
    long_code = nbformat.v4.new_code_cell("\n".join(f"a{i} = {i}" for i in range(13)))
    hidden_ok = nbformat.v4.new_code_cell('s = result.summary\nsay(f"{s}")\ncheck(True, "ok")')
    hidden_ok.metadata["jupyter"] = {"source_hidden": True}
    picture = nbformat.v4.new_code_cell('from IPython.display import SVG\nSVG("x.svg")')
    notebook.cells = [shown_prose, hidden_plot, long_code, hidden_ok, picture]
    path = tmp_path / "99-example.ipynb"
    nbformat.write(notebook, path)
    problems = _problems(path)
    assert any("cell 0: narrative cell" in p for p in problems)
    assert any("cell 1: hidden cell hides code: result = simulate(scenario)" in p for p in problems)
    assert any("cell 2: 13 lines of code" in p for p in problems)
    assert any("cell 4: narrative cell" in p for p in problems)
    assert not any("cell 3" in p for p in problems)
