"""``make lab`` starts JupyterLab as root (containers, CI) and as a normal user.

JupyterLab refuses to run as root without ``--allow-root``; the Makefile adds
that flag only when the effective uid is 0. One test reads the command make
would run, for this user and (when we are root) for ``nobody``; the other
really starts ``make lab`` on a free port and asks the server for its status.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.jupyter_server import REPO, JupyterLab, free_port, server_env

MAKE = shutil.which("make")
SETPRIV = shutil.which("setpriv")
BIN = Path(sys.executable).parent  # this venv: where `make lab` finds `jupyter`
# Treat the venv stamp as up to date: the test must never create or reinstall a venv.
NO_INSTALL = ["-o", ".venv/.lab-installed"]

# Starts a real JupyterLab server: not in make test-fast.
pytestmark = [pytest.mark.skipif(MAKE is None, reason="needs make"), pytest.mark.service]


def lab_command(makefile: Path, *, as_nobody: bool = False) -> str:
    """The JupyterLab command line ``make lab`` would run (``make -n``)."""
    cmd = [MAKE, "-n", "-f", str(makefile), *NO_INSTALL, "lab"]
    if as_nobody:
        cmd = [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    done = subprocess.run(
        cmd,
        cwd=makefile.parent,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    [line] = [line for line in done.stdout.splitlines() if "jupyter lab" in line]
    return line


def test_make_lab_allows_root_only_when_the_effective_uid_is_0():
    root = os.geteuid() == 0
    assert ("--allow-root" in lab_command(REPO / "Makefile").split()) is root
    if not root:
        pytest.skip("the uid-0 branch needs root; the normal-user branch was checked")
    if SETPRIV is None:
        pytest.skip("needs setpriv (util-linux) to check the normal-user branch")
    # A folder `nobody` can read: the Makefile alone is enough for `make -n`.
    workdir = Path(tempfile.mkdtemp(prefix="make-lab-"))
    try:
        workdir.chmod(0o755)
        shutil.copy(REPO / "Makefile", workdir / "Makefile")
        (workdir / "Makefile").chmod(0o644)
        line = lab_command(workdir / "Makefile", as_nobody=True)
    finally:
        shutil.rmtree(workdir)
    assert "jupyter lab notebooks/00-start-here.ipynb" in line
    assert "--allow-root" not in line.split()


@pytest.mark.skipif(not (BIN / "jupyter").exists(), reason="jupyter is not in this venv")
def test_make_lab_starts_a_server_that_answers(tmp_path):
    (tmp_path / "notebooks").mkdir()
    shutil.copy(REPO / "notebooks" / "00-start-here.ipynb", tmp_path / "notebooks")
    port, token = free_port(), secrets.token_hex(24)
    lab_args = " ".join(
        [
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={token}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
    )
    log_path = tmp_path / "make-lab.log"
    log_file = log_path.open("wb")
    # The repository's Makefile, run in a folder holding only the first notebook.
    proc = subprocess.Popen(
        [
            MAKE,
            "-f",
            str(REPO / "Makefile"),
            *NO_INSTALL,
            "lab",
            f"BIN={BIN}",
            f"LAB_ARGS={lab_args}",
        ],
        cwd=tmp_path,
        env=server_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # stop() ends make and JupyterLab together
    )
    lab = JupyterLab(proc, port, token, tmp_path / "notebooks", log_path, log_file)
    try:
        lab.wait_until_ready(timeout_s=120)
        root = lab.api("GET", "/api/contents")
        assert root["type"] == "directory"
        # Served from notebooks/ (the folder of the notebook it opens), not from beside it.
        assert [entry["name"] for entry in root["content"]] == ["00-start-here.ipynb"]
    finally:
        lab.stop()
    assert "is running at" in lab.log_path.read_text(errors="replace")
