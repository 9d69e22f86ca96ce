"""The documentation site, built once per checkout for the tests that read it, as ``make docs``
builds it.

``make test`` reads the site in two pytest runs at the same time (``test_site.py`` with
the unit tests, ``test_site_browser.py`` with the browser tests), and a build runs every
notebook (minutes on a loaded machine). A whole build that passed is kept in
:func:`builds_folder` under the digest of the checkout it was built from
(:func:`checkout_digest`); a later run of the same checkout copies it instead of building
again, and a run that comes while another builds waits for it (:func:`one_build_at_a_time`).
The folder keeps the last :data:`KEPT` builds.

``python -m tests.docs.site_builds`` builds and keeps the site of this checkout (unless a
build of it is kept): ``make test`` runs it beside the suite and the browser tests, whose
site tests then copy it instead of building it on one of their cores.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import importlib.metadata
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: What ``make docs`` runs after ``$(BIN)/python``; the Makefile test checks they agree.
SPHINX = ["-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "docs"]
#: How many builds :func:`builds_folder` keeps (the newest): one per checkout in use.
KEPT = 4


class BuildFailed(Exception):
    """The site's build failed; the message names the command and its warnings."""


def site_of_this_checkout(folder: Callable[[], Path]) -> tuple[Path, str]:
    """The built site (its ``index.html``'s folder, a fresh one from ``folder()`` for each
    build or copy) and what the build printed (stdout, then stderr: kernels' logs included):
    a copy of the kept build of this checkout, or a new build, kept if it passed.

    Raises:
        BuildFailed: the build failed.
    """
    digest, builds = checkout_digest(), builds_folder()
    if digest is None:
        return _build(folder, None, builds)
    # A run that comes while another builds (make test builds the site beside the suite and
    # the browser tests) waits, then copies the build if it is of its checkout.
    with one_build_at_a_time(builds):
        found = copy_of_a_build(builds, digest, folder())
        return found if found is not None else _build(folder, digest, builds)


def checkout_digest() -> str | None:
    """A digest of every file of the checkout (tracked, or untracked and not ignored, as
    git lists them: the build's copies under ``docs/`` are ignored), the checkout's
    path, the environment (its prefix and Python's version) and every distribution
    installed in it, with its version; None without git."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO, capture_output=True, check=True, timeout=60,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    # The environment by its prefix and its site-packages, not by the path the interpreter
    # was started as (``python`` or ``pytest``'s ``python3``) or what else is on sys.path.
    digest = hashlib.sha256(f"{REPO}\0{sys.prefix}\0{sys.version}\0{SPHINX}".encode())
    packages = sorted({sysconfig.get_paths()[kind] for kind in ("purelib", "platlib")})
    installed = {
        (d.metadata["Name"] or "", d.version)
        for d in importlib.metadata.distributions(path=packages)
    }
    digest.update(repr(sorted(installed)).encode())
    for name in sorted(set(listed.decode().split("\0")) - {""}):
        path = REPO / name
        if path.is_file():  # a file deleted but still tracked is skipped, as the build does
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def builds_folder() -> Path:
    """Where whole builds are kept, one folder per digest: this user's, in the temporary
    folder (``PIPELINE_TEST_SITE_BUILDS`` names another)."""
    named = os.environ.get("PIPELINE_TEST_SITE_BUILDS")
    return (
        Path(named)
        if named
        else Path(tempfile.gettempdir()) / f"pipeline-lab-site-{getpass.getuser()}"
    )


def copy_of_a_build(builds: Path, digest: str, into: Path) -> tuple[Path, str] | None:
    """A copy into ``into`` of the whole build kept under ``digest``, and what that build
    printed; or None (none kept, or it was dropped while being copied)."""
    try:
        shutil.copytree(builds / digest / "html", into)
        log = (builds / digest / "build.log").read_text()
        os.utime(builds / digest)  # used: the last to be dropped
    except OSError:
        shutil.rmtree(into, ignore_errors=True)
        return None
    return into, log


def keep_build(builds: Path, digest: str, html: Path, log: str) -> None:
    """Keep a copy of ``html``, a whole build that passed, and what it printed (``log``),
    under ``digest``; drop all but
    the newest :data:`KEPT`. Placed whole or not at all (a rename), so that a reader never
    finds half a build."""
    builds.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=builds))
    try:
        shutil.copytree(html, partial / "html")
        (partial / "build.log").write_text(log)
        partial.rename(builds / digest)
    except OSError:  # another run kept the same build first
        shutil.rmtree(partial, ignore_errors=True)
    for old in sorted(_ages(builds), reverse=True)[KEPT:]:
        shutil.rmtree(old[1], ignore_errors=True)


def _ages(builds: Path) -> list[tuple[float, Path]]:
    """``(last used, folder)`` of each build kept (another run may drop one meanwhile)."""
    found = []
    for folder in builds.iterdir():
        try:
            if not folder.name.startswith("."):  # not one being placed
                found.append((folder.stat().st_mtime, folder))
        except OSError:
            continue
    return found


@contextlib.contextmanager
def one_build_at_a_time(builds: Path) -> Iterator[None]:
    """Hold ``builds``' lock (a file lock, shared by every process) for the block."""
    builds.mkdir(parents=True, exist_ok=True)
    with open(builds / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _build(folder: Callable[[], Path], digest: str | None, builds: Path) -> tuple[Path, str]:
    """Build the site into ``folder()``; keep it under ``digest`` if it passed."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    # A build once waited out a cell's whole timeout for a reply its socket already held
    # (the wake-up was lost: pipeline/kernelpoll.py, which the build now installs, reads it).
    # Should a build still fail on a cell timeout, it is built again, once, in a fresh
    # folder; a cell that raises fails at once.
    for attempt in range(2):
        out = folder()
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
        raise BuildFailed(
            f"{shlex.join(['python', *SPHINX, str(out)])} failed ({done.returncode}):\n"
            + "\n".join(warnings[:40] or done.stderr.splitlines()[-40:])
        )
    log = done.stdout + done.stderr
    if digest is not None:  # only a whole build that passed is kept
        keep_build(builds, digest, out, log)
    return out, log


def main() -> int:
    """Build and keep this checkout's site unless a build of it is kept; 1 if it failed."""
    if checkout_digest() is None:  # nothing to keep it under: each test run builds its own
        print("not a git checkout: the site's tests build the site themselves")
        return 0
    with tempfile.TemporaryDirectory(prefix="pipeline-lab-site-") as scratch:
        made = itertools.count(1)
        try:
            site_of_this_checkout(lambda: Path(scratch) / str(next(made)) / "html")
        except BuildFailed as failed:
            print(failed, file=sys.stderr)
            return 1
    print(f"the site of this checkout is kept in {builds_folder()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
