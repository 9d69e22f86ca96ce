"""No number in the prose of the README or ``docs/`` goes unchecked.

Reads the pages and the tests (``tests/docs/prose_numbers.py`` says how), runs
nothing: each number of the prose is found by a check of its page, or registered
in ``tests/docs/prose_registry.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.conftest import REPO
from tests.docs.prose_numbers import (
    not_in_code,
    numbers,
    page_name,
    pages,
    phrase_pattern,
    unheld,
)
from tests.docs.prose_registry import GIVENS, NOT_FIGURES, REGISTRY


def failure(name: str, missing: list[tuple[int, str]]) -> str:
    """What a page with numbers nothing holds is told: each one, then how to hold it."""
    return "\n".join(
        [
            f"{name}:{line}: {number} is quoted in prose and nothing holds it"
            for line, number in missing
        ]
        + [
            "Check it (a says/agrees/quoted phrase in the page's checker in"
            " tests/docs/figures.py, or a test beside the code that sets it), or register"
            " its phrase in tests/docs/prose_registry.py: REGISTRY with the test that"
            " holds it, NOT_FIGURES if it names something (a date, a version, a section),"
            " GIVENS if the page's own code writes it."
        ]
    )


@pytest.mark.parametrize("page", pages(), ids=page_name)
def test_every_number_in_the_prose_is_held(page: Path):
    missing = unheld(page)
    assert missing == [], failure(page_name(page), missing)


def test_the_failure_names_the_page_the_line_and_the_number():
    told = failure("docs/guide/overload.md", [(12, "150")])
    assert told.startswith("docs/guide/overload.md:12: 150 is quoted in prose and nothing holds it")
    assert "tests/docs/prose_registry.py" in told


def test_only_the_prose_s_numbers_are_inventoried(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Part 3\n\n1. took 15 ms, p95 `01-backpressure` 2,000 items [a](x/3.md) 20x\n"
        "<!-- 7 -->\n\n```python\nx = 42\n```\n\n```\n43\n```\n",
        encoding="utf-8",
    )
    assert [number for _, _, number in numbers(page)] == ["3", "15", "2,000", "20"]


@pytest.mark.parametrize(
    "entry", [*REGISTRY, *NOT_FIGURES, *GIVENS], ids=lambda e: f"{e.page}:{e.phrase}"
)
def test_each_registered_phrase_is_on_its_page(entry):
    on = [REPO / entry.page] if entry.page != "*" else pages()
    found = [page for page in on if phrase_pattern(entry.phrase).search(page.read_text("utf-8"))]
    assert found, f"{entry.page} no longer says {entry.phrase!r}"


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: f"{e.page}:{e.phrase}")
def test_each_registered_holder_exists(entry):
    path, _, name = entry.by.partition("::")
    source = (REPO / path).read_text(encoding="utf-8")
    assert f"def {name}(" in source, f"{entry.by} (holding {entry.phrase!r}) does not exist"


@pytest.mark.parametrize("entry", GIVENS, ids=lambda e: f"{e.page}:{e.phrase}")
def test_each_worked_example_s_givens_are_its_code_s(entry):
    assert not_in_code(entry) == [], (
        f"{entry.page}: {entry.phrase!r} gives {not_in_code(entry)}, which {entry.by} does not"
    )
