"""Make sure the browser tests have a Chromium: ``python -m tests.browser_setup``.

Under ``CI=true`` a missing ``/usr/bin/chromium`` is installed from Debian
(``apt-get update`` then ``apt-get install -y --no-install-recommends chromium``)
and a failed install stops the run. Elsewhere nothing is installed: a hint is
printed and the browser tests skip themselves. Playwright's own browser
download (``playwright install``) is never used; it cannot reach its servers here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

CHROMIUM = "/usr/bin/chromium"
INSTALL = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]


def _run(cmd: list[str]) -> None:
    print("browser_setup: $", " ".join(cmd), flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"browser_setup: {' '.join(cmd)} failed with exit code {result.returncode}"
        )


def main() -> int:
    if os.path.exists(CHROMIUM):
        print(f"browser_setup: {CHROMIUM} present; browser tests will run")
        return 0
    if os.environ.get("CI") != "true":
        print(
            f"browser_setup: {CHROMIUM} missing; the browser tests will be skipped. "
            "To run them: apt-get install -y chromium"
        )
        return 0
    if shutil.which("apt-get") is None:
        raise SystemExit(f"browser_setup: CI=true, {CHROMIUM} missing and no apt-get to install it")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print(f"browser_setup: CI=true and {CHROMIUM} missing: installing Debian's chromium")
    _run([*sudo, "apt-get", "update"])
    _run([*sudo, *INSTALL])
    if not os.path.exists(CHROMIUM):
        # Installed as a package but the file is gone: put it back.
        _run(
            [
                *sudo,
                "apt-get",
                "install",
                "-y",
                "--reinstall",
                "--no-install-recommends",
                "chromium",
            ]
        )
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"browser_setup: chromium installed but {CHROMIUM} is still missing")
    print(f"browser_setup: installed {CHROMIUM}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
