"""Repository hygiene: notebooks are committed clean, generated output stays out of git.

A notebook saved after "Run All" carries its outputs, execution counts and
widget state; committed, they bloat diffs and go stale. The guard below reads
every notebook that git tracks under ``notebooks/`` (as it is in the working
tree, so it fails before such a save is committed) and names what to clear.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.lessons.prose import shape

REPO = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()


def run_state(notebook: dict) -> list[str]:
    """What in ``notebook`` (a parsed .ipynb) was left by running it; empty when clean.

    Flags cell outputs, execution counts, nbclient's per-cell ``execution``
    timings and the notebook-level ``widgets`` state that ipywidgets saves. The
    one thing of a run a notebook keeps is its prose's values: each markdown
    cell's inline expressions with the plain-text values of the seeded run, in
    the ``user_expressions`` metadata jupyterlab-myst shows before Run All
    (:func:`pipeline.lessons.prose.shape` says what form they take; the notebook
    tests hold them to a fresh run). Anything else there is flagged, and so is a
    cell whose expressions have no saved values.
    """
    problems = []
    if "widgets" in notebook.get("metadata", {}):
        problems.append("widget state in the notebook metadata")
    for index, cell in enumerate(notebook.get("cells", [])):
        problems += [f"cell {index}: {problem}" for problem in shape(cell)]
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {index}: {len(cell['outputs'])} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {index}: execution_count {cell['execution_count']}")
        if "execution" in cell.get("metadata", {}):
            problems.append(f"cell {index}: execution timings in its metadata")
    return problems


def tracked_notebooks() -> list[Path]:
    """Notebooks under ``notebooks/`` that git tracks (every one there without git)."""
    git = shutil.which("git")
    if git is not None:
        listed = subprocess.run(
            [git, "ls-files", "-z", "--", "notebooks"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if listed.returncode == 0:
            names = [name for name in listed.stdout.split("\0") if name.endswith(".ipynb")]
            return sorted(REPO / name for name in names)
    return sorted((REPO / "notebooks").rglob("*.ipynb"))


# A prose value as jupyterlab-myst saves it, and as the notebooks are committed with.
SEVEN = {"status": "ok", "data": {"text/plain": "7"}, "metadata": {}}


def test_the_guard_flags_a_notebook_saved_after_running_it():
    ran = {
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
            {
                "cell_type": "code",
                "execution_count": 3,
                "metadata": {"execution": {"iopub.execute_input": "2026-01-05T09:00:00Z"}},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["6\n"]}],
                "source": ["print(1 + 5)"],
            },
            {
                "cell_type": "markdown",
                "metadata": {
                    "user_expressions": [
                        {"expression": "1 + 5", "result": {"status": "ok", "data": {}}}
                    ]
                },
                "source": ["Six: {eval}`1 + 5`"],
            },
            {"cell_type": "markdown", "metadata": {}, "source": ["Seven: {eval}`1 + 6`"]},
            {
                "cell_type": "markdown",
                "metadata": {"user_expressions": [{"expression": "2", "result": SEVEN}]},
                "source": ["Seven: {eval}`1 + 6`"],
            },
            {
                "cell_type": "markdown",
                "metadata": {"user_expressions": [{"expression": "1 + 6", "result": SEVEN}]},
                "source": ["# Title"],
            },
            {
                "cell_type": "markdown",
                "metadata": {
                    "user_expressions": [
                        {"expression": "1 + 6", "result": {**SEVEN, "metadata": {"x": 1}}}
                    ]
                },
                "source": ["Seven: {eval}`1 + 6`"],
            },
            {
                "cell_type": "markdown",
                "metadata": {
                    "user_expressions": [
                        {"expression": "1 + 6", "result": {"status": "error", "ename": "E"}}
                    ]
                },
                "source": ["Seven: {eval}`1 + 6`"],
            },
        ],
    }
    assert run_state(ran) == [
        "widget state in the notebook metadata",
        "cell 1: 1 output(s)",
        "cell 1: execution_count 3",
        "cell 1: execution timings in its metadata",
        "cell 2: {eval}`1 + 5` is not saved as one plain-text value",
        "cell 3: no saved values for its 1 inline expression(s)",
        "cell 4: saved values are not those of its expressions",
        "cell 5: user_expressions on a cell without inline expressions",
        "cell 6: {eval}`1 + 6` is not saved as one plain-text value",
        "cell 7: {eval}`1 + 6` is not saved as one plain-text value",
    ]
    clean = {
        "metadata": {"kernelspec": {"name": "python3"}},
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {"jupyter": {"source_hidden": True}, "tags": ["raises-exception"]},
                "outputs": [],
                "source": ["print(1 + 5)"],
            },
            {
                "cell_type": "markdown",
                "metadata": {"user_expressions": [{"expression": "1 + 6", "result": SEVEN}]},
                "source": ["Seven: {eval}`1 + 6`, ", "as a seeded run gave it"],
            },
        ],
    }
    assert run_state(clean) == []


def test_the_repository_has_notebooks_to_guard():
    found = tracked_notebooks()
    assert len(found) >= 2
    assert any(path.parent.name == "solutions" for path in found)


@pytest.mark.parametrize("path", tracked_notebooks(), ids=lambda path: path.name)
def test_notebooks_are_committed_without_outputs(path):
    problems = run_state(json.loads(path.read_text(encoding="utf-8")))
    assert problems == [], (
        f"{path.relative_to(REPO)} was saved after running: {'; '.join(problems)}. "
        "Clear all outputs (Edit > Clear Outputs of All Cells) and save again."
    )


def test_generated_output_is_ignored_by_git():
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    # The README writes its example reports to out/; the other paths are ours to make
    # (grader.check logs each check to .OTTER_LOG beside the notebook; make exercises builds
    # the grading bundles into build/).
    paths = [
        "out/summary.json",
        "artifacts/browser/x.png",
        ".venv-3.12/pyvenv.cfg",
        "notebooks/.OTTER_LOG",
        "build/exercises/01-backpressure.zip",
    ]
    ignored = subprocess.run(
        [git, "check-ignore", "--no-index", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert sorted(ignored.stdout.split()) == sorted(paths)


#: Paths the sources name that are not in the repository on purpose: placeholders
#: (``notebooks/NN-name.ipynb``) and what a build writes (the site, a notebook's HTML).
NOT_IN_THE_REPOSITORY = re.compile(r"NN|NAME|docs/_build|\.html$|\.OTTER_LOG$")


def stale_references(text: str, package: str) -> list[str]:
    """The ``:mod:`` targets and repository paths in ``text`` that name nothing that exists.

    ``package`` is the dotted package the text's module lives in (relative ``:mod:`` targets
    are resolved against it); only targets inside ``pipeline`` and ``tests`` are checked.
    """
    stale = []
    for target in re.findall(r":mod:`~?([.\w]+)`", text):
        name = importlib.util.resolve_name(target, package) if target.startswith(".") else target
        path = REPO / name.replace(".", "/")
        if name.split(".")[0] in ("pipeline", "tests") and not (
            path.with_suffix(".py").exists() or (path / "__init__.py").exists()
        ):
            stale.append(f":mod:`{target}`")
    for path in re.findall(
        r"(?<![\w/.])((?:pipeline|tests|docs|bench|notebooks|data)/[\w/.-]*\w)", text
    ):
        if not NOT_IN_THE_REPOSITORY.search(path) and not (REPO / path).exists():
            stale.append(path)
    return stale


def test_sources_name_only_modules_and_paths_that_exist():
    stale = []
    sources = sorted({*REPO.glob("pipeline/**/*.py"), *REPO.glob("tests/**/*.py")} - {THIS})
    for source in sources:  # this file's own examples of stale references left out
        parts = source.relative_to(REPO).with_suffix("").parts
        package = ".".join(parts[:-1])  # a module and a package's __init__ alike
        text = source.read_text(encoding="utf-8")
        stale += [f"{source.relative_to(REPO)}: {ref}" for ref in stale_references(text, package)]
    assert stale == []


def test_a_stale_reference_is_caught():
    text = (
        "See :mod:`._kernel_events`, :mod:`.replay` and tests/chain/conftest.py, tests/conftest.py."
    )
    assert stale_references(text, "pipeline.sim.running.kernel") == [
        ":mod:`._kernel_events`",
        "tests/chain/conftest.py",
    ]


#: IPv4 literals a document may name: loopback, "any" for a server's bind, and version
#: numbers that look like addresses are not matched (four parts, each 0-255, required).
ADDRESS = re.compile(r"(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(?![\w.])")


def addresses_off_loopback(text: str) -> list[str]:
    """The IPv4 addresses in ``text`` that are neither loopback (127.0.0.0/8) nor 0.0.0.0."""
    found = []
    for address in ADDRESS.findall(text):
        parts = [int(p) for p in address.split(".")]
        if max(parts) > 255:
            continue  # not an address (a long version number)
        if parts[0] != 127 and address != "0.0.0.0":
            found.append(address)
    return found


def test_nothing_documented_or_tested_names_an_address_off_loopback():
    # A snippet a reader copies, or a test, must never reach a host the reader did not choose:
    # a real cluster or server is a placeholder in prose (SCHEDULER), a LocalCluster in code.
    places = [REPO / "README.md", *REPO.glob("docs/**/*.md"), *tracked_notebooks()]
    places += [p for p in REPO.glob("tests/**/*.py") if p != THIS]
    places += [*REPO.glob("pipeline/**/*.py"), *REPO.glob("bench/**/*.py")]
    found = [
        f"{place.relative_to(REPO)}: {address}"
        for place in places
        if "_build" not in place.parts
        for address in addresses_off_loopback(place.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_an_address_off_loopback_is_caught():
    text = 'Client("tcp://10.0.0.5:8786"), 192.168.1.2, 127.0.0.1:80, 0.0.0.0, v1.2.3.4000'
    assert addresses_off_loopback(text) == ["10.0.0.5", "192.168.1.2"]
