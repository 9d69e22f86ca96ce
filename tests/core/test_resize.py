"""``Pipeline.resize``: the pool grows and shrinks while the run goes on, losing nothing.

A run with a finite source starts draining once the source is read, and a draining pipeline
refuses to resize: the queues here are small so that the source is still being read.

Most tests run on the virtual clock (``run_virtual``), where "at t = 0.5 s" is exact and a
fuzzed schedule is reproducible from its seed; two run on the real clock, one with a
plain-function handler on threads with ``prefetch``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections import Counter
from decimal import Decimal

import numpy as np
import pytest

from pipeline import Backoff, EventKind, Pipeline, PipelineClosed, PipelineConfig
from pipeline.queue import WorkerRetired, WorkQueue
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_nothing_lost


def sleeper(seconds: float, running: list[int] | None = None):
    """A handler that takes ``seconds`` of loop time; ``running[0]`` counts calls in progress."""

    async def handle(item: int) -> int:
        if running is not None:
            running[0] += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            if running is not None:
                running[0] -= 1
        return item

    return handle


def test_shrinking_lets_busy_workers_finish_and_counts_them_until_they_do():
    running = [0]

    async def main():
        pipe = Pipeline(sleeper(1.0, running), PipelineConfig(concurrency=8, queue_maxsize=10))
        run = asyncio.ensure_future(pipe.run(range(100)))
        await asyncio.sleep(0.5)
        assert running[0] == 8
        pipe.resize(2)
        # Every worker is busy: none leaves before its item ends, and they all still count.
        assert pipe.statistics().workers == 8
        await asyncio.sleep(1.0)  # t = 1.5: the six leavers finished their items and left
        assert running[0] == 2
        assert pipe.statistics().workers == 2
        await asyncio.sleep(1.7)  # t = 3.2
        pipe.resize(5)
        assert pipe.statistics().workers == 5
        await asyncio.sleep(0)
        assert running[0] == 5  # the new workers took items at once
        return await run

    report = run_virtual(main())
    assert report.completed == 100 and not report.unfinished and not report.dead_letters


def test_idle_workers_leave_at_once():
    running = [0]

    async def main():
        pipe = Pipeline(sleeper(1.0, running), PipelineConfig(concurrency=4))
        async with pipe:
            await asyncio.sleep(0.1)
            pipe.resize(1)
            assert pipe.statistics().workers == 1
            for item in range(3):
                await pipe.put(item)
            await asyncio.sleep(0.5)
            assert running[0] == 1  # one worker left to take the three items
            assert pipe.statistics().workers == 1
        return pipe.report

    report = run_virtual(main())
    assert report.completed == 3


def test_growing_keeps_workers_due_to_leave_before_starting_new_ones():
    running = [0]

    async def main():
        pipe = Pipeline(sleeper(1.0, running), PipelineConfig(concurrency=4, queue_maxsize=5))
        run = asyncio.ensure_future(pipe.run(range(40)))
        await asyncio.sleep(0.5)
        pipe.resize(1)
        assert pipe.statistics().workers == 4  # 1, and 3 busy ones due to leave
        pipe.resize(3)
        assert pipe.statistics().workers == 4  # 3, and 1 still due to leave
        await asyncio.sleep(0)
        assert running[0] == 4  # no fifth call: two of the leavers were kept, none started
        await asyncio.sleep(1.0)
        assert running[0] == 3 and pipe.statistics().workers == 3
        return await run

    report = run_virtual(main())
    assert report.completed == 40


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (0, ValueError, "workers must be >= 1"),
        (-3, ValueError, "workers must be >= 1"),
        (10**7, ValueError, "at most 1,000,000"),
        (True, TypeError, "workers must be an integer"),
        (2.0, TypeError, "workers must be an integer"),
        (float("nan"), TypeError, "workers must be an integer"),
        (Decimal(2), TypeError, "workers must be an integer"),
        ("3", TypeError, "workers must be an integer"),
    ],
)
def test_bad_sizes_are_refused_naming_the_parameter(value, error, words):
    async def main():
        pipe = Pipeline(sleeper(0.1), PipelineConfig(concurrency=2))
        async with pipe:
            with pytest.raises(error, match=words):
                pipe.resize(value)
            assert pipe.statistics().workers == 2
        return pipe.report

    run_virtual(main())


def test_numpy_integers_are_sizes():
    async def main():
        pipe = Pipeline(sleeper(0.1), PipelineConfig(concurrency=2))
        async with pipe:
            pipe.resize(np.int64(5))
            assert pipe.statistics().workers == 5
            assert type(pipe.statistics().workers) is int

    run_virtual(main())


def test_resize_outside_the_run_is_an_error_not_a_no_op():
    async def main():
        pipe = Pipeline(sleeper(1.0), PipelineConfig(concurrency=2))
        with pytest.raises(
            PipelineClosed, match=r"resize\(3\) needs a running pipeline.*concurrency"
        ):
            pipe.resize(3)
        await pipe.__aenter__()
        await pipe.put(1)
        pipe.stop()
        with pytest.raises(PipelineClosed, match="draining"):
            pipe.resize(3)
        await pipe.drain()
        with pytest.raises(PipelineClosed, match="closed"):
            pipe.resize(3)
        assert pipe.statistics().workers == 2

    run_virtual(main())


def test_a_handler_may_resize_its_own_pipeline():
    seen: list[int] = []

    async def main():
        pipe: Pipeline

        async def handle(item: int) -> int:
            if item == 0:
                pipe.resize(1)  # from inside a worker that is itself busy
            seen.append(pipe.statistics().workers)
            await asyncio.sleep(1.0)
            return item

        pipe = Pipeline(handle, PipelineConfig(concurrency=3, queue_maxsize=2))
        return await pipe.run(range(9))

    report = run_virtual(main())
    assert report.completed == 9
    assert seen[-1] == 1


async def _fuzzed_run(seed: int) -> tuple[object, Counter, list, list[str]]:
    """One run with resizes at random moments, failures, retries, deadlines and an ending
    chosen by the seed (a full drain, a drain that times out, or one or two cancels)."""
    rng = random.Random(seed)
    calls: Counter = Counter()
    succeeded: list[int] = []  # a list: an item that succeeded twice would show
    problems: list[str] = []
    running = [0]
    active: set[int] = set()  # the calls in progress, numbered
    pipe: Pipeline

    async def handle(item: int) -> int:
        calls[item] += 1
        running[0] += 1
        call = calls.total()
        active.add(call)
        try:
            if running[0] > pipe.statistics().workers:
                problems.append(f"{running[0]} calls with {pipe.statistics().workers} workers")
            await asyncio.sleep(rng.expovariate(2.0))
            if rng.random() < 0.3:
                raise ValueError("flaky")
            succeeded.append(item)
            return item
        finally:
            running[0] -= 1
            active.discard(call)

    async def outlive(calls_now: set[int]) -> None:
        while calls_now & active and pipe.state.value == "open":
            await asyncio.sleep(0.05)

    config = PipelineConfig(
        concurrency=rng.randint(1, 6),
        queue_maxsize=rng.choice([None, 1, 4, 20]),
        max_attempts=rng.randint(1, 4),
        backoff=Backoff(base_s=0.1, factor=2.0, cap_s=1.0),
        max_wait_s=rng.choice([None, 2.0, 10.0]),
        drain_timeout_s=rng.choice([None, 0.5, 3.0]),
    )
    pipe = Pipeline(handle, config, rng=random.Random(seed))
    n_items = rng.choice([0, 1, 5, 60])

    async def resizer() -> None:
        for _ in range(rng.randint(0, 12)):
            await asyncio.sleep(rng.choice([0.0, rng.uniform(0, 2)]))
            size = rng.randint(1, 8)
            try:
                pipe.resize(size)
            except PipelineClosed:
                if pipe.state.value == "open":
                    problems.append("refused while open")
                return
            if pipe.statistics().workers < size:
                problems.append(f"resize({size}) left {pipe.statistics().workers} workers")
            if rng.random() < 0.5:
                # Once the workers woken before the resize have started their calls (one
                # turn of the loop), and the calls running then have ended, and those
                # started meanwhile, every leaver has left.
                await asyncio.sleep(0)
                await outlive(set(active))
                await outlive(set(active))
                if pipe.state.value == "open" and (
                    running[0] > size or pipe.statistics().workers != size
                ):
                    problems.append(
                        f"after resize({size}): {running[0]} calls, "
                        f"{pipe.statistics().workers} workers"
                    )

    ending = rng.choice(["drain", "cancel", "cancel twice"])
    run = asyncio.ensure_future(pipe.run(range(n_items)))
    resizing = asyncio.ensure_future(resizer())
    if ending != "drain":
        await asyncio.sleep(rng.uniform(0, 8))
        run.cancel()
        if ending == "cancel twice":
            await asyncio.sleep(rng.choice([0, 0.01]))
            run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    resizing.cancel()
    await asyncio.gather(resizing, return_exceptions=True)
    return pipe.report, calls, succeeded, problems


@pytest.mark.parametrize("seed", range(150))
def test_fuzzed_resizes_lose_and_duplicate_nothing(seed):
    report, calls, succeeded, problems = run_virtual(_fuzzed_run(seed))
    assert problems == []
    assert_nothing_lost(report, list(range(report.offered)), succeeded)
    assert report.attempts == sum(calls.values())


def test_on_the_real_clock_with_threads_and_prefetch_nothing_is_lost():
    lock = threading.Lock()
    running = [0]
    most = [0]
    done: list[int] = []

    def handle(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.005)
        with lock:
            running[0] -= 1
            done.append(item)
        return item

    async def main():
        pipe = Pipeline(handle, PipelineConfig(concurrency=3, prefetch=2, queue_maxsize=20))
        run = asyncio.ensure_future(pipe.run(range(200)))
        await asyncio.sleep(0.05)
        pipe.resize(1)
        await asyncio.sleep(0.05)
        pipe.resize(4)
        await asyncio.sleep(0.02)
        pipe.resize(2)
        return await run

    report = asyncio.run(main())
    assert report.completed == 200 and sorted(done) == list(range(200))
    assert most[0] <= 4 * 2  # never more calls than the largest pool's prefetch allows


def test_on_the_real_clock_an_async_pool_shrinks_and_grows():
    async def main():
        running = [0]
        pipe = Pipeline(sleeper(0.01, running), PipelineConfig(concurrency=6, queue_maxsize=30))
        run = asyncio.ensure_future(pipe.run(range(300)))
        await asyncio.sleep(0.03)
        pipe.resize(2)
        await asyncio.sleep(0.05)  # every leaver's item (10 ms) has ended
        assert running[0] <= 2 and pipe.statistics().workers == 2
        pipe.resize(7)
        return await run

    report = asyncio.run(main())
    assert report.completed == 300


def test_a_worker_woken_for_an_item_another_took_leaves_if_workers_are_due_to():
    """The queue's side of shrinking: a worker woken for an item that another caller
    took comes back to wait; if workers are still due to leave, it leaves instead."""

    async def main():
        queue: WorkQueue[int] = WorkQueue(None)
        first = asyncio.ensure_future(queue.get())
        second = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)  # both wait, first the longest
        queue.put_nowait(7)  # wakes `first`...
        assert queue.get_nowait() == 7  # ...but this caller takes the item before it runs
        assert queue.retire_waiting(2) == 1  # `second` is waiting: it leaves now
        queue.retiring += 1  # and one more is due to leave

        results = await asyncio.gather(first, second, return_exceptions=True)
        assert [type(result) for result in results] == [WorkerRetired, WorkerRetired]
        assert queue.retiring == 0

    run_virtual(main())


def test_a_busy_worker_leaving_is_an_event_with_the_new_count():
    left: list[tuple[float, int]] = []
    box: list[Pipeline] = []

    def listen(kind: EventKind, now: float, item: object) -> None:
        if kind is EventKind.WORKER_LEFT:
            left.append((now, box[0].statistics().workers))

    async def main():
        pipe = Pipeline(sleeper(1.0), PipelineConfig(concurrency=4, queue_maxsize=10))
        box.append(pipe)
        pipe.add_listener(listen)
        run = asyncio.ensure_future(pipe.run(range(40)))
        await asyncio.sleep(0.5)
        pipe.resize(1)  # every worker busy: three leave, each as its item ends at 1.0 s
        assert not left and pipe.statistics().workers == 4
        await asyncio.sleep(2.0)
        pipe.resize(3)  # growing starts workers (busy until 3.5 s): no departure
        await asyncio.sleep(0.25)
        pipe.resize(2)  # one busy worker due to leave: the first whose item ends, at 3.0 s
        return await run

    report = run_virtual(main())
    assert report.completed == 40
    assert left == [(1.0, 3), (1.0, 2), (1.0, 1), (3.0, 2)]
