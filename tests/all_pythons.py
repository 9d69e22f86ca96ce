"""Run the fast tests on every supported Python: ``make test-all-pythons``.

For each of Python 3.11, 3.12 and 3.13 this finds an interpreter that runs
(``python3.X`` on PATH, else one installed by pyenv), makes it its own venv
(``.venv-3.X``, reinstalled only when ``pyproject.toml`` changes), installs the
project with its ``test`` extra and runs the fast tier (:mod:`tests.tiers`). It ends
with one line per version: passed, FAILED, or absent. The exit status is 1 when
a version failed or none was found.

Extra pytest arguments can follow: ``python -m tests.all_pythons -x -k live``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests import tiers

REPO = Path(__file__).resolve().parent.parent
VERSIONS = ("3.11", "3.12", "3.13")


def _reports(python: str | Path, version: str) -> bool:
    """True when ``python`` starts and is ``version`` (a pyenv shim may exist yet refuse)."""
    try:
        done = subprocess.run(
            [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def _release(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.parent.name))


def find_python(version: str) -> tuple[str, str] | None:
    """``(interpreter, where it was found)`` for ``version``, or None if there is none."""
    name = f"python{version}"
    on_path = shutil.which(name)
    if on_path and _reports(on_path, version):
        return on_path, "PATH"
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        versions = Path(root.stdout.strip() or "/nonexistent") / "versions"
        # Newest patch release first; free-threaded builds (3.13.0t) name their binary 3.13t.
        for candidate in sorted(versions.glob(f"{version}.*/bin/{name}"), key=_release)[::-1]:
            if _reports(candidate, version):
                return str(candidate), "pyenv"
    return None


def _run(cmd: list[str]) -> int:
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO, stdin=subprocess.DEVNULL, check=False).returncode


def prepare_venv(python: str, version: str) -> Path | None:
    """Create or refresh ``.venv-<version>``; return its python, or None if installing failed."""
    venv = REPO / f".venv-{version}"
    stamp = venv / ".installed"
    venv_python = venv / "bin" / "python"
    if stamp.exists() and stamp.stat().st_mtime >= (REPO / "pyproject.toml").stat().st_mtime:
        return venv_python
    steps = [
        [python, "-m", "venv", str(venv)],
        [str(venv_python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(venv_python), "-m", "pip", "install", "--quiet", "-e", ".[lab,test]"],
    ]
    for step in steps:
        if _run(step) != 0:
            return None
    stamp.touch()
    return venv_python


def main(pytest_args: list[str]) -> int:
    results: list[tuple[str, str, str]] = []
    for version in VERSIONS:
        found = find_python(version)
        if found is None:
            results.append((version, "absent", f"no python{version} on PATH or in pyenv"))
            continue
        python, where = found
        print(f"\n=== Python {version}: {python} (found on {where}) ===", flush=True)
        began = time.monotonic()
        venv_python = prepare_venv(python, version)
        if venv_python is None:
            results.append((version, "FAILED", f"could not install into .venv-{version}"))
            continue
        code = subprocess.run(
            [*tiers.command(venv_python), *pytest_args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            env=tiers.environment(),
            check=False,
        ).returncode
        status = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        results.append((version, status, f"{python}, {time.monotonic() - began:.0f} s"))
    print("\ntest-all-pythons: the fast tier (tests/tiers.py)")
    for version, status, note in results:
        print(f"  Python {version}: {status:<22} {note}")
    ran = [status for _, status, _ in results if status != "absent"]
    if not ran:
        print("no Python 3.11-3.13 found: nothing ran")
        return 1
    return 0 if all(status == "passed" for status in ran) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
