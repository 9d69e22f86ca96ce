"""Regressions for the "trust under faults" issue: one small deterministic run per finding.

Each test states the target behaviour through the public API: every offered
item ends as exactly one of completed, dead-lettered, unfinished or shed; a run
ends (on the virtual loop a hang is a DeadlockError, so it fails loudly); and a
failure in the engine's own bookkeeping never loses an item.
"""

from __future__ import annotations

import asyncio

import pytest

from pipeline import Backoff, EventKind, Pipeline
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once, assert_results_accounted

ITEMS = [0, 1, 2, 3]


class Boom(BaseException):
    """A BaseException that is neither KeyboardInterrupt, SystemExit nor CancelledError."""


class UnprintableError(Exception):
    """An exception whose ``str()`` itself raises."""

    def __str__(self):
        raise RuntimeError("__str__ is broken")


def failing_on(bad, error_factory, *, seconds=1.0):
    """An async handler that takes ``seconds`` and raises ``error_factory()`` for ``bad``."""

    async def handler(x):
        await asyncio.sleep(seconds)
        if x == bad:
            raise error_factory()
        return x

    return handler


# -- 1. a handler's BaseException or its own CancelledError ------------------------------


@pytest.mark.parametrize("drain_timeout_s", [None, 5.0])
def test_a_custom_base_exception_from_a_handler_propagates_from_run_after_the_close(
    config,
    drain_timeout_s,
):
    async def main():
        pipe = Pipeline(failing_on(1, Boom), config(concurrency=1, drain_timeout_s=drain_timeout_s))
        with pytest.raises(Boom):
            await pipe.run(ITEMS)
        return pipe

    pipe = run_virtual(main())
    assert pipe.state.value == "closed"
    assert pipe.report is not None
    assert_each_payload_once(pipe.report, ITEMS)
    assert pipe.report.statistics.workers_busy == 0


@pytest.mark.parametrize("drain_timeout_s", [None, 6.0])
def test_a_handlers_own_cancelled_error_is_a_failed_attempt_not_a_dead_worker(
    config, drain_timeout_s
):
    # Four one-second items, item 1 failing all three attempts: six seconds of work.
    cfg = config(concurrency=1, drain_timeout_s=drain_timeout_s)
    report = run_virtual(Pipeline(failing_on(1, asyncio.CancelledError), cfg).run(ITEMS))
    assert_each_payload_once(report, ITEMS)
    # The one worker survives: everything else completes, nothing is left unfinished.
    assert report.unfinished == []
    assert report.completed == 3
    (letter,) = report.dead_letters
    assert letter.payload == 1 and letter.attempts == 3 and letter.reason == "max_attempts"
    assert [error.type for error in letter.errors] == ["CancelledError"] * 3


# -- 2. cancelling run() twice --------------------------------------------------------------


@pytest.mark.parametrize("turns_between", range(7))
def test_cancelling_run_twice_still_closes_before_the_cancellation_reaches_the_caller(
    config,
    turns_between,
):
    async def stuck(x):
        await asyncio.sleep(100.0)

    async def main():
        pipe = Pipeline(stuck, config())
        run = asyncio.ensure_future(pipe.run(range(10)))
        at_done = []
        run.add_done_callback(lambda _: at_done.append((pipe.state.value, pipe.report)))
        await asyncio.sleep(1.0)
        run.cancel()
        for _ in range(turns_between):
            await asyncio.sleep(0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return at_done[0]

    state, report = run_virtual(main())
    assert state == "closed"
    assert report is not None, "the CancelledError reached the caller before the close ended"
    assert report.balanced and report.completed == 0
    assert sorted(report.unfinished) == list(range(report.offered))


# -- 3. errors in the engine's own bookkeeping ------------------------------------------------


@pytest.mark.parametrize("drain_timeout_s", [None, 5.0])
def test_an_exception_whose_str_raises_is_recorded_as_a_failed_attempt(config, drain_timeout_s):
    cfg = config(max_attempts=2, drain_timeout_s=drain_timeout_s)
    report = run_virtual(Pipeline(failing_on(1, UnprintableError), cfg).run(ITEMS))
    assert_each_payload_once(report, ITEMS)
    assert report.unfinished == [] and report.completed == 3
    (letter,) = report.dead_letters
    assert letter.payload == 1 and letter.attempts == 2
    assert [error.type for error in letter.errors] == ["UnprintableError"] * 2


@pytest.mark.parametrize("drain_timeout_s", [None, 5.0])
def test_a_listener_raising_on_retry_scheduled_never_loses_the_item(config, drain_timeout_s):
    def listener(kind, now, item):
        if kind is EventKind.RETRY_SCHEDULED:
            raise RuntimeError("listener failed")

    async def main():
        handler = failing_on(1, lambda: ValueError("flaky"))
        pipe = Pipeline(handler, config(drain_timeout_s=drain_timeout_s), on_event=listener)
        try:
            report = await pipe.run(ITEMS)
        except Exception:
            # Failing loudly is allowed, provided the account is still whole.
            assert pipe.report is not None, "run() raised without a report"
            return pipe.report, False
        return report, True

    report, returned = run_virtual(main())
    assert_each_payload_once(report, ITEMS)
    if returned:
        # The listener was isolated: item 1 used its retries, nothing was stranded.
        assert report.unfinished == []
        assert [letter.payload for letter in report.dead_letters] == [1]
        assert report.dead_letters[0].attempts == 3


def test_an_rng_that_is_not_a_random_generator_is_a_type_error_at_construction(config):
    async def handler(x):
        return x

    with pytest.raises(TypeError, match="rng"):
        Pipeline(handler, config(backoff=Backoff.constant(1.0, jitter=True)), rng=42)


# -- 4. drain() from inside a handler -------------------------------------------------------


@pytest.mark.parametrize("drain_timeout_s", [None, 5.0])
def test_drain_called_from_inside_a_handler_does_not_hang_the_run(config, drain_timeout_s):
    pipe = None
    inside = []

    async def handler(x):
        await asyncio.sleep(1.0)
        if x == 1:
            try:
                inside.append(await pipe.drain())
            except Exception as error:  # a clear error raised in the handler is fine
                inside.append(error)
                raise
        return x

    async def main():
        nonlocal pipe
        pipe = Pipeline(handler, config(drain_timeout_s=drain_timeout_s))
        return await pipe.run(ITEMS)

    report = run_virtual(main())  # a hang is a DeadlockError here
    assert inside, "the handler's drain() call never returned nor raised"
    assert_each_payload_once(report, ITEMS)
    if drain_timeout_s is None:
        assert report.unfinished == []


# -- 5. a plain-function handler raising StopIteration ----------------------------------------


def raise_stop_iteration_on_1(x):
    if x == 1:
        raise StopIteration
    return x


def test_a_plain_handler_raising_stop_iteration_fails_the_attempt_on_the_virtual_loop(config):
    cfg = config(drain_timeout_s=None)
    report = run_virtual(Pipeline(raise_stop_iteration_on_1, cfg).run(ITEMS))
    assert_each_payload_once(report, ITEMS)
    assert report.completed == 3 and report.unfinished == []
    (letter,) = report.dead_letters
    assert letter.payload == 1 and letter.attempts == 3


def test_a_plain_handler_raising_stop_iteration_fails_the_attempt_in_real_time(config):
    async def main():
        pipe = Pipeline(raise_stop_iteration_on_1, config(drain_timeout_s=None))
        # Only a guard against the hang, far above the milliseconds this takes.
        return await asyncio.wait_for(pipe.run(ITEMS), 30.0)

    report = asyncio.run(main())
    assert_each_payload_once(report, ITEMS)
    assert report.completed == 3 and report.unfinished == []
    (letter,) = report.dead_letters
    assert letter.payload == 1 and letter.attempts == 3


# -- 6. the results() stream --------------------------------------------------------------------


def test_results_stuck_in_the_hand_off_at_the_drain_timeout_are_delivered_or_reported(config):
    async def instant(x):
        return x

    async def main():
        pipe = Pipeline(instant, config(drain_timeout_s=1.0))
        stream = pipe.results(maxsize=1)
        # Nobody reads during the run: workers wait on the hand-off until the
        # drain times out and cancels them. The consumer reads afterwards.
        report = await pipe.run(range(3))
        delivered = [result.payload async for result in stream]
        return report, delivered

    report, delivered = run_virtual(main())
    completed = assert_each_payload_once(report, range(3))
    assert report.completed == 3
    assert_results_accounted(delivered, completed, report)


@pytest.mark.parametrize("how", ["break", "aclose"])
def test_a_results_consumer_that_leaves_does_not_stall_the_workers(config, how):
    async def handler(x):
        await asyncio.sleep(1.0)
        return x

    async def main():
        pipe = Pipeline(handler, config(drain_timeout_s=None))
        got = []

        async def consume():
            if how == "break":
                async for result in pipe.results(maxsize=1):
                    got.append(result.payload)
                    break
            else:
                stream = pipe.results(maxsize=1)
                got.append((await anext(stream)).payload)
                await stream.aclose()

        consumer = asyncio.ensure_future(consume())
        report = await pipe.run(range(6))
        await consumer
        return report, got

    report, got = run_virtual(main())  # workers stuck on the hand-off: DeadlockError
    assert_each_payload_once(report, range(6))
    assert report.completed == 6 and report.unfinished == []
    assert len(got) == 1


# -- 7. an async source that never suspends ----------------------------------------------------


async def never_suspends(n, reads):
    for item in range(n):
        reads.append(item)
        yield item


async def one_turn(x):
    await asyncio.sleep(0)


def test_an_async_source_that_never_suspends_sheds_no_more_than_the_same_items_as_a_list(config):
    cfg = config(on_full="reject", concurrency=4, queue_maxsize=5)
    as_list = run_virtual(Pipeline(one_turn, cfg).run(list(range(1000))))
    as_async = run_virtual(Pipeline(one_turn, cfg).run(never_suspends(1000, [])))
    assert as_list.balanced and as_async.balanced
    assert len(as_async.shed) == len(as_list.shed)


def test_a_burst_after_a_wait_meets_the_idle_workers_like_a_list_does(config):
    async def burst_at_one_second():
        await asyncio.sleep(1.0)  # the first read of the burst suspends, the rest do not
        for item in range(6):
            yield item

    async def five_seconds(x):
        await asyncio.sleep(5.0)

    cfg = config(on_full="reject", concurrency=3, queue_maxsize=1)
    as_list = run_virtual(Pipeline(five_seconds, cfg).run(list(range(6))))
    after_wait = run_virtual(Pipeline(five_seconds, cfg).run(burst_at_one_second()))
    # K = maxsize + workers = 4 fit whichever way the items come.
    assert list(as_list.shed) == list(after_wait.shed) == [4, 5]


@pytest.mark.parametrize("on_full", ["block", "reject"])
def test_stop_reaches_an_unbounded_pipeline_fed_by_an_async_source_that_never_suspends(
    config, on_full
):
    async def main():
        reads = []
        pipe = Pipeline(one_turn, config(on_full=on_full, queue_maxsize=None))
        asyncio.get_running_loop().call_later(0.0, pipe.stop)
        # 10,000 stands for "endless": the stop must land long before the end.
        report = await pipe.run(never_suspends(10_000, reads))
        return report, len(reads)

    report, reads = run_virtual(main())
    assert report.balanced
    assert reads < 100 and report.offered < 100
    assert report.statistics.queue_peak < 100


# -- 8. closing an async source that was never read ----------------------------------------------


class CountingSource:
    """An async iterator that counts reads and records ``aclose()``."""

    def __init__(self, n=5):
        self.n = n
        self.reads = 0
        self.closed = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.closed or self.reads >= self.n:
            raise StopAsyncIteration
        self.reads += 1
        return self.reads - 1

    async def aclose(self):
        self.closed = True


async def one_second(x):
    await asyncio.sleep(1.0)


def test_an_async_source_is_closed_when_stop_lands_before_its_producer_starts(config):
    async def main():
        source = CountingSource()
        pipe = Pipeline(one_second, config())
        run = asyncio.ensure_future(pipe.run(source))
        await asyncio.sleep(0)  # run() has started its producer; the producer has not run
        pipe.stop()
        return await run, source

    report, source = run_virtual(main())
    assert report.balanced
    assert source.closed
    assert report.offered == source.reads


def test_an_async_source_is_closed_when_a_cancel_lands_before_its_producer_starts(config):
    async def main():
        source = CountingSource()
        pipe = Pipeline(one_second, config())
        run = asyncio.ensure_future(pipe.run(source))
        await asyncio.sleep(0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return pipe, source

    pipe, source = run_virtual(main())
    assert pipe.report is not None and pipe.report.balanced
    assert source.closed


def test_stop_before_run_closes_the_source_without_reading_it(config):
    async def main():
        source = CountingSource()
        pipe = Pipeline(one_second, config())
        pipe.stop()
        return await pipe.run(source), source

    report, source = run_virtual(main())
    assert source.closed
    assert source.reads == 0
    assert report.balanced and report.offered == 0


# -- found by the fault-injection property test ------------------------------------------------


def outcomes(report):
    """What happened to each payload, and when the run ended, to compare two runs by."""
    return {
        "finished_s": report.finished_s,
        "attempts": report.attempts,
        "completed": report.completed,
        "dead": sorted(
            (d.payload, d.attempts, tuple(e.type for e in d.errors)) for d in report.dead_letters
        ),
        "unfinished": sorted(report.unfinished),
        "shed": sorted(report.shed),
    }


@pytest.mark.parametrize("kind", list(EventKind), ids=lambda kind: kind.name)
def test_a_listener_raising_on_any_event_kind_is_isolated_or_fails_loudly(config, kind):
    # One run meets every event kind: a queue of one blocks (or sheds), item 1
    # fails twice (retry, then dead letter), item 5 hangs past the drain timeout.
    on_full = "reject" if kind is EventKind.SHED else "block"
    cfg = config(queue_maxsize=1, on_full=on_full, max_attempts=2, drain_timeout_s=5.0)

    async def handler(x):
        await asyncio.sleep(100.0 if x == 5 else 1.0)
        if x == 1:
            raise ValueError("flaky")
        return x

    def run_with(raising_on):
        def listener(k, now, item):
            if k is raising_on:
                raise RuntimeError(f"listener failed on {k.name}")

        async def main():
            pipe = Pipeline(handler, cfg, on_event=listener)
            try:
                return await pipe.run(range(6)), True
            except Exception:
                return pipe.report, False

        return run_virtual(main())

    baseline, _ = run_with(None)
    report, returned = run_with(kind)
    assert report is not None, "run() raised without a report"
    assert_each_payload_once(report, range(report.offered))
    if returned:
        # Isolated: the listener's failure changed nothing about the items, and no
        # worker was lost (a smaller pool would finish later).
        assert outcomes(report) == outcomes(baseline)


def test_results_waiting_on_the_hand_off_when_run_is_cancelled_are_delivered_or_reported(config):
    async def instant(x):
        return x

    async def main():
        pipe = Pipeline(instant, config(drain_timeout_s=None))
        stream = pipe.results(maxsize=1)
        run = asyncio.ensure_future(pipe.run(range(3)))
        await asyncio.sleep(1.0)  # nobody reads: workers wait on the hand-off
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        delivered = [result.payload async for result in stream]
        return pipe.report, delivered

    report, delivered = run_virtual(main())
    completed = assert_each_payload_once(report, range(3))
    assert_results_accounted(delivered, completed, report)
