"""``make test``'s later steps collect the files that hold their marks (tests/marked_files.py)."""

from __future__ import annotations

import re

import pytest

from tests.marked_files import MISSED, STEP_MARKS, files


def test_every_test_of_a_step_s_marks_collected_here_is_in_a_file_that_step_collects(request):
    # In the first step of make test (the whole suite collected, these marks deselected):
    # a test marked in a way files() does not see would be run by no step.
    assert request.config.stash.get(MISSED, []) == []


def test_the_files_are_the_marked_modules_and_the_notebooks_that_measure():
    assert "tests/notebooks/test_browser.py" in files(["browser"])
    assert "tests/examples/ingest/test_ingest_postgres.py" in files(["service"])
    measuring = files(["measures"])
    assert "notebooks/09-from-a-real-run-to-its-twin.ipynb" in measuring
    assert "tests/examples/ingest/test_ingest.py" in measuring
    assert "tests/notebooks/test_browser.py" in measuring  # runs notebook 09 in JupyterLab
    assert "tests/test_marked_files.py" not in files(STEP_MARKS)  # names the marks, marks nothing
    assert files([]) == []


def test_an_unknown_mark_is_refused():
    with pytest.raises(ValueError, match=re.escape("['slow'] are not among")):
        files(["slow"])
