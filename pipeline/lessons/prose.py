"""The notebooks' prose numbers, computed by a seeded run and saved with each notebook.

A markdown cell quotes a number from the run as a MyST inline expression,
``{eval}`f"{wait:.2f}"` ``. jupyterlab-myst evaluates it in the kernel when the
cell runs, and shows the value it finds in the cell's ``user_expressions``
metadata whenever it renders the cell: before Run All, that is the value saved
with the notebook. Without one, a reader who opens the notebook sees the
expression's source where the number should be. So every notebook is
committed with the values of one seeded run, in exactly the form
jupyterlab-myst saves them (one ``{"expression", "result"}`` per expression of
the cell, in order; ``result`` is the kernel's ``user_expressions`` reply, a
plain-text value), and nothing else of a run.

Most values are fixed by the notebooks' seeds and must match a fresh run
exactly. Those the machine decides (real-time measurements: a real pipeline's
duration in 00 and 04, a real call desk in 11, everything notebooks 07 and 09
measure of live runs and a real HTTP service) are listed in
:data:`MACHINE_DEPENDENT` with their tolerance; a refresh keeps their saved text
while it is within that tolerance, so a rerun does not churn the files.

Command line, from the repository's root (``make prose`` runs it on every notebook)::

    python -m pipeline.lessons.prose [NOTEBOOK ...]

It runs each notebook top to bottom in a fresh kernel (as Run All does), then
evaluates every inline expression and writes the values into the notebook.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import nbformat

from ..kernelcurve import encrypt_by_default
from ..kernelpoll import install

__all__ = [
    "EVAL",
    "MACHINE_DEPENDENT",
    "MEASURED",
    "METADATA_KEY",
    "Tolerance",
    "differences",
    "evaluate",
    "expressions",
    "main",
    "notebooks",
    "refresh",
    "saved",
    "shape",
    "stamp",
    "tolerance",
]

EVAL = re.compile(r"\{eval\}`([^`]*)`")
"""A MyST inline expression in markdown: ``{eval}`expression` ``."""

METADATA_KEY = "user_expressions"
"""The markdown cell's metadata key where jupyterlab-myst keeps its expressions' values."""

TIMEOUT_S = 600
"""Seconds a cell, or the evaluation of a cell's expressions, may take."""


@dataclass(frozen=True)
class Tolerance:
    """How far a value the machine decides may move between two runs.

    Two texts agree when they read the same with their numbers taken out, and
    each pair of numbers is within a ratio of ``factor`` of each other, or
    within ``digits`` units of the last digit the saved text shows (for values
    near zero: ``0`` and ``3`` retries, ``0.04`` and ``0.07`` s). ``words`` lets
    the text differ entirely, for a value whose sign or wording a run decides.

    Attributes:
        factor: the largest ratio between the two numbers (>= 1).
        digits: units of the saved number's last shown digit that always agree.
        words: the text may differ entirely.
    """

    factor: float = 1.0
    digits: int = 0
    words: bool = False

    def agrees(self, saved_text: str, fresh_text: str) -> bool:
        """Whether ``fresh_text`` is within this tolerance of ``saved_text``."""
        if self.words:
            return True
        if NUMBER.sub("#", saved_text) != NUMBER.sub("#", fresh_text):
            return False
        for shown, other in zip(
            NUMBER.findall(saved_text), NUMBER.findall(fresh_text), strict=True
        ):
            a, b = (float(text.replace(",", "")) for text in (shown, other))
            decimals = len(shown.split(".")[1]) if "." in shown else 0
            if abs(a - b) <= self.digits * 10.0**-decimals * (1 + 1e-9):
                continue
            if a == 0 or b == 0 or (a < 0) != (b < 0) or max(a / b, b / a) > self.factor:
                return False
        return True


NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
"""A number as a value's text shows it (a sign stays in the text around it)."""

# A measurement of real time on a shared machine: one run's wall times vary up to 1.6x
# (NOTES.md), and a loaded machine or a slower one moves them further. Within a factor
# of 10, its order of magnitude, is what the prose can claim of such a figure before the
# reader's own run (or 5 units of its last digit, for small counts and short times).
MEASURED = Tolerance(factor=10.0, digits=5)
_ANY = Tolerance(words=True)

MACHINE_DEPENDENT: dict[str, dict[str, Tolerance]] = {
    # a real pipeline's run on the kernel's loop, beside the simulation's figures
    "00": {
        "f\"{s['wall_time_s']:.2f}\"": MEASURED,
        "f\"{s['sim_time_s'] / s['wall_time_s']:,.0f}\"": MEASURED,
        'f"{report.duration_s:.2f}"': MEASURED,
        'f"{one.duration_s:.2f}"': MEASURED,
        'f"{ten.duration_s:.2f}"': MEASURED,
        'f"{one.duration_s / ten.duration_s:.1f}"': MEASURED,
    },
    # a real drain's duration
    "04": {
        'f"{report.duration_s:.2f}"': MEASURED,
        'f"{pipe.report.duration_s:.2f}"': MEASURED,
    },
    # the whole notebook measures real runs: a live pipeline, CPU use, real dead letters
    "07": {
        "*": MEASURED,
        "f\"{closer.split(', ')[1]}\"": _ANY,  # which twin came closer
        # whether the queue builds at all, live and in the 4-worker twin that replays the
        # durations measured live, depends on how busy the machine was: a peak of 93 and
        # 0.85 s blocked on a loaded machine, 7 and 0.00 s on a quiet one
        "f\"{peak['live']:.0f}\"": _ANY,
        "f\"{blocked['live']:.2f}\"": _ANY,
        "f\"{peak['twin, 4 workers']:.0f}\"": _ANY,
        "f\"{blocked['twin, 4 workers']:.2f}\"": _ANY,
        "f\"{', '.join(sorted({l.errors[-1].type for l in again.dead_letters}))}\"": _ANY,
    },
    # the whole notebook measures a real HTTP service and a real ingestion against it
    "09": {
        "*": MEASURED,
        'f"{server.url}"': _ANY,  # a free port
        "f\"{row['relative_error']:+.1%}\"": _ANY,  # a difference of two measurements
        # the family calibration picks for measured service times (log-normal, empirical)
        'f"{fetch.service.family}"': _ANY,
        'f"{write.service.family}"': _ANY,
    },
    # a real call desk on the wall clock: how long the premium calls took, who hung up
    "11": {
        'f"{last_premium_ms:.0f}"': MEASURED,
        'f"{len(standard_ids)}"': MEASURED,
        'f"{len(desk_report.expired)}"': MEASURED,
    },
}
"""Expressions whose value the machine decides, by notebook number (its name's first
field: a notebook and its solutions share it), with how far a fresh run may move them;
``"*"`` is every other expression of that notebook. Every other value must be exactly
its saved text."""


def tolerance(path: Path, expression: str) -> Tolerance | None:
    """How far ``expression``'s value in the notebook at ``path`` may move (None: not at all)."""
    loose = MACHINE_DEPENDENT.get(path.name.split("-", 1)[0], {})
    return loose.get(expression, loose.get("*"))


def expressions(source: str) -> list[str]:
    """The inline expressions of a markdown cell's ``source``, in order."""
    return EVAL.findall(source)


def saved(cell: dict) -> list[dict]:
    """The values a markdown cell carries (``[]`` when it has none)."""
    return list(cell.get("metadata", {}).get(METADATA_KEY, []))


def _text(entry: dict) -> str | None:
    result = entry.get("result", {})
    if result.get("status") != "ok":
        return None
    return result.get("data", {}).get("text/plain")


def shape(cell: dict) -> list[str]:
    """What is wrong with the form of a cell's saved values; empty when right.

    A markdown cell with inline expressions carries one value per expression, in
    order, each exactly ``{"expression": ..., "result": {"status": "ok", "data":
    {"text/plain": ...}, "metadata": {}}}``; any other cell carries none.
    """
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source  # as the .ipynb stores it
    found = expressions(source) if cell.get("cell_type") == "markdown" else []
    metadata = cell.get("metadata", {})
    if not found:
        stray = METADATA_KEY in metadata
        return [f"{METADATA_KEY} on a cell without inline expressions"] if stray else []
    if METADATA_KEY not in metadata:
        return [f"no saved values for its {len(found)} inline expression(s)"]
    have = metadata[METADATA_KEY]
    if (
        not isinstance(have, list)
        or [entry.get("expression") if isinstance(entry, dict) else None for entry in have] != found
    ):
        return ["saved values are not those of its expressions"]
    problems = []
    for entry in have:
        result = entry.get("result")
        plain = (
            isinstance(result, dict)
            and result.get("status") == "ok"
            and result.get("metadata") == {}
            and set(result) == {"status", "data", "metadata"}
            and isinstance(result.get("data"), dict)
            and set(result["data"]) == {"text/plain"}
            and isinstance(result["data"]["text/plain"], str)
        )
        if set(entry) != {"expression", "result"} or not plain:
            problems.append(f"{{eval}}`{entry['expression']}` is not saved as one plain-text value")
    return problems


def differences(path: Path, notebook: nbformat.NotebookNode, fresh: list[list[dict]]) -> list[str]:
    """Where ``notebook``'s saved values differ from ``fresh`` (:func:`evaluate`'s, per cell).

    Each cell's values must have the form :func:`shape` asks for, and each must
    equal the fresh one, or be within the expression's :data:`MACHINE_DEPENDENT`
    tolerance.
    """
    problems = []
    for index, (cell, values) in enumerate(zip(notebook.cells, fresh, strict=True)):
        where = f"{path.name} cell {index}"
        wrong = shape(cell)
        problems += [f"{where}: {problem}" for problem in wrong]
        if wrong:
            continue
        for entry, value in zip(saved(cell), values, strict=True):
            got, want = _text(entry), _text(value)
            allowed = tolerance(path, value["expression"])
            same = got == want or (
                want is not None and allowed is not None and allowed.agrees(got, want)
            )
            if not same:
                problems.append(
                    f"{where}: {{eval}}`{value['expression']}` saved {got}, the run gives "
                    f"{want if want is not None else value['result']}"
                )
    return problems


def evaluate(client: Any, notebook: nbformat.NotebookNode) -> list[list[dict]]:
    """Every markdown cell's expressions evaluated by ``client``'s kernel, per cell.

    ``client`` is a blocking ``jupyter_client`` kernel client whose kernel has run
    the notebook's code. Each value is what jupyterlab-myst asks and saves: an
    ``execute_request`` with empty code and the cell's expressions as
    ``user_expressions``; only the plain-text form of a value is kept, the form
    it shows.

    Raises:
        RuntimeError: the kernel refused the request.
    """
    values: list[list[dict]] = []
    for cell in notebook.cells:
        found = expressions(cell.source) if cell.cell_type == "markdown" else []
        if not found:
            values.append([])
            continue
        asked = {str(i): text for i, text in enumerate(found)}
        reply = client.execute_interactive(
            "", user_expressions=asked, store_history=False, timeout=TIMEOUT_S,
            output_hook=lambda message: None,
        )  # fmt: skip
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the kernel refused the expressions {found}")
        answers = reply["content"]["user_expressions"]
        cell_values = []
        for key, text in asked.items():
            result = dict(answers[key])
            if result.get("status") == "ok":
                plain = result.get("data", {}).get("text/plain")
                result = {"status": "ok", "data": {"text/plain": plain}, "metadata": {}}
            cell_values.append({"expression": text, "result": result})
        values.append(cell_values)
    return values


def stamp(path: Path, notebook: nbformat.NotebookNode, fresh: list[list[dict]]) -> None:
    """Save ``fresh`` into ``notebook``'s markdown cells, keeping a machine-dependent
    saved value that is still within its tolerance (so a rerun changes no file)."""
    for cell, values in zip(notebook.cells, fresh, strict=True):
        if not values:
            cell.metadata.pop(METADATA_KEY, None)
            continue
        before = {entry.get("expression"): entry for entry in saved(cell)}
        kept = []
        for value in values:
            old = before.get(value["expression"])
            allowed = tolerance(path, value["expression"])
            old_text, new_text = (None, None) if old is None else (_text(old), _text(value))
            if allowed is not None and old_text is not None and new_text is not None:
                kept.append(old if allowed.agrees(old_text, new_text) else value)
            else:
                kept.append(value)
        cell.metadata[METADATA_KEY] = kept


def _run(client: Any, path: Path, notebook: nbformat.NotebookNode) -> None:
    """Run ``notebook``'s code cells in order, as Run All does; a cell that raises stops it."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        reply = client.execute_interactive(
            cell.source, store_history=True, timeout=TIMEOUT_S, output_hook=lambda message: None
        )
        content = reply["content"]
        if content["status"] != "ok":
            raise RuntimeError(
                f"{path} cell {index} raised {content.get('ename')}: {content.get('evalue')}"
            )


def refresh(path: Path) -> bool:
    """Run the notebook at ``path`` in a fresh kernel and save its prose values.

    Returns:
        Whether the file changed.

    Raises:
        RuntimeError: a cell raised (the file is left as it was).
    """
    from jupyter_client.manager import start_new_kernel

    install()  # a reply whose socket wake-up was lost is read within a second
    notebook = nbformat.read(path, as_version=4)
    encrypt_by_default()  # CurveZMQ keys for the kernel's channels, where they can be had
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(path.parent))
    try:
        _run(client, path, notebook)
        fresh = evaluate(client, notebook)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    failed = [
        f"cell {index}: {{eval}}`{value['expression']}` raised {value['result'].get('ename')}"
        for index, values in enumerate(fresh)
        for value in values
        if value["result"].get("status") != "ok"
    ]
    if failed:
        raise RuntimeError(f"{path}: " + "; ".join(failed))
    stamp(path, notebook, fresh)
    text = nbformat.writes(notebook) + "\n"
    if path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def notebooks(root: Path) -> list[Path]:
    """The repository's notebooks: ``notebooks/`` and its solutions."""
    found = sorted((root / "notebooks").rglob("*.ipynb"))
    return [path for path in found if ".ipynb_checkpoints" not in path.parts]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: Iterable[str] | None = None) -> int:
    """Refresh the prose values of the named notebooks (every notebook by default)."""
    parser = _Parser(prog="python -m pipeline.lessons.prose", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/**/*.ipynb")
    args = parser.parse_args(None if argv is None else list(argv))
    paths = args.notebooks or notebooks(Path.cwd())
    if not paths:
        parser.error("no notebooks: run from the repository's root, or name .ipynb files")
    for path in paths:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"notebook must be an existing .ipynb file, got {str(path)!r}")
    for path in paths:
        try:
            changed = refresh(path)
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"{'wrote' if changed else 'unchanged'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
