"""``make test`` hands the longest test files to its cores first (tests/longest_first.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.longest_first import (
    AFTER_THE_SITE,
    LONGEST,
    LONGEST_TESTS,
    pytest_collection_modifyitems,
)

REPO = Path(__file__).resolve().parent.parent


def _config(reorder: bool, dist: str = "loadfile") -> SimpleNamespace:
    return SimpleNamespace(getoption=lambda name, default=None: dist if name == "dist" else reorder)


def _items(*files: tuple[str, int]) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=f"{path}::t{i}") for path, n in files for i in range(n)]


def test_every_file_it_names_exists():
    named = LONGEST + AFTER_THE_SITE
    assert [path for path in named if not (REPO / path).is_file()] == []


def test_the_longest_go_first_then_the_most_tests_each_file_together_in_its_order():
    first, second = LONGEST[:2]
    items = _items(("short_a", 1), (second, 2), ("short_b", 3), (first, 1), ("short_c", 3))
    pytest_collection_modifyitems(_config(reorder=False), items)
    assert [item.nodeid for item in items] == [
        f"{first}::t0",
        f"{second}::t0",
        f"{second}::t1",
        *(f"short_b::t{i}" for i in range(3)),  # a tie keeps the collection's order
        *(f"short_c::t{i}" for i in range(3)),
        "short_a::t0",
    ]


def test_a_run_that_lets_xdist_reorder_keeps_pytests_order():
    items = _items(("short_a", 1), (LONGEST[0], 1))
    before = list(items)
    pytest_collection_modifyitems(_config(reorder=True), items)
    assert items == before


def test_every_test_it_names_exists():
    # a renamed notebook or test would silently lose its place
    files = {nodeid.split("::")[0] for nodeid in LONGEST_TESTS}
    assert [path for path in files if not (REPO / path).is_file()] == []
    notebooks = REPO / "notebooks"
    named = [nodeid.rsplit("[", 1)[1].rstrip("]") for nodeid in LONGEST_TESTS]
    assert [name for name in named if not (notebooks / name).is_file()] == []


def test_single_tests_handed_out_go_longest_first_then_in_their_order():
    first, second = LONGEST_TESTS[:2]
    items = [SimpleNamespace(nodeid=n) for n in ("a::t0", second, "b::t1", first, "a::t2")]
    pytest_collection_modifyitems(_config(reorder=True, dist="worksteal"), items)
    assert [item.nodeid for item in items] == [first, second, "a::t0", "b::t1", "a::t2"]


def test_the_site_s_readers_go_last_in_both_steps():
    site, browser_site = AFTER_THE_SITE
    items = _items((site, 2), ("short_a", 1), (LONGEST[0], 1))
    pytest_collection_modifyitems(_config(reorder=False), items)
    assert [item.nodeid for item in items] == [f"{LONGEST[0]}::t0", "short_a::t0", *(
        f"{site}::t{i}" for i in range(2))]  # fmt: skip
    first = LONGEST_TESTS[0]
    items = [SimpleNamespace(nodeid=n) for n in (f"{browser_site}::t0", "a::t0", first)]
    pytest_collection_modifyitems(_config(reorder=True, dist="worksteal"), items)
    assert [item.nodeid for item in items] == [first, "a::t0", f"{browser_site}::t0"]
