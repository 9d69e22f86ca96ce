"""The order in which ``make test`` hands test files to its two cores: the longest first.

``pytest -n 2 --dist loadfile`` keeps each file's tests on one core and hands the files
out in turn, the next one to whichever core is about to run out of work. The longer
the files that come last, the longer one core works alone at the end. By its own rule
xdist hands out the files with the most tests first, a poor guide to their time here:
the fault injection is one test of 10,000 examples (about a minute and a half of one
core), and came fifth from last; the site's build, a single test's fixture that runs
every notebook, came after 138 files.

So the files of :data:`LONGEST` (measured: each took well over a minute of a core, on a
loaded machine) go first, in that order, and the rest follow with the most tests first,
as xdist orders them; the shortest come last. The items are put in this order only
when xdist is told to keep the collection's order (``--no-loadscope-reorder``, which
the Makefile passes with ``--dist loadfile``); any other run keeps pytest's order.
"""

from __future__ import annotations

import pytest

#: Test files (paths from the repository's root) whose run takes a core the longest, the
#: longest first, as measured one file at a time on a loaded machine (seconds there, about
#: 2.5 times a quiet machine's). Files not listed take less than half a minute there.
LONGEST = (
    "tests/docs/test_site.py",  # 406: the site's build runs every notebook
    "tests/core/test_fault_injection.py",  # 183: one test of 10,000 examples
    "tests/docs/test_snippets_planning.py",  # 140
    "tests/lessons/test_exercises.py",  # 103: otter grades four notebooks
    "tests/cli/test_cli_calibrate_twin.py",  # 99
    "tests/cli/test_cli_golden.py",  # 88
    "tests/docs/test_snippets_twin.py",  # 85
    "tests/docs/test_snippets_simulating.py",  # 80
    "tests/cli/test_cli_sweep.py",  # 74
    "tests/core/test_soak.py",  # 73
    "tests/core/test_kernelpoll.py",  # 60
    "tests/docs/test_snippets_chains.py",  # 57
    "tests/sim/analysis/planning/test_cost_bounds.py",  # 37: one test
)


@pytest.hookimpl(trylast=True)  # after -m and -k deselect: the files as they will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("loadscopereorder", default=True):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {path: place for place, path in enumerate(LONGEST)}
    order = sorted(files, key=lambda path: (rank.get(path, len(rank)), -len(files[path])))
    items[:] = [item for path in order for item in files[path]]
