"""The notebooks read as prose with short code between: the house rules, checked.

- **Prose lives in markdown.** Interpretation is a markdown cell; a number it
  quotes from the run is a MyST inline expression, ``{eval}`f"{x:.2f}"` ``,
  which ``jupyterlab-myst`` evaluates in the kernel when the cell runs (Run
  All runs markdown cells too), and shows before that from the values saved
  with the notebook (:mod:`pipeline.lessons.prose`; ``tests/test_repository.py``
  checks their form, ``tests/notebooks/after_the_run.py`` their values). Every
  expression must parse, and every name it uses must be bound by an earlier
  code cell (or be a builtin).
- **A hidden code cell is one short line.** JupyterLab shows a hidden cell's
  first line with a ``•••`` placeholder, so a hidden cell of several lines
  reads as a fragment of code where a sentence should be. A code cell that
  writes prose (calls ``say``) is hidden, and is one line of at most
  :data:`MAX_HIDDEN_CHARS` characters.
- **Hidden cells hide no lesson.** A hidden cell runs nothing the notebook
  teaches (a simulation, a sweep, a plan, a pipeline, a widget) and defines
  no function or class: those stay visible.
- **Every figure is read.** A code cell that draws (``plt.show()``, a
  ``.figure()``, a ``plot_*`` call, an SVG or image) is followed directly by
  a markdown cell saying what the figure shows.
- **Short code cells.** A visible code cell has at most
  :data:`MAX_CODE_LINES` non-blank lines: one idea per cell. A solution
  whose code is the lesson (a whole handler, the naive worker) may be longer
  when its cell is tagged :data:`LESSON_TAG`. So may a solutions notebook's
  grading tests (the code cells between otter's ``# BEGIN TESTS`` and ``# END
  TESTS`` markers): they are not lesson cells but the checks built into the
  student notebook's metadata, one assertion and its hint per likely slip.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import nbformat
import pytest

from pipeline.lessons.prose import EVAL

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").rglob("*.ipynb"))
NOTEBOOKS = [path for path in NOTEBOOKS if ".ipynb_checkpoints" not in path.parts]

MAX_CODE_LINES = 12
MAX_HIDDEN_CHARS = 100
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
    """Writes prose with ``say``: a sentence built in code, so its source hides."""
    return "say" in _called(tree)


def _hides_a_lesson(tree: ast.Module) -> list[str]:
    """Statements of a hidden cell that run or draw something: what the reader would miss."""
    missed = []
    for node in tree.body:
        lessons = {name for name in _called(node) if name.startswith(LESSON_CALLS)}
        if lessons or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            missed.append(ast.unparse(node).splitlines()[0])
    return missed


def _draws(tree: ast.Module) -> bool:
    """Draws a figure: ``plt.show()``, ``x.figure()``, ``plot_*(...)``, an SVG or an image."""
    return any(
        name in {"show", "figure", "SVG", "Image"} or name.startswith("plot_")
        for name in _called(tree)
    )


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _bound(tree: ast.AST) -> set[str]:
    """Names a cell binds: assignments, imports, loop and ``with`` targets, defs.

    A comprehension's loop variable stays inside it (Python 3), and so do a function's
    locals and imports (an exercise's test function imports what it checks with), so
    neither is counted.
    """
    names = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (*COMPREHENSIONS, ast.Lambda)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
            continue  # its body binds locals; its decorators and defaults bind nothing
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _free(expression: ast.Expression) -> set[str]:
    """Names an expression reads that it does not bind itself (comprehension targets)."""
    reads, own = set(), set()
    for node in ast.walk(expression):
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else own).add(node.id)
    return reads - own


def _expression_problems(path: Path) -> list[str]:
    """Inline expressions that do not parse, use a name no earlier code cell binds, or use
    a name a later code cell binds again.

    The last rule is there because jupyterlab-myst sends a markdown cell's expressions to
    the kernel only after it has rendered the cell, while Run All goes on queueing the
    code cells after it: the expressions may be evaluated after later cells ran. A name
    bound once reads the same whenever it is read.
    """
    notebook = nbformat.read(path, as_version=4)
    binds = [
        _bound(tree) if cell.cell_type == "code" and (tree := _code(cell.source)) else set()
        for cell in notebook.cells
    ]
    known = set(dir(builtins))
    problems = []
    for index, cell in enumerate(notebook.cells):
        known |= binds[index]
        if cell.cell_type != "markdown":
            continue
        for text in EVAL.findall(cell.source):
            where = f"{path.name} cell {index}: {{eval}}`{text}`"
            try:
                expression = ast.parse(text, mode="eval")
            except SyntaxError:
                problems.append(f"{where} is not a Python expression")
                continue
            names = _free(expression)
            unknown = sorted(names - known)
            if unknown:
                problems.append(f"{where} uses {', '.join(unknown)}, bound by no earlier code cell")
            for later in range(index + 1, len(notebook.cells)):
                again = sorted(names & binds[later])
                if again:
                    problems.append(
                        f"{where} uses {', '.join(again)}, bound again by cell {later} "
                        "(inline expressions may be evaluated after later cells ran)"
                    )
    return problems


def _cells(path: Path) -> list[tuple[int, dict]]:
    notebook = nbformat.read(path, as_version=4)
    return [(i, cell) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]


def _hidden(cell: dict) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden", False))


def _grading_tests(cells: list) -> set[int]:
    """Indexes of the code cells inside otter's ``# BEGIN TESTS`` ... ``# END TESTS`` markers."""
    inside, found = False, set()
    for index, cell in enumerate(cells):
        if cell.cell_type == "raw":
            first = cell.source.lstrip().split("\n", 1)[0].strip().upper()
            inside = {"# BEGIN TESTS": True, "# END TESTS": False}.get(first, inside)
        elif inside and cell.cell_type == "code":
            found.add(index)
    return found


def _problems(path: Path) -> list[str]:
    solutions = path.parent.name == "solutions"
    problems = _expression_problems(path)
    every = nbformat.read(path, as_version=4).cells
    tests = _grading_tests(every) if solutions else set()
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
        after = every[index + 1] if index + 1 < len(every) else None
        if _draws(tree) and (after is None or after.cell_type != "markdown"):
            problems.append(f"{where}: a figure with no markdown cell after it to read it")
        if _hidden(cell):
            for statement in _hides_a_lesson(tree):
                problems.append(f"{where}: hidden cell hides code: {statement}")
            shown = [line for line in cell.source.splitlines() if line.strip()]
            if len(shown) > 1 or any(len(line) > MAX_HIDDEN_CHARS for line in shown):
                problems.append(
                    f"{where}: hidden cell of {len(shown)} lines: prose belongs in markdown "
                    f"(at most one line of {MAX_HIDDEN_CHARS} characters may hide)"
                )
            continue
        lines = [line for line in cell.source.splitlines() if line.strip()]
        if len(lines) > MAX_CODE_LINES and LESSON_TAG not in tags and index not in tests:
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
    hidden_prose = nbformat.v4.new_code_cell('say(f"""x is\n{x}""")')
    hidden_prose.metadata["jupyter"] = {"source_hidden": True}
    read = nbformat.v4.new_markdown_cell('x is {eval}`f"{x:.1f}"`, y {eval}`y +`, z {eval}`z`')
    drawn = nbformat.v4.new_code_cell(
        "fig = plot_sweep(frame, 'p95'); x = 2; y = [z for z in x]\n"
        "def f():\n    import y as z\n    z = 1"
    )
    unread = nbformat.v4.new_code_cell("check(True, 'ok')")
    notebook.cells = [
        shown_prose,
        hidden_plot,
        long_code,
        hidden_ok,
        picture,
        hidden_prose,
        read,
        drawn,
        unread,
    ]
    path = tmp_path / "99-example.ipynb"
    nbformat.write(notebook, path)
    problems = _problems(path)
    assert any("cell 0: narrative cell" in p for p in problems)
    assert any("cell 1: hidden cell hides code: result = simulate(scenario)" in p for p in problems)
    assert any("cell 2: 13 lines of code" in p for p in problems)
    assert any("cell 3: hidden cell of 3 lines" in p for p in problems)
    assert not any("cell 4: narrative cell" in p for p in problems)
    assert any("cell 4: a figure with no markdown" in p for p in problems)
    assert any("cell 5: hidden cell of 2 lines" in p for p in problems)
    assert any("cell 6: {eval}`y +` is not a Python expression" in p for p in problems)
    assert any("cell 6: {eval}`z` uses z, bound by no earlier code cell" in p for p in problems)
    assert any('cell 6: {eval}`f"{x:.1f}"` uses x, bound again by cell 7' in p for p in problems)
    assert not any("uses z, bound again" in p for p in problems)  # a comprehension's, f's own z
    assert any("cell 7: a figure with no markdown" in p for p in problems)
    assert not any("cell 8" in p for p in problems)
    # One line hides well: a sentence with a number, when a reader wants nothing else.
    one_line = nbformat.v4.new_code_cell('say(f"x={x}")')
    one_line.metadata["jupyter"] = {"source_hidden": True}
    notebook.cells = [nbformat.v4.new_code_cell("x = 1"), one_line]
    nbformat.write(notebook, path)
    assert _problems(path) == []


def test_only_a_solutions_grading_tests_may_be_long(tmp_path):
    long = "\n".join(f"a{i} = {i}" for i in range(13))
    cells = [
        nbformat.v4.new_code_cell(long),  # before the markers: a lesson cell
        nbformat.v4.new_raw_cell("# BEGIN TESTS"),
        nbformat.v4.new_code_cell(long),  # a grading test
        nbformat.v4.new_raw_cell("# END TESTS"),
        nbformat.v4.new_code_cell(long),  # after them: a lesson cell again
    ]
    for folder, flagged in (("solutions", [0, 4]), ("notebooks", [0, 2, 4])):
        notebook = nbformat.v4.new_notebook()
        notebook.cells = cells
        path = tmp_path / folder / "99-example-solutions.ipynb"
        path.parent.mkdir()
        nbformat.write(notebook, path)
        problems = _problems(path)
        assert [int(p.split(" cell ")[1].split(":")[0]) for p in problems] == flagged
