"""Exercises that answer back: built from the solutions with otter-grader, and graded.

A solutions notebook (``notebooks/solutions/NN-name-solutions.ipynb``) is the
source of truth for its notebook's exercises. When it carries otter-grader's
markers (an ``# ASSIGNMENT CONFIG`` raw cell, and for each checkable exercise a
question named ``exercise_N``: its answer cell, ``# SOLUTION`` lines, and test
cells whose assertion messages are the hints) it is an otter *master*, and
:func:`build` makes from it:

- the student notebook's exercise cells: ``otter assign`` strips the answers
  (``x = ...``), and the student notebook ``notebooks/NN-name.ipynb`` gets,
  after the text of exercise N, its answer cell and a ``grader.check("exercise_N")``
  cell; one cell before the first exercise makes the ``grader``. Its tests go
  into the notebook's metadata, so the notebook checks itself wherever it is
  opened. The lesson's own cells, prose and widgets are left as they are; the
  exercise list is split into one markdown cell per exercise, its text unchanged.
- the grading bundle ``build/exercises/NN-name.zip`` (otter's autograder zip),
  which ``otter run`` and :func:`grade` use to score a collected notebook.

Adding a notebook's checks is adding its master: nothing here names a notebook.
A build is idempotent (generated cells are tagged and replaced), so a test can
prove that the committed notebooks are what a fresh build makes.

Command line, from the repository's root (``make exercises`` runs the first)::

    python -m pipeline.lessons.exercises build
    python -m pipeline.lessons.exercises grade ROOM_FOLDER [--out FOLDER]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from .._extras import require

require("pipeline.lessons.exercises", "grade")  # otter-grader, which brings nbformat too

import nbformat

with warnings.catch_warnings():
    # otter imports ipylab, whose 1.1 release passes a trait type where traitlets asks for an
    # instance (a DeprecationWarning at import, an error under pytest's warnings policy).
    warnings.filterwarnings("ignore", "Traits should be given as instances", DeprecationWarning)
    from otter.assign import main as otter_assign

from .prose import METADATA_KEY

__all__ = [
    "Grade",
    "build",
    "build_notebook",
    "grade",
    "main",
    "masters",
    "read_notebook",
    "split_exercises",
    "student_of",
]

CONFIG_MARK = "# ASSIGNMENT CONFIG"
"""The first line of the raw cell that makes a solutions notebook an otter master."""
GENERATED = ("exercise-grader", "exercise-answer", "exercise-check")
"""Tags of the code cells a build writes into a student notebook (and replaces next time)."""
PROSE_TAG = "exercise-prose"
"""Tag of the markdown cells split off the exercise list (joined again before a build)."""
QUESTION = re.compile(r"exercise_(\d+)")
CHECK = re.compile(r"""grader\.check\(["'](exercise_\d+)["']\)""")
ITEM = re.compile(r"^(\d+)\.\s")
SHARED = ("data", "docs")
"""The checkout's folders the notebooks read beside theirs (``../data/``, ``../docs/``)."""
# What `otter run` calls in the folders it makes (otter.run.main), without its copying; its
# notebook runs through nbclient, whose kernel replies are read even when a wake-up is lost.
_RUN_AUTOGRADER = (
    "import sys\n"
    "from pipeline.kernelpoll import install\n"
    "install()\n"
    "from otter.run.run_autograder import main\n"
    "main(sys.argv[1], otter_run=True, logo=False, debug=False)\n"
)
GRADER_CELL = """\
# The exercises answer back: fill in an answer cell, then run the grader.check cell after it.
import otter

grader = otter.Notebook("{name}")"""


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, or a ValueError that names the file and what is wrong."""
    try:
        return nbformat.read(path, as_version=4)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such notebook") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read ({error})") from None
    except Exception as error:  # nbformat's JSON, schema and version errors share no base
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"{path}: not a valid notebook ({first[:200]})") from None


def masters(root: Path) -> list[Path]:
    """The solutions notebooks under ``root/notebooks/solutions`` that are otter masters.

    Raises:
        ValueError: a solutions notebook cannot be read (the message names it).
    """
    found = []
    for path in sorted((root / "notebooks" / "solutions").glob("*-solutions.ipynb")):
        notebook = read_notebook(path)
        if any(c.cell_type == "raw" and c.source.startswith(CONFIG_MARK) for c in notebook.cells):
            found.append(path)
    return found


def student_of(master: Path) -> Path:
    """The student notebook a master's exercises belong to (``../NN-name.ipynb``)."""
    return master.parent.parent / (master.name.removesuffix("-solutions.ipynb") + ".ipynb")


def _assign(master: Path, out: Path) -> Path:
    """Run ``otter assign`` on ``master`` into ``out``; the student version's path."""
    shutil.rmtree(out, ignore_errors=True)
    # In this process: otter's imports take seconds, a build assigns every master.
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            otter_assign(str(master), str(out), no_pdfs=True, no_run_tests=True)
    except Exception as error:  # otter's own errors share no base: say which master it was
        raise ValueError(f"{master}: otter assign refused it: {error}") from error
    return out / "student" / master.name


def _questions(student: nbformat.NotebookNode) -> dict[int, str]:
    """Exercise number -> its stripped answer cell's source, from otter's student version."""
    found, answer = {}, None
    for cell in student.cells:
        if cell.cell_type != "code":
            continue
        if "otter_answer_cell" in cell.metadata.get("tags", []):
            answer = cell.source
        elif match := CHECK.search(cell.source):
            number = int(QUESTION.fullmatch(match.group(1)).group(1))
            if answer is None or number in found:
                raise ValueError(f"{match.group(1)} needs exactly one answer cell before its check")
            found[number], answer = answer, None
    return found


def _exercise_text(cells: list) -> tuple[int, int, str]:
    """Where the exercise list is: (first cell, end cell, its text joined again)."""
    start = next(
        (
            i
            for i, c in enumerate(cells)
            if c.cell_type == "markdown" and re.search(r"^## Exercises\s*$", c.source, re.M)
        ),
        None,
    )
    if start is None:
        raise ValueError("the student notebook has no '## Exercises' heading")
    end = start + 1
    while end < len(cells) and PROSE_TAG in cells[end].metadata.get("tags", []):
        end += 1
    return start, end, "\n\n".join(c.source.strip("\n") for c in cells[start:end])


def split_exercises(text: str) -> list[tuple[int | None, str]]:
    """A notebook's exercise text in pieces, each ``(N, item N)`` or ``(None, other text)``.

    The first piece runs up to the ``## Exercises`` heading, then one per numbered item,
    then the rest (links on). Joined with blank lines, the pieces are the text again.
    """
    lines = text.split("\n")
    heading = next(i for i, line in enumerate(lines) if re.match(r"^## Exercises\s*$", line))
    pieces: list[tuple[int | None, list[str]]] = [(None, lines[: heading + 1])]
    for line in lines[heading + 1 :]:
        number, own = pieces[-1]
        if match := ITEM.match(line):
            pieces.append((int(match.group(1)), [line]))
        elif number is not None and line.strip() and not line.startswith(" "):
            pieces.append((None, [line]))  # the first line after the list: the rest
        else:
            own.append(line)
    return [(n, "\n".join(own).strip("\n")) for n, own in pieces if "\n".join(own).strip()]


def _code(source: str, tag: str, cell_id: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [tag]
    cell["id"] = cell_id
    return cell


def build_notebook(master: Path, work: Path) -> nbformat.NotebookNode:
    """The student notebook of ``master`` with its exercise cells built afresh (not written)."""
    target = student_of(master)
    assigned = read_notebook(_assign(master, work))
    try:
        answers = _questions(assigned)
    except ValueError as error:
        raise ValueError(f"{master}: {error}") from None
    notebook = read_notebook(target)
    before = {cell.get("id"): cell for cell in notebook.cells}
    cells = [c for c in notebook.cells if not set(c.metadata.get("tags", [])) & set(GENERATED)]
    try:
        start, end, text = _exercise_text(cells)
    except ValueError as error:
        raise ValueError(f"{target}: {error}") from None
    pieces = split_exercises(text)
    missing = sorted(set(answers) - {n for n, _ in pieces if n is not None})
    if missing:
        raise ValueError(f"{master.name} checks exercises {missing}, not in {target.name}'s list")
    first = cells[start]
    built = []
    for index, (number, source) in enumerate(pieces):
        if index == 0:
            first.source = source
            built.append(first)
            grader = GRADER_CELL.format(name=target.name)
            built.append(_code(grader, GENERATED[0], "exercise-grader"))
            continue
        prose = nbformat.v4.new_markdown_cell(source)
        prose.metadata["tags"] = [PROSE_TAG]
        prose["id"] = f"exercise-{number}" if number is not None else "exercises-end"
        # its text's saved values (pipeline.lessons.prose) stay while its text does
        old = before.get(prose["id"])
        if old is not None and old.source == source and METADATA_KEY in old.metadata:
            prose.metadata[METADATA_KEY] = old.metadata[METADATA_KEY]
        built.append(prose)
        if number in answers:
            built.append(_code(answers[number], GENERATED[1], f"exercise-{number}-answer"))
            built.append(
                _code(
                    f'grader.check("exercise_{number}")', GENERATED[2], f"exercise-{number}-check"
                )
            )
    notebook.cells = cells[:start] + built + cells[end:]
    notebook.metadata["otter"] = assigned.metadata["otter"]
    return notebook


def build(root: Path, *, out: Path | None = None) -> list[Path]:
    """Build every master's student notebook (written in place) and grading bundle.

    Every notebook and bundle is built before the first is written: a master that
    fails leaves the checkout and ``out`` as they were.

    Args:
        root: the repository (holding ``notebooks/`` and ``notebooks/solutions/``).
        out: where the grading bundles go (default ``root/build/exercises``).

    Returns:
        The student notebooks written.

    Raises:
        ValueError: ``root`` has no masters, or a master or its student notebook
            cannot be built; the message names the folder or file.
    """
    solutions = root / "notebooks" / "solutions"
    if not solutions.is_dir():
        raise ValueError(
            f"{solutions}: no such folder; run from the repository's root, which holds "
            "notebooks/solutions/"
        )
    found = masters(root)
    if not found:
        raise ValueError(
            f"{solutions}: no otter masters (*-solutions.ipynb with an {CONFIG_MARK!r} raw cell)"
        )
    made = []
    with tempfile.TemporaryDirectory() as work:
        for master in found:
            target = student_of(master)
            dist = Path(work) / master.stem
            notebook = build_notebook(master, dist)
            bundles = sorted((dist / "autograder").glob("*.zip"))
            if not bundles:
                raise ValueError(f"{master}: otter assign made no grading bundle")
            made.append((target, nbformat.writes(notebook) + "\n", bundles[-1].read_bytes()))
    out = out or root / "build" / "exercises"
    out.mkdir(parents=True, exist_ok=True)
    for target, text, bundle in made:
        (out / f"{target.stem}.zip").write_bytes(bundle)
        if target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return [target for target, _, _ in made]


@dataclass(frozen=True)
class Grade:
    """One collected notebook's score, exercise by exercise.

    ``scores`` maps ``exercise_N`` to (points earned, points possible), the
    exercise's points shared evenly among its tests; ``score`` and ``possible``
    are their sums.
    ``feedback`` maps ``exercise_N`` to what ``grader.check`` would have shown
    the student: the hints of the tests that failed.
    """

    submission: str
    notebook: str
    scores: dict[str, tuple[float, float]]
    feedback: dict[str, str]

    @property
    def score(self) -> float:
        return sum(earned for earned, _ in self.scores.values())

    @property
    def possible(self) -> float:
        return sum(possible for _, possible in self.scores.values())


def _notebook_name(path: Path, known: set[str]) -> str:
    """Which workshop notebook a collected file is, from its metadata (otter's too)."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        name = notebook["metadata"]["otter"]["assignment_name"]
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        raise ValueError(
            f"{path}: not a workshop notebook with checks (no otter assignment name in its "
            "metadata); collect the notebooks the students saved, under any file name"
        ) from None
    if name not in known:
        raise ValueError(f"{path}: notebook {name!r} has no grading bundle; run make exercises")
    return name


def _run_otter(submission: Path, bundle: Path, folder: Path, checkout: Path) -> None:
    """Grade ``submission`` with ``bundle`` as ``otter run`` does; its results.json into ``folder``.

    ``otter run`` copies a submission into ``autograder/submission/`` of a fresh
    temporary folder and runs it there, where a notebook's ``../data/`` is not
    the checkout's: every answer after the first read of a file would score 0.
    The same folders are made here, with the checkout's shared folders
    (:data:`SHARED`) linked beside ``submission/`` as they are beside ``notebooks/``.
    """
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        autograder = Path(tmp) / "autograder"
        for part in ("source", "submission", "results"):
            (autograder / part).mkdir(parents=True)
        (autograder / "submission_metadata.json").write_text("{}")
        with zipfile.ZipFile(bundle) as archive:
            archive.extractall(autograder / "source")
        shutil.copy(submission, autograder / "submission")
        for name in SHARED:
            if (checkout / name).is_dir():
                (autograder / name).symlink_to(checkout / name, target_is_directory=True)
        done = subprocess.run(
            [sys.executable, "-c", _RUN_AUTOGRADER, str(autograder)],
            capture_output=True,
            text=True,
            cwd=autograder,
        )
        results = autograder / "results" / "results.json"
        if done.returncode != 0 or not results.exists():
            lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
            raise RuntimeError(f"otter run failed on {submission}: {lines[-1]}")
        shutil.copy(results, folder / "results.json")


def grade(room: Path, *, bundles: Path, out: Path, checkout: Path | None = None) -> list[Grade]:
    """Grade every ``*.ipynb`` in ``room`` with ``otter run`` and its notebook's bundle.

    Each submission runs from the top in a fresh kernel, then its exercises'
    tests score it. ``out`` gets one folder per submission (otter's
    ``results.json``) and ``grades.csv``: one row per submission, one column
    per exercise (points earned), then the total and the points possible.

    Args:
        room: the folder of collected notebooks, under any file names
            (``01-backpressure-ada.ipynb``): each says in its metadata which
            notebook it is.
        bundles: the folder of grading bundles :func:`build` wrote.
        out: the folder for results (created).
        checkout: the repository whose ``data/`` and ``docs/`` the notebooks
            read (``../data/``); by default the one this package is in.

    Raises:
        ValueError: a file in ``room`` is not a graded notebook (before any grading).
    """
    room, bundles, out = room.resolve(), bundles.resolve(), out.resolve()
    checkout = Path(__file__).resolve().parents[2] if checkout is None else checkout.resolve()
    known = {path.stem for path in bundles.glob("*.zip")}
    submissions = sorted(room.glob("*.ipynb"))
    names = [_notebook_name(path, known) for path in submissions]
    out.mkdir(parents=True, exist_ok=True)
    grades = []
    for path, name in zip(submissions, names, strict=True):
        folder = out / path.stem
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        _run_otter(path, bundles / f"{name}.zip", folder, checkout)
        results = json.loads((folder / "results.json").read_text())
        exercises = sorted(
            (test for test in results["tests"] if "score" in test),  # not the summary entry
            key=lambda test: int(test["name"].split("_")[1]),
        )
        scores = {t["name"]: (float(t["score"]), float(t["max_score"])) for t in exercises}
        feedback = {t["name"]: t.get("output", "") for t in exercises}
        grades.append(Grade(path.name, name, scores, feedback))
    exercises = sorted({q for g in grades for q in g.scores}, key=lambda q: int(q.split("_")[1]))
    with (out / "grades.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["submission", "notebook", *exercises, "score", "possible"])
        for g in grades:
            earned = [g.scores[q][0] if q in g.scores else "" for q in exercises]
            writer.writerow([g.submission, g.notebook, *earned, g.score, g.possible])
    return grades


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """``build`` the exercises, or ``grade`` a room's collected notebooks."""
    parser = _Parser(prog="python -m pipeline.lessons.exercises")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="student notebooks and grading bundles from the solutions")
    grading = commands.add_parser("grade", help="score a folder of collected notebooks")
    grading.add_argument("room", type=Path, help="folder of collected .ipynb files")
    grading.add_argument("--out", type=Path, default=Path("build/grades"))
    grading.add_argument("--bundles", type=Path, default=Path("build/exercises"))
    args = parser.parse_args(argv)
    if args.command == "build":
        try:
            built = build(Path.cwd())
        except ValueError as error:
            parser.error(str(error))
        for path in built:
            print(f"built {path}")
        return 0
    if not args.room.is_dir():
        parser.error(f"room must be a folder of notebooks, got {str(args.room)!r}")
    if not sorted(args.bundles.glob("*.zip")):
        parser.error(f"--bundles has no grading bundles ({args.bundles}): run make exercises")
    try:
        grades = grade(args.room, bundles=args.bundles, out=args.out)
    except ValueError as error:
        parser.error(str(error))
    for g in grades:
        print(f"{g.submission}: {g.score:g} / {g.possible:g}")
    print(f"wrote {args.out / 'grades.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
