"""The files that may hold tests of some marks: what ``make test``'s later steps collect.

``make test`` runs the ``browser`` and ``service`` tests in a step of their own, and the
``measures`` tests in another; each step collected the whole suite (about 6,700 items, 12 s
of a core) to run a few dozen. ``python -m tests.marked_files MARK...`` prints, one a line,
the files that may hold a test of one of the marks, found without importing anything: a
test module that names ``pytest.mark.MARK``, one that marks by :func:`tests.measures.marks`
(for ``measures``), and a notebook that :func:`tests.measures.measures_real_runs` (for
``measures``: ``tests/conftest.py`` marks its cells). The Makefile passes them to pytest.

A test marked another way would be missed by that step and run by none: this plugin (the
repository's ``conftest.py`` loads it) notes, in any run, each collected test of those marks
whose file is not listed, and ``tests/test_marked_files.py`` fails on it (in the first step,
which collects the whole suite).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.measures import measures_real_runs

REPO = Path(__file__).resolve().parent.parent
#: The marks that ``make test`` runs in steps of their own.
STEP_MARKS = ("browser", "service", "measures")

MISSED = pytest.StashKey[list[str]]()
_DESELECTED = pytest.StashKey[list[pytest.Item]]()


def files(marks: Iterable[str], root: Path = REPO) -> list[str]:
    """The files under ``root`` (paths from it, sorted) that may hold a test marked with one
    of ``marks``: the test modules under ``tests/`` and the notebooks under ``notebooks/``."""
    marks = set(marks)
    unknown = marks - set(STEP_MARKS)
    if unknown:
        raise ValueError(f"marks: {sorted(unknown)} are not among {list(STEP_MARKS)}")
    named = re.compile(r"\bmark\.(" + "|".join(sorted(marks)) + r")\b") if marks else None
    by_the_notebook = re.compile(r"from tests\.measures import .*\bmarks\b")
    found = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        by_name = named is not None and named.search(text) is not None
        by_notebook = "measures" in marks and by_the_notebook.search(text) is not None
        if by_name or by_notebook:
            found.append(path.relative_to(root).as_posix())
    if "measures" in marks:
        found += [
            path.relative_to(root).as_posix()
            for path in sorted((root / "notebooks").rglob("*.ipynb"))
            if ".ipynb_checkpoints" not in path.parts and measures_real_runs(path)
        ]
    return found


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        items[0].config.stash.setdefault(_DESELECTED, []).extend(items)


@pytest.hookimpl(trylast=True)  # after every mark is added and -m has deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(config.rootpath)
    listed = {mark: set(files([mark], root)) for mark in STEP_MARKS}
    missed = config.stash.setdefault(MISSED, [])
    for item in [*items, *config.stash.get(_DESELECTED, [])]:
        marks = [mark for mark in STEP_MARKS if item.get_closest_marker(mark)]
        if marks and item.path.is_relative_to(root):
            path = item.path.relative_to(root).as_posix()
            missed += [f"{item.nodeid} ({mark})" for mark in marks if path not in listed[mark]]


if __name__ == "__main__":
    print("\n".join(files(sys.argv[1:])))
