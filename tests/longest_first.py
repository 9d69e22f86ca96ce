"""The order in which ``make test`` hands test files to its two cores: the longest first.

``pytest -n 3 --dist loadfile`` keeps each file's tests in one process and hands the files
out in turn, the next one to whichever process is about to run out of work. The longer
the files that come last, the longer one process works alone at the end. By its own rule
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

In both, the files of :data:`AFTER_THE_SITE` go last: ``make test`` builds the site beside
the two steps (``tests/docs/site_builds.py``), and these tests copy that build, so they
come when it is done instead of building it themselves on one of the cores.
"""

from __future__ import annotations

import pytest

#: Test files (paths from the repository's root) whose run takes a core the longest, the
#: longest first: the seconds each took in one run of ``make test``'s first step at load 2-4
#: (2026-12-07). Files not listed took less than about 10 s there.
LONGEST = (
    "tests/sim/analysis/planning/test_plan_cost.py",  # 121: headroom over 30 seeds
    "tests/sim/analysis/test_retry_chain.py",  # 78: the engine against the exact chain
    "tests/sim/running/kernel/test_kernel_equality.py",  # 74
    "tests/sim/analysis/test_recovery_map.py",  # 49: the OSDI-shaped map
    "tests/sim/running/kernel/test_kernel_arrays.py",  # 43
    "tests/sim/running/kernel/test_kernel_chain_equality.py",  # 42
    "tests/sim/analysis/planning/test_skewed_bounds.py",  # 39
    "tests/sim/analysis/test_setup_chain.py",  # 38: the engine against M/M/k/setup
    "tests/docs/test_snippets_planning.py",  # 38
    "tests/sim/running/test_replication_intervals.py",  # 38
    "tests/docs/test_snippets_chains.py",  # 38
    "tests/test_lean_install.py",  # about 36 when it builds its wheel (a kept one: 7)
    "tests/lessons/test_exercises.py",  # 35: otter grades four notebooks
    "tests/sim/calibration/test_histogram.py",  # 35
    "tests/core/test_fault_injection.py",  # 31: one test of 10,000 examples
    "notebooks/12-retry-storms.ipynb",  # 31
    "tests/viz/test_explorer.py",  # 27
    "tests/docs/test_snippets_twin.py",  # 25
    "tests/sim/running/test_summary_intervals.py",  # 22
    "tests/examples/ingest/test_ingest_edges.py",  # 21
    "tests/examples/ingest/test_ingest.py",  # 20
    "tests/sim/running/test_class_sim.py",  # 19
    "tests/docs/test_snippets_simulating.py",  # 19
    "notebooks/solutions/13-autoscaling-solutions.ipynb",  # 19
    "tests/sim/analysis/planning/test_plan_budget.py",  # 19
    "notebooks/solutions/07-real-time-solutions.ipynb",  # 18
    "tests/core/test_kernelpoll.py",  # 17
    "tests/docs/test_snippets_overload.py",  # 15
    "tests/viz/test_viz.py",  # 14
    "tests/docs/test_snippets_autoscaling.py",  # 14
    "notebooks/05b-confidence-and-comparison.ipynb",  # 13
    "tests/core/test_metrics.py",  # 12
    "tests/cli/test_cli_sweep.py",  # 11
    "tests/sim/analysis/planning/test_plan_scenario_cost.py",  # 11
    "notebooks/07-real-time.ipynb",  # 10
    "tests/viz/test_animate.py",  # 10
    "tests/cli/test_cli_calibrate_twin.py",  # 10
)


#: Test files that read the documentation site (tests/docs/conftest.py): last in both steps.
AFTER_THE_SITE = ("tests/docs/test_site.py", "tests/docs/test_site_browser.py")


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
    def last(nodeid: str) -> bool:
        return nodeid.split("::", 1)[0] in AFTER_THE_SITE

    if config.getoption("dist", default="no") == "worksteal":
        rank = {nodeid: place for place, nodeid in enumerate(LONGEST_TESTS)}
        # stable: the rest in their order
        items.sort(key=lambda item: (last(item.nodeid), rank.get(item.nodeid, len(rank))))
        return
    if config.getoption("loadscopereorder", default=True):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {path: place for place, path in enumerate(LONGEST)}
    order = sorted(
        files, key=lambda path: (last(path), rank.get(path, len(rank)), -len(files[path]))
    )
    items[:] = [item for path in order for item in files[path]]
