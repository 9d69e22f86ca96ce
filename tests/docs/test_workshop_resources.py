"""The figures the workshop guide and the README derive from the table of resources.

Each row of the table (a notebook's and its solutions' Run All: peak memory, CPU
time) is held to the notebook tests' own run (``tests/notebooks/after_the_run.py``).
The sentences that add them up (a pair of notebooks open at once, a room pressing
Run All together, the longest notebook) must follow the table.
"""

from __future__ import annotations

from tests.docs.conftest import REPO
from tests.docs.figures import quoted
from tests.notebooks.after_the_run import quoted_resources

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
SERVER_MIB = 85  # the idle JupyterLab server, as the guide gives it


def _table() -> dict[str, tuple[tuple[float, float], tuple[float, float]]]:
    """Each notebook number's (memory MiB, CPU s), its own and its solutions'."""
    table = {}
    for path in NOTEBOOKS:
        solutions = path.parent / "solutions" / f"{path.stem}-solutions.ipynb"
        own, theirs = quoted_resources(path), quoted_resources(solutions)
        assert own is not None and theirs is not None, f"no row for {path.name}"
        table[path.name.split("-", 1)[0]] = (own, theirs)
    return table


def test_every_notebook_has_its_row():
    assert len(_table()) == len(NOTEBOOKS) >= 13


def test_the_memory_advice_follows_the_table():
    table = _table()
    pairs = {number: own[0] + theirs[0] for number, (own, theirs) in table.items()}
    largest = max(pairs, key=pairs.get)
    said = quoted(
        "docs/workshop.md",
        r"a limit of 1 GiB per user cover a notebook and its solutions open at once: the largest"
        r" pair, (\w+) and its solutions, takes (\d+) MiB, with the server's (\d+) MiB",
    )
    assert (said[1], float(said[2]), int(said[3])) == (largest, pairs[largest], SERVER_MIB)
    # with room left under the limit for 05b's two Dask workers
    assert pairs[largest] + SERVER_MIB <= 0.8 * 1024


def test_the_room_s_cpu_follows_the_table():
    cpu = _table()["02"][0][1]
    said = quoted(
        "docs/workshop.md",
        r"Thirty people pressing Run All on 02 ask for about (\d+) CPU seconds at once: about"
        r" (\d+) s of waiting on 8 cores",
    )
    asked = round(30 * cpu, -1)
    assert (int(said[1]), int(said[2])) == (asked, round(asked / 8))


def test_the_readme_names_the_longest_notebook():
    table = _table()
    longest = max(table, key=lambda number: table[number][0][1])
    said = quoted("README.md", r"the longest, (\w+), in about (\d+) s of CPU")
    assert (said[1], int(said[2])) == (longest, round(table[longest][0][1]))
