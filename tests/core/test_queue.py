"""WorkQueue on its own, in the manner of CPython's test_asyncio/test_queues.py.

Each test runs on the virtual clock (:func:`~pipeline.sim.vloop.run_virtual`):
"blocks" means the waiter is still pending after the loop has run everything
else it could, and times are exact virtual seconds, not wall-clock thresholds.
"""

from __future__ import annotations

import asyncio

import pytest

from pipeline.errors import PipelineClosed, QueueFull
from pipeline.queue import WorkQueue
from pipeline.sim.vloop import run_virtual


async def settle() -> None:
    """Let every ready callback run (a few turns: a wake-up takes one, its task another)."""
    for _ in range(5):
        await asyncio.sleep(0)


# -- put / get -----------------------------------------------------------------------


def test_fifo_order_and_len():
    q = WorkQueue(maxsize=None)
    for x in range(5):
        q.put_nowait(x)
    assert len(q) == 5
    assert [q.get_nowait() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert len(q) == 0


def test_get_nowait_on_an_empty_queue_raises_queue_empty():
    with pytest.raises(asyncio.QueueEmpty):
        WorkQueue(maxsize=3).get_nowait()


def test_put_nowait_on_a_full_queue_raises_and_takes_nothing():
    q = WorkQueue(maxsize=2)
    q.put_nowait("a")
    q.put_nowait("b")
    assert q.full()
    with pytest.raises(QueueFull, match="full"):
        q.put_nowait("c")
    assert len(q) == 2 and [q.get_nowait(), q.get_nowait()] == ["a", "b"]


def test_an_unbounded_queue_is_never_full():
    q = WorkQueue(maxsize=None)
    for x in range(10_000):
        q.put_nowait(x)
    assert not q.full() and len(q) == 10_000 and q.peak == 10_000


def test_full_counts_queued_reserved_and_held_items():
    q = WorkQueue(maxsize=3)
    q.put_nowait("queued")
    q.reserve_nowait()
    assert not q.full()
    q.hold()
    assert q.full() and len(q) == 1 and q.held == 1
    assert q.try_reserve() is False  # nothing taken
    q.unhold()
    assert q.try_reserve() is True
    assert q.full()


def test_retries_are_served_before_new_items_in_the_order_they_became_due():
    q = WorkQueue(maxsize=None)
    q.put_nowait("new-1")
    q.hold()
    q.hold()
    q.put_nowait("new-2")
    q.readmit("retry-b")
    q.readmit("retry-a")
    assert q.held == 0
    assert [q.get_nowait() for _ in range(4)] == ["retry-b", "retry-a", "new-1", "new-2"]


def test_holding_never_waits_and_may_exceed_maxsize():
    q = WorkQueue(maxsize=1)
    q.put_nowait("x")
    q.hold()
    q.hold()  # a retrying item is never refused: a worker must not block on its own queue
    assert q.full() and q.held == 2
    q.readmit("r1")
    q.readmit("r2")
    assert len(q) == 3 and q.peak == 3


def test_drain_items_returns_retries_first_and_empties_the_queue():
    q = WorkQueue(maxsize=None)
    q.put_nowait(1)
    q.hold()
    q.readmit("r")
    assert q.drain_items() == ["r", 1]
    assert len(q) == 0


# -- blocking ------------------------------------------------------------------------


def test_get_blocks_until_an_item_is_put():
    async def main():
        q = WorkQueue(maxsize=1)
        loop = asyncio.get_running_loop()
        getter = asyncio.ensure_future(q.get())
        await settle()
        assert not getter.done()  # really blocked
        assert "getters=1" in repr(q)
        loop.call_later(2.5, q.put_nowait, "late")
        assert await getter == "late"
        return loop.time()

    assert run_virtual(main()) == 2.5


def test_reserve_blocks_while_full_and_resumes_when_a_get_frees_a_slot():
    async def main():
        q = WorkQueue(maxsize=1)
        loop = asyncio.get_running_loop()
        q.put_nowait("first")
        producer = asyncio.ensure_future(q.reserve())
        await settle()
        assert not producer.done() and q.waiting_put == 1
        loop.call_later(4.0, q.get_nowait)
        await producer
        q.put_reserved("second")
        return loop.time(), q.get_nowait(), q.waiting_put

    assert run_virtual(main()) == (4.0, "second", 0)


def test_slot_waiters_are_served_first_come_first_served():
    async def main():
        q = WorkQueue(maxsize=1)
        q.put_nowait(0)
        order = []

        async def producer(name):
            await q.reserve()
            order.append(name)
            q.put_reserved(name)

        tasks = [asyncio.ensure_future(producer(n)) for n in "abc"]
        await settle()
        for _ in "abc":
            q.get_nowait()
            await settle()
        await asyncio.gather(*tasks)
        return order

    assert run_virtual(main()) == ["a", "b", "c"]


def test_getters_are_served_first_come_first_served():
    async def main():
        q = WorkQueue(maxsize=None)
        getters = [asyncio.ensure_future(q.get()) for _ in range(3)]
        await settle()
        for x in "xyz":
            q.put_nowait(x)
        return await asyncio.gather(*getters)

    assert run_virtual(main()) == ["x", "y", "z"]


def test_release_of_an_unused_reservation_wakes_a_waiting_producer():
    async def main():
        q = WorkQueue(maxsize=1)
        q.reserve_nowait()
        waiter = asyncio.ensure_future(q.reserve())
        await settle()
        assert not waiter.done()
        q.release()
        await asyncio.wait_for(waiter, 1.0)
        return q.full()

    assert run_virtual(main()) is True


def test_unhold_frees_the_slot_for_a_waiting_producer():
    async def main():
        q = WorkQueue(maxsize=1)
        q.hold()
        waiter = asyncio.ensure_future(q.reserve())
        await settle()
        assert not waiter.done()
        q.unhold()
        await asyncio.wait_for(waiter, 1.0)
        return q.held

    assert run_virtual(main()) == 0


# -- cancellation --------------------------------------------------------------------


@pytest.mark.parametrize("times", [1, 2])
def test_a_cancelled_get_leaves_no_getter_behind(times):
    async def main():
        q = WorkQueue(maxsize=None)
        getter = asyncio.ensure_future(q.get())
        await settle()
        for _ in range(times):
            getter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await getter
        assert "getters" not in repr(q)
        q.put_nowait("kept")
        return len(q), q.get_nowait()

    assert run_virtual(main()) == (1, "kept")


def test_a_getter_cancelled_after_its_wake_up_passes_the_item_to_the_next_getter():
    async def main():
        q = WorkQueue(maxsize=None)
        first = asyncio.ensure_future(q.get())
        second = asyncio.ensure_future(q.get())
        await settle()
        q.put_nowait("only")  # wakes ``first``...
        first.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await first
        return await asyncio.wait_for(second, 1.0), len(q)

    assert run_virtual(main()) == ("only", 0)


@pytest.mark.parametrize("times", [1, 2])
def test_a_cancelled_reserve_takes_no_slot_and_leaves_the_line(times):
    async def main():
        q = WorkQueue(maxsize=1)
        q.put_nowait("x")
        waiter = asyncio.ensure_future(q.reserve())
        await settle()
        for _ in range(times):
            waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert q.waiting_put == 0
        q.get_nowait()
        q.put_nowait("y")  # the slot was not taken by the cancelled reserve
        return len(q)

    assert run_virtual(main()) == 1


def test_a_reserve_cancelled_after_its_wake_up_passes_the_slot_on():
    async def main():
        q = WorkQueue(maxsize=1)
        q.put_nowait("x")
        first = asyncio.ensure_future(q.reserve())
        second = asyncio.ensure_future(q.reserve())
        await settle()
        q.get_nowait()  # wakes ``first``...
        first.cancel()  # ...which declines the slot
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, 1.0)
        return q.waiting_put, q.full()

    assert run_virtual(main()) == (0, True)


# -- close ---------------------------------------------------------------------------


def test_close_wakes_every_waiting_producer_with_pipeline_closed():
    async def main():
        q = WorkQueue(maxsize=1)
        q.put_nowait("x")
        producers = [asyncio.ensure_future(q.reserve()) for _ in range(3)]
        await settle()
        q.close()
        outcomes = await asyncio.gather(*producers, return_exceptions=True)
        return [type(o) for o in outcomes], q.waiting_put

    assert run_virtual(main()) == ([PipelineClosed] * 3, 0)


def test_close_does_not_wake_getters_and_leaves_queued_items_to_take():
    async def main():
        q = WorkQueue(maxsize=2)
        getter = asyncio.ensure_future(q.get())
        await settle()
        q.close()
        await settle()
        assert not getter.done()  # documented: close wakes producers only
        getter.cancel()
        r = WorkQueue(maxsize=2)
        r.put_nowait("a")
        r.close()
        return await r.get()

    assert run_virtual(main()) == "a"


def test_a_closed_queue_refuses_new_items_but_still_readmits_retries():
    q = WorkQueue(maxsize=2)
    q.hold()
    q.close()
    with pytest.raises(PipelineClosed, match="closed"):
        q.put_nowait(1)
    with pytest.raises(PipelineClosed):
        q.reserve_nowait()
    with pytest.raises(PipelineClosed):
        q.try_reserve()
    q.readmit("retry")  # an item already inside finishes its attempts
    assert q.get_nowait() == "retry" and q.closed


def test_close_twice_is_harmless():
    q = WorkQueue(maxsize=1)
    q.close()
    q.close()
    assert q.closed and repr(q).endswith("closed>")


# -- repr and statistics -------------------------------------------------------------


def test_repr_shows_the_live_state():
    async def main():
        q = WorkQueue(maxsize=2)
        assert repr(q) == "<WorkQueue maxsize=2 queued=0>"
        q.put_nowait(1)
        q.reserve_nowait()
        q.hold()
        waiter = asyncio.ensure_future(q.reserve())
        await settle()
        shown = repr(q)
        q.close()
        await asyncio.gather(waiter, return_exceptions=True)
        return shown, repr(q)

    shown, closed = run_virtual(main())
    assert shown == "<WorkQueue maxsize=2 queued=1 reserved=1 held=1 waiting_put=1>"
    assert closed == "<WorkQueue maxsize=2 queued=1 reserved=1 held=1 closed>"


def test_peak_is_the_most_items_ever_queued_at_once():
    q = WorkQueue(maxsize=None)
    for x in range(3):
        q.put_nowait(x)
    q.get_nowait()
    q.get_nowait()
    q.put_nowait(3)
    q.hold()
    q.readmit("r")
    assert len(q) == 3 and q.peak == 3
    q.put_nowait(4)
    assert q.peak == 4


def test_empty_says_whether_an_item_is_queued():
    # Reserved and held slots count against maxsize but are not queued items.
    queue: WorkQueue[int] = WorkQueue(3)
    assert queue.empty()
    queue.reserve_nowait()
    queue.hold()
    assert queue.empty() and len(queue) == 0
    queue.put_reserved(1)
    queue.readmit(2)
    assert not queue.empty() and len(queue) == 2
    assert [queue.get_nowait(), queue.get_nowait()] == [2, 1]  # the retry lane first
    assert queue.empty()
