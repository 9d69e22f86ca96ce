"""Notebooks 03 and 07: a wrong answer gets the hint that fits, and every right one passes.

Their checks run the learner's own choice on the virtual clock and compare the answer
with what that choice really does: a backoff through the outage batch, a naive pool
written in the notebook, the twin built from the live run. So no check holds a fixed
number that a loaded machine could move (07's twin is calibrated from measured
durations: here a twin of the same shape is built from chosen ones), and any backoff
that rides out the outage, any pool written as asked, passes. The latencies expected
below were measured with the solutions' first downstream, a separate implementation
of the same batch.
"""

from __future__ import annotations

import asyncio
import warnings

import numpy as np
import pytest

from pipeline import Backoff
from pipeline.examples.approval import approval_config
from pipeline.sim import Empirical, Scenario, ScriptedFailures, TimeVarying, Trace, simulate
from tests.lessons.test_exercises import ROOT, _hints

with warnings.catch_warnings():  # as pipeline.lessons.exercises does: ipylab's import warns
    warnings.filterwarnings("ignore", "Traits should be given as instances", DeprecationWarning)
    import otter

PLAIN = Backoff(base_s=0.5, factor=2.0, cap_s=8.0)
JITTER = Backoff(base_s=0.5, factor=2.0, cap_s=8.0, jitter=True)


def _grader(monkeypatch, name: str) -> otter.Notebook:
    monkeypatch.chdir(ROOT / "notebooks")
    return otter.Notebook(name)


# -- 03, exercise 2: a longer outage -------------------------------------------------


@pytest.mark.parametrize(
    ("backoff", "max_attempts", "worst_s"),
    [
        (PLAIN, 6, 15.75),  # the solution's: 0.5 + 1 + 2 + 4 + 8 s of patience
        (Backoff(), 10, 13.1),  # the default backoff, with more attempts
        (Backoff.constant(1.0), 12, 10.5),
        (JITTER, 12, 17.36),
        (Backoff.none(), 300, 10.0),  # no backoff at all, and the attempts to last 10 s
    ],
)
def test_any_choice_that_rides_out_the_outage_passes(monkeypatch, backoff, max_attempts, worst_s):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    env = {"outage_backoff": backoff, "outage_max_attempts": max_attempts}
    assert (
        _hints(grader.check("exercise_2", global_env=env | {"worst_item_delay_s": worst_s})) == []
    )
    # Rounded as a learner reads it off a printout: within 0.05 s (or 1%) still passes.
    assert (
        _hints(
            grader.check("exercise_2", global_env=env | {"worst_item_delay_s": round(worst_s, 1)})
        )
        == []
    )


def test_too_little_patience_gets_the_dead_letter_hint(monkeypatch):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    # Five fixed delays are 7.5 s of patience for a 10-s outage; its cost is still checked.
    env = {"outage_backoff": PLAIN, "outage_max_attempts": 5, "worst_item_delay_s": 10.35}
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 1 and "250 items are dead-lettered" in hints[0]
    assert "sum of its delays between attempts" in hints[0]
    # Six jittered delays: half the patience on average, some near 0.
    env.update(outage_backoff=JITTER, outage_max_attempts=6)
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 2 and "items are dead-lettered" in hints[0] and "Full jitter" in hints[0]


@pytest.mark.parametrize("max_attempts", [0, -3, 6.0, "6", None])
def test_a_budget_that_is_not_one_gets_a_hint_not_a_traceback(monkeypatch, max_attempts):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    env = {"outage_backoff": PLAIN, "outage_max_attempts": max_attempts, "worst_item_delay_s": 1.0}
    result = grader.check("exercise_2", global_env=env)
    hints = _hints(result)
    assert len(hints) == 2 and "Traceback" not in str(result)
    assert ("at least 1" in hints[0]) if max_attempts in (0, -3) else ("whole number" in hints[0])
    assert "1 or more attempts" in hints[1]


@pytest.mark.parametrize(
    "slip",
    [
        14.869,
        6.422,
        19.869,
        -17.36,
        10.0,
    ],  # the batch's end, the mean, a time, the sign, the outage
)
def test_a_latency_that_is_not_the_unluckiest_items_delay_gets_the_hint(monkeypatch, slip):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    env = {"outage_backoff": JITTER, "outage_max_attempts": 12, "worst_item_delay_s": slip}
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 1 and "take the largest difference" in hints[0]


# -- 03, exercise 4: write the naive worker yourself ---------------------------------


async def naive(handler, items, concurrency=2, maxsize=4, max_attempts=3):
    # As exercise 4 asks for it (and the solutions write it).
    queue = asyncio.Queue(maxsize=maxsize)

    async def worker():
        while True:
            payload, attempt = await queue.get()
            try:
                await handler(payload)
            except Exception:
                if attempt < max_attempts:
                    await queue.put((payload, attempt + 1))
            finally:
                queue.task_done()

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    for payload in items:
        await queue.put((payload, 1))
    await queue.join()
    for task in workers:
        task.cancel()


async def three_workers(handler, items):
    await naive(handler, items, concurrency=3)


async def unbounded(handler, items):
    await naive(handler, items, maxsize=0)  # asyncio.Queue(0) has no bound


async def workers_too_late(handler, items, maxsize=4):
    queue = asyncio.Queue(maxsize)
    for payload in items:
        await queue.put((payload, 1))


async def broken(handler, items):
    raise RuntimeError("nothing here yet")


RIGHT_4 = {
    "your_naive": naive,
    "naive_finishes": False,
    "naive_stops_at_s": 0.1,
    "naive_handler_calls": 2,
    "naive_tasks_waiting_on_put": 3,
    "rare_failure_is_safe": False,
}


def test_a_naive_pool_written_as_asked_and_the_right_predictions_pass(monkeypatch):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    assert _hints(grader.check("exercise_4", global_env=RIGHT_4)) == []
    # Another pool: its predictions are checked against what it does (3 calls, 4 waiting).
    env = RIGHT_4 | {"your_naive": three_workers, "naive_handler_calls": 3}
    assert (
        _hints(grader.check("exercise_4", global_env=env | {"naive_tasks_waiting_on_put": 4})) == []
    )
    hints = _hints(grader.check("exercise_4", global_env=env))
    assert len(hints) == 1 and "One more waits" in hints[0]


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        ({"naive_finishes": True}, "does run_virtual return, or raise DeadlockError?"),
        ({"naive_stops_at_s": 0.0}, "when do the first handler calls end"),
        ({"naive_stops_at_s": 0.3}, "when do the first handler calls end"),
        ({"naive_handler_calls": 4}, "how many workers take an item"),
        ({"naive_handler_calls": 60}, "how many workers take an item"),
        ({"naive_tasks_waiting_on_put": 51}, "a line per task"),
        ({"rare_failure_is_safe": True}, "two failures at the same time"),
        ({"naive_finishes": "no"}, "Set naive_finishes to True or False"),
    ],
)
def test_a_wrong_prediction_gets_its_hint(monkeypatch, answer, hint):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    hints = _hints(grader.check("exercise_4", global_env=RIGHT_4 | answer))
    assert len(hints) == 1 and hint in hints[0]


def test_forgetting_the_producer_gets_its_own_hint(monkeypatch):
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    hints = _hints(
        grader.check("exercise_4", global_env=RIGHT_4 | {"naive_tasks_waiting_on_put": 2})
    )
    assert len(hints) == 1 and "the coroutine that puts the items in" in hints[0]


@pytest.mark.parametrize(
    ("pool", "hint"),
    [
        (..., "Set your_naive to your coroutine function"),
        (unbounded, "Your naive finished although every call fails"),
        (workers_too_late, "No handler call before it stops"),
        (broken, "did not run as asked: RuntimeError: nothing here yet"),
    ],
)
def test_a_pool_not_written_as_asked_gets_its_hint_and_the_predictions_are_still_checked(
    monkeypatch, pool, hint
):
    # The predictions are then checked against the pool asked for (naive_pool): right here.
    grader = _grader(monkeypatch, "03-retries-and-dead-letters.ipynb")
    result = grader.check("exercise_4", global_env=RIGHT_4 | {"your_naive": pool})
    hints = _hints(result)
    assert len(hints) == 1 and hint in hints[0] and "Traceback" not in str(result)


# -- 07, exercise 2: ask the twin ----------------------------------------------------


@pytest.fixture(scope="module")
def twin_of_a_burst():
    """A 1-worker twin shaped as notebook 07's, from chosen durations instead of measured ones.

    A quiet stream, a burst at twice what one worker scores for 0.8 s, and every 25th task
    failing three times: during the burst, tasks wait out their retries' backoff, so the
    most tasks held against the bound exceeds the queue's own peak.
    """
    plan = TimeVarying.from_profile([0, 1.5, 1.55, 2.3, 2.35, 3.5], [50, 50, 400, 400, 50, 50])
    arrival_s = plan.times(np.random.default_rng(7), duration_s=3.5)
    fails = tuple(3 if i % 25 == 7 else 1 if i == 3 else 0 for i in range(len(arrival_s)))
    twin = Scenario(
        arrivals=Trace(arrival_s),
        service=Empirical((0.004, 0.005, 0.006)),
        config=approval_config(concurrency=1, queue_maxsize=None),
        n_items=len(arrival_s),
        failures=ScriptedFailures(fails, permanent={3}),
        seed=1,
    )
    free = simulate(twin)
    held = int((free.timeseries.queue_depth + free.timeseries.retry_waiting).max())
    blocked = {
        size: simulate(twin.replace(queue_maxsize=size)).summary["producer_blocked_s"] > 0
        for size in range(held - 5, held + 1)
    }
    smallest = min(size for size, blocks in blocked.items() if not blocks)
    assert all(blocked[size] for size in range(held - 5, smallest))  # the search was wide enough
    assert free.summary["queue_depth_max"] < smallest  # the slip below is one
    return {"arrival_s": arrival_s, "one_worker_twin": twin}, smallest, free.summary


def test_the_twins_smallest_bound_and_its_memory_pass(monkeypatch, twin_of_a_burst):
    grader = _grader(monkeypatch, "07-real-time.ipynb")
    env, smallest, _ = twin_of_a_burst
    env = env | {
        "never_blocking_maxsize": smallest,
        "never_blocking_memory_kib": (smallest + 1) * 2,
    }
    assert _hints(grader.check("exercise_2", global_env=env)) == []
    # A numpy integer, as a learner's max() of a series gives it, is a whole number too.
    env.update(never_blocking_maxsize=np.int64(smallest))
    assert _hints(grader.check("exercise_2", global_env=env)) == []
    # The twin's measured peak at 2 KiB a task (dead letters kept included) is right as well.
    peak = simulate(env["one_worker_twin"].replace(queue_maxsize=smallest, item_size_bytes=2048))
    env.update(never_blocking_memory_kib=peak.summary["memory_peak_bytes"] / 1024)
    assert env["never_blocking_memory_kib"] != (smallest + 1) * 2
    assert _hints(grader.check("exercise_2", global_env=env)) == []


def test_the_queues_own_peak_is_too_small_a_bound(monkeypatch, twin_of_a_burst):
    grader = _grader(monkeypatch, "07-real-time.ipynb")
    env, _, free = twin_of_a_burst
    depth = free["queue_depth_max"]
    env = env | {"never_blocking_maxsize": depth, "never_blocking_memory_kib": (depth + 1) * 2}
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 2 and "still blocks" in hints[0] and "retry's backoff" in hints[0]
    assert "Find the smallest bound first" in hints[1]  # its memory, however consistent


def test_a_bound_larger_than_needed_is_not_the_smallest(monkeypatch, twin_of_a_burst):
    grader = _grader(monkeypatch, "07-real-time.ipynb")
    env, smallest, _ = twin_of_a_burst
    env = env | {
        "never_blocking_maxsize": smallest + 20,
        "never_blocking_memory_kib": (smallest + 21) * 2,
    }
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 2 and "One slot fewer never blocks" in hints[0]
    assert "Find the smallest bound first" in hints[1]


@pytest.mark.parametrize(
    "memory",
    ["bytes", "queue only", "four workers", "kB"],
)
def test_a_memory_slip_gets_the_hint(monkeypatch, twin_of_a_burst, memory):
    grader = _grader(monkeypatch, "07-real-time.ipynb")
    env, smallest, _ = twin_of_a_burst
    wrong = {
        "bytes": (smallest + 1) * 2048,
        "queue only": smallest * 2,
        "four workers": (smallest + 4) * 2,
        "kB": (smallest + 1) * 2.048,
    }[memory]
    env = env | {"never_blocking_maxsize": smallest, "never_blocking_memory_kib": wrong}
    hints = _hints(grader.check("exercise_2", global_env=env))
    assert len(hints) == 1 and "(queue_maxsize + concurrency) × 2 KiB" in hints[0]


def test_a_twin_that_is_not_the_one_worker_twin_of_this_run_gets_the_hint(
    monkeypatch, twin_of_a_burst
):
    grader = _grader(monkeypatch, "07-real-time.ipynb")
    env, smallest, _ = twin_of_a_burst
    right = {"never_blocking_maxsize": smallest, "never_blocking_memory_kib": (smallest + 1) * 2}
    four = env | right | {"one_worker_twin": env["one_worker_twin"].replace(concurrency=4)}
    hints = _hints(grader.check("exercise_2", global_env=four))
    assert "One worker, as the GIL dictates" in hints[0]
    other = env["one_worker_twin"].replace(arrivals=Trace(env["arrival_s"][:-1]), n_items=10)
    hints = _hints(grader.check("exercise_2", global_env=env | right | {"one_worker_twin": other}))
    assert "Not this notebook's twin" in hints[0]


@pytest.mark.parametrize("size", [0, -5, 2.5, "big", None])
def test_a_bound_that_is_not_one_gets_a_hint_not_a_traceback(monkeypatch, twin_of_a_burst, size):
    grader = _grader(monkeypatch, "07-real-time.ipynb")
    env, _, _ = twin_of_a_burst
    result = grader.check(
        "exercise_2",
        global_env=env | {"never_blocking_maxsize": size, "never_blocking_memory_kib": 2},
    )
    hints = _hints(result)
    assert "Traceback" not in str(result) and len(hints) >= 2
    assert all(h.startswith("AssertionError: ") for h in hints)
    assert "a whole number of slots, 1 or more" in hints[0]
