"""A test that leaves a file in the directory pytest runs from fails (tests/leaves_no_file.py)."""

from __future__ import annotations

pytest_plugins = ["pytester"]

WRITES = """
from pathlib import Path

def test_writes_where_it_runs():
    Path("sweep-20260101-000000").mkdir()

def test_writes_under_its_tmp_path(tmp_path):
    (tmp_path / "sweep-20260101-000000").mkdir()

def test_writes_nothing():
    pass

def test_a_tool_s_cache():
    Path(".hypothesis").mkdir()
"""


def test_a_new_entry_where_pytest_runs_fails_the_test_that_left_it_and_no_other(pytester):
    pytester.makepyfile(test_writes=WRITES)
    # the plugin alone, on the suite's warnings-are-errors
    result = pytester.runpytest(
        "-p", "tests.leaves_no_file", "-p", "no:cacheprovider", "-p", "no:asyncio", "-W", "error"
    )  # fmt: skip
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_writes_where_it_runs*", "*left sweep-20260101-000000 in*"]
    )
