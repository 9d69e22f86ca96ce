"""The exercises answer back: built from the solutions, checked by otter, graded for a room.

The committed student notebooks must be what a fresh build makes (they are what
``make lab`` opens, so they are committed; this test keeps anyone from editing
their exercise cells by hand). nbval runs each solutions notebook whole, so its
test cells (the same code otter extracts) prove there that the worked answers pass
(and its wrong answers are tried after its last cell: ``tests/lessons/wrong_answers.py``),
and nbval runs the untouched student
notebooks, which proves that their placeholders break no later cell. Here otter
itself runs the checks: on the untouched answers (a hint for every test, never
an error from the test's own code), on wrong answers (the hint that fits), and
for a trainer, grading a solved and an untouched notebook with ``otter run``.
"""

from __future__ import annotations

import ast
import csv
import json
import shutil
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from pipeline.lessons import exercises
from pipeline.lessons.exercises import GENERATED, build_notebook, masters, student_of
from pipeline.sim import theory

with warnings.catch_warnings():  # as pipeline.lessons.exercises does: ipylab's import warns
    warnings.filterwarnings("ignore", "Traits should be given as instances", DeprecationWarning)
    import otter

ROOT = Path(__file__).resolve().parents[2]
MASTERS = masters(ROOT)
IDS = [path.name.removesuffix("-solutions.ipynb") for path in MASTERS]


def _answers(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """``exercise_N`` -> the source of its answer cell in a built student notebook."""
    return {
        cell.id.removesuffix("-answer").replace("-", "_"): cell.source
        for cell in notebook.cells
        if "exercise-answer" in cell.metadata.get("tags", [])
    }


def _placeholders(source: str) -> dict[str, object]:
    """What an untouched answer cell binds: every name to ``...``."""
    env: dict[str, object] = {}
    exec(source, env)
    return {name: value for name, value in env.items() if name != "__builtins__"}


def test_there_are_masters_and_each_has_its_student_notebook():
    assert len(MASTERS) >= 1
    for master in MASTERS:
        assert student_of(master).exists(), f"{master.name} has no student notebook"


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_the_committed_student_notebook_is_a_fresh_build(master, tmp_path):
    built = nbformat.writes(build_notebook(master, tmp_path / "dist")) + "\n"
    committed = student_of(master).read_text(encoding="utf-8")
    assert committed == built, (
        f"{student_of(master).name} differs from what its solutions build: edit the lesson or "
        "the master, then run `make exercises` (never the generated exercise cells by hand)"
    )


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_every_test_of_a_master_states_its_hint(master):
    notebook = nbformat.read(master, as_version=4)
    inside, tests = False, 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "raw":
            inside = {"# BEGIN TESTS": True, "# END TESTS": False}.get(cell.source.strip(), inside)
            continue
        if not inside:
            continue
        tests += 1
        asserts = [n for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Assert)]
        assert asserts, f"{master.name} cell {index}: a test without an assert"
        silent = [ast.unparse(a.test) for a in asserts if a.msg is None]
        assert not silent, f"{master.name} cell {index}: asserts without a hint: {silent}"
    assert tests >= 1


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_an_untouched_notebook_gets_a_hint_from_every_test(master, monkeypatch):
    # otter, in this process, on what the untouched answer cells bind (``...``): each test
    # must fail on its own assertion, whose message is the hint, before it uses anything
    # from the lesson (none is bound here), so that no student sees a test's own error.
    student = student_of(master)
    notebook = nbformat.read(student, as_version=4)
    answers = _answers(notebook)
    assert set(answers) == set(notebook.metadata["otter"]["tests"])
    monkeypatch.chdir(student.parent)
    grader = otter.Notebook(student.name)
    for question, source in answers.items():
        assert set(_placeholders(source).values()) == {...}, f"{question}: answers left in"
        result = grader.check(question, global_env=_placeholders(source))
        assert result.test_case_results, question
        for case in result.test_case_results:
            assert not case.passed, f"{question} passes untouched"
            last = case.message.strip().splitlines()[-1]
            assert last.startswith("AssertionError: ") and len(last) > 40, (
                f"{question} fails untouched with {last!r}, not a hint"
            )
        assert "Traceback" not in str(result)


def _lesson_env(student: Path, needed: set[str]) -> dict[str, object]:
    """Run the student notebook's code cells here until ``needed`` are bound.

    The figures those cells draw are closed again: only the names are wanted, and a pyplot
    figure left open would outlive this test (the suite fails the next test that sees one).
    """
    env: dict[str, object] = {}
    try:
        for cell in nbformat.read(student, as_version=4).cells:
            if needed <= env.keys():
                return env
            if cell.cell_type == "code":
                lines = [line for line in cell.source.splitlines() if not line.startswith("%")]
                exec("\n".join(lines), env)
        raise AssertionError(f"{student.name} never binds {needed - env.keys()}")
    finally:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close("all")


def _hints(result) -> list[str]:
    return [c.message.strip().splitlines()[-1] for c in result.test_case_results if not c.passed]


def test_a_wrong_answer_gets_the_hint_that_fits(monkeypatch):
    student = ROOT / "notebooks" / "01-backpressure.ipynb"
    monkeypatch.chdir(student.parent)
    env = _lesson_env(student, {"bounded", "b", "sb"})
    grader = otter.Notebook(student.name)
    sb = env["sb"]
    env.update(
        smaller_memory_peak_bytes=sb["memory_peak_bytes"],  # the 50-slot run's
        smaller_upstream_peak=sb["upstream_backlog_max"],
        smaller_mean_wait_s=1.0,
    )
    hints = _hints(grader.check("exercise_1", global_env=env))
    assert len(hints) == 3
    assert "at most 10 queued and 4 running" in hints[0]
    assert "more of it waits upstream" in hints[1]
    assert "it does not remove it" in hints[2]
    # Too small a queue sheds too much; too big a one is not the smallest. Either way its
    # memory bound, however consistent with it, is not the bound asked for.
    env.update(smallest_shedding_queue=50, its_memory_bound_bytes=(50 + 4) * 64 * 1024)
    assert _hints(grader.check("exercise_2", global_env=env)) == [
        "AssertionError: That queue sheds 1% of items or more: try bigger sizes (the share falls "
        "as it grows).",
        "AssertionError: Find the smallest queue first (smallest_shedding_queue): the bound asked "
        "for is the bound of that queue.",
    ]
    env.update(smallest_shedding_queue=800, its_memory_bound_bytes=800 * 64 * 1024)
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 2
    assert "One slot fewer still sheds under 1%" in hints[0]
    assert "Find the smallest queue first" in hints[1]


def test_notebook_11s_wrong_answers_get_the_hints_that_fit(monkeypatch):
    # Its checks compute what they compare with from the formulas, with no lesson name bound:
    # the likely slips (the notebook's fifth for half, one agent too few or too many, the
    # patience's share for the deadline's) each get their own hint.
    student = ROOT / "notebooks" / "11-who-waits.ipynb"
    monkeypatch.chdir(student.parent)
    grader = otter.Notebook(student.name)
    fifth = theory.mmc_priority([0.64, 2.56], 1.0, 4)
    hints = _hints(
        grader.check(
            "exercise_1",
            global_env={
                "half_premium_wait_s": fifth.wait_mean_s[0],
                "half_standard_wait_s": fifth.wait_mean_s[1],
                "premium_still_worth_much": False,
            },
        )
    )
    assert len(hints) == 3
    assert "a fifth premium" in hints[0] and "wait_mean_s[1]" in hints[1]
    env = {"deadline_gives_up": "more", "deadline_expired_fraction": 0.043}
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 2 and "Only those who wait how long?" in hints[0]
    assert "max_wait_s=300.0" in hints[1]
    env = {"agents_for_premium": 4, "standard_wait_then_s": 0.18, "agents_for_everyone": 7}
    hints = _hints(grader.check("exercise_3", global_env=env))
    assert len(hints) == 3
    assert "still over 0.1 s: add agents" in hints[0] and "look for the fewest" in hints[2]
    right = theory.mmc_priority([0.64, 2.56], 1.0, 5).wait_mean_s[1]
    env.update(agents_for_premium=5, standard_wait_then_s=right, agents_for_everyone=6)
    assert _hints(grader.check("exercise_3", global_env=env)) == []


def test_notebook_09s_wrong_answers_get_the_hints_that_fit(monkeypatch):
    # Its exercises run against a live partner, and its twins are calibrated from timings this
    # machine measured: the checks compare an answer with the twins' own predictions, never
    # with a band that a loaded machine can leave. The likely slips (four servers for four
    # workers, four times the throughput, the first fetch counted, a percentage, a ratio for a
    # slowdown) each get their own hint.
    student = ROOT / "notebooks" / "09-from-a-real-run-to-its-twin.ipynb"
    monkeypatch.chdir(student.parent)
    grader = otter.Notebook(student.name)
    itself, predicted = {"throughput_per_s": 200.0}, {"throughput_per_s": 196.0}
    twins = {"itself": itself, "predicted": predicted}
    env = {"more_writers": "faster", "twin_write_servers": 4, "more_writers_speedup": 4.0}
    hints = _hints(grader.check("exercise_1", global_env=env | twins))
    assert len(hints) == 3
    assert "how many writers does SQLite" in hints[0] and "min(workers" in hints[1]
    assert "not four times the throughput" in hints[2]
    env.update(twin_write_servers=2, more_writers_speedup=1.6)
    hints = _hints(grader.check("exercise_1", global_env=env | twins))
    assert len(hints) == 3 and "SQLite has one writer" in hints[1]
    assert "predict a ratio of 0.98" in hints[2]
    env = {"more_writers": "no faster", "twin_write_servers": 1, "more_writers_speedup": 0.98}
    assert _hints(grader.check("exercise_1", global_env=env | twins)) == []
    # A machine whose load made the twin's what-if slower: the twins' ratio is the answer.
    slow = {"itself": itself, "predicted": {"throughput_per_s": 150.0}}
    assert _hints(grader.check("exercise_1", global_env=env | slow))[0].endswith("another run's.")
    env.update(more_writers_speedup=0.75)
    assert _hints(grader.check("exercise_1", global_env=env | slow)) == []

    twins = {"itself": itself, "predicted_flaky": {"throughput_per_s": 182.0}}  # 9% slower
    env = {"flaky_refetches_per_page": 1.11, "flaky_slowdown": 15.0}
    hints = _hints(grader.check("exercise_2", global_env=env | twins))
    assert len(hints) == 2
    assert "not the first one" in hints[0] and "not a percentage" in hints[1]
    env.update(flaky_refetches_per_page=0.5, flaky_slowdown=0.91)
    hints = _hints(grader.check("exercise_2", global_env=env | twins))
    assert len(hints) == 2 and "0.1 + 0.1**2" in hints[0] and "1 minus it" in hints[1]
    for wrong in (-0.09, 0.01, 0.2):  # the sign turned, far too small, too big
        env.update(flaky_slowdown=wrong)
        assert "predict 0.090" in _hints(grader.check("exercise_2", global_env=env | twins))[1]
    env.update(flaky_refetches_per_page=0.1, flaky_slowdown=0.09)  # p alone is close enough
    assert _hints(grader.check("exercise_2", global_env=env | twins)) == []
    # A loaded machine whose twin found writing the bottleneck: no slowdown is then right.
    still = {"itself": itself, "predicted_flaky": {"throughput_per_s": 200.5}}
    env.update(flaky_slowdown=-0.0025)
    assert _hints(grader.check("exercise_2", global_env=env | still)) == []


def test_the_split_exercise_list_keeps_its_text():
    text = (
        "## Summary\n\n- a point\n\n## Exercises\n\n1. **One.** Do it\n   over two lines.\n"
        "2. **Two.** Again.\n\n   A second paragraph.\n\n"
        "Solutions: [s](s.ipynb)\n\n---\n\n[Next](n)"
    )
    pieces = exercises.split_exercises(text)
    assert [n for n, _ in pieces] == [None, 1, 2, None]
    assert "\n\n".join(p for _, p in pieces) == text.replace("lines.\n2.", "lines.\n\n2.")
    assert pieces[2][1] == "2. **Two.** Again.\n\n   A second paragraph."


@pytest.mark.slow
def test_a_trainer_grades_a_solved_and_an_untouched_notebook(tmp_path):
    # The commands of docs/workshop.md: bundles built from the solutions, then a room's
    # folder of notebooks graded with otter run, one fresh kernel each.
    master = ROOT / "notebooks" / "solutions" / "01-backpressure-solutions.ipynb"
    student = student_of(master)
    bundles = tmp_path / "bundles"
    work = tmp_path / "dist"
    build_notebook(master, work)
    bundles.mkdir()
    shutil.copyfile(next((work / "autograder").glob("*.zip")), bundles / "01-backpressure.zip")
    room = tmp_path / "room"
    room.mkdir()
    shutil.copyfile(student, room / "ada.ipynb")  # handed in untouched
    solved = json.loads(master.read_text())  # every answer right, saved from JupyterLab
    solved["metadata"]["otter"] = json.loads(student.read_text())["metadata"]["otter"]
    (room / "grace.ipynb").write_text(json.dumps(solved))
    grades = exercises.grade(room, bundles=bundles, out=tmp_path / "grades")
    untouched, right = grades
    assert (untouched.submission, right.submission) == ("ada.ipynb", "grace.ipynb")
    assert right.score == right.possible == untouched.possible == 8
    assert untouched.score == 0
    assert "Set smallest_shedding_queue to a queue_maxsize" in untouched.feedback["exercise_2"]
    assert "Traceback" not in "".join(untouched.feedback.values())
    with (tmp_path / "grades" / "grades.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [(r["submission"], r["score"], r["possible"]) for r in rows] == [
        ("ada.ipynb", "0.0", "8.0"),
        ("grace.ipynb", "8.0", "8.0"),
    ]
    assert rows[1]["exercise_3"] == "2.0"


def test_notebook_12s_wrong_answers_get_the_hints_that_fit(monkeypatch):
    # Its checks are the loop's arithmetic, with no lesson name bound: the likely slips (the
    # budget's ratio without its floor, the margin without the floor, a storm that "drains",
    # one attempt too many) each get their own hint.
    student = ROOT / "notebooks" / "12-retry-storms.ipynb"
    monkeypatch.chdir(student.parent)
    grader = otter.Notebook(student.name)
    env = {"default_budget_retries_per_s": 20.0, "default_budget_recovers": True}
    hints = _hints(grader.check("exercise_1", global_env=env))
    assert len(hints) == 2 and "the ratio's part alone" in hints[0]
    assert "can its backlog drain?" in hints[1]
    env = {"largest_ratio": 0.25, "drain_at_0_2_per_s": 5.0, "recovers_at_0_2": True}
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 3 and "takes its share of the margin" in hints[0]
    assert "the floor's 1" in hints[1] and "drain by a few a second" in hints[2]
    env = {"largest_max_attempts": 2, "attempts_per_item_with_one_more": 3.24}
    hints = _hints(grader.check("exercise_3", global_env=env))
    assert len(hints) == 2 and "it sticks" in hints[0] and "max_attempts=2" in hints[1]
    env = {"default_budget_retries_per_s": 30.0, "default_budget_recovers": False}
    assert _hints(grader.check("exercise_1", global_env=env)) == []


@pytest.mark.slow
def test_a_notebook_that_reads_the_data_folder_is_graded_with_it(tmp_path):
    # otter run copies a submission into a temporary folder of its own, where notebook 10's
    # ../data/ reads found nothing: every answer after them scored 0. The room's folder is
    # anywhere, and nothing is linked beside it: grading gives the notebook the checkout's.
    master = ROOT / "notebooks" / "solutions" / "10-from-your-dashboard-to-a-plan-solutions.ipynb"
    student = student_of(master)
    work, bundles, room = tmp_path / "dist", tmp_path / "bundles", tmp_path / "far" / "room"
    build_notebook(master, work)
    bundles.mkdir()
    shutil.copyfile(next((work / "autograder").glob("*.zip")), bundles / f"{student.stem}.zip")
    room.mkdir(parents=True)
    shutil.copyfile(student, room / "ada.ipynb")
    solved = json.loads(master.read_text().replace("../../data/", "../data/"))  # as a student's
    solved["metadata"]["otter"] = json.loads(student.read_text())["metadata"]["otter"]
    (room / "grace.ipynb").write_text(json.dumps(solved))
    untouched, right = exercises.grade(room, bundles=bundles, out=tmp_path / "grades")
    assert right.possible > 0 and right.score == right.possible
    assert untouched.score == 0 and untouched.possible == right.possible
    feedback = "".join(untouched.feedback.values())
    assert "Set " in feedback and "Traceback" not in feedback and "FileNotFound" not in feedback


def test_grading_refuses_a_file_that_is_not_a_workshop_notebook(tmp_path):
    (tmp_path / "bundles").mkdir()
    (tmp_path / "bundles" / "01-backpressure.zip").write_bytes(b"")
    room = tmp_path / "room"
    room.mkdir()
    (room / "notes.ipynb").write_text(json.dumps(nbformat.v4.new_notebook()))
    with pytest.raises(ValueError, match=r"notes\.ipynb: not a workshop notebook with checks"):
        exercises.grade(room, bundles=tmp_path / "bundles", out=tmp_path / "grades")
    assert not (tmp_path / "grades").exists()  # nothing half-written


def test_generated_cells_are_tagged():
    for master in MASTERS:
        notebook = nbformat.read(student_of(master), as_version=4)
        tags = [t for c in notebook.cells for t in c.metadata.get("tags", []) if t in GENERATED]
        assert tags.count("exercise-grader") == 1
        assert tags.count("exercise-answer") == tags.count("exercise-check") >= 1


def _build_in(folder: Path, monkeypatch, capsys) -> str:
    """``python -m pipeline.lessons.exercises build`` run in ``folder``: its stderr, exit 2."""
    monkeypatch.chdir(folder)
    with pytest.raises(SystemExit) as stopped:
        exercises.main(["build"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_build_outside_the_repository_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    err = _build_in(tmp_path, monkeypatch, capsys)
    assert "notebooks/solutions" in err and "repository's root" in err
    assert list(tmp_path.iterdir()) == []  # no empty build/exercises/
    (tmp_path / "notebooks" / "solutions").mkdir(parents=True)  # the folder, but no master
    assert "no otter masters" in _build_in(tmp_path, monkeypatch, capsys)
    assert not (tmp_path / "build").exists()


# A missing master is no master (the folder without any is tested above); a missing student
# notebook is a master's without its notebook.
BROKEN = [
    (which, damage)
    for which in ("master", "student")
    for damage in ("truncated", "empty", "not utf-8", "missing")
    if (which, damage) != ("master", "missing")
]


@pytest.mark.parametrize(("which", "damage"), BROKEN)
def test_a_build_names_a_broken_notebook_and_writes_nothing(
    tmp_path, monkeypatch, capsys, damage, which
):
    master = MASTERS[0]
    solutions = tmp_path / "notebooks" / "solutions"
    solutions.mkdir(parents=True)
    copies = {
        "master": solutions / master.name,
        "student": solutions.parent / student_of(master).name,
    }
    shutil.copyfile(master, copies["master"])
    shutil.copyfile(student_of(master), copies["student"])
    broken = copies[which]
    text = broken.read_bytes()
    if damage == "missing":
        broken.unlink()
    else:
        damaged = {"truncated": text[: len(text) // 2], "empty": b"", "not utf-8": b"\xff\xfe{"}
        broken.write_bytes(damaged[damage])
    before = {path: path.read_bytes() for path in copies.values() if path.exists()}
    err = _build_in(tmp_path, monkeypatch, capsys)
    assert str(broken) in err
    assert not (tmp_path / "build").exists()
    assert {path: path.read_bytes() for path in copies.values() if path.exists()} == before


def test_a_build_that_fails_on_one_master_writes_no_other(tmp_path, monkeypatch, capsys):
    # The first master builds; the second's student notebook has lost its exercise list. The
    # first student notebook (its generated cells removed here) is not rewritten either.
    first, second = MASTERS[:2]
    solutions = tmp_path / "notebooks" / "solutions"
    solutions.mkdir(parents=True)
    for master in (first, second):
        shutil.copyfile(master, solutions / master.name)
    stale = nbformat.read(student_of(first), as_version=4)
    stale.cells = [c for c in stale.cells if not set(c.metadata.get("tags", [])) & set(GENERATED)]
    nbformat.write(stale, tmp_path / "notebooks" / student_of(first).name)
    before = (tmp_path / "notebooks" / student_of(first).name).read_text()
    lost = nbformat.read(student_of(second), as_version=4)
    for cell in lost.cells:
        cell.source = cell.source.replace("## Exercises", "## Things to try")
    nbformat.write(lost, tmp_path / "notebooks" / student_of(second).name)
    err = _build_in(tmp_path, monkeypatch, capsys)
    assert student_of(second).name in err and "'## Exercises'" in err
    assert (tmp_path / "notebooks" / student_of(first).name).read_text() == before
    assert not (tmp_path / "build").exists()
