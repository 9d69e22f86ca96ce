"""Make sure the browser tests have a Chromium: ``python -m tests.browser_setup``.

The Chromium part of :mod:`tests.services_setup` (which ``make test`` runs for
every service): under ``CI=true`` a missing ``/usr/bin/chromium`` is installed
from Debian and a failed install stops the run; elsewhere a hint is printed
and the browser tests skip themselves. Playwright's own browser download
(``playwright install``) is never used; it cannot reach its servers here.
"""

from __future__ import annotations

import sys

from tests.services_setup import CHROMIUM
from tests.services_setup import main as _setup

__all__ = ["CHROMIUM", "main"]


def main() -> int:
    """Check (and under ``CI=true`` install) Chromium."""
    return _setup(["chromium"])


if __name__ == "__main__":
    sys.exit(main())
