"""PipelineConfig(priority=KEY): lowest key first, FIFO among equals, retries at their place."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import fractions
import math

import numpy as np
import pytest

from pipeline import Backoff, Pipeline, PipelineConfig, RateLimit
from pipeline.priority import PriorityKeys
from pipeline.queue import PriorityWorkQueue
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once


def prefilled(handler, payloads, **overrides):
    """Run ``payloads``, all queued before the first worker takes one; the pipeline back."""

    async def main():
        config = PipelineConfig(
            **{"concurrency": 1, "queue_maxsize": None, "drain_timeout_s": None, **overrides}
        )
        pipe = Pipeline(handler, config)
        async with pipe:
            # Queue everything first: the worker only runs at the first suspension.
            for payload in payloads:
                pipe.put_nowait(payload)
        return pipe

    return run_virtual(main())


def recording():
    order = []

    async def handle(x):
        order.append(x)
        await asyncio.sleep(1.0)
        return x

    return order, handle


def test_ten_thousand_equal_keys_are_served_first_in_first_out():
    order, handle = recording()
    pipe = prefilled(handle, range(10_000), priority=lambda x: 7)
    assert order == list(range(10_000))
    assert pipe.report.completed == 10_000 and pipe.report.balanced


def test_a_single_worker_serves_a_prefilled_queue_in_exact_key_order():
    order, handle = recording()
    keys = {x: (x * 7919) % 13 for x in range(200)}
    prefilled(handle, range(200), priority=keys.__getitem__)
    # Lower key first; among equal keys, admission order (a stable sort of the payloads).
    assert order == sorted(range(200), key=lambda x: keys[x])


def test_payloads_are_never_compared():
    class Opaque:
        def __lt__(self, other):
            raise AssertionError("payloads must never be compared")

        __gt__ = __le__ = __ge__ = __lt__

    order, handle = recording()
    items = [Opaque() for _ in range(50)]
    prefilled(handle, items, priority=lambda item: 0)
    assert order == items


@pytest.mark.parametrize(
    "key",
    [
        lambda x: -x,
        lambda x: float(-x),
        lambda x: np.int64(-x),
        lambda x: np.float32(-x),
        lambda x: decimal.Decimal(-x),
        lambda x: fractions.Fraction(-x, 3),
        lambda x: (x % 2, -x),
        lambda x: f"{1000 - x:04d}",
        lambda x: datetime.datetime(2026, 1, 1) - datetime.timedelta(seconds=x),
        lambda x: x % 2 == 0,  # bool: False (odd) first
    ],
)
def test_every_kind_of_key_orders_like_python(key):
    order, handle = recording()
    prefilled(handle, range(30), priority=key)
    assert order == sorted(range(30), key=key)


def test_a_retry_goes_back_at_its_own_place_by_key_and_admission_order():
    # Payload 5 (key 1) fails once and is back in the queue while payloads 0-4 (key 0)
    # and 6-9 (key 1, admitted after it) wait: it comes after every key-0 item, before
    # the key-1 items admitted after it.
    order = []
    failed = set()

    async def handle(x):
        order.append(x)
        await asyncio.sleep(1.0)
        if x == 5 and x not in failed:
            failed.add(x)
            raise ValueError("once")

    async def main():
        pipe = Pipeline(
            handle,
            PipelineConfig(
                concurrency=1,
                queue_maxsize=None,
                priority=lambda x: 0 if x < 5 or x >= 10 else 1,
                backoff=Backoff.none(),
            ),
        )
        async with pipe:
            for x in [5, 6, 7]:
                pipe.put_nowait(x)
            await asyncio.sleep(0.5)  # 5 is running; it fails at t = 1
            for x in [0, 1, 8, 9]:
                pipe.put_nowait(x)
            await asyncio.sleep(1.0)  # 5 is back in the queue
            for x in [10, 11]:
                pipe.put_nowait(x)
        return pipe.report

    report = run_virtual(main())
    assert order == [5, 0, 1, 10, 11, 5, 6, 7, 8, 9]
    assert report.completed == 9 and report.balanced


def test_a_retry_never_jumps_a_better_key():
    queue = PriorityWorkQueue(None)

    class Item:
        def __init__(self, key, seq):
            self.key, self.seq = key, seq

    retry, better = Item(5, 0), Item(1, 9)
    queue.hold()
    queue.put_nowait(better)
    queue.readmit(retry)
    assert queue.get_nowait() is better and queue.get_nowait() is retry


@pytest.mark.parametrize(
    ("key", "reason_text"),
    [
        (lambda x: 1 / 0 if x == 3 else x, "division by zero"),
        (lambda x: math.nan if x == 3 else x, "got nan"),
        (lambda x: np.float64("nan") if x == 3 else x, "got nan"),
        (lambda x: decimal.Decimal("NaN") if x == 3 else x, "NaN"),
        (lambda x: decimal.Decimal("sNaN") if x == 3 else x, "sNaN"),
        (lambda x: None if x == 3 else x, "got None"),
        (lambda x: "three" if x == 3 else x, "does not compare with the keys before it"),
        (lambda x: (x, "a") if x == 3 else (x, 1), "does not compare with the keys before it"),
        (lambda x: object() if x == 3 else x, "priority key must be"),
        (lambda x: np.array([1, 2]) if x == 3 else x, "priority key must be"),
    ],
)
def test_a_bad_key_dead_letters_that_item_without_a_handler_call(key, reason_text):
    called = []

    async def handle(x):
        called.append(x)

    async def main():
        pipe = Pipeline(
            handle, PipelineConfig(concurrency=2, queue_maxsize=3, priority=key, max_attempts=5)
        )
        return await pipe.run(range(8))

    report = run_virtual(main())
    assert_each_payload_once(report, range(8))
    assert [letter.payload for letter in report.dead_letters] == [3]
    letter = report.dead_letters[0]
    assert letter.reason == "bad_priority" and letter.attempts == 1  # never retried
    assert reason_text in letter.errors[0].message
    assert sorted(called) == [0, 1, 2, 4, 5, 6, 7]


@pytest.mark.parametrize("put", ["put_nowait", "put"])
def test_a_key_function_that_raises_a_base_exception_is_not_swallowed_and_frees_its_slot(put):
    # The payload was not admitted (the caller sees the KeyboardInterrupt): the slot it
    # had reserved is free again, so a full-sized queue still takes the next item.
    def key(x):
        if x == "bad":
            raise KeyboardInterrupt
        return x

    async def main():
        config = PipelineConfig(priority=key, queue_maxsize=1, on_full="reject")
        async with Pipeline(lambda x: x, config) as pipe:
            for _ in range(3):
                with pytest.raises(KeyboardInterrupt):
                    result = getattr(pipe, put)("bad")
                    if put == "put":
                        await result
            assert pipe.statistics().queue_size == 0
            pipe.put_nowait(1)  # the queue's one slot is free
        return pipe.report

    report = run_virtual(main())
    assert report.completed == 1 and report.offered == 1


def test_the_first_good_key_fixes_the_shape():
    keys = PriorityKeys(lambda x: x)
    assert keys.of((1, "a")) == (1, "a")
    with pytest.raises(TypeError, match=r"shaped \(number, str\), this one \(number, number\)"):
        keys.of((1, 2))
    aware = PriorityKeys(lambda x: x)
    aware.of(datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    with pytest.raises(TypeError, match="naive datetime"):
        aware.of(datetime.datetime(2026, 1, 1))


def test_a_full_queue_sheds_a_better_key_too_no_displacement():
    async def main():
        release = asyncio.Event()

        async def hold(x):
            await release.wait()

        pipe = Pipeline(
            hold,
            PipelineConfig(concurrency=1, queue_maxsize=2, on_full="reject", priority=lambda x: x),
        )
        async with pipe:
            assert await pipe.put(10)  # running
            await asyncio.sleep(0)
            assert await pipe.put(11) and await pipe.put(12)  # queued: full
            assert not await pipe.put(0)  # the best key still is shed: nothing is displaced
            release.set()
        return pipe.report

    report = run_virtual(main())
    assert list(report.shed) == [0] and report.completed == 3 and report.balanced


def test_a_blocked_producer_of_a_better_key_waits_its_turn_then_goes_first():
    order, handle = recording()

    async def main():
        pipe = Pipeline(
            handle, PipelineConfig(concurrency=1, queue_maxsize=2, priority=lambda x: x)
        )
        async with pipe:
            for x in [10, 11, 12]:
                await pipe.put(x)  # 10 and 11 fill the queue; 12 waits for 10 to start
            await pipe.put(0)  # waits for a slot (11 starts at 1 s), then is the best queued
        return pipe.report

    report = run_virtual(main())
    assert order == [10, 11, 0, 12] and report.balanced
    assert report.statistics.producer_blocked_s == 1.0


def test_priority_with_a_rate_limit_keeps_key_order():
    order, handle = recording()
    pipe = prefilled(
        handle,
        range(20),
        priority=lambda x: -x,
        rate_limit=RateLimit(requests_per_minute=60, burst_s=1.0),
    )
    assert order == list(range(19, -1, -1)) and pipe.report.completed == 20


def test_a_plain_function_handler_with_prefetch_serves_by_key():
    order = []

    def handle(x):
        order.append(x)

    prefilled(handle, range(40), priority=lambda x: x % 4, prefetch=1)
    assert order == sorted(range(40), key=lambda x: x % 4)


def test_the_drain_serves_what_is_queued_in_key_order():
    order, handle = recording()

    async def main():
        pipe = Pipeline(handle, PipelineConfig(concurrency=1, queue_maxsize=None, priority=abs))
        async with pipe:
            for x in [3, -1, 2, 0, -2]:
                pipe.put_nowait(x)
            pipe.stop()  # intake closed: what is queued is served, in key order
        return pipe.report

    report = run_virtual(main())
    assert order == [0, -1, 2, -2, 3] and report.completed == 5


def test_statistics_and_repr_while_ordered():
    async def main():
        pipe = Pipeline(lambda x: x, PipelineConfig(queue_maxsize=5, priority=lambda x: x))
        async with pipe:
            pipe.put_nowait(2)
            pipe.put_nowait(1)
            stats = pipe.statistics()
            assert stats.queue_size == 2 and "ordered" in repr(pipe._queue)
            assert stats.oldest_age_s == 0.0

    run_virtual(main())
