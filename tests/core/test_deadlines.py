"""PipelineConfig(max_wait_s=S): an item not started within S seconds of admission expires."""

from __future__ import annotations

import asyncio
import decimal
import logging
import math

import numpy as np
import pytest

from pipeline import Backoff, EventKind, Pipeline, PipelineConfig, RateLimit
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once


async def stuck(x):
    await asyncio.sleep(3600.0)


def sleeper(seconds: float):
    async def handle(x):
        await asyncio.sleep(seconds)
        return x

    return handle


def config(**overrides):
    return PipelineConfig(
        **{"concurrency": 1, "queue_maxsize": None, "drain_timeout_s": None, **overrides}
    )


def test_queued_items_expire_at_their_deadline_even_with_every_worker_busy():
    seen = []

    async def main():
        pipe = Pipeline(stuck, config(max_wait_s=2.0, drain_timeout_s=0.0))
        async with pipe:
            for x in range(4):
                pipe.put_nowait(x)
            await asyncio.sleep(1.999)
            seen.append(pipe.statistics())
            await asyncio.sleep(0.002)
            seen.append(pipe.statistics())
        return pipe.report

    report = run_virtual(main())
    before, after = seen
    assert (before.queue_size, before.expired, before.workers_busy) == (3, 0, 1)
    assert (after.queue_size, after.expired, after.workers_busy) == (0, 3, 1)
    assert list(report.expired) == [1, 2, 3] and report.unfinished == [0]
    assert_each_payload_once(report, range(4))


def test_an_expired_item_frees_its_slot_for_a_blocked_producer():
    times = []

    async def main():
        pipe = Pipeline(stuck, config(queue_maxsize=1, max_wait_s=5.0, drain_timeout_s=0.0))
        async with pipe:
            await pipe.put(0)  # taken by the worker, stuck for an hour
            await asyncio.sleep(0)
            await pipe.put(1)  # fills the queue
            await pipe.put(2)  # waits until 1 expires at t = 5
            times.append(asyncio.get_running_loop().time())
        return pipe.report

    report = run_virtual(main())
    assert times == [5.0]
    assert list(report.expired) == [1] and sorted(report.unfinished) == [0, 2]
    assert report.statistics.producer_blocked_s == 5.0


def test_an_item_starting_just_before_its_deadline_runs_and_at_it_expires():
    async def main():
        pipe = Pipeline(sleeper(1.0), config(max_wait_s=1.0))
        return await pipe.run(range(3))

    report = run_virtual(main())
    # 0 starts at 0; 1 could start at 1.0, its deadline: too late. 2 likewise.
    assert report.completed == 1 and list(report.expired) == [1, 2]


def test_a_retry_that_could_only_start_after_the_deadline_expires_at_the_failure():
    events = []

    async def fail(x):
        await asyncio.sleep(1.0)
        raise ValueError("down")

    async def main():
        pipe = Pipeline(
            fail,
            config(max_wait_s=3.0, max_attempts=5, backoff=Backoff.constant(1.5)),
            on_event=lambda kind, now, item: events.append((kind.name, now)),
        )
        return await pipe.run([0])

    report = run_virtual(main())
    # Attempt 1 fails at 1.0, its retry starts at 2.5 (< 3.0) and fails at 3.5; the next
    # could only start at 5.0, past the deadline: it expires at 3.5.
    assert list(report.expired) == [0] and report.attempts == 2
    assert events[-3:] == [("RETRY_SCHEDULED", 3.5), ("READMITTED", 3.5), ("EXPIRED", 3.5)]
    assert report.statistics.retry_waiting == 0 and report.balanced


def test_a_retry_readmitted_before_its_deadline_expires_in_the_queue():
    failed = set()

    async def handle(x):
        await asyncio.sleep(1.0)
        if x == 0 and x not in failed:
            failed.add(x)
            raise ValueError("once")

    events = []

    async def main():
        pipe = Pipeline(
            handle,
            config(max_wait_s=1.5, backoff=Backoff.constant(0.1)),
            on_event=lambda kind, now, item: (
                events.append((kind.name, now, item.payload)) if item is not None else None
            ),
        )
        async with pipe:
            pipe.put_nowait(0)
            await asyncio.sleep(1.05)  # 0 failed at 1.0 and waits out its backoff
            pipe.put_nowait(1)  # the idle worker takes it at once, until 2.05
        return pipe.report

    report = run_virtual(main())
    # 0's retry is back in the queue at 1.1, with its deadline 1.5 still ahead; the only
    # worker is busy with 1 until 2.05, so the sweep expires 0 at 1.5.
    assert ("READMITTED", 1.1, 0) in [(k, round(t, 9), p) for k, t, p in events]
    assert events[-2:] == [("EXPIRED", 1.5, 0), ("COMPLETED", 2.05, 1)]
    assert report.completed == 1 and list(report.expired) == [0]


def test_the_rate_limit_wait_counts_as_waiting_and_expires_at_the_deadline():
    async def main():
        pipe = Pipeline(
            sleeper(0.0),
            config(
                concurrency=3,
                max_wait_s=10.0,
                rate_limit=RateLimit(requests_per_minute=60, burst_s=1.0),
            ),
        )
        return await pipe.run(range(30))

    report = run_virtual(main())
    # One start per second: 0 at once, then items 1-10 by t = 10 (item 10's start at
    # exactly 10 is too late), the rest expire at their deadlines.
    assert report.completed == 10
    assert sorted(report.expired) == list(range(10, 30))
    assert report.attempts == 10 and report.balanced
    assert report.duration_s == 10.0


def test_expired_event_log_line_and_hook_carry_the_item(caplog):
    events, hooked = [], []

    class Job:
        def __init__(self, n):
            self.n, self.trace_id = n, f"job-{n}"

    jobs = [Job(n) for n in range(3)]

    async def main():
        pipe = Pipeline(
            sleeper(5.0),
            config(max_wait_s=1.0),
            on_event=lambda kind, now, item: (
                events.append((kind, now, item)) if kind is EventKind.EXPIRED else None
            ),
            on_expired=hooked.append,
        )
        return await pipe.run(jobs)

    with caplog.at_level(logging.WARNING, logger="pipeline"):
        report = run_virtual(main())
    assert list(report.expired) == hooked == jobs[1:]
    assert [(now, item.payload) for _, now, item in events] == [(1.0, jobs[1]), (1.0, jobs[2])]
    lines = [r for r in caplog.records if getattr(r, "event", None) == "pipeline.expired"]
    assert [r.trace_id for r in lines] == ["job-1", "job-2"]
    assert [r.waited_s for r in lines] == [1.0, 1.0]


def test_a_raising_hook_loses_no_item_and_does_not_stall():
    def hook(payload):
        raise RuntimeError("hook broke")

    async def main():
        pipe = Pipeline(sleeper(1.0), config(concurrency=2, max_wait_s=0.5), on_expired=hook)
        return await pipe.run(range(10))

    report = run_virtual(main())
    assert report.completed == 2 and len(report.expired) == 8
    assert report.statistics.listener_errors == 8
    assert_each_payload_once(report, range(10))


def test_a_hook_raising_a_base_exception_stops_the_run_with_a_balanced_report():
    class Stop(BaseException):
        pass

    def hook(payload):
        raise Stop

    pipe = Pipeline(stuck, config(max_wait_s=1.0), on_expired=hook)

    async def main():
        return await pipe.run(range(3))

    with pytest.raises(Stop):
        run_virtual(main())
    assert pipe.report.balanced and len(pipe.report.expired) >= 1


def test_an_async_hook_is_refused_at_construction():
    async def hook(payload):
        pass

    with pytest.raises(TypeError, match="on_expired must be a plain function"):
        Pipeline(stuck, on_expired=hook)
    with pytest.raises(TypeError, match="on_expired must be a plain function"):
        Pipeline(stuck, on_expired=3)


def test_expired_payloads_are_kept_bounded_with_an_exact_count():
    async def main():
        pipe = Pipeline(sleeper(10.0), config(max_wait_s=1.0, keep_shed=5))
        return await pipe.run(range(1000))

    report = run_virtual(main())
    assert len(report.expired) == 999 and report.expired.kept == list(range(995, 1000))
    assert report.expired.dropped == 994 and report.balanced


@pytest.mark.parametrize("priority", [None, lambda x: -x])
def test_memory_stays_bounded_while_a_hung_worker_lets_items_expire(priority):
    # A service whose only worker hangs, fed for a long time: expired entries must not pile up.
    async def main():
        pipe = Pipeline(
            stuck,
            config(queue_maxsize=10, max_wait_s=1.0, drain_timeout_s=0.0, priority=priority),
        )
        peaks = []
        async with pipe:
            for x in range(5000):
                await pipe.put(x)
                if x % 500 == 0:
                    queue = pipe._queue
                    stored = len(queue._heap) if priority else len(queue._items)
                    peaks.append((len(pipe._sweep), stored, len(queue._removed)))
        return pipe.report, peaks

    report, peaks = run_virtual(main())
    # At the close: the stuck item and the last ten queued are handed back.
    assert len(report.unfinished) <= 11 and report.balanced
    assert len(report.expired) + len(report.unfinished) == 5000
    assert all(sweep <= 2 * 10 + 64 and items <= 2 * 10 + 33 for sweep, items, _ in peaks)


def test_per_item_deadlines_from_a_function():
    waits = {0: None, 1: 0.5, 2: math.inf, 3: 2.5, 4: decimal.Decimal("0.1"), 5: np.float64(9)}

    async def main():
        pipe = Pipeline(sleeper(1.0), config(max_wait_s=waits.__getitem__))
        return await pipe.run(range(6))

    report = run_virtual(main())
    # 0 runs 0-1; 4 (deadline 0.1) and 1 (0.5) expire; 2 runs 1-2; 3 (2.5) runs 2-3;
    # 5 (9) runs 3-4.
    assert list(report.expired) == [4, 1] and report.completed == 4


@pytest.mark.parametrize(
    ("wait", "message"),
    [
        (math.nan, "got nan"),
        (-1.0, "must be > 0"),
        (0, "must be > 0"),
        ("soon", "must be a real number"),
        (True, "must be a real number"),
    ],
)
def test_a_bad_per_item_deadline_dead_letters_that_item(wait, message):
    async def main():
        pipe = Pipeline(sleeper(0.1), config(max_wait_s=lambda x: wait if x == 1 else 5.0))
        return await pipe.run(range(3))

    report = run_virtual(main())
    assert [letter.payload for letter in report.dead_letters] == [1]
    letter = report.dead_letters[0]
    assert letter.reason == "bad_deadline" and message in letter.errors[0].message
    assert "max_wait_s(payload)" in letter.errors[0].message
    assert report.completed == 2 and report.balanced


def test_the_drain_lets_queued_items_run_or_expire_at_their_deadline():
    async def main():
        pipe = Pipeline(sleeper(1.0), config(max_wait_s=2.5))
        async with pipe:
            for x in range(5):
                pipe.put_nowait(x)
            pipe.stop()
        return pipe.report

    report = run_virtual(main())
    # Starts at 0, 1, 2; 3 and 4 (deadline 2.5) would start at 3: they expire at 2.5.
    assert report.completed == 3 and list(report.expired) == [3, 4]
    assert report.duration_s == 3.0


def test_a_drain_timeout_before_the_deadline_hands_items_back_unfinished():
    async def main():
        pipe = Pipeline(stuck, config(max_wait_s=100.0, drain_timeout_s=1.0))
        return await pipe.run(range(3))

    report = run_virtual(main())
    assert sorted(report.unfinished) == [0, 1, 2] and not report.expired


def test_inf_means_no_deadline():
    async def main():
        pipe = Pipeline(sleeper(1.0), config(max_wait_s=math.inf))
        report = await pipe.run(range(5))
        return report, pipe._sweep

    report, sweep = run_virtual(main())
    assert report.completed == 5 and sweep is None


def test_with_a_plain_function_handler_on_threads():
    import time

    def handle(x):
        time.sleep(0.001)

    async def main():
        pipe = Pipeline(handle, config(max_wait_s=30.0, concurrency=2, prefetch=2))
        return await pipe.run(range(20))

    report = asyncio.run(main())
    assert report.completed + len(report.expired) == 20 and report.balanced


def test_the_same_scenario_in_real_time_and_in_virtual_time():
    # Times scaled down for real time; only the outcome is compared, no wall-clock bound.
    def scenario(scale):
        async def handle(x):
            await asyncio.sleep(1.0 * scale)

        async def main():
            pipe = Pipeline(
                handle, config(concurrency=2, max_wait_s=2.5 * scale, priority=lambda x: -x)
            )
            async with pipe:
                for x in range(10):
                    pipe.put_nowait(x)
            return pipe.report

        return main

    virtual = run_virtual(scenario(1.0)())
    real = asyncio.run(scenario(0.05)())
    # Two workers, best key first: 9,8 at 0; 7,6 at 1; 5,4 at 2; the rest expire at 2.5.
    assert sorted(virtual.expired) == [0, 1, 2, 3] and virtual.completed == 6
    assert real.balanced and real.completed + len(real.expired) == 10
    assert real.completed >= 2  # the first two start at once, whatever the machine's load


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (math.nan, ValueError, "max_wait_s must be seconds > 0, math.inf or None"),
        (np.float64("nan"), ValueError, "got nan"),
        (decimal.Decimal("NaN"), ValueError, "got Decimal('NaN')"),
        (decimal.Decimal("sNaN"), ValueError, "got Decimal('sNaN')"),
        (-1.0, ValueError, "max_wait_s must be > 0"),
        (0, ValueError, "max_wait_s must be > 0 (seconds > 0, math.inf or None"),
        (-math.inf, ValueError, "got -inf"),
        (10**400, ValueError, "1e+400"),
        (True, TypeError, "max_wait_s must be a real number"),
        ("5", TypeError, "got '5'"),
    ],
)
def test_a_bad_max_wait_is_one_line_naming_it(value, error, words):
    with pytest.raises(error) as caught:
        PipelineConfig(max_wait_s=value)
    message = str(caught.value)
    assert message.startswith("max_wait_s") and words in message and "\n" not in message


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (2, 2.0),
        (np.float32(0.5), 0.5),
        (decimal.Decimal("1.5"), 1.5),
        (math.inf, math.inf),
        (np.inf, math.inf),
        (decimal.Decimal("Infinity"), math.inf),
    ],
)
def test_max_wait_is_kept_as_a_float(value, stored):
    config = PipelineConfig(max_wait_s=value)
    assert config.max_wait_s == stored and type(config.max_wait_s) is float


@pytest.mark.parametrize("value", [3, "first", [lambda x: x]])
def test_a_priority_that_is_not_callable_is_one_line(value):
    with pytest.raises(TypeError, match=r"^priority must be a function of the payload") as caught:
        PipelineConfig(priority=value)
    assert "\n" not in str(caught.value)


def test_the_results_stream_has_no_result_for_an_expired_item_and_one_for_a_refused_one():
    from tests.accounting import assert_results_accounted

    async def main():
        pipe = Pipeline(
            sleeper(1.0),
            config(max_wait_s=1.5, priority=lambda x: None if x == 4 else x),
        )
        delivered = []

        async def consume():
            async for result in pipe.results():
                delivered.append((result.payload, result.ok))

        consumer = asyncio.ensure_future(consume())
        report = await pipe.run(range(5))
        await consumer
        return report, delivered

    report, delivered = run_virtual(main())
    # 0 runs at once; then 4 (bad key) is refused ahead of the queue, 1 runs,
    # and 2 and 3 expire at 1.5.
    assert delivered == [(0, True), (4, False), (1, True)]
    assert list(report.expired) == [2, 3]
    finished = assert_each_payload_once(report, range(5))
    finished.update(letter.payload for letter in report.dead_letters)
    assert_results_accounted([payload for payload, _ in delivered], finished, report)
