"""Closing a pipeline from several directions at once, and admission at the edges."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from pipeline import EventKind, Pipeline, RateLimit
from pipeline.sim.vloop import run_virtual


async def stuck(x):
    await asyncio.sleep(3600.0)


def test_two_drains_timing_out_together_share_one_balanced_report(config):
    timeouts = []

    def listener(kind, now, item):
        if kind is EventKind.DRAIN_TIMEOUT:
            timeouts.append(now)

    async def main():
        pipe = Pipeline(stuck, config(drain_timeout_s=5.0), on_event=listener)
        run = asyncio.ensure_future(pipe.run(range(6)))
        await asyncio.sleep(0)
        other = asyncio.ensure_future(pipe.drain())
        return await run, await other, pipe

    first, second, pipe = run_virtual(main())
    assert first is second is pipe.report
    # The second drain stopped intake early; what was admitted comes back once.
    assert first.balanced and first.completed == 0
    assert sorted(first.unfinished) == list(range(first.offered))
    assert timeouts == [5.0]


def test_a_drain_waiting_in_another_task_wakes_when_the_run_is_cancelled(config):
    async def main():
        pipe = Pipeline(stuck, config(drain_timeout_s=None))
        run = asyncio.ensure_future(pipe.run(range(3)))
        await asyncio.sleep(1.0)
        waiting = asyncio.ensure_future(pipe.drain())
        await asyncio.sleep(1.0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return await waiting

    report = run_virtual(main())  # a hang would be a DeadlockError on the virtual loop
    assert report.balanced and len(report.unfinished) == 3


def test_cancelling_a_drain_still_closes_the_pipeline_and_hands_items_back(config):
    async def service(pipe):
        async with pipe:
            for item in range(3):
                await pipe.put(item)

    async def main():
        pipe = Pipeline(stuck, config(drain_timeout_s=None))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(service(pipe), 10.0)
        return pipe

    pipe = run_virtual(main())
    assert pipe.state.value == "closed"
    assert pipe.report.balanced and sorted(pipe.report.unfinished) == [0, 1, 2]
    assert all(worker.done() for worker in pipe._workers)


def test_reject_mode_with_a_sync_source_lets_workers_take_items(config):
    async def slow(x):
        await asyncio.sleep(10.0)

    report = run_virtual(Pipeline(slow, config(on_full="reject", concurrency=4)).run(range(100)))
    # K = maxsize + concurrency: the four workers took one item each.
    assert report.admitted == 4 + 4 and len(report.shed) == 92


def test_an_endless_sync_source_can_be_stopped(config):
    async def quick(x):
        await asyncio.sleep(0)

    async def main():
        pipe = Pipeline(quick, config(on_full="reject", queue_maxsize=None))
        asyncio.get_running_loop().call_later(0.0, pipe.stop)
        return await pipe.run(itertools.count())

    report = asyncio.run(asyncio.wait_for(main(), 60.0))  # liveness guard only
    assert report.offered > 0 and report.balanced


def test_stop_while_the_source_is_reading_hands_the_item_back(config):
    pipe = None

    def source():
        yield 1
        yield 2
        pipe.stop()  # e.g. a shutdown flag noticed inside the generator
        yield 3

    async def quick(x):
        await asyncio.sleep(0.1)

    for on_full in ("block", "reject"):
        pipe = Pipeline(quick, config(on_full=on_full))
        report = run_virtual(pipe.run(source()))
        assert report.balanced, on_full
        assert report.completed == 2 and report.unfinished == [3], on_full


def test_waiting_for_the_rate_limit_is_waiting_not_an_attempt(config):
    calls = []

    async def handler(x):
        calls.append(x)

    async def main():
        pipe = Pipeline(
            handler,
            config(rate_limit=RateLimit(requests_per_minute=1), drain_timeout_s=100.0),
        )
        return await pipe.run(range(3))

    report = run_virtual(main())
    # One request's allowance at t=0, the next after 60 s; the third would need 120 s.
    assert calls == [0, 1]
    assert report.attempts == 2 and report.unfinished == [2]
    assert report.balanced


def test_a_plain_function_returning_a_coroutine_is_awaited(config):
    ran = []

    async def real(x):
        ran.append(x)
        return x * 2

    report = asyncio.run(Pipeline(lambda x: real(x), config()).run(range(5)))
    assert sorted(ran) == list(range(5)) and report.completed == 5
