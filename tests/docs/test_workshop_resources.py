"""The figures the workshop guide and the README give of what a room needs and sees.

Each row of the table (a notebook's and its solutions' Run All: peak memory, CPU
time) is held to the notebook tests' own run (``tests/notebooks/after_the_run.py``).
The sentences that add them up (a pair of notebooks open at once, a room pressing
Run All together, the longest notebook) must follow the table. The idle JupyterLab
server's memory and the ``[lab]`` extra's size on disk are measured here, each held
to the guide within a stated factor; the student errors' timings are the arithmetic
of their handlers, checked on the virtual clock or by counting the handlers at work.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import time
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from pipeline import Pipeline, PipelineConfig
from pipeline.sim.vloop import run_virtual
from tests.docs.conftest import REPO
from tests.docs.figures import quoted
from tests.jupyter_server import start_lab
from tests.notebooks.after_the_run import MEMORY_FACTOR, quoted_resources

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
GUIDE = "docs/workshop.md"
SIZE_FACTOR = 1.25
"""How far the ``[lab]`` extra's size on disk may be from the guide's figure: a ratio.
The same versions take the same bytes anywhere; this is room for newer releases."""


def server_mib() -> int:
    """The idle JupyterLab server's memory, as the guide gives it (MiB)."""
    return int(quoted(GUIDE, r"JupyterLab server adds about (\d+) MiB when idle")[1])


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
    assert (said[1], float(said[2]), int(said[3])) == (largest, pairs[largest], server_mib())
    # the guarantee holds the largest single notebook (or its solutions) and the server
    said = quoted("docs/workshop.md", r"a guarantee of (\d+) MiB and a limit of 1 GiB per user")
    single = max(max(own[0], theirs[0]) for own, theirs in table.values())
    assert single + server_mib() <= int(said[1]), (single, server_mib(), said[0])
    # with room left under the limit for 05b's two Dask workers
    assert pairs[largest] + server_mib() <= 0.8 * 1024


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


def _resident_mib(pid: int) -> float:
    """The resident memory of process ``pid`` (Linux's VmRSS), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)[1]) / 1024


@pytest.mark.service
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_the_idle_server_s_memory_is_the_guide_s(tmp_path):
    lab = start_lab(REPO / "notebooks", tmp_path)
    try:
        # what it holds once started and left alone: no browser, no kernel
        time.sleep(2)
        measured = _resident_mib(lab.process.pid)
    finally:
        lab.stop()
    said = server_mib()
    assert said / MEMORY_FACTOR <= measured <= said * MEMORY_FACTOR, (measured, said)


def _installed(requirement: Requirement, found: dict) -> None:
    """Add to ``found`` (by name) the installed distribution ``requirement`` names and
    every one it requires, its extras' requirements included, recursively."""
    name = re.sub(r"[-_.]+", "-", requirement.name).lower()
    key = (name, tuple(sorted(requirement.extras)))
    if key in found:
        return
    found[key] = distribution = importlib.metadata.distribution(name)
    for line in distribution.requires or []:
        needed = Requirement(line)
        environments = [{"extra": extra} for extra in requirement.extras] or [{"extra": ""}]
        if needed.marker is None or any(needed.marker.evaluate(e) for e in environments):
            _installed(needed, found)


def _megabytes(distribution: importlib.metadata.Distribution) -> float:
    """The bytes on disk of the files ``distribution`` installed, in MB (10**6)."""
    total = 0
    for file in distribution.files or []:
        path = distribution.locate_file(file)
        if os.path.isfile(path):
            total += os.path.getsize(path)
    return total / 1e6


def test_the_lab_extra_s_size_on_disk_is_the_guide_s():
    found: dict = {}
    _installed(Requirement("pipeline-lab[lab]"), found)
    by_name = {d.metadata["Name"].lower(): d for d in found.values()}
    total = sum(_megabytes(d) for d in by_name.values())
    # the browser driver the guide names comes with otter-grader: its absence changes the guide
    assert "playwright" in by_name, "the [lab] extra no longer brings playwright"
    driver = _megabytes(by_name["playwright"])
    said = quoted(
        GUIDE,
        r"the `\[lab\]` extra \(about (\d+) MB on disk, (\d+) MB of it a browser driver that"
        r" otter-grader",
    )
    for shown, measured in ((said[1], total), (said[2], driver)):
        assert int(shown) / SIZE_FACTOR <= measured <= int(shown) * SIZE_FACTOR, (said[0], measured)


N_ITEMS, SLEEP_S, WORKERS = 100, 0.01, 4


async def _run_s(handler) -> float:
    """Seconds on the running loop's clock that ``N_ITEMS`` items through ``handler`` take."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    report = await Pipeline(handler, PipelineConfig(concurrency=WORKERS)).run(range(N_ITEMS))
    assert report.completed == N_ITEMS
    return loop.time() - start


def test_a_forgotten_await_finishes_at_once_instead_of_in_the_guide_s_time():
    said = quoted(
        GUIDE,
        r"(\d+) such items \"finished\" at once instead of in ([\d.]+) s \((\d+) sleeps of"
        r" (\d+) ms over (\d+) workers\)",
    )
    assert (int(said[1]), int(said[3]), int(said[4]), int(said[5])) == (
        N_ITEMS, N_ITEMS, SLEEP_S * 1000, WORKERS,
    )  # fmt: skip

    async def awaited(item):
        await asyncio.sleep(SLEEP_S)

    async def forgotten(item):
        asyncio.sleep(SLEEP_S)  # the student's error, on purpose: no await

    assert run_virtual(_run_s(awaited)) == pytest.approx(float(said[2]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_virtual(_run_s(forgotten)) == 0.0
    assert any("was never awaited" in str(w.message) for w in caught)


def test_a_blocking_handler_runs_one_item_at_a_time():
    said = quoted(
        GUIDE,
        r"(\d+) items of `time.sleep\(([\d.]+)\)` with (\d+) workers run one at a time and take"
        r" at least (\d+) s, as with one worker, instead of ([\d.]+) s",
    )
    assert (int(said[1]), float(said[2]), int(said[3])) == (N_ITEMS, SLEEP_S, WORKERS)
    assert float(said[4]) == N_ITEMS * SLEEP_S and float(said[5]) == N_ITEMS * SLEEP_S / WORKERS
    sleeping, most = 0, 0

    async def blocking(item):
        nonlocal sleeping, most
        sleeping += 1
        most = max(most, sleeping)
        time.sleep(SLEEP_S)
        sleeping -= 1

    asyncio.run(_run_s(blocking))
    assert most == 1  # no two sleeps at once: the 100 take their 10 ms one after another
