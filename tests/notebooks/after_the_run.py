"""Checks made in a notebook's own kernel after its last cell, with no second run.

nbval runs a notebook's code cells in one kernel, a test item per cell, and keeps
the kernel until the notebook's last item is done. This plugin (the repository's
``conftest.py`` loads it) adds two items after each notebook's last cell, in that
same kernel:

- **prose values**: every inline expression is evaluated as jupyterlab-myst does,
  and the values the notebook carries must be this run's
  (:func:`pipeline.lessons.prose.differences`: exactly, or within the stated
  tolerance of a machine-dependent value).
- **resources**: the kernel's peak memory and the CPU time of the whole run
  (the kernel's, and its finished child processes') must be what the workshop
  guide's table of resources per user says for the notebook, within
  :data:`MEMORY_FACTOR` and :data:`CPU_FACTOR`.

After a solutions notebook that is an otter master, one more (last, so that its work
counts in no resource): **wrong answers**, the slips a student makes put to each
exercise's graded tests (:mod:`tests.lessons.wrong_answers`), where the notebook's
objects and worked answers are bound. It used to run each master a second time, in a
kernel of its own.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKSHOP = REPO / "docs" / "workshop.md"

MEMORY_FACTOR = 1.3
"""How far the kernel's peak RSS may be from the guide's figure: a ratio. The same
packages take the same memory anywhere; this is room for other versions of them."""
CPU_FACTOR = 3.0
"""How far the run's CPU time may be from the guide's figure: a ratio. A machine two
or three times slower or faster than the one that measured it, or one shared with
other work (CPU time drifts far less than wall time under load, NOTES.md), stays in."""

# RUSAGE_SELF (0) and RUSAGE_CHILDREN (-1): CPU seconds and peak RSS (KiB on Linux). The
# kernel's own peak is its VmHWM where Linux has one: ru_maxrss keeps, across exec, the
# peak of the process the kernel was forked from (a pytest worker that had run the site
# build and the plans showed its 1.4 GiB as every later kernel's).
USAGE = (
    "tuple((u.ru_utime + u.ru_stime, u.ru_maxrss) "
    "for u in map(__import__('resource').getrusage, (0, -1))) + (next((int(l.split()[1]) "
    "for l in open('/proc/self/status') if l.startswith('VmHWM:')), None) "
    "if __import__('os').path.exists('/proc/self/status') else None,)"
)


def _kernel(item: pytest.Item):
    notebook_file = item.parent
    kernel = notebook_file.kernel
    if kernel is None or not kernel.is_alive() or notebook_file.timed_out:
        pytest.fail("the notebook's kernel did not finish its cells", pytrace=False)
    return kernel


class ProseValues(pytest.Item):
    """The notebook's saved prose values, held to this run's."""

    def runtest(self) -> None:
        from pipeline.lessons.prose import differences, evaluate

        fresh = evaluate(_kernel(self).kc, self.parent.nb)
        problems = differences(self.path, self.parent.nb, fresh)
        if problems:
            pytest.fail(
                "\n".join(problems)
                + "\nThe prose's saved values are not this run's: run `make prose` "
                "(python -m pipeline.lessons.prose) and commit the notebook.",
                pytrace=False,
            )

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


def quoted_resources(notebook: Path) -> tuple[float, float] | None:
    """What the workshop guide's table says a Run All of ``notebook`` takes: (MiB, CPU s).

    The table has a row per notebook number (``| 02 | ...``); a notebook's columns
    are the 2nd and 3rd cells, its solutions' the 4th and 5th. None: no such row.
    """
    number = notebook.name.split("-", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in WORKSHOP.read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| {number} |")
    ]
    if len(rows) != 1:
        return None
    memory, cpu = rows[0][3:5] if notebook.parent.name == "solutions" else rows[0][1:3]
    return (
        float(re.fullmatch(r"([\d.]+) MiB", memory)[1]),
        float(re.fullmatch(r"([\d.]+) s", cpu)[1]),
    )


class RunResources(pytest.Item):
    """The run's peak memory and CPU time, against the workshop guide's figures."""

    def runtest(self) -> None:
        reply = _kernel(self).kc.execute_interactive(
            "", user_expressions={"usage": USAGE}, store_history=False, timeout=60
        )
        result = reply["content"]["user_expressions"]["usage"]
        (own_cpu, own_kib), (children_cpu, _), high_water_kib = ast.literal_eval(
            result["data"]["text/plain"]
        )
        memory = (own_kib if high_water_kib is None else high_water_kib) / 1024
        cpu = own_cpu + children_cpu
        said = quoted_resources(self.path)
        if said is None:
            pytest.fail(
                f"docs/workshop.md has no row of resources for {self.path.name}: it measured"
                f" {memory:.0f} MiB and {cpu:.1f} s of CPU",
                pytrace=False,
            )
        said_memory, said_cpu = said
        problems = [
            f"{what} {measured:.1f}{unit}; docs/workshop.md says {said:g}{unit} (within x{factor})"
            for what, measured, said, factor, unit in (
                ("peak RSS", memory, said_memory, MEMORY_FACTOR, " MiB"),
                ("CPU", cpu, said_cpu, CPU_FACTOR, " s"),
            )
            if not said / factor <= measured <= said * factor
        ]
        if problems:
            pytest.fail(f"{self.path.name}: " + "; ".join(problems), pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


class WrongAnswers(pytest.Item):
    """No graded test of the master's exercises credits a wrong answer of the kind a student
    gives, and the worked answers pass every test (:mod:`tests.lessons.wrong_answers`)."""

    def runtest(self) -> None:
        from tests.lessons.wrong_answers import MARK, probe, problems

        printed: list[str] = []
        errors: list[str] = []

        def output(message: dict) -> None:
            content = message["content"]
            if message["msg_type"] == "stream":
                printed.append(content["text"])
            elif message["msg_type"] == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")

        # each exercise's tests run once per wrong value: minutes on a loaded machine
        _kernel(self).kc.execute_interactive(
            probe(self.path), store_history=False, timeout=900, output_hook=output
        )
        lines = [line for line in "".join(printed).splitlines() if line.startswith(MARK)]
        if errors or not lines:
            pytest.fail(f"the wrong answers' probe failed: {errors or printed}", pytrace=False)
        found = problems(json.loads(lines[0].removeprefix(MARK)))
        if found:
            pytest.fail("\n".join(found), pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


# In this order: the resources must count the notebook's run alone.
AFTER_THE_RUN = {"prose values": ProseValues, "resources": RunResources}
AFTER_A_MASTER = {**AFTER_THE_RUN, "wrong answers": WrongAnswers}


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: the items follow their notebook's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.has_plugin("nbval"):
        return
    from nbval.plugin import IPyNbFile

    last: dict[int, int] = {}
    for index, item in enumerate(items):
        if isinstance(item.parent, IPyNbFile):
            last[id(item.parent)] = index
    graded: set[Path] = set()
    if any(Path(items[index].path).parent.name == "solutions" for index in last.values()):
        # only then: the module imports otter, seconds that a run without them need not pay
        from pipeline.lessons.exercises import masters

        graded = {path.resolve() for path in masters(REPO)}
    for index in sorted(last.values(), reverse=True):
        parent = items[index].parent
        kinds = AFTER_A_MASTER if Path(parent.path).resolve() in graded else AFTER_THE_RUN
        added = [kind.from_parent(parent, name=name) for name, kind in kinds.items()]
        for item in added:
            if isinstance(item, WrongAnswers):  # each exercise's tests, dozens of times
                item.add_marker(pytest.mark.slow)
        items[index + 1 : index + 1] = added
