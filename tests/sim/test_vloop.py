"""Tests of the virtual-time event loop (pipeline.sim.vloop).

Every test asserts virtual times (``loop.time()``), never wall-clock
thresholds. The reference for "same behaviour as asyncio" is a loop that keeps
asyncio's own ``_run_once`` and only swaps the clock (``_StockClockLoop``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import random
import selectors
import socket
import threading
import time
import traceback
from asyncio import base_events

import pytest

from pipeline.errors import DeadlockError
from pipeline.sim.vloop import VirtualEventLoop, new_virtual_loop, run_virtual

YEAR_S = 365 * 86400.0


def now() -> float:
    return asyncio.get_running_loop().time()


# -- reference: asyncio's own _run_once on a jumping clock ----------------------


class _JumpingSelector(selectors.DefaultSelector):
    """Instead of sleeping until the next timer, jump the loop's clock to it."""

    def __init__(self, loop: _StockClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout=None):
        if timeout is None:
            raise RuntimeError("reference loop would block forever")
        if timeout > 0:
            self._loop._t = max(self._loop._t, self._loop._scheduled[0]._when)
        return super().select(0)


class _StockClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._t = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._t


def run_on_stock(main):
    with asyncio.Runner(loop_factory=_StockClockLoop) as runner:
        return runner.run(main)


# -- the clock ------------------------------------------------------------------


def test_sleep_takes_exactly_its_virtual_duration():
    async def main():
        start = now()
        await asyncio.sleep(3600)
        return start, now()

    assert run_virtual(main()) == (0.0, 3600.0)
    assert run_virtual(main(), start_s=100.0) == (100.0, 3700.0)


def test_timers_fire_in_deadline_order_and_equal_deadlines_fifo():
    async def main():
        loop = asyncio.get_running_loop()
        rng = random.Random(3)
        fired = []
        expected = []
        for i in range(200):
            when = rng.choice([1.0, 2.0, 2.5]) if i % 3 == 0 else rng.uniform(0.0, 3.0)
            loop.call_at(when, lambda i=i, when=when: fired.append((i, when, now())))
            expected.append((when, i))
        await asyncio.sleep(5)
        return fired, expected

    fired, expected = run_virtual(main())
    # Sorted by (deadline, scheduling order): ties are FIFO; each fires at its exact deadline.
    assert [i for i, _, _ in fired] == [i for _, i in sorted(expected)]
    assert all(when == at for _, when, at in fired)


def test_time_does_not_move_inside_an_iteration():
    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        loop.call_later(1.0, lambda: seen.append(now()))
        loop.call_later(1.0, lambda: seen.append(now()))
        await asyncio.sleep(0)
        seen.append(now())
        await asyncio.sleep(2)
        return seen

    assert run_virtual(main()) == [0.0, 1.0, 1.0]


def test_timeout_and_wait_for_use_virtual_time():
    async def main():
        log = []
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(5):
                await asyncio.sleep(10)
        log.append(now())
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), 2.5)
        log.append(now())
        log.append(await asyncio.wait_for(asyncio.sleep(1, result="ok"), 2.5))
        log.append(now())
        return log

    assert run_virtual(main()) == [5.0, 7.5, "ok", 8.5]


async def _producer_consumer(seed: int, n_items: int = 60, workers: int = 3):
    """A bounded queue, workers, events and timeouts; returns a log of (time, event)."""
    rng = random.Random(seed)
    gaps = [rng.expovariate(2.0) for _ in range(n_items)]
    services = [rng.expovariate(0.8) for _ in range(n_items)]
    queue: asyncio.Queue[int | None] = asyncio.Queue(maxsize=2)
    first_done = asyncio.Event()
    log = []

    async def producer():
        for i, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            await queue.put(i)
            log.append((now(), "put", i))
        for _ in range(workers):
            await queue.put(None)

    async def worker(w):
        while (i := await queue.get()) is not None:
            log.append((now(), f"start-{w}", i))
            try:
                await asyncio.wait_for(asyncio.sleep(services[i]), 3.0)
            except TimeoutError:
                log.append((now(), f"timeout-{w}", i))
            first_done.set()

    async def watcher():
        await first_done.wait()
        log.append((now(), "first-done", -1))

    await asyncio.gather(producer(), watcher(), *(worker(w) for w in range(workers)))
    log.append((now(), "end", -1))
    return log


def test_queue_workload_matches_stock_asyncio_exactly():
    virtual = run_virtual(_producer_consumer(seed=7))
    stock = run_on_stock(_producer_consumer(seed=7))
    assert virtual == stock
    assert len(virtual) > 120


def test_seeded_workload_is_bit_identical_across_runs():
    first = run_virtual(_producer_consumer(seed=11))
    second = run_virtual(_producer_consumer(seed=11))
    assert [(t.hex(), e, i) for t, e, i in first] == [(t.hex(), e, i) for t, e, i in second]


def test_far_future_sleeps_complete_at_their_exact_deadline():
    async def main(duration_s):
        loop = asyncio.get_running_loop()
        start = now()
        handle = loop.call_later(duration_s, lambda: None)
        await asyncio.sleep(duration_s)
        return start, handle.when(), now()

    for duration in (YEAR_S, 100 * YEAR_S):
        start, deadline, end = run_virtual(main(duration))
        assert end == deadline == start + duration
    # Far past 2**24 s the spacing of floats exceeds asyncio's 1e-9 s resolution.
    start, deadline, end = run_virtual(main(1e-3), start_s=2.0**40)
    assert end == deadline == 2.0**40 + 1e-3


def test_hundred_thousand_chained_timers_without_recursion():
    async def main():
        loop = asyncio.get_running_loop()
        rng = random.Random(5)
        done = loop.create_future()
        fired = []

        def tick():
            fired.append(now())
            if len(fired) == 100_000:
                done.set_result(None)
            else:
                loop.call_later(rng.expovariate(1.0), tick)  # each timer schedules the next

        loop.call_soon(tick)
        await done
        return fired

    fired = run_virtual(main())
    assert len(fired) == 100_000
    assert fired == sorted(fired)


def test_many_timers_scheduled_at_once_fire_in_order():
    async def main():
        loop = asyncio.get_running_loop()
        rng = random.Random(5)
        deadlines = [rng.uniform(0.0, 1000.0) for _ in range(20_000)]
        fired = []
        for when in deadlines:
            loop.call_at(when, lambda when=when: fired.append((when, now())))
        await asyncio.sleep(1001)
        return deadlines, fired

    deadlines, fired = run_virtual(main())
    assert [when for when, _ in fired] == sorted(deadlines)
    assert all(when == at for when, at in fired)


def test_cancelled_timers_are_purged():
    async def main():
        loop = asyncio.get_running_loop()
        handles = [loop.call_later(10.0 + i, lambda: None) for i in range(200)]
        for handle in handles[:150]:
            handle.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return len(loop._scheduled)

    assert run_virtual(main()) == 50


# -- threads freeze virtual time -----------------------------------------------


def test_to_thread_freezes_virtual_time():
    def slow(value):
        time.sleep(0.1)  # real time: must cost no virtual time
        return value

    async def main():
        loop = asyncio.get_running_loop()
        log = []
        loop.call_later(0.05, lambda: log.append(("timer", now())))
        result = await asyncio.to_thread(slow, 42)
        log.append(("thread", result, now()))
        await asyncio.sleep(1)
        return log

    for _ in range(2):
        assert run_virtual(main()) == [("thread", 42, 0.0), ("timer", 0.05)]


def test_thread_results_arrive_in_submission_order_not_finishing_order():
    def job(i):
        time.sleep((3 - i) * 0.02)  # the last submitted finishes first, for real
        return i

    async def main():
        resumed = []

        async def offload(i):
            resumed.append((await asyncio.to_thread(job, i), now()))

        await asyncio.gather(*(offload(i) for i in range(4)))
        return resumed

    assert run_virtual(main()) == [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0)]


def test_threads_take_no_virtual_time_even_under_a_timeout():
    async def main():
        async with asyncio.timeout(0.001):
            await asyncio.to_thread(time.sleep, 0.02)
        worker = asyncio.create_task(asyncio.to_thread(time.sleep, 0.02))
        await asyncio.sleep(0)
        worker.cancel()  # the thread runs on; time stays frozen until it is done
        await asyncio.sleep(1)
        return now(), worker.cancelled()

    assert run_virtual(main()) == (1.0, True)


def test_run_in_executor_and_call_soon_threadsafe_from_a_worker():
    def job(loop, log):
        loop.call_soon_threadsafe(lambda: log.append(("posted", now())))
        time.sleep(0.02)
        return "done"

    async def main():
        loop = asyncio.get_running_loop()
        log = []
        await asyncio.sleep(2.0)
        loop.call_later(0.001, lambda: log.append(("timer", now())))
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            log.append((await loop.run_in_executor(pool, job, loop, log), now()))
        await asyncio.sleep(1)
        return log

    assert run_virtual(main()) == [("posted", 2.0), ("done", 2.0), ("timer", 2.001)]


def test_due_callbacks_run_while_a_thread_works():
    async def main():
        started = threading.Event()
        release = threading.Event()

        def job():
            started.set()
            release.wait(5)

        work = asyncio.ensure_future(asyncio.to_thread(job))
        await asyncio.to_thread(started.wait, 5)
        # The loop still runs ready callbacks and due timers while a thread works.
        asyncio.get_running_loop().call_later(0, release.set)
        await work
        return now()

    assert run_virtual(main()) == 0.0


# -- deadlocks --------------------------------------------------------------------


def test_deadlock_between_two_events_names_tasks_and_waits(caplog):
    cleaned = []

    async def waiter(mine: asyncio.Event, other: asyncio.Event):
        try:
            await mine.wait()
            other.set()
        finally:
            cleaned.append(asyncio.current_task().get_name())

    async def main():
        first, second = asyncio.Event(), asyncio.Event()
        await asyncio.sleep(1.5)
        a = asyncio.create_task(waiter(first, second), name="task-a")
        b = asyncio.create_task(waiter(second, first), name="task-b")
        await asyncio.gather(a, b)

    with pytest.raises(DeadlockError) as info:
        run_virtual(main())
    message = str(info.value)
    assert "virtual time 1.5 s" in message
    waiter_name = "test_deadlock_between_two_events_names_tasks_and_waits.<locals>.waiter"
    assert f"Task 'task-a' ({waiter_name}) waiting on Event.wait at test_vloop.py:" in message
    assert "Task 'task-b'" in message
    assert message.count("waiting on Event.wait at test_vloop.py:") == 2
    assert "waiting on asyncio.gather(...)" in message
    assert sorted(cleaned) == ["task-a", "task-b"]  # cancelled, finally blocks ran
    gc.collect()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_deadlock_on_queue_get_without_producer(caplog):
    async def consumer(queue):
        await queue.get()

    async def main():
        queue = asyncio.Queue()
        await asyncio.create_task(consumer(queue), name="worker-0")

    with pytest.raises(DeadlockError, match=r"Task 'worker-0' \(.*consumer\) waiting on Queue.get"):
        run_virtual(main())
    gc.collect()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_deadlock_with_a_task_that_ignores_cancellation(caplog):
    async def stubborn():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.Event().wait()  # waits again: nothing can ever wake it

    async def main():
        await asyncio.create_task(stubborn(), name="stubborn")

    with pytest.raises(DeadlockError, match="stubborn"):
        run_virtual(main())
    gc.collect()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- running it ---------------------------------------------------------------------


def test_run_virtual_inside_a_running_loop_uses_a_helper_thread():
    async def inner():
        await asyncio.sleep(60)
        return threading.current_thread().name, now()

    async def outer():
        return run_virtual(inner())  # synchronous call, like a Jupyter cell

    name, at = asyncio.run(outer())
    assert (name, at) == ("pipeline-virtual-loop", 60.0)


def test_exceptions_propagate_with_traceback_from_both_paths():
    async def failing():
        await asyncio.sleep(1)
        raise ValueError("boom")

    async def outer():
        return run_virtual(failing())

    for call in (lambda: run_virtual(failing()), lambda: asyncio.run(outer())):
        with pytest.raises(ValueError, match="boom") as info:
            call()
        names = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
        assert "failing" in names


def test_callback_exceptions_go_to_the_exception_handler():
    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        loop.set_exception_handler(lambda _loop, context: seen.append(context["exception"]))
        loop.call_later(1.0, lambda: 1 / 0)
        await asyncio.sleep(2)
        return seen

    (error,) = run_virtual(main())
    assert isinstance(error, ZeroDivisionError)


def test_runner_with_loop_factory_and_executor_shutdown():
    async def main():
        value = await asyncio.to_thread(sum, [1, 2, 3])
        await asyncio.sleep(10)
        return value, now()

    with asyncio.Runner(loop_factory=new_virtual_loop) as runner:
        assert runner.run(main()) == (6, 10.0)
        assert isinstance(runner.get_loop(), VirtualEventLoop)


def test_async_generators_are_finalised():
    closed = []

    async def ticks():
        try:
            while True:
                await asyncio.sleep(1)
                yield now()
        finally:
            closed.append(True)

    async def main():
        gen = ticks()
        return [await anext(gen), await anext(gen)]

    assert run_virtual(main()) == [1.0, 2.0]
    assert closed == [True]


def test_real_socket_io_still_works():
    async def main():
        left, right = socket.socketpair()
        _, left_writer = await asyncio.open_connection(sock=left)
        right_reader, right_writer = await asyncio.open_connection(sock=right)
        left_writer.write(b"ping\n")
        await left_writer.drain()
        line = await right_reader.readline()
        for writer in (left_writer, right_writer):
            writer.close()
            await writer.wait_closed()
        return line

    assert run_virtual(main()) == b"ping\n"


def test_bad_arguments():
    with pytest.raises(ValueError, match="start_s must be finite"):
        new_virtual_loop(float("inf"))

    async def main():
        return None

    with pytest.raises(ValueError, match="start_s"):
        run_virtual(main(), start_s=float("nan"))

    async def nan_timer():
        asyncio.get_running_loop().call_later(float("nan"), print)

    with pytest.raises(ValueError, match="NaN deadline"):
        run_virtual(nan_timer())
    with pytest.raises(TypeError, match="needs a coroutine"):
        run_virtual(main)  # type: ignore[arg-type]


def test_private_asyncio_names_we_rely_on_exist():
    # The loop overrides or reads these; this fails loudly if a Python release renames one.
    for name in ("_run_once", "_check_default_executor", "_write_to_self", "_check_closed"):
        assert callable(getattr(base_events.BaseEventLoop, name))
    assert isinstance(base_events._MIN_SCHEDULED_TIMER_HANDLES, int)
    assert isinstance(base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION, float)
    loop = new_virtual_loop()
    try:
        for name in (
            "_ready",
            "_scheduled",
            "_stopping",
            "_timer_cancelled_count",
            "_selector",
            "_internal_fds",
            "_default_executor",
            "_debug",
        ):
            assert hasattr(loop, name), name
        assert not loop._io_watched
        left, right = socket.socketpair()
        loop.add_reader(left.fileno(), lambda: None)
        assert loop._io_watched
        loop.remove_reader(left.fileno())
        assert not loop._io_watched
        left.close()
        right.close()
    finally:
        loop.close()
