"""The wrong answers put to the exercises: every master gets them, and their list is sound.

The check itself runs in nbval's kernel after each solutions notebook's last cell
(``tests/notebooks/after_the_run.py``, the item ``wrong answers``): there the lesson's
objects are bound, and the notebook is not run a second time for it. Here, that each
master gets the item, and that the slips :data:`tests.lessons.wrong_answers.SPEC`
lists name notebooks and answers that exist (a misspelt one would never be tried).
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from pipeline.lessons.exercises import masters, student_of
from tests.lessons.wrong_answers import ROOT, SPEC, answer_names

MASTERS = masters(ROOT)


@pytest.mark.slow  # a pytest of its own collects the notebooks under nbval
def test_every_master_gets_the_wrong_answers_after_its_cells():
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "notebooks/solutions"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    ).stdout.splitlines()  # fmt: skip
    for master in MASTERS:
        mine = [
            line.split("::", 1)[1]
            for line in listed
            if line.startswith(f"notebooks/solutions/{master.name}::")
        ]
        assert mine[-1:] == ["wrong answers"], f"{master.name}: {mine[-3:]}"


def test_the_slips_name_notebooks_and_answers_that_exist():
    names = {m.name.removesuffix("-solutions.ipynb"): m for m in MASTERS}
    assert set(SPEC) <= set(names)
    for notebook, spec in SPEC.items():
        student = nbformat.read(student_of(names[notebook]), as_version=4)
        answers = {n for question in answer_names(student).values() for n in question}
        said = set(spec.get("wrong", {})) | set(spec.get("ungraded", {}))
        said |= set(spec.get("tolerance", {})) | {
            name for name, _label, _why in spec.get("skip", [])
        }
        said |= {n for wholes in spec.get("whole", {}).values() for whole in wholes for n in whole}
        assert said <= answers, f"{notebook}: {sorted(said - answers)} are no answer names"
