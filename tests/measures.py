"""Which notebooks measure: the ``measures`` marker for the tests that run them.

A ``measures`` test times real runs and compares them with a prediction
calibrated from another real run, so it must run alone: beside another test,
the runs it compares see different machines (see ``pyproject.toml``'s markers
and the Makefile's ``test``). A notebook measures when it runs the ingestion
example (:mod:`pipeline.examples.ingest`) and checks its twin against it
(notebook 09 and its solutions); every test that runs such a notebook is
marked: its cells under nbval, with the checks after them (``tests/conftest.py``),
and its run in JupyterLab.
"""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ["marks", "measures_real_runs"]


def measures_real_runs(notebook: Path) -> bool:
    """Whether ``notebook`` times real runs of the ingestion example and compares its
    twin's prediction with them."""
    return notebook.suffix == ".ipynb" and "pipeline.examples.ingest" in notebook.read_text()


def marks(notebook: Path) -> list[pytest.MarkDecorator]:
    """The marks of a test that runs ``notebook``: ``measures`` when it measures."""
    return [pytest.mark.measures] if measures_real_runs(notebook) else []
