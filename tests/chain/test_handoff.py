"""HandOff and BatchFormer on their own, with a real Pipeline as the next stage.

In the manner of CPython's test_asyncio/test_queues.py, on the virtual clock:
"blocks" means still pending after every other task ran, and every time is an
exact virtual second.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from pipeline import Pipeline
from pipeline.chain.handoff import BatchFormer, HandOff
from pipeline.chain.stage import Batch
from pipeline.records import DeadLetter, Result
from pipeline.sim.vloop import run_virtual


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def ok(payload, value=None):
    return Result(payload=payload, value=payload if value is None else value, attempts=1)


def sleeping(seconds):
    async def handler(x):
        await asyncio.sleep(seconds)
        return x

    return handler


def hand_off(downstream, *, expands=False, batching=False, turns=False):
    closed = []
    sink = HandOff(
        asyncio.get_running_loop().time,
        downstream,
        expands=expands,
        batching=batching,
        on_downstream_closed=lambda: closed.append(True),
        turns=turns,
    )
    return sink, closed


# -- HandOff -------------------------------------------------------------------------


def test_at_the_tail_outputs_are_counted_and_nothing_waits():
    async def main():
        sink, _ = hand_off(None, expands=True)
        await sink.send(ok("page", value=("a", "b", "c")))
        return sink.settled_items, sink.completed_items, sink.outputs, sink.handed_on, len(sink)

    assert run_virtual(main()) == (1, 1, 3, 0, 0)


def test_a_dead_letter_settles_the_item_and_hands_nothing_on(config):
    async def main():
        async with Pipeline(sleeping(1.0), config()) as down:
            sink, _ = hand_off(down)
            letter = Result(payload="x", value=None, attempts=3, dead_letter=_letter("x"))
            await sink.send(letter)
            return sink.settled_items, sink.completed_items, sink.outputs, sink.handed_on

    assert run_virtual(main()) == (1, 0, 0, 0)


def _letter(payload):
    return DeadLetter(payload=payload, attempts=3, errors=(), reason="max_attempts")


def test_a_full_next_queue_blocks_the_hand_off_after_service(config):
    async def main():
        loop = asyncio.get_running_loop()
        # one worker busy for 10 s and room for one waiting item: the third output waits
        async with Pipeline(sleeping(10.0), config(concurrency=1, queue_maxsize=1)) as down:
            sink, _ = hand_off(down, expands=True)
            send = asyncio.ensure_future(sink.send(ok("page", value=(1, 2, 3))))
            await settle()
            assert not send.done()  # really blocked, holding the upstream worker
            assert (sink.handed_on, sink.pending) == (2, 1)
            assert "pending=1" in repr(sink)
            await send
            return loop.time(), sink.blocked_s, sink.handed_on, sink.pending

    # item 1 starts at 0 and ends at 10: item 2 leaves the queue then, and 3 gets its slot
    assert run_virtual(main()) == (10.0, 10.0, 3, 0)


def test_a_next_stage_that_stops_strands_what_it_did_not_take(config):
    async def main():
        async with Pipeline(sleeping(10.0), config(concurrency=1, queue_maxsize=1)) as down:
            sink, closed = hand_off(down, expands=True)
            send = asyncio.ensure_future(sink.send(ok("page", value=(1, 2, 3, 4))))
            await settle()
            down.stop()  # a waiting put gets PipelineClosed
            await send
            return sink.handed_on, sink.stranded, sink.pending, closed

    assert run_virtual(main()) == (2, [3, 4], 0, [True])


@pytest.mark.parametrize("times", [1, 2])
def test_a_hand_off_cancelled_while_it_waits_strands_the_rest(config, times):
    async def main():
        async with Pipeline(sleeping(10.0), config(concurrency=1, queue_maxsize=1)) as down:
            sink, closed = hand_off(down, expands=True)
            send = asyncio.ensure_future(sink.send(ok("page", value=("a", "b", "c"))))
            await settle()
            for _ in range(times):
                send.cancel()
            with pytest.raises(asyncio.CancelledError):
                await send
            return sink.handed_on, sink.stranded, sink.pending, closed

    # cancelled, not refused: on_downstream_closed is not called
    assert run_virtual(main()) == (2, ["c"], 0, [])


def test_with_turns_an_idle_worker_takes_each_output_before_the_next_is_judged(config):
    async def run(turns):
        async with Pipeline(
            sleeping(1.0), config(concurrency=3, queue_maxsize=1, on_full="reject")
        ) as down:
            sink, _ = hand_off(down, expands=True, turns=turns)
            await sink.send(ok("page", value=tuple(range(6))))
        return down.report.admitted, len(down.report.shed)

    # K = queue_maxsize + concurrency = 4 with the turn; without it only the queue's 1 fits
    assert run_virtual(run(True)) == (4, 2)
    assert run_virtual(run(False)) == (1, 5)


def test_a_batch_counts_its_payloads_as_items():
    async def main():
        sink, _ = hand_off(None, expands=True, batching=True)
        await sink.send(ok(Batch((1, 2, 3)), value=("x",)))
        return sink.settled_items, sink.completed_items, sink.outputs

    assert run_virtual(main()) == (3, 3, 1)


# -- BatchFormer ---------------------------------------------------------------------


def batches_seen(log):
    async def handler(batch):
        log.append((asyncio.get_running_loop().time(), tuple(batch)))
        await asyncio.sleep(1.0)
        return batch

    return handler


def test_a_full_batch_is_sent_at_once(config):
    async def main():
        log = []
        async with Pipeline(batches_seen(log), config()) as down:
            former = BatchFormer(down, 3, None, None)
            former.start("write")
            for x in range(7):
                await former.put(x)
            await settle()
            full = list(log)
            assert await former.drain(None)
        return full, log, former.batches, former.offered, former.admitted

    full, log, batches, offered, admitted = run_virtual(main())
    assert full == [(0.0, (0, 1, 2)), (0.0, (3, 4, 5))]
    # the drain sends the partial batch at once; it starts when a worker frees, at 1 s
    assert log[-1] == (1.0, (6,))
    assert (batches, offered, admitted) == (3, 7, 7)


def test_a_batch_is_sealed_window_s_after_its_first_payload(config):
    async def main():
        log = []
        loop = asyncio.get_running_loop()
        async with Pipeline(batches_seen(log), config()) as down:
            former = BatchFormer(down, 10, 2.5, None)
            former.start("write")
            await former.put("a")
            await asyncio.sleep(1.0)
            await former.put("b")
            await asyncio.sleep(5.0)
            await former.put("c")  # a new window opens at 6.0
            await asyncio.sleep(10.0)
            assert repr(former) == "<BatchFormer forming=0/10 batches=2>"
            await former.drain(None)
        return log, loop.time()

    log, _ = run_virtual(main())
    assert log == [(2.5, ("a", "b")), (8.5, ("c",))]


def test_a_sealed_batch_that_the_stage_cannot_take_blocks_the_next_put(config):
    async def main():
        loop = asyncio.get_running_loop()
        async with Pipeline(sleeping(9.0), config(concurrency=1, queue_maxsize=1)) as down:
            former = BatchFormer(down, 1, None, None)
            former.start("write")
            await former.put(1)  # taken by the worker
            await former.put(2)  # queued
            await former.put(3)  # sealed, its flusher waits for room
            waiter = asyncio.ensure_future(former.put(4))
            await settle()
            assert not waiter.done() and "sealed" in repr(former)
            await waiter
            started = loop.time()
            await former.drain(None)
        return started

    # the worker frees the queue at 9 s (item 1 done, 2 starts): 3 goes in, 4 may form
    assert run_virtual(main()) == 9.0


def test_a_reject_stage_sheds_a_whole_batch_and_counts_each_payload(config):
    async def main():
        async with Pipeline(
            sleeping(5.0), config(concurrency=1, queue_maxsize=1, on_full="reject")
        ) as down:
            former = BatchFormer(down, 2, None, keep_shed=None)
            former.start("write")
            for x in range(6):
                await former.put(x)
                await settle()
            await former.drain(None)
        return former.admitted, list(former.shed), former.batches

    # one batch in service, one queued, the third shed
    assert run_virtual(main()) == (4, [4, 5], 3)


def test_a_batch_whose_handler_fails_is_dead_lettered_as_one(config):
    async def fail(batch):
        raise RuntimeError(f"batch of {len(batch)}")

    async def main():
        async with Pipeline(fail, config(max_attempts=1)) as down:
            former = BatchFormer(down, 2, None, None)
            former.start("write")
            for x in range(4):
                await former.put(x)
            await former.drain(None)
        return former.admitted, [tuple(d.payload) for d in down.report.dead_letters]

    assert run_virtual(main()) == (4, [(0, 1), (2, 3)])


def test_drain_mid_batch_sends_the_partial_batch_and_refuses_more(config):
    async def main():
        log = []
        async with Pipeline(batches_seen(log), config()) as down:
            former = BatchFormer(down, 5, math.inf, None)
            former.start("write")
            await former.put("a")
            await former.put("b")
            sent = await former.drain(None)
            with pytest.raises(Exception, match="not taking payloads"):
                await former.put("c")
        return sent, log, former.unsent()

    assert run_virtual(main()) == (True, [(0.0, ("a", "b"))], [])


def test_a_drain_that_times_out_keeps_the_batch_unsent_and_wakes_waiting_puts(config):
    async def main():
        loop = asyncio.get_running_loop()
        async with Pipeline(sleeping(100.0), config(concurrency=1, queue_maxsize=1)) as down:
            former = BatchFormer(down, 1, None, None)
            former.start("write")
            await former.put(1)
            await former.put(2)
            await former.put(3)  # sealed; the flusher waits for room
            waiter = asyncio.ensure_future(former.put(4))
            await settle()
            sent = await former.drain(5.0)
            refused = await asyncio.gather(waiter, return_exceptions=True)
            down.stop()
        return sent, former.unsent(), loop.time() >= 5.0, type(refused[0]).__name__

    assert run_virtual(main()) == (False, [3], True, "PipelineClosed")


@pytest.mark.parametrize("times", [1, 2])
def test_abort_stops_the_flusher_and_is_safe_to_repeat(config, times):
    async def main():
        async with Pipeline(sleeping(100.0), config(concurrency=1, queue_maxsize=1)) as down:
            former = BatchFormer(down, 1, None, None)
            former.start("write")
            for x in (1, 2, 3):
                await former.put(x)
            await settle()
            for _ in range(times):
                await former.abort()
            down.stop()
        return former.unsent(), "closed" in repr(former)

    assert run_virtual(main()) == ([3], True)


def test_a_stage_that_stops_on_its_own_closes_the_former(config):
    async def main():
        async with Pipeline(sleeping(100.0), config(concurrency=1, queue_maxsize=1)) as down:
            former = BatchFormer(down, 1, None, None)
            former.start("write")
            for x in (1, 2, 3):
                await former.put(x)
            waiter = asyncio.ensure_future(former.put(4))
            await settle()
            down.stop()  # the flusher's waiting put gets PipelineClosed
            refused = await asyncio.gather(waiter, return_exceptions=True)
        return former.unsent(), type(refused[0]).__name__

    assert run_virtual(main()) == ([3], "PipelineClosed")
