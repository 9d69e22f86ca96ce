"""The documentation site, built once for the tests that read it, as ``make docs`` builds it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: What ``make docs`` runs after ``$(BIN)/python``; the Makefile test checks they agree.
SPHINX = ["-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "docs"]


@pytest.fixture(scope="session")
def site_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The built site's folder (its ``index.html``), built into a temporary folder, and
    what the build printed (stdout, then stderr: kernels' logs included)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    # A build once waited out a cell's whole timeout for a reply its socket already held
    # (the wake-up was lost: pipeline/kernelpoll.py, which the build now installs, reads it).
    # Should a build still fail on a cell timeout, it is built again, once, in a fresh
    # folder; a cell that raises fails at once.
    for attempt in range(2):
        out = tmp_path_factory.mktemp("site") / "html"
        command = [sys.executable, *SPHINX, str(out), "-d", str(out.parent / "doctrees")]
        try:
            done = subprocess.run(
                command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1500
            )
        except subprocess.TimeoutExpired as expired:
            done = subprocess.CompletedProcess(command, -9, "", f"Timeout: {expired}")
        timed_out = "Timeout" in done.stderr or "timed out" in done.stderr
        lost_reply = done.returncode != 0 and timed_out
        if not lost_reply or attempt == 1:
            break
    if done.returncode != 0:
        warnings = [
            line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line
        ]
        pytest.fail(
            f"{shlex.join(['python', *SPHINX, str(out)])} failed ({done.returncode}):\n"
            + "\n".join(warnings[:40] or done.stderr.splitlines()[-40:]),
            pytrace=False,
        )
    return out, done.stdout + done.stderr


@pytest.fixture(scope="session")
def site(site_build: tuple[Path, str]) -> Path:
    """The built site's folder (its ``index.html``)."""
    return site_build[0]
