"""The prose's saved values: their tolerance, their comparison with a run, their refresh.

The notebooks' own values are checked against their run by the item
``tests/notebooks/after_the_run.py`` adds after each notebook's cells; here, the
rules it applies, on small notebooks and a fake kernel client.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from pipeline.lessons.prose import (
    MEASURED,
    Tolerance,
    differences,
    evaluate,
    stamp,
    tolerance,
)


def _value(expression: str, text: str) -> dict:
    data = {"text/plain": repr(text)}
    return {"expression": expression, "result": {"status": "ok", "data": data, "metadata": {}}}


def _notebook(*saved: dict) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    prose = nbformat.v4.new_markdown_cell(
        " ".join(f"{{eval}}`{entry['expression']}`" for entry in saved)
    )
    prose.metadata["user_expressions"] = list(saved)
    notebook.cells = [nbformat.v4.new_code_cell("x = 1"), prose]
    return notebook


class FakeClient:
    """A kernel client that answers user_expressions from a dict of texts."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def execute_interactive(self, code, *, user_expressions, **options):
        assert code == ""
        found = {
            key: {"status": "ok", "data": {"text/plain": repr(self.answers[text])}, "metadata": {}}
            for key, text in user_expressions.items()
        }
        return {"content": {"status": "ok", "user_expressions": found}}


@pytest.mark.parametrize(
    ("saved", "fresh", "agree"),
    [
        ("1.06", "1.08", True),
        ("830", "697", True),
        ("0", "3", True),  # five units of the last digit shown
        ("0", "9", False),
        ("2.36", "25.00", False),  # more than a factor of 10
        ("+9.2%", "-3.0%", False),  # the sign is text
        ("4 workers", "1 worker", False),
        ("http://127.0.0.1:35187", "http://127.0.0.1:44445", True),
    ],
)
def test_a_measured_value_agrees_within_its_order(saved, fresh, agree):
    assert MEASURED.agrees(saved, fresh) is agree


def test_an_exact_tolerance_takes_only_the_same_text_and_words_take_any():
    assert Tolerance().agrees("0.815", "0.815")
    assert not Tolerance().agrees("0.815", "0.816")
    assert Tolerance(words=True).agrees("1 worker", "4 workers")


def test_only_the_listed_notebooks_and_expressions_are_loose():
    assert tolerance(Path("02-workers-and-littles-law.ipynb"), 'f"{x}"') is None
    assert tolerance(Path("07-real-time-solutions.ipynb"), 'f"{x}"') is MEASURED
    assert tolerance(Path("09-from-a-real-run-to-its-twin.ipynb"), 'f"{server.url}"').words
    assert tolerance(Path("00-start-here.ipynb"), 'f"{report.duration_s:.2f}"') is MEASURED
    assert tolerance(Path("00-start-here.ipynb"), 'f"{report.completed}"') is None


def test_saved_values_are_held_to_the_run():
    notebook = _notebook(_value('f"{x}"', "1"), _value('f"{y:.2f}"', "0.50"))
    fresh = evaluate(FakeClient({'f"{x}"': "1", 'f"{y:.2f}"': "0.50"}), notebook)
    assert fresh[0] == []
    assert differences(Path("02-x.ipynb"), notebook, fresh) == []
    drifted = evaluate(FakeClient({'f"{x}"': "1", 'f"{y:.2f}"': "0.51"}), notebook)
    assert differences(Path("02-x.ipynb"), notebook, drifted) == [
        """02-x.ipynb cell 1: {eval}`f"{y:.2f}"` saved '0.50', the run gives '0.51'"""
    ]
    # a real-time notebook's value may move within its tolerance
    assert differences(Path("07-x.ipynb"), notebook, drifted) == []


def test_a_cell_without_its_values_or_with_others_fails():
    notebook = _notebook(_value('f"{x}"', "1"))
    fresh = evaluate(FakeClient({'f"{x}"': "1"}), notebook)
    notebook.cells[1].metadata.pop("user_expressions")
    assert differences(Path("02-x.ipynb"), notebook, fresh) == [
        "02-x.ipynb cell 1: no saved values for its 1 inline expression(s)"
    ]
    notebook.cells[0].metadata["user_expressions"] = []
    assert (
        "cell 0: user_expressions on a cell without"
        in differences(Path("02-x.ipynb"), notebook, fresh)[0]
    )


def test_a_refresh_keeps_a_measured_value_within_its_tolerance_and_nothing_else():
    old = [_value('f"{t:.2f}"', "1.06"), _value('f"{n}"', "7")]
    fresh = [[], [_value('f"{t:.2f}"', "1.08"), _value('f"{n}"', "8")]]
    for name, kept in (("07-x.ipynb", "'1.06'"), ("02-x.ipynb", "'1.08'")):
        notebook = _notebook(*old)
        notebook.cells[1].source = '{eval}`f"{t:.2f}"` {eval}`f"{n}"`'
        stamp(Path(name), notebook, fresh)
        values = notebook.cells[1].metadata["user_expressions"]
        assert values[0]["result"]["data"]["text/plain"] == kept
        # 7 and 8 agree within 07's tolerance too: kept there, replaced in 02
        second = "'7'" if name.startswith("07") else "'8'"
        assert values[1]["result"]["data"]["text/plain"] == second
        assert "user_expressions" not in notebook.cells[0].metadata
