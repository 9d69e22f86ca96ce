"""Notebook 03's exercises as their checks run them: the outage batch and the naive probe.

Everything runs on the virtual clock, so the numbers are exact: the outage batch's
worst delay with six fixed delays is the sum of the delays an unlucky item waits,
and the naive pool deadlocks at 0.1 s after two calls, with three tasks on
``Queue.put``, as notebook 03 predicts.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from pipeline import Backoff
from pipeline.examples.naive import naive_pool
from pipeline.lessons.retries import (
    OutageRun,
    outage_batch,
    outage_cost,
    outage_downstream,
    probe_naive,
)
from pipeline.sim import run_virtual

PLAIN = Backoff(base_s=0.5, factor=2.0, cap_s=8.0)
JITTER = Backoff(base_s=0.5, factor=2.0, cap_s=8.0, jitter=True)


def test_the_downstream_fails_fast_in_the_outage_and_notes_each_success():
    finished: dict[int, float] = {}
    downstream = outage_downstream((1.0, 2.0), finished)

    async def calls():
        errors = []
        for item in range(4):
            try:
                await downstream(item)
            except ConnectionError as error:
                errors.append(str(error))
            await asyncio.sleep(0.5)
        return errors

    errors = run_virtual(calls())
    # Calls start at 0, 0.75, 1.5 (down: 0.05 s), 2.05; the third one fails.
    assert errors == ["503 Service Unavailable at t = 1.50 s"]
    assert finished == {0: 0.25, 1: 1.0, 3: 2.3}


def test_without_an_outage_every_item_succeeds_and_the_batch_is_the_baseline():
    base = outage_batch(backoff=PLAIN, max_attempts=1, outage=None)
    assert base.report.completed == 1000 and not base.report.dead_letters
    assert base.report.finished_s == 5.0  # 1,000 items, 50 workers, 0.25 s each
    assert max(base.success_s) == 5.0 and not any(math.isnan(t) for t in base.success_s)
    assert base.delays_s(base) == (0.0,) * 1000


def test_six_fixed_delays_ride_out_a_10_s_outage_and_five_do_not():
    base = outage_batch(backoff=PLAIN, max_attempts=1, outage=None)
    six = outage_batch(backoff=PLAIN, max_attempts=6)
    assert not six.report.dead_letters and six.report.balanced
    # 0.5 + 1 + 2 + 4 + 8 = 15.5 s of patience: the item that first failed at t = 2 s
    # succeeds on its sixth attempt, 15.75 s later than without the outage.
    assert six.worst_delay_s(base) == pytest.approx(15.75)
    five = outage_batch(backoff=PLAIN, max_attempts=5)
    assert len(five.report.dead_letters) == 250  # 7.5 s of patience: the first 250 run out
    dead = {letter.payload for letter in five.report.dead_letters}
    assert all(math.isnan(five.success_s[i]) for i in dead)
    assert all(math.isnan(d) for i, d in enumerate(five.delays_s(base)) if i in dead)


def test_the_cost_of_a_choice_compares_it_with_the_same_batch_without_the_outage():
    cost = outage_cost(backoff=JITTER, max_attempts=12)
    run, base = (
        outage_batch(backoff=JITTER, max_attempts=12),
        outage_batch(backoff=JITTER, max_attempts=12, outage=None),
    )
    delays = [d for d in run.delays_s(base) if not math.isnan(d)]
    assert cost.dead_letters == 0
    assert cost.worst_delay_s == max(delays) == run.worst_delay_s(base)
    assert cost.mean_delay_s == pytest.approx(sum(delays) / len(delays))
    assert cost.delayed_items == sum(d > 0.01 for d in delays)
    assert cost.batch_later_s == run.report.finished_s - base.report.finished_s
    # With jitter the unluckiest item is not the last one: the batch ends sooner than
    # that item's delay, so "the batch ends later by" and "the worst item waits" differ.
    assert cost.worst_delay_s > cost.batch_later_s + 1.0
    assert outage_cost(backoff=JITTER, max_attempts=12) == cost  # seeded: exact again


def test_full_jitter_needs_more_attempts_than_fixed_delays():
    assert outage_cost(backoff=JITTER, max_attempts=6).dead_letters > 0
    assert outage_cost(backoff=PLAIN, max_attempts=6).dead_letters == 0


@pytest.mark.parametrize(
    ("outage", "shown"),
    [
        ((5.0, 1.0), "(5.0, 1.0)"),
        ((-1.0, 2.0), "(-1.0, 2.0)"),
        ((0.0, math.inf), "inf"),
        ((math.nan, 1.0), "nan"),
        ("soon", "'soon'"),
        ("12", "'12'"),
        ((1.0,), "(1.0,)"),
    ],
)
def test_a_bad_outage_is_refused_before_anything_runs(outage, shown):
    with pytest.raises(ValueError, match=r"outage must be \(start_s, end_s\)") as caught:
        outage_batch(backoff=PLAIN, max_attempts=6, outage=outage)
    assert shown in str(caught.value)
    with pytest.raises(ValueError, match="outage must be"):
        outage_downstream(outage)


def test_bad_settings_of_the_batch_are_refused_with_their_name():
    with pytest.raises(ValueError, match="n_items must be an integer >= 0, got -1"):
        outage_batch(backoff=PLAIN, max_attempts=6, n_items=-1)
    with pytest.raises(ValueError, match="n_items must be an integer >= 0, got True"):
        outage_batch(backoff=PLAIN, max_attempts=6, n_items=True)
    with pytest.raises(TypeError, match=r"backoff must be a Backoff, got 0\.5"):
        outage_batch(backoff=0.5, max_attempts=6)
    with pytest.raises(ValueError, match="max_attempts must be >= 1, got 0"):
        outage_batch(backoff=PLAIN, max_attempts=0)


def test_delays_need_runs_of_the_same_items():
    short = outage_batch(backoff=PLAIN, max_attempts=1, outage=None, n_items=10)
    long = outage_batch(backoff=PLAIN, max_attempts=1, outage=None, n_items=20)
    with pytest.raises(ValueError, match="baseline must be a run of the same 20 items, got 10"):
        long.delays_s(short)
    empty = OutageRun(short.report, ())
    assert math.isnan(empty.worst_delay_s(empty))


def test_the_naive_pool_deadlocks_where_notebook_03_predicts():
    seen = probe_naive(naive_pool)
    assert (seen.finished, seen.deadlocked, seen.error) == (False, True, "")
    assert (seen.stopped_s, seen.handler_calls, seen.completed, seen.waiting_on_put) == (
        0.1,
        2,
        0,
        3,
    )
    assert seen.message.startswith("deadlock at virtual time 0.1 s")


def test_one_failure_in_ten_deadlocks_it_too_after_a_few_items():
    seen = probe_naive(naive_pool, failure_rate=0.1, seed=1)
    assert seen.deadlocked and 0 < seen.completed < 20 and seen.waiting_on_put == 3
    assert probe_naive(naive_pool, failure_rate=0.1, seed=1) == seen  # seeded: exact again


def test_a_healthy_downstream_lets_the_naive_pool_finish():
    seen = probe_naive(naive_pool, failure_rate=0.0)
    assert (seen.finished, seen.deadlocked, seen.completed, seen.handler_calls) == (
        True,
        False,
        20,
        20,
    )
    assert seen.stopped_s == pytest.approx(1.0)  # 20 items, 2 workers, 0.1 s each


async def _unbounded(handler, items, concurrency=2, maxsize=4, max_attempts=3):
    # A wrong naive pool: its queue has no bound, so a put never waits.
    queue: asyncio.Queue = asyncio.Queue()

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


async def _retries_forever(handler, items):
    queue: asyncio.Queue = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    while True:
        item = await queue.get()
        try:
            await handler(item)
        except Exception:
            queue.put_nowait(item)


async def _workers_too_late(handler, items, maxsize=4):
    queue: asyncio.Queue = asyncio.Queue(maxsize)
    for item in items:
        await queue.put(item)


def _not_a_coroutine(handler, items):
    return len(list(items))


async def _one_argument(handler):
    await handler(0)


async def _raises(handler, items):
    raise RuntimeError("the pool is broken")


def test_what_a_learners_pool_does_is_reported_never_raised():
    unbounded = probe_naive(_unbounded)
    assert unbounded.finished and unbounded.handler_calls == 60 and not unbounded.error
    assert unbounded.stopped_s == pytest.approx(3.0)  # 60 calls, 2 workers, 0.1 s each
    forever = probe_naive(_retries_forever, max_calls=500)
    assert not forever.finished and not forever.deadlocked and forever.handler_calls == 500
    assert forever.error == "stopped after 500 handler calls: it retries without end"
    late = probe_naive(_workers_too_late)
    assert late.deadlocked and late.handler_calls == 0 and late.stopped_s == 0.0
    assert late.waiting_on_put == 1
    assert probe_naive(_not_a_coroutine).error == (
        "TypeError: object int can't be used in 'await' expression"
    )
    assert probe_naive(_one_argument).error.startswith("TypeError: _one_argument() takes 1")
    broken = probe_naive(_raises)
    assert broken.error == "RuntimeError: the pool is broken" and not broken.finished


def test_the_probe_runs_inside_a_running_loop_as_in_a_notebook():
    async def cell():
        return probe_naive(naive_pool)

    assert asyncio.run(cell()) == probe_naive(naive_pool)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"failure_rate": 1.5}, "failure_rate must be a number from 0 to 1, got 1.5"),
        ({"failure_rate": math.nan}, "failure_rate must be a number from 0 to 1, got nan"),
        ({"failure_rate": "often"}, "failure_rate must be a number from 0 to 1, got 'often'"),
        ({"n_items": -1}, "n_items must be an integer >= 0, got -1"),
        ({"max_calls": 0}, "max_calls must be an integer >= 1, got 0"),
    ],
)
def test_bad_settings_of_the_probe_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        probe_naive(naive_pool, **settings)


def test_the_probe_needs_something_to_call():
    with pytest.raises(TypeError, match="naive must be a coroutine function, got Ellipsis"):
        probe_naive(...)
