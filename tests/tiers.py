"""The fast tier, defined once: ``make test-fast`` and ``make test-all-pythons`` run it.

The fast tier is ``tests/`` without the notebooks (nbval off), the browser tests, the
tests that start a real server (``service``), the wheel build (``install``), the
long checks (``slow``) and the tests that time real runs against a twin, which must
run alone (``measures``); the fault injection runs 1,000 examples instead of 10,000
(``PIPELINE_FAULT_EXAMPLES``, unless set), and the other large randomized checks a fifth
of their examples (:func:`examples`; ``PIPELINE_TEST_TIER=fast``, unless set). It is spread
over both cores (``-n 2``, pytest-xdist). ``make test`` runs all of it, and the rest.

The tier writes Python's bytecode caches even where ``PYTHONDONTWRITEBYTECODE`` is set:
without them each of the two workers compiles the package and rewrites the asserts of
every test file again on every run (about 9 s of a core each, half of what collecting
the tests costs).

``python -m tests.tiers [PYTEST ARGS]`` runs the tier with this interpreter; extra
arguments go to pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["command", "environment", "examples", "main"]

REPO = Path(__file__).resolve().parent.parent
SELECTION = "not browser and not slow and not service and not install and not measures"


def examples(full: int) -> int:
    """Examples (Hypothesis's, or seeds) for a randomized check of ``full`` in this run.

    A fifth (at least 20) in the fast tier, ``full`` everywhere else: ``make test`` keeps
    the full count. A derandomized check draws the same first examples either way: the
    fast tier runs the start of the full run.
    """
    if os.environ.get("PIPELINE_TEST_TIER") == "fast":
        return min(full, max(20, full // 5))
    return full


def command(python: str | os.PathLike[str]) -> list[str]:
    """The fast tier's command line for the interpreter ``python``."""
    return [
        str(python), "-m", "pytest", "tests",
        "-p", "no:nbval",
        "-o", "addopts=-ra",  # pyproject's addopts carry nbval's flags
        "-m", SELECTION,
        "-n", "2",
        "-q",
    ]  # fmt: skip


def environment() -> dict[str, str]:
    """The environment to run it in: this one, with the tier's defaults where unset."""
    env = dict(os.environ)
    env.setdefault("PIPELINE_FAULT_EXAMPLES", "1000")
    env.setdefault("PIPELINE_TEST_TIER", "fast")
    # numpy's thread pool would only add noise to tests that time threads.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # see the module's docstring
    return env


def main(argv: list[str]) -> int:
    """Run the fast tier with this interpreter; the exit status is pytest's."""
    return subprocess.call(
        [*command(sys.executable), *argv], cwd=REPO, env=environment(), stdin=subprocess.DEVNULL
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
