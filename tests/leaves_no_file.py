"""No test leaves a file or folder in the directory pytest runs from (the checkout's root).

A command that writes by default into the current directory (``sweep`` makes a new
``sweep-YYYYMMDD-HHMMSS`` there) left one per run in the checkout: two hundred after a
day's work, hidden by ``.gitignore``. A test gives such a command ``--out`` under its
``tmp_path`` (or runs it there); this plugin (the repository's ``conftest.py`` loads it)
fails the test in whose run a new entry appeared, at its teardown.

Under ``pytest -n 2`` the other core's test runs meanwhile: the message says so, since
the entry may be that test's. Only the root's own entries are compared (one listing a
test): a notebook's run writes beside it on purpose (``grader.check``'s ``.OTTER_LOG``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: What is kept there on purpose (each in ``.gitignore``): the caches of the tools, and
#: ``artifacts/``, the browser tests' screenshots for a person to look at (``make clean``).
KEPT = frozenset({".hypothesis", ".pytest_cache", ".ruff_cache", "__pycache__", "artifacts"})

_BEFORE = pytest.StashKey[frozenset[str]]()


def entries(folder: Path) -> frozenset[str]:
    """The names in ``folder`` (not below it), apart from :data:`KEPT`."""
    return frozenset(os.listdir(folder)) - KEPT


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_BEFORE] = entries(item.config.invocation_params.dir)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    result = yield  # the fixtures' teardown first: a temporary folder's removal included
    before = item.stash.get(_BEFORE, None)
    if before is not None:
        folder = item.config.invocation_params.dir
        left = sorted(entries(folder) - before)
        if left:
            pytest.fail(
                f"a test left {', '.join(left)} in {folder} (this one, or under pytest -n "
                "another core's test that ran meanwhile): give the command --out under "
                "tmp_path, or run it there",
                pytrace=False,
            )
    return result
