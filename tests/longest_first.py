"""The order in which ``make test`` hands test files to its two cores: the longest first.

``pytest -n 2 --dist loadfile`` keeps each file's tests on one core and hands the files
out in turn, the next one to whichever core is about to run out of work. The longer
the files that come last, the longer one core works alone at the end. By its own rule
xdist hands out the files with the most tests first, a poor guide to their time here:
the fault injection (one test of 10,000 examples, over a minute of a core) came fifth
from last, and the replication intervals (four tests, about a minute) 24th from last;
the site's build, a single test's fixture that runs every notebook, came after 138
files.

So the files of :data:`LONGEST` (measured) go first, longest first (the LPT rule), and
the rest follow with the most tests first, as xdist orders them; the shortest come
last. The items are put in this order only
when xdist is told to keep the collection's order (``--no-loadscope-reorder``, which
the Makefile passes with ``--dist loadfile``). A run that hands out single tests
(``--dist worksteal``, the browser-and-server step) puts the tests of
:data:`LONGEST_TESTS` first instead; any other run keeps pytest's order.
"""

from __future__ import annotations

import pytest

#: Test files (paths from the repository's root) whose run takes a core the longest, the
#: longest first: the seconds each took, run one directory at a time on a loaded machine
#: (about 2.5 times a quiet machine's). Files not listed took less than about 35 s there.
LONGEST = (
    "tests/docs/test_site.py",  # 406: the site's build runs every notebook
    "tests/sim/analysis/planning/test_plan_budget.py",  # 350: 240 plans of M/M/10
    "tests/sim/analysis/test_retry_chain.py",  # 85 quiet: the engine against the exact chain
    "tests/viz/test_explorer.py",  # 207
    "tests/core/test_fault_injection.py",  # 183: one test of 10,000 examples
    "tests/sim/analysis/test_recovery_map.py",  # 170: the OSDI-shaped map
    "tests/sim/running/test_replication_intervals.py",  # 167: four tests
    "tests/examples/ingest/test_ingest_edges.py",  # 148
    "tests/docs/test_snippets_planning.py",  # 140
    "tests/sim/analysis/test_setup_chain.py",  # 120: the engine against M/M/k/setup
    "tests/lessons/test_exercises.py",  # 103: otter grades four notebooks
    "tests/cli/test_cli_calibrate_twin.py",  # 99
    "tests/viz/test_animate.py",  # 95
    "tests/test_lean_install.py",  # 90: a wheel and a bare virtualenv
    "tests/cli/test_cli_golden.py",  # 88
    "tests/docs/test_snippets_twin.py",  # 85
    "tests/docs/test_snippets_simulating.py",  # 80
    "tests/viz/test_viz.py",  # 78
    "notebooks/12-retry-storms.ipynb",  # 31 quiet: the storm's map and its controls compared
    "tests/cli/test_cli_sweep.py",  # 74
    "tests/core/test_soak.py",  # 73
    "tests/sim/calibration/test_histogram.py",  # 73
    "tests/examples/ingest/test_ingest.py",  # 66
    "tests/core/test_kernelpoll.py",  # 60
    "tests/docs/test_snippets_chains.py",  # 57
    "tests/sim/running/test_summary_intervals.py",  # 48
    "tests/viz/test_live.py",  # 44
    "tests/viz/test_plan_explorer.py",  # 44
    "tests/sim/analysis/planning/test_plan.py",  # 41
    "tests/sim/running/test_class_sim.py",  # 39
    "tests/sim/analysis/planning/test_cost_bounds.py",  # 37: one test
)


#: The browser-and-server step's longest tests (node ids), the longest first: the seconds each
#: took there at load 12 (about 2.5 times a quiet machine's). That step hands out single tests
#: (``--dist worksteal``: each core takes half the list in order, and steals from the end of
#: the other's half when its own runs out), so these go first and the short ones balance the
#: end; the rest keep their order. Notebook 12 came 14th of 50 and ran 2.5 minutes.
LONGEST_TESTS = tuple(
    f"tests/notebooks/test_browser.py::test_{kind}_runs_in_jupyterlab[{name}.ipynb]"
    for kind, name in (
        ("notebook", "12-retry-storms"),  # 152
        ("notebook", "05b-confidence-and-comparison"),  # 89
        ("notebook", "05-capacity-planning"),  # 57
        ("notebook", "08-where-is-the-bottleneck"),  # 53
        ("notebook", "06-rate-limits-and-llm-batches"),  # 53
        ("notebook", "03-retries-and-dead-letters"),  # 49
        ("notebook", "07-real-time"),  # 47
        ("notebook", "10-from-your-dashboard-to-a-plan"),  # 44
        ("notebook", "11-who-waits"),  # 43
        ("notebook", "04-drain-and-shutdown"),  # 40
        ("notebook", "01-backpressure"),  # 39
        ("notebook", "00-start-here"),  # 39
        ("notebook", "02-workers-and-littles-law"),  # 36
        ("solution_notebook", "solutions/00-start-here-solutions"),  # 34
        ("notebook", "13-autoscaling"),  # 32
        ("solution_notebook", "solutions/01-backpressure-solutions"),  # 31
    )
)


@pytest.hookimpl(trylast=True)  # after -m and -k deselect: the tests as they will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("dist", default="no") == "worksteal":
        rank = {nodeid: place for place, nodeid in enumerate(LONGEST_TESTS)}
        items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))  # stable: the rest in order
        return
    if config.getoption("loadscopereorder", default=True):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {path: place for place, path in enumerate(LONGEST)}
    order = sorted(files, key=lambda path: (rank.get(path, len(rank)), -len(files[path])))
    items[:] = [item for path in order for item in files[path]]
