"""Run ``make test``'s runs at the same time, each one's output whole.

The browser-and-server tests spend most of their time waiting (for JupyterLab, a page, a
kernel's reply, a server): measured alone on two quiet cores they kept 0.8 of a core busy
for 7 minutes. The documentation site's build runs every notebook one after another, at
most a core. Beside the suite they take the cores' idle share instead of a turn of their
own (the suite then copies the site: ``tests/docs/site_builds.py``).

Usage: ``python -m tests.together COMMAND [COMMAND ...]``, each a shell command. The
first prints as it runs; each other prints its output whole once it has ended, so that
none interleave. The exit status is the first command's if that failed, else
the first failed other's; 0 when all passed. An interrupt (``SIGINT``) or ``SIGTERM``
stops them all.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: How the Makefile calls this module, before the commands it gives it.
RUNNER = "$(BIN)/python -m tests.together "


def run(commands: list[str]) -> int:
    """Run ``commands`` at once (see the module docstring); return the exit status."""
    if not commands:
        print("python -m tests.together: no command given", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        others = []
        for command in commands[1:]:
            log = stack.enter_context(tempfile.TemporaryFile())
            # a session of its own: stopping it stops the shell's pytest and its workers too
            process = subprocess.Popen(
                command, shell=True, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            stack.callback(_stop, process)
            others.append((command, process, log))
        statuses = [subprocess.run(commands[0], shell=True).returncode]
        for command, process, log in others:
            statuses.append(process.wait())
            log.seek(0)
            print(f"\n{command}", flush=True)
            sys.stdout.buffer.write(log.read())
            sys.stdout.flush()
    return next((status for status in statuses if status != 0), 0)


def make_test_steps(makefile: Path = REPO / "Makefile") -> list[list[str]]:
    """The steps of ``make test``'s recipe in order, each the commands it runs at the same
    time: a step run by this module gives its commands, any other step itself alone."""
    recipe = re.search(r"^test:.*\n((?:\t.+\n)+)", makefile.read_text(), re.M)
    if recipe is None:
        raise ValueError(f"{makefile} has no test target")
    steps = [s.strip() for s in recipe.group(1).replace("\\\n", "").splitlines()]
    return [shlex.split(s[len(RUNNER) :]) if s.startswith(RUNNER) else [s] for s in steps]


def _stop(process: subprocess.Popen) -> None:
    """Stop ``process``'s session (the shell, its pytest and the workers) if still running."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


def _exit(signum: int, frame: object) -> None:
    sys.exit(128 + signum)  # as a shell reports it; unwinding stops the other commands


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit)  # a CI runner cancels with SIGTERM, a terminal with ^C
    sys.exit(run(sys.argv[1:]))
