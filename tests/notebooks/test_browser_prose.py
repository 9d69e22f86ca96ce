"""Before Run All: a notebook opened in a real JupyterLab reads as prose, numbers included.

A markdown cell quotes the run's numbers as MyST inline expressions
(``{eval}`f"{wait:.2f}"` ``); the notebook carries the values of a seeded run
(:mod:`pipeline.lessons.prose`), and jupyterlab-myst shows them whenever it renders
the cell. The test opens each notebook (and each solution) in JupyterLab without
running a cell, waits until every markdown cell has rendered, and reads what a
reader sees: no ``{eval}`` and no expression's source in any cell, and each saved
value where its expression stands.

That every inline expression of every notebook has its saved value, equal to a
fresh run's, is checked without a browser after each notebook's run
(``tests/notebooks/after_the_run.py``). What the browser adds is the rendering,
which is jupyterlab-myst's and the same for every notebook; it is checked on the
notebook a reader opens first, the one with the most expressions and the solution
with the most (about 11 s a notebook: all 28 would cost five minutes of the suite).

Needs Chromium and the JupyterLab of this venv, as ``test_browser.py`` (whose
server, browser and page helpers these are).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from pipeline.lessons.prose import expressions, saved
from tests.notebooks.test_browser import (
    MAIN_NOTEBOOKS,
    SOLUTION_NOTEBOOKS,
    browser,  # noqa: F401 -- the module's fixtures, shared with test_browser.py's
    browser_and_lab,
    lab,  # noqa: F401
    notebooks_dir,
    open_notebook,
)

pytestmark = pytest.mark.browser

#: What each markdown cell shows, once every one has rendered (its editor, hidden, aside).
RENDERED_JS = r"""
() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-MarkdownCell')).map(cell => {
  const shown = cell.querySelector('.myst, .jp-RenderedMarkdown');
  return shown ? shown.innerText : null;
})
"""


def shown_value(entry: dict) -> str:
    """What jupyterlab-myst shows for a saved value: a string without its quotes."""
    plain = entry["result"]["data"]["text/plain"]
    try:
        value = ast.literal_eval(plain)
    except (ValueError, SyntaxError):
        return plain
    return value if isinstance(value, str) else plain


#: The first notebook a reader opens, the one with the most inline expressions, and
#: the solution with the most.
OPENED = (
    "00-start-here.ipynb",
    "06-rate-limits-and-llm-batches.ipynb",
    "solutions/03-retries-and-dead-letters-solutions.ipynb",
)


def test_the_opened_notebooks_exist():
    assert set(OPENED) <= set(MAIN_NOTEBOOKS + SOLUTION_NOTEBOOKS)


@pytest.mark.parametrize("name", OPENED)
def test_an_unrun_notebook_shows_its_numbers_not_their_expressions(request, name):
    browser_, lab_ = browser_and_lab(request)
    notebook = json.loads((notebooks_dir() / name).read_text(encoding="utf-8"))
    markdown = [cell for cell in notebook["cells"] if cell["cell_type"] == "markdown"]
    with open_notebook(browser_, lab_, name) as page:
        page.wait_for_function(
            f"() => ({RENDERED_JS})().filter(text => text !== null).length >= {len(markdown)}",
            timeout=60_000,
        )
        texts = page.evaluate(RENDERED_JS)
    assert len(texts) == len(markdown), f"{name}: {len(texts)} markdown cells shown"
    problems = []
    for index, (cell, text) in enumerate(zip(markdown, texts, strict=True), 1):
        source = "".join(cell["source"])
        if "{eval}" in text:
            problems.append(f"markdown cell {index} shows {{eval}}: {text[:200]!r}")
        for expression in expressions(source):
            if expression in text:
                problems.append(f"markdown cell {index} shows the source {expression!r}")
        for entry in saved(cell):
            if shown_value(entry) not in text:
                problems.append(
                    f"markdown cell {index} does not show {shown_value(entry)!r}"
                    f" for {entry['expression']!r}: {text[:200]!r}"
                )
    assert not problems, f"{Path(name).name}, opened without running:\n  " + "\n  ".join(problems)
