"""Running a page of the README or ``docs/`` as a reader would, block by block.

Each page runs in a fresh temporary folder, as a reader at the repository's root
would follow it: ``data/`` is there (a copy), ``.venv/bin/python`` is this
interpreter, a ``file:`` block is saved before the blocks after it. Shell blocks run
through bash, Python blocks in one namespace per page, in order; an output block
must match the run (:mod:`tests.docs.snippets` says how), and the figures the prose
quotes are checked against the run in :mod:`tests.docs.figures`. A page leaves
nothing behind in the repository.

The pages are split among test files by :data:`LONG`: ``--dist loadfile`` keeps a
file's tests on one core, and the few pages that run plans, calibrations or chains
take minutes of a core between them, so each runs from a file of its own
(``test_snippets_<group>.py``) and the cores share them.
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

#: Every page whose blocks run, in the order they are tested.
PAGES = [
    REPO / "README.md",
    REPO / "docs" / "index.md",
    REPO / "docs" / "workshop.md",
    *sorted((REPO / "docs" / "guide").glob("*.md")),
]
#: The pages whose runs take more than a few seconds (plans, calibration, a real
#: ingestion, chains, autoscaled plans), each with the test file that runs it:
#: ``test_snippets_<file>.py``.
LONG = {
    "planning.md": "planning",
    "twin.md": "twin",
    "simulating.md": "simulating",
    "chains.md": "chains",
    "autoscaling.md": "autoscaling",
    "overload.md": "overload",
}
#: The exit status an output shows, ``Check: fails (exit 1)``.
_EXIT = re.compile(r"\(exit (\d+)\)")


def page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def pages(group: str | None) -> list:
    """The pages one test file runs, as parameters (the long ones marked ``slow``):
    those :data:`LONG` gives to ``group``, or with ``None`` every other page."""
    return [
        pytest.param(page, marks=[pytest.mark.slow] if page.name in LONG else [], id=page_id(page))
        for page in PAGES
        if LONG.get(page.name) == group
    ]


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


def check_page(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every block of ``page`` runs as written in a reader's folder under ``tmp_path``, the
    figures its prose quotes are its run's, and it leaves no file in the repository."""
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
