"""Every code block of the README and ``docs/`` runs as written, and shows what it prints.

Each page runs in a fresh temporary folder as a reader would follow it
(:mod:`tests.docs.page_runs` says how), and its output blocks and the figures its
prose quotes must be the run's. The pages that take long run from files of their own
(``test_snippets_<page>.py``, so that ``--dist loadfile`` shares them among the
cores); here, every other page, and the rules of the runs. Blocks marked
``<!-- not run: WHY -->`` are only checked to name loopback or placeholder addresses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.conftest import REPO
from tests.docs.page_runs import (
    LONG,
    PAGES,
    check_page,
    git,
    page_id,
    pages,
    run_pycon,
    run_python,
)
from tests.docs.snippets import blocks, commands, shows
from tests.test_repository import addresses_off_loopback

#: Host names a block that does not run may name: loopback, or a placeholder.
PLACEHOLDER_HOSTS = {"127.0.0.1", "localhost", "HOST", "SCHEDULER", "PROMETHEUS"}


@pytest.mark.parametrize("page", pages(None))
def test_every_block_of_the_page_runs_as_written(page, tmp_path, monkeypatch):
    check_page(page, tmp_path, monkeypatch)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_blocks_that_do_not_run_name_only_loopback_or_placeholders(page):
    for block in blocks(page):
        if block.kind != "not run":
            continue
        assert addresses_off_loopback(block.text) == [], block.where
        hosts = set(re.findall(r"\b[a-z][a-z0-9+.-]*://([^/:\s\"')]+)", block.text))
        assert hosts <= PLACEHOLDER_HOSTS, f"{block.where}: names {sorted(hosts)}"


def test_every_page_with_code_is_run():
    """A tracked page under docs/ with a block that runs is in PAGES (notebooks run under nbval)."""
    listed = git("ls-files", "docs/*.md", "docs/**/*.md").split()
    with_code = {
        REPO / name
        for name in listed
        if any(block.kind in {"python", "pycon", "shell"} for block in blocks(REPO / name))
    }
    assert with_code, "no page with code found: the listing is wrong"
    assert sorted(map(page_id, with_code - set(PAGES))) == []


def test_each_long_page_is_run_from_its_own_file():
    # pages(group) gives each page to exactly one group: it runs once, if its group's file
    # asks for it.
    here = Path(__file__).resolve().parent
    assert sorted(p.name for p in PAGES if p.name in LONG) == sorted(LONG)
    for group in sorted(set(LONG.values())):
        asks = (here / f"test_snippets_{group}.py").read_text(encoding="utf-8")
        assert f'pages("{group}")' in asks, f"test_snippets_{group}.py does not run its page"


def test_the_comparison_rounds_as_the_page_does():
    assert shows("mean 0.45 s", "mean 0.4498 s")
    assert shows("999 s", "998.93 s")
    assert shows("3.5e+04", "35021")
    assert shows("212,969 samples", "212969 samples")
    assert not shows("212,969 samples", "250553 samples")
    assert not shows("0.4965", "0.4972")
    assert shows("a ... d", "a b c d e")
    assert not shows("a d", "a b c d")
    assert shows('{"runs": 72,\n "x": 1}', '{\n "runs": 72,\n  "x": 1\n}')


def test_a_shell_block_is_split_into_commands_and_the_output_they_show(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```sh\n# what it does\nprintf 'a b' \\\n  --x  # b\n# a b\n\n# next\ntrue\n```\n",
        encoding="utf-8",
    )
    (block,) = blocks(page)
    assert commands(block) == [("printf 'a b' --x", ["a b"]), ("true", [])]


def test_a_session_block_runs_as_a_doctest_in_the_page_namespace(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 20\n```\n\n```pycon\n>>> x + 1\n21\n```\n\n```pycon\n>>> x * 2\n41\n```\n",
        encoding="utf-8",
    )
    first, good, bad = blocks(page)
    namespace: dict = {}
    run_python(first, namespace)
    run_pycon(good, namespace)
    with pytest.raises(AssertionError, match="does not run as shown"):
        run_pycon(bad, namespace)
