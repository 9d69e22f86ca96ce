"""The documentation site for the tests that read it: built once per checkout
(:mod:`tests.docs.site_builds`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.site_builds import REPO as REPO  # the docs tests take the root from here
from tests.docs.site_builds import BuildFailed, site_of_this_checkout


@pytest.fixture(scope="session")
def site_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The built site's folder (its ``index.html``), a copy of the kept build of this
    checkout or a new build in a temporary folder, and what the build printed (stdout,
    then stderr: kernels' logs included)."""
    try:
        return site_of_this_checkout(lambda: tmp_path_factory.mktemp("site") / "html")
    except BuildFailed as failed:
        pytest.fail(str(failed), pytrace=False)


@pytest.fixture(scope="session")
def site(site_build: tuple[Path, str]) -> Path:
    """The built site's folder (its ``index.html``)."""
    return site_build[0]
