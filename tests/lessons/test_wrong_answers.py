"""No graded test of an exercise credits a wrong answer of the kind a student gives.

Each solutions notebook (an otter master) runs in a kernel of its own, as nbval
and otter run it, with one more cell: :func:`tests.lessons.wrong_answers.report`
puts wrong answers to the student notebook's tests there, where the lesson's
objects are bound (see that module for the wrong values tried). A test that
passes on a wrong answer passes trivially for it: the student earns its points
for nothing. The right answers must still pass everything.

The wrong values each name gets beyond the generic ones, and the whole wrong
answers beyond "every name wrong at once", are listed here per notebook: the
slips its exercise text invites (a neighbouring run's number, a consistent
answer to the wrong question).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pipeline.lessons.exercises import masters, student_of
from tests.lessons.wrong_answers import MARK
from tests.measures import marks

ROOT = Path(__file__).resolve().parents[2]
MASTERS = masters(ROOT)
IDS = [path.name.removesuffix("-solutions.ipynb") for path in MASTERS]

# Per notebook: "wrong" {name: {label: expression}}, more wrong values in the notebook's terms;
# "whole" {exercise: [{name: expression}]}, whole wrong answers (consistent slips); "skip"
# [[name, label, why]], a generic value that is no wrong answer for that name; "ungraded"
# {name: {test: why}}, a test that reads a name without grading it; "tolerance" {name: [rel,
# abs]}, a check's own tolerance for a prediction from this machine's measurements.
SPEC: dict[str, dict] = {
    "00-start-here": {
        "wrong": {
            "edge_erlang_wait_s": {"at 3.2 per second": "at_80"},
            "edge_simulated_wait_s": {"the first run's": "simulate(base).summary['wait_mean_s']"},
            "constant_wait_share": {"the inverse": "1 / constant_wait_share"},
        }
    },
    "01-backpressure": {
        "wrong": {
            "smaller_memory_peak_bytes": {"the 50-slot run's": "sb['memory_peak_bytes']"},
            "smaller_upstream_peak": {"the 50-slot run's": "sb['upstream_backlog_max']"},
            "five_workers_upstream_peak": {"4 workers'": "b.summary['upstream_backlog_max']"},
            "five_workers_blocked_s": {"4 workers'": "b.summary['producer_blocked_s']"},
        },
        "whole": {
            "exercise_2": [  # a queue one too small, and its own bound: the example
                {
                    "smallest_shedding_queue": "smallest_shedding_queue - 1",
                    "its_memory_bound_bytes": "(smallest_shedding_queue + 3) * 64 * 1024",
                },
                {
                    "smallest_shedding_queue": "smallest_shedding_queue + 1",
                    "its_memory_bound_bytes": "(smallest_shedding_queue + 5) * 64 * 1024",
                },
            ]
        },
    },
    "02-workers-and-littles-law": {
        "wrong": {"cv2_wait_factor": {"the inverse": "1 / cv2_wait_factor", "Erlang C": "1.0"}},
        # A log-normal with cv = 2 has a heavy tail: six replications of 10,000 items estimate
        # the factor 1.98 +- 0.59 (95%), single runs range from 1.4 to 3.3 (40 seeds), so the
        # check accepts 1.2 to 4.5, and these lie inside what a right method can give.
        "skip": [
            ["cv2_wait_factor", label, "inside the estimate's own spread"]
            for label in ("one more", "twice", "queue_L's answer", "queue_lambda_W's answer")
        ],
    },
    "03-retries-and-dead-letters": {
        # Any budget with which no item is dead-lettered answers the question (its cost is
        # graded by worst_item_delay_s, for the choice made).
        "skip": [
            ["outage_max_attempts", "one more", "a longer budget dead-letters nothing too"],
            ["outage_max_attempts", "twice", "a longer budget dead-letters nothing too"],
        ],
        # When a learner's coroutine does not deadlock as asked, these grade the numbers
        # against the pool the exercise gives (pipeline.examples.naive): one slip, one point.
        "ungraded": {
            "your_naive": {
                test: "falls back to naive_pool"
                for test in (
                    "test_naive_stops_at_s",
                    "test_naive_handler_calls",
                    "test_naive_tasks_waiting_on_put",
                )
            }
        },
    },
    "04-drain-and-shutdown": {
        "wrong": {
            "full_drain_8_s": {"4 workers'": "full4", "from the start": "full8 + stop_s"},
            "handed_back_8": {"4 workers'": "simulate(batch).summary['items_unfinished']"},
        }
    },
    "05-capacity-planning": {
        "wrong": {"twice_plan": {"today's plan": "p"}, "campaign_plan": {"today's": "priced"}},
    },
    "07-real-time": {
        "whole": {
            "exercise_2": [
                {
                    "never_blocking_maxsize": "never_blocking_maxsize + 1",
                    "never_blocking_memory_kib": "(never_blocking_maxsize + 2) * 2",
                }
            ]
        },
        "wrong": {"one_worker_twin": {"four workers": "one_worker_twin.replace(concurrency=4)"}},
    },
    "06-rate-limits-and-llm-batches": {
        "wrong": {"rpm_24_throughput_per_s": {"per minute": "240.0"}},
    },
    "08-where-is-the-bottleneck": {
        "wrong": {"two_fetchers_s": {"one fetcher's": "times[1]"}},
        # "About 100": where the two stages' rates cross, which a simulated sweep of pool sizes
        # finds within a few connections; the check accepts 90 to 110.
        "skip": [
            ["connections_needed", "one less", "within what a sweep can tell"],
            ["connections_needed", "one more", "within what a sweep can tell"],
        ],
    },
    "09-from-a-real-run-to-its-twin": {
        # The twins are calibrated from timings this machine measured: the checks compare with
        # their own predictions within a stated tolerance, and on a loaded machine the right
        # slowdown is near 0, where "twice" or "half" of it is still inside that tolerance.
        "tolerance": {"flaky_slowdown": [0.05, 0.005], "more_writers_speedup": [0.02, 0.0]},
    },
    "11-who-waits": {
        # The share a 300-s deadline loses is estimated from runs: about 0.00025, and a right
        # method gives anything from 0 to well under 2% (the exponential patience's 4.3% fails).
        "skip": [
            ["deadline_expired_fraction", label, "inside the estimate's spread near 0"]
            for label in ("twice", "half", "zero")
        ],
    },
    "12-retry-storms": {
        "wrong": {
            "default_budget_retries_per_s": {"the ratio's part alone": "0.2 * RATE"},
            "largest_ratio": {"without the floor": "(CAPACITY - RATE) / RATE"},
            "drain_at_0_2_per_s": {"without the floor": "CAPACITY - RATE - 0.2 * RATE"},
        },
    },
}

PROBE = """\
import sys
sys.path.insert(0, {root!r})
from tests.lessons.wrong_answers import report
print(report(globals(), {student!r}, {spec}))
"""


def _report(master: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Run ``master`` in a fresh kernel, then the probe cell; its report."""
    notebook = nbformat.read(master, as_version=4)
    name = master.name.removesuffix("-solutions.ipynb")
    spec = json.dumps(SPEC.get(name, {}))
    source = PROBE.format(root=str(ROOT), student=str(student_of(master)), spec=spec)
    notebook.cells.append(nbformat.v4.new_code_cell(source))
    # The kernel imports this checkout's package and tests, whatever is installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = NotebookClient(
        notebook,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(master.parent)}},
    )
    client.execute()
    outputs = notebook.cells[-1].outputs
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    line = next(line for line in text.splitlines() if line.startswith(MARK))
    return json.loads(line.removeprefix(MARK))


@pytest.mark.slow  # each case runs a solutions notebook in a kernel
@pytest.mark.parametrize(
    "master", [pytest.param(m, marks=marks(m), id=i) for m, i in zip(MASTERS, IDS, strict=True)]
)
def test_no_graded_test_credits_a_wrong_answer(master, monkeypatch):
    found = _report(master, monkeypatch)
    assert found["right"] == {}, f"right answers fail: {found['right']}"
    assert found["tried"] > 0
    credited = [
        f"{q} {name} = {shown} ({label}) passes {tests}"
        for q, name, label, shown, tests in found["credited"]
    ]
    whole = [f"{q} wholly wrong {values} earns {tests}" for q, values, tests in found["whole"]]
    assert not credited + whole, "\n".join(credited + whole)
