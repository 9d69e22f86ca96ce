"""Fixtures shared by the whole suite: one home for what tests used to copy.

- ``config``: a :class:`~pipeline.PipelineConfig` factory on one set of small
  test defaults; a test passes what it needs different.
- ``sweep_frame``: a sweep's long table built from values per grid point.
- ``no_open_figures``: asserts a test left no pyplot figure open (opt in with
  ``pytest.mark.usefixtures("no_open_figures")``).

Fixtures that only one part of the package needs live in that part's folder
(``tests/cli/conftest.py``, ``tests/docs/conftest.py``).

The cells of a notebook that times real runs (:mod:`tests.measures`) are marked
``measures`` here, as the tests that run it mark themselves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline import Backoff, PipelineConfig
from tests.measures import measures_real_runs

# ``make test`` runs the kernel's tests a second time as on an install without the
# ``[fast]`` extra: with PIPELINE_TEST_WITHOUT_NUMBA=1 importing numba fails, as it would
# there, and every path falls back to plain Python (tests of the compiled paths skip).
if os.environ.get("PIPELINE_TEST_WITHOUT_NUMBA") == "1":
    sys.modules["numba"] = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``measures`` the cells of a notebook that measures (nbval's items)."""
    found: dict[Path, bool] = {}
    for item in items:
        path = item.path
        if path.suffix == ".ipynb":
            if path not in found:
                found[path] = measures_real_runs(path)
            if found[path]:
                item.add_marker(pytest.mark.measures)


# The defaults of ``config()``: two workers, room for four waiting items, three
# attempts and no backoff, so a retry costs no virtual time unless a test asks.
CONFIG_DEFAULTS: Mapping[str, Any] = {
    "concurrency": 2,
    "queue_maxsize": 4,
    "max_attempts": 3,
    "backoff": Backoff.none(),
}


@pytest.fixture(scope="session")
def config() -> Callable[..., PipelineConfig]:
    """``config(**overrides)``: a PipelineConfig on :data:`CONFIG_DEFAULTS`.

    Session-scoped (it is a pure factory), so Hypothesis tests may use it too.
    """

    def make(**overrides: Any) -> PipelineConfig:
        return PipelineConfig(**{**CONFIG_DEFAULTS, **overrides})

    return make


@pytest.fixture(scope="session")
def sweep_frame() -> Callable[..., Any]:
    """``sweep_frame(values, metric="latency_p95_s")``: a sweep's long table.

    ``values`` maps each grid point ``(concurrency, queue_maxsize)`` to its
    per-replication values of ``metric``, in replication order. The frame has
    one row per replication, ``queue_maxsize`` as an object column (so an
    unbounded ``None`` stays ``None``) and ``attrs["grid"]`` as ``sweep()``
    sets it.
    """
    import pandas as pd

    def make(values: Mapping[tuple[int, object], Sequence[float]], metric: str = "latency_p95_s"):
        rows = [
            {"concurrency": c, "queue_maxsize": m, "replication": r, metric: v}
            for (c, m), per_replication in values.items()
            for r, v in enumerate(per_replication)
        ]
        frame = pd.DataFrame(rows)
        frame["queue_maxsize"] = pd.Series([row["queue_maxsize"] for row in rows], dtype=object)
        frame.attrs["grid"] = ["concurrency", "queue_maxsize"]
        return frame

    return make


@pytest.fixture
def no_open_figures():
    """Fail the test that leaves a pyplot figure open (each one holds memory until closed)."""
    import matplotlib.pyplot as plt

    yield
    assert plt.get_fignums() == [], "a plot function left a pyplot figure open"


@pytest.fixture
def run_main(monkeypatch, capsys) -> Callable[..., tuple[object, str, str]]:
    """``run_main(*argv, cwd=None)``: ``main()`` in this process (fast).

    Each argument is passed as ``str``; ``cwd`` (if given) is the working folder
    for the call. Returns ``(status, stdout, stderr)``; argparse's own errors
    arrive as SystemExit and their code is the status.
    """
    from pipeline.cli import main

    def run(*argv: object, cwd: Path | str | None = None) -> tuple[object, str, str]:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        try:
            status = main([str(arg) for arg in argv])
        except SystemExit as exc:
            status = exc.code
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run
