"""ResultStream on its own, in the manner of CPython's test_asyncio/test_queues.py.

Every result is handed over or counted as dropped: each test checks
``delivered + dropped + len(stream)`` against what was sent. On the virtual
clock, so "blocks" means still pending after every other task ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import math

import pytest

from pipeline.records import Result
from pipeline.resultstream import ResultStream
from pipeline.sim.vloop import run_virtual


def result(x):
    return Result(payload=x, value=x * 10, attempts=1)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.parametrize("bad", [0, -1])
def test_maxsize_below_one_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match=f"results maxsize must be >= 1, got {bad}"):
        ResultStream(bad)


@pytest.mark.parametrize("bad", [True, 2.0, "3", None])
def test_maxsize_that_is_not_an_integer_is_a_type_error(bad):
    with pytest.raises(TypeError, match="results maxsize must be an integer >= 1"):
        ResultStream(bad)


def test_results_arrive_in_send_order_and_the_stream_ends_after_close():
    async def main():
        stream = ResultStream(10)
        reader = stream.reader()
        for x in range(3):
            await stream.send(result(x))
        stream.close()
        got = [r.payload async for r in reader]
        return got, stream.delivered, stream.dropped

    assert run_virtual(main()) == ([0, 1, 2], 3, 0)


def test_send_blocks_while_full_until_the_consumer_reads():
    async def main():
        stream = ResultStream(1)
        loop = asyncio.get_running_loop()
        reader = stream.reader()
        await stream.send(result(0))
        sender = asyncio.ensure_future(stream.send(result(1)))
        await settle()
        assert not sender.done() and len(stream) == 1  # backpressure: the worker waits
        await asyncio.sleep(3.0)
        first = await anext(reader)
        await sender
        return loop.time(), first.payload, len(stream)

    assert run_virtual(main()) == (3.0, 0, 1)


def test_a_reader_blocks_until_a_result_is_sent():
    async def main():
        stream = ResultStream(2)
        loop = asyncio.get_running_loop()
        reader = stream.reader()
        got = asyncio.ensure_future(anext(reader))
        await settle()
        assert not got.done()
        loop.call_later(1.5, lambda: asyncio.ensure_future(stream.send(result(7))))
        return (await got).payload, loop.time()

    assert run_virtual(main()) == (7, 1.5)


def test_close_wakes_a_waiting_reader_with_the_end_of_the_stream():
    async def main():
        stream = ResultStream(2)
        reader = stream.reader()
        got = asyncio.ensure_future(anext(reader))
        await settle()
        stream.close()
        with pytest.raises(StopAsyncIteration):
            await got
        return repr(reader)

    assert run_virtual(main()).startswith("<ResultReader closed of <ResultStream")


def test_close_wakes_every_waiting_sender_and_their_results_are_dropped():
    async def main():
        stream = ResultStream(1)
        stream.reader()
        await stream.send(result(0))
        senders = [asyncio.ensure_future(stream.send(result(x))) for x in (1, 2, 3)]
        await settle()
        stream.close()
        await asyncio.gather(*senders)
        return len(stream), stream.delivered, stream.dropped

    # the one that was waiting is still readable; the three senders were released
    assert run_virtual(main()) == (1, 0, 3)


def test_sending_after_close_drops_and_counts():
    async def main():
        stream = ResultStream(5)
        stream.close()
        await stream.send(result(1))
        return stream.dropped, len(stream)

    assert run_virtual(main()) == (1, 0)


@pytest.mark.parametrize("times", [1, 2])
def test_a_sender_cancelled_while_it_waits_counts_its_result_dropped_once(times):
    async def main():
        stream = ResultStream(1)
        reader = stream.reader()
        await stream.send(result(0))
        sender = asyncio.ensure_future(stream.send(result(1)))
        await settle()
        for _ in range(times):
            sender.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sender
        assert (await anext(reader)).payload == 0
        await stream.send(result(2))  # the cancelled sender left the line: room is free
        return stream.delivered, stream.dropped, len(stream)

    assert run_virtual(main()) == (1, 1, 1)


def test_a_cancelled_reader_leaves_and_the_senders_are_released():
    async def main():
        stream = ResultStream(1)

        async def consume():
            async for _ in stream.reader():
                await asyncio.sleep(math.inf)  # a consumer that never comes back

        consumer = asyncio.ensure_future(consume())
        await stream.send(result(0))
        await stream.send(result(1))
        sender = asyncio.ensure_future(stream.send(result(2)))
        await settle()
        assert not sender.done()
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
        await asyncio.wait_for(sender, 1.0)  # released, not stuck
        return stream.delivered, stream.dropped, "detached" in repr(stream)

    # 0 was handed over, 1 was waiting when the consumer left, 2 came after: both dropped
    assert run_virtual(main()) == (1, 2, True)


def test_aclose_detaches_only_when_the_last_reader_leaves():
    async def main():
        stream = ResultStream(4)
        a, b = stream.reader(), stream.reader()
        await stream.send(result(0))
        await a.aclose()
        await stream.send(result(1))  # b still reads: kept
        kept = len(stream)
        await b.aclose()
        await b.aclose()  # twice is harmless
        await stream.send(result(2))
        with pytest.raises(StopAsyncIteration):
            await anext(b)
        return kept, stream.dropped, len(stream)

    assert run_virtual(main()) == (2, 3, 0)


def test_a_new_reader_after_every_reader_left_attaches_again():
    async def main():
        stream = ResultStream(2)
        await stream.reader().aclose()
        await stream.send(result(0))  # nobody reads: dropped
        reader = stream.reader()
        await stream.send(result(1))
        return (await anext(reader)).payload, stream.dropped

    assert run_virtual(main()) == (1, 1)


def test_a_reader_that_stops_without_closing_keeps_the_workers_waiting():
    async def main():
        stream = ResultStream(1)
        reader = stream.reader()
        await stream.send(result(0))
        sender = asyncio.ensure_future(stream.send(result(1)))
        await asyncio.sleep(3600.0)
        waiting = not sender.done()  # documented backpressure, not a drop
        await reader.aclose()
        await sender
        return waiting, stream.dropped

    assert run_virtual(main()) == (True, 2)


def test_repr_shows_the_live_state():
    async def main():
        stream = ResultStream(3)
        reader = stream.reader()
        await stream.send(result(0))
        await stream.send(result(1))
        await anext(reader)
        shown = repr(stream)
        stream.close()
        return shown, repr(stream)

    shown, closed = run_virtual(main())
    assert shown == "<ResultStream maxsize=3 waiting=1 delivered=1 dropped=0>"
    assert closed == "<ResultStream maxsize=3 waiting=1 delivered=1 dropped=0 closed>"
