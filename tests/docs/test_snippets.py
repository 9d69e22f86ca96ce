"""Every code block of the README and ``docs/`` runs as written, and shows what it prints.

Each page runs in a fresh temporary folder, as a reader at the repository's root
would follow it: ``data/`` is there (a copy), ``.venv/bin/python`` is this
interpreter, a ``file:`` block is saved before the blocks after it. Shell blocks run
through bash, Python blocks in one namespace per page, in order; an output block
must match the run (``tests/docs/snippets.py`` says how), and the figures the prose
quotes are checked against the run in ``tests/docs/figures.py``. A page leaves
nothing behind in the repository. Blocks marked ``<!-- not run: WHY -->`` are only
checked to name loopback or placeholder addresses.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.docs import figures
from tests.docs.conftest import REPO
from tests.docs.snippets import Block, blocks, commands, first_difference, shows
from tests.test_repository import addresses_off_loopback

PAGES = [
    REPO / "README.md",
    REPO / "docs" / "index.md",
    REPO / "docs" / "workshop.md",
    *sorted((REPO / "docs" / "guide").glob("*.md")),
]
#: Pages whose runs take more than a few seconds (plans, calibration, a real ingestion).
SLOW = {"planning.md", "twin.md", "simulating.md", "chains.md", "autoscaling.md"}
#: Host names a block that does not run may name: loopback, or a placeholder.
PLACEHOLDER_HOSTS = {"127.0.0.1", "localhost", "HOST", "SCHEDULER", "PROMETHEUS"}
#: The exit status an output shows, ``Check: fails (exit 1)``.
_EXIT = re.compile(r"\(exit (\d+)\)")


def page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def git(*args: str) -> str:
    """What ``git ARGS`` prints in the repository."""
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout


def untracked() -> set[str]:
    """The repository's untracked, unignored files, as git lists them."""
    listed = git("status", "--porcelain", "--untracked-files=all").splitlines()
    return {line[3:] for line in listed if line.startswith("??")}


def reader_folder(folder: Path) -> Path:
    """``folder`` set up as a reader's checkout: ``data/`` and ``.venv/bin``."""
    shutil.copytree(REPO / "data", folder / "data")
    bin_ = folder / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name, tail in (("python", ""), ("pipeline-lab", " -m pipeline")):
        script = bin_ / name
        script.write_text(f'#!/bin/sh\nexec {sys.executable}{tail} "$@"\n', encoding="utf-8")
        script.chmod(0o755)
    return folder


def run_shell(block: Block, folder: Path, shown: str = "") -> list[tuple[str, str]]:
    """Run each command of ``block`` in ``folder``; each with its stdout and stderr.

    A command exits 0 unless what the page shows of it (its comment lines, or
    ``shown``, the output block after it) says ``(exit N)``.
    """
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        PATH=f"{folder / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        MPLBACKEND="Agg",
        OPENBLAS_NUM_THREADS="1",
    )
    out = []
    for command, comments in commands(block):
        expected = {int(m) for line in [*comments, shown] for m in _EXIT.findall(line)} or {0}
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        printed = done.stdout + done.stderr
        assert done.returncode in expected, (
            f"{block.where}: `{command}` exited {done.returncode}:\n{printed[-3000:]}"
        )
        for line in comments:
            assert shows(line, printed), (
                f"{block.where}: `{command}` does not print what its comment shows:\n"
                f"  shown: {line}\n  printed:\n{printed[-3000:]}"
            )
        out.append((command, printed))
    return out


def run_python(block: Block, namespace: dict) -> str:
    """Run ``block`` in ``namespace``; what it printed, then the warnings it gave.

    A warning is what a reader sees on stderr, so it joins the output (a page may say
    that a call warns), except one that says the page's API is on its way out.
    """
    printed = io.StringIO()
    code = compile(block.text, block.where, "exec")
    with contextlib.redirect_stdout(printed), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, namespace)
    for warning in caught:
        assert not issubclass(warning.category, (DeprecationWarning, FutureWarning)), (
            f"{block.where}: {warning.category.__name__}: {warning.message}"
        )
        printed.write(f"{warning.category.__name__}: {warning.message}\n")
    return printed.getvalue()


def run_pycon(block: Block, namespace: dict) -> None:
    """Run the session ``block`` as a doctest in ``namespace``; each output must match."""
    test = doctest.DocTestParser().get_doctest(
        block.text, namespace, block.where, str(block.page), block.line
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    runner.run(test, out=report.write, clear_globs=False)
    assert runner.failures == 0, (
        f"{block.where}: the session does not run as shown:\n{report.getvalue()}"
    )


def run_page(page: Path, folder: Path) -> figures.PageRun:
    """Every block of ``page`` run in ``folder``, each output compared with its run."""
    run = figures.PageRun(page=page, text=page.read_text(encoding="utf-8"), folder=folder)
    namespace: dict = {"__name__": "__main__"}
    last = ""
    found = blocks(page)
    for index, block in enumerate(found):
        following = found[index + 1] if index + 1 < len(found) else None
        if block.kind == "file":
            (folder / block.file_name).write_text(block.text, encoding="utf-8")
        elif block.kind == "shell":
            shown = following.text if following and following.kind == "output" else ""
            ran = run_shell(block, folder, shown)
            run.commands += ran
            last = run.outputs[block.line] = "".join(printed for _, printed in ran)
        elif block.kind == "python":
            last = run.outputs[block.line] = run_python(block, namespace)
        elif block.kind == "pycon":
            run_pycon(block, namespace)
        elif block.kind == "output":
            assert shows(block.text, last), (
                f"{block.where}: the output shown is not what the block before it prints;"
                f" first line that differs:\n  {first_difference(block.text, last)}\n"
                f"printed:\n{last[-4000:]}"
            )
    run.namespace = namespace
    return run


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=[pytest.mark.slow] if page.name in SLOW else [], id=page_id(page))
        for page in PAGES
    ],
)
def test_every_block_of_the_page_runs_as_written(page, tmp_path, monkeypatch):
    before = untracked()
    folder = reader_folder(tmp_path)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    try:
        run = run_page(page, folder)
        figures.check(run)
    finally:
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    assert untracked() - before == set(), f"{page_id(page)} left files in the repository"


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
