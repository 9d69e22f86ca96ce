"""Make sure the tests' real services are installed: ``python -m tests.services_setup``.

Some tests drive real programs, never mocks: the browser tests a Chromium
(``/usr/bin/chromium``, Debian's ``chromium``), the Postgres sink's tests a
PostgreSQL server (``initdb``, ``pg_ctl`` and ``postgres`` under
``/usr/lib/postgresql/N/bin``, Debian's ``postgresql``), the metrics tests and the
simulated-metrics backfill a Prometheus server and ``promtool`` (Debian's ``prometheus``), the
animation's MP4 export ``ffmpeg`` (Debian's ``ffmpeg``). Each is a
:class:`Service`: a Debian package and a way to find what it installs.

Under ``CI=true`` the missing ones are installed from Debian, with one
``apt-get update`` and one ``apt-get install -y --no-install-recommends
PACKAGES``, and a failed install stops the run. Elsewhere nothing is
installed: a one-line hint per missing service is printed and its tests skip
themselves. ``python -m tests.services_setup chromium`` sets up only the
services named.

The tests find the programs with the same functions (:func:`chromium`,
:func:`postgres_bin`, :func:`prometheus_bin`), so what this installs is what they run.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "SERVICES",
    "Service",
    "chromium",
    "ffmpeg_bin",
    "main",
    "postgres_bin",
    "prometheus_bin",
]

CHROMIUM = "/usr/bin/chromium"
_POSTGRES_TOOLS = ("initdb", "pg_ctl", "postgres")


def chromium() -> str | None:
    """The system Chromium's path, or None when it is not installed."""
    return CHROMIUM if os.path.exists(CHROMIUM) else None


def postgres_bin() -> str | None:
    """The folder of the newest installed PostgreSQL's server programs, or None.

    Debian puts them under ``/usr/lib/postgresql/N/bin`` (not on PATH); a
    folder on PATH holding all of ``initdb``, ``pg_ctl`` and ``postgres``
    (another distribution) counts too.
    """

    def version(folder: str) -> tuple[int, ...]:
        name = os.path.basename(os.path.dirname(folder))
        return tuple(int(part) for part in name.split(".") if part.isdigit())

    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    found = shutil.which("initdb")
    if found:
        folders.append(os.path.dirname(found))
    for folder in folders:
        if all(os.access(os.path.join(folder, tool), os.X_OK) for tool in _POSTGRES_TOOLS):
            return folder
    return None


def prometheus_bin() -> str | None:
    """``prometheus``'s path when it and ``promtool`` are both on PATH (Debian's ``prometheus``)."""
    server, tool = shutil.which("prometheus"), shutil.which("promtool")
    return server if server and tool else None


def ffmpeg_bin() -> str | None:
    """``ffmpeg``'s path (Debian's ``ffmpeg``), which matplotlib's MP4 writer runs."""
    return shutil.which("ffmpeg")


@dataclass(frozen=True)
class Service:
    """A program some tests run for real.

    Attributes:
        name: what ``python -m tests.services_setup NAME`` calls it.
        package: the Debian package that installs it.
        find: where it is once installed, or None.
        tests: which tests need it, for messages.
    """

    name: str
    package: str
    find: Callable[[], str | None]
    tests: str

    @property
    def hint(self) -> str:
        """The one-line install hint a skipped test prints."""
        return f"apt-get update && apt-get install -y --no-install-recommends {self.package}"


SERVICES: dict[str, Service] = {
    service.name: service
    for service in (
        Service("chromium", "chromium", chromium, "the browser tests"),
        Service("postgresql", "postgresql", postgres_bin, "the Postgres sink's tests"),
        Service(
            "prometheus", "prometheus", prometheus_bin, "the metrics tests with a real Prometheus"
        ),
        Service("ffmpeg", "ffmpeg", ffmpeg_bin, "the animation's MP4 export test"),
    )
}


def _say(text: str) -> None:
    print(f"services_setup: {text}", flush=True)


def _run(cmd: list[str]) -> None:
    _say("$ " + " ".join(cmd))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"services_setup: {' '.join(cmd)} failed with exit code {result.returncode}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Check (and under ``CI=true`` install) the services named, default all of them."""
    names = list(sys.argv[1:] if argv is None else argv) or list(SERVICES)
    unknown = [name for name in names if name not in SERVICES]
    if unknown:
        raise SystemExit(
            f"services_setup: unknown service(s) {', '.join(unknown)}; known: {', '.join(SERVICES)}"
        )
    missing = []
    for service in (SERVICES[name] for name in names):
        where = service.find()
        if where is not None:
            _say(f"{service.name} found at {where}; {service.tests} will run")
        else:
            missing.append(service)
    if not missing:
        return 0
    if os.environ.get("CI") != "true":
        for service in missing:
            _say(f"{service.name} missing; {service.tests} will be skipped. To run them: "
                 f"{service.hint}")  # fmt: skip
        return 0
    packages = [service.package for service in missing]
    if shutil.which("apt-get") is None:
        raise SystemExit(
            f"services_setup: CI=true, {', '.join(packages)} missing and no apt-get to install"
        )
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    _say(f"CI=true and {', '.join(packages)} missing: installing from Debian")
    _run([*sudo, "apt-get", "update"])
    _run([*sudo, "apt-get", "install", "-y", "--no-install-recommends", *packages])
    still = [service for service in missing if service.find() is None]
    if still:
        # Installed as packages but the files are gone: put them back.
        again = [service.package for service in still]
        _run([*sudo, "apt-get", "install", "-y", "--reinstall", "--no-install-recommends", *again])
    for service in missing:
        where = service.find()
        if where is None:
            raise SystemExit(
                f"services_setup: {service.package} installed but {service.name} is still missing"
            )
        _say(f"installed {service.name} at {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
