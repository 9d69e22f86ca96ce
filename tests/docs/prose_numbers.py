"""Every number the prose of the README and ``docs/`` quotes, and what holds each one.

A number in prose (outside code blocks and their outputs, which the page's run
compares as a whole) is one of:

- **checked**: a test finds the sentence that quotes it and holds the figure to
  what it measures or to the constant that sets it. Such checks are found here by
  reading the tests, not by running them: a function that calls ``says``,
  ``agrees`` or ``quoted`` (``tests/docs/figures.py``) holds every number inside
  the page text its phrases and patterns match, on the page it names (its
  ``@checker`` page, or a page path it spells);
- **registered**: an entry of :data:`REGISTRY`, a phrase of one page with the
  test that holds its numbers, or :data:`NOT_FIGURES`, a phrase whose numbers
  are names, dates, versions or references rather than figures.

:func:`unheld` lists the numbers that are neither; ``test_prose_numbers.py``
fails on any, naming the page, the line and the number.
"""

from __future__ import annotations

import ast
import contextlib
import math
import re
import subprocess
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.docs.conftest import REPO
from tests.docs.prose_registry import GIVENS, NOT_FIGURES, REGISTRY, Held
from tests.docs.snippets import blocks

#: Calls whose phrase or pattern finds a sentence of a page that a check then holds.
FINDERS = {"says", "agrees", "quoted"}
#: A number as prose writes it: ``4``, ``10,000``, ``0.5``, ``1e-9``, ``20x``, ``13-15``;
#: not part of a name (``p95``, ``UTF-8``, ``v0.5.4``, ``_2``) or of a file's
#: (``01-backpressure``, ``a/4``).
NUMBER = re.compile(
    r"(?<![\w.\/@#$])(?<![A-Za-z]-)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e-?\d+)?(?![\d_]|\.\d|-[A-Za-z])"
)
#: What prose carries that is not prose: HTML comments, link targets, an ordered
#: list's marker, a heading's anchor.
_NOT_PROSE = re.compile(r"<!--.*?-->|\]\([^)]*\)|^\s*\d+\.\s|\{#[^}]*\}", re.S | re.M)


def pages() -> list[Path]:
    """The pages whose prose is inventoried: the README and every page under ``docs/``
    the repository holds (not what a build leaves there: its copy of ``data/README.md``
    under ``docs/`` would otherwise take the README's checker)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "docs/*.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [REPO / "README.md", *sorted(REPO / name for name in listed.split("\0") if name)]


def page_name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@cache
def prose(page: Path) -> str:
    """The page's text with its code blocks (and their outputs) and what is not prose
    blanked out, each character kept in place (offsets and lines are the page's)."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    chars = list(text)
    for block in blocks(page):
        first = block.line - 1
        last = first + block.text.count("\n") + 1  # the closing fence
        for i in range(starts[first], starts[min(last + 1, len(lines))]):
            chars[i] = chars[i] if chars[i] == "\n" else " "
    blanked = "".join(chars)
    return _NOT_PROSE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), blanked)


def numbers(page: Path) -> list[tuple[int, int, str]]:
    """Each number of the page's prose: ``(offset, line, number)``."""
    text = prose(page)
    return [(m.start(), text.count("\n", 0, m.start()) + 1, m[0]) for m in NUMBER.finditer(text)]


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A registered phrase (a regular expression, as :func:`~tests.docs.figures.quoted`
    takes) as a pattern whose spaces match any whitespace (a sentence may wrap)."""
    return re.compile(phrase.replace(" ", r"\s+"))


# --- the checks found in the tests --------------------------------------------------------


@dataclass(frozen=True)
class Finder:
    """A phrase or pattern a test function looks for, and the pages it looks on."""

    holder: str
    patterns: tuple[re.Pattern[str], ...]
    pages: frozenset[str] | None  # None: the function names no page


def _template(node: ast.AST) -> str | None:
    """A string literal's text, or an f-string's with each value as ``\\0``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else "\0" for part in node.values
        )
    return None


def _patterns(template: str) -> list[re.Pattern[str]]:
    """What ``template`` finds: as words (an f-string's values any short text), and, if
    it is one, as a regular expression whose spaces match any whitespace."""
    found = []
    parts = template.split("\0")
    if len("".join(parts).strip()) >= 8:
        gap = r"[\s\S]{1,60}?"
        found.append(
            re.compile(gap.join(r"\s+".join(map(re.escape, part.split(" "))) for part in parts))
        )
    with warnings.catch_warnings(), contextlib.suppress(re.error, FutureWarning):
        warnings.simplefilter("error")  # text that is not a pattern: skipped
        found.append(re.compile(template.replace(" ", r"\s+").replace("\0", r"[^\n]{1,40}?")))
    return found


def _calls(function: ast.AST) -> set[str]:
    return {
        node.func.id
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def _checker_page(function: ast.FunctionDef) -> str | None:
    for decorator in function.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and getattr(decorator.func, "id", "") == "checker"
            and isinstance(decorator.args[0], ast.Constant)
        ):
            return decorator.args[0].value
    return None


@cache
def finders() -> tuple[Finder, ...]:
    """Every phrase or pattern the tests look for in a page, with the test that does."""
    names = {page_name(page) for page in pages()}
    by_file = {page.name: page_name(page) for page in pages()}
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if not any(f"{name}(" in source for name in FINDERS):
            continue
        tree = ast.parse(source)
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
        # a helper a page's checker calls looks on that page
        page_of = {f.name: by_file.get(_checker_page(f) or "") for f in functions}
        for caller in functions:
            if page_of[caller.name]:
                for callee in _calls(caller):
                    page_of[callee] = page_of.get(callee) or page_of[caller.name]
        for function in functions:
            if not FINDERS & _calls(function):
                continue
            templates = [t for node in ast.walk(function) if (t := _template(node)) is not None]
            spelled = {t for t in templates if t in names}
            on = spelled or ({page_of[function.name]} if page_of[function.name] else None)
            patterns = tuple(
                p for t in templates if t not in names and len(t) >= 8 for p in _patterns(t)
            )
            holder = f"{path.relative_to(REPO).as_posix()}::{function.name}"
            found.append(Finder(holder, patterns, frozenset(on) if on else None))
    return tuple(found)


def checked_spans(page: Path) -> list[tuple[int, int, str]]:
    """The stretches of ``page`` a test's phrase or pattern finds: ``(start, end, test)``."""
    text = page.read_text(encoding="utf-8")
    name = page_name(page)
    spans = []
    for finder in finders():
        if finder.pages is not None and name not in finder.pages:
            continue
        for pattern in finder.patterns:
            for match in pattern.finditer(text):
                if match.end() > match.start():
                    spans.append((match.start(), match.end(), finder.holder))
    return spans


#: An inline code span of the prose: paired left to right, as Markdown pairs them.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)([\s\S]+?)(?<!`)\1(?!`)")


def registered_spans(page: Path, entries: tuple[Held, ...]) -> list[tuple[int, int, str]]:
    """The stretches of ``page`` that ``entries`` name: ``(start, end, by)``."""
    text = page.read_text(encoding="utf-8")
    name = page_name(page)
    spans = list(CODE_SPAN.finditer(prose(page)))
    found = []
    for entry in entries:
        if entry.page not in (name, "*"):
            continue
        pattern = phrase_pattern(entry.phrase)
        if entry.in_code:
            found += [(s.start(), s.end(), entry.by) for s in spans if pattern.fullmatch(s[0])]
        else:
            found += [(m.start(), m.end(), entry.by) for m in pattern.finditer(text)]
    return found


def unheld(page: Path) -> list[tuple[int, str]]:
    """The numbers of ``page``'s prose that nothing holds: ``(line, number)``."""
    spans = [
        *checked_spans(page),
        *registered_spans(page, REGISTRY),
        *registered_spans(page, NOT_FIGURES),
        *registered_spans(page, GIVENS),
    ]
    return [
        (line, number)
        for offset, line, number in numbers(page)
        if not any(start <= offset and offset + len(number) <= end for start, end, _ in spans)
    ]


#: How prose may write a number its code writes: as it is, as a percentage, in
#: milliseconds, in megabytes (``2%`` is 0.02, ``500 ms`` 0.5, ``200 MB`` 200e6).
SCALES = (1.0, 0.01, 0.001, 1e6)


def code_numbers(page: Path) -> set[float]:
    """Every number the page's code that runs (and the files it saves) writes."""
    runs = {"python", "pycon", "shell", "file"}
    text = "\n".join(block.text for block in blocks(page) if block.kind in runs)
    found = re.findall(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?", text)
    return {float(number.replace("_", "")) for number in found}


def not_in_code(entry: Held) -> list[str]:
    """The numbers of ``entry``'s phrase that its page's code does not write."""
    page = REPO / entry.page
    said = phrase_pattern(entry.phrase).search(page.read_text(encoding="utf-8"))
    written = code_numbers(page)
    return [
        number
        for number in NUMBER.findall(said[0] if said else "")
        if not any(
            math.isclose(float(number.replace(",", "")) * scale, value, rel_tol=1e-9)
            for scale in SCALES
            for value in written
        )
    ]
