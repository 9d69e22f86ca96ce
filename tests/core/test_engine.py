"""Behaviour of the core engine, on the virtual clock (hour-long backoffs take milliseconds)."""

from __future__ import annotations

import asyncio
import random

import pytest

from pipeline import (
    Backoff,
    EventKind,
    PermanentError,
    Pipeline,
    PipelineClosed,
    QueueFull,
    RateLimit,
    SourceError,
)
from pipeline.sim.vloop import run_virtual


async def sleep_for(seconds):
    await asyncio.sleep(seconds)


def test_clean_run_completes_everything_and_leaves_no_dead_letters(config):
    async def handler(x):
        await asyncio.sleep(1.0)
        return x * 2

    report = run_virtual(Pipeline(handler, config()).run(range(20)))
    assert report.completed == report.offered == report.admitted == 20
    assert report.dead_letters == [] and report.unfinished == [] and report.shed == []
    assert report.balanced
    # 20 one-second items on 2 workers take exactly 10 seconds of loop time.
    assert report.duration_s == pytest.approx(10.0)


def test_put_into_a_full_queue_waits_until_a_slot_frees(config):
    release = None

    async def handler(x):
        await release.wait()

    async def main():
        nonlocal release
        release = asyncio.Event()
        async with Pipeline(handler, config(concurrency=1, queue_maxsize=2)) as pipe:
            for item in range(3):  # one running, two queued: the queue is now full
                await pipe.put(item)
            await asyncio.sleep(0)
            waiting = asyncio.ensure_future(pipe.put(3))
            await asyncio.sleep(5.0)
            assert not waiting.done()
            assert pipe.statistics().tasks_waiting_put == 1
            with pytest.raises(QueueFull):
                pipe.put_nowait(99)
            release.set()
            await waiting
            blocked = pipe.statistics().producer_blocked_s
        return pipe.report, blocked

    report, blocked = run_virtual(main())
    assert report.completed == 4
    assert blocked == pytest.approx(5.0)


def test_source_is_never_read_ahead_of_capacity(config):
    reads = []
    gate = None

    def source():
        for item in range(100):
            reads.append(item)
            yield item

    async def handler(x):
        await gate.wait()

    async def main():
        nonlocal gate
        gate = asyncio.Event()
        pipe = Pipeline(handler, config(concurrency=3, queue_maxsize=5))
        run = asyncio.ensure_future(pipe.run(source()))
        await asyncio.sleep(10.0)
        read_while_stuck = len(reads)
        gate.set()
        await run
        return read_while_stuck

    # 3 items running + 5 queued: exactly 8 read, not one more.
    assert run_virtual(main()) == 8
    assert len(reads) == 100


def test_dead_letter_lands_on_exactly_the_max_attempts_th_failure(config):
    calls = []

    async def handler(x):
        calls.append(x)
        raise RuntimeError(f"attempt {len(calls)}")

    cfg = config(max_attempts=4, backoff=Backoff.constant(2.0))
    report = run_virtual(Pipeline(handler, cfg).run(["a"]))
    assert calls == ["a"] * 4
    (letter,) = report.dead_letters
    assert letter.payload == "a" and letter.attempts == 4 and letter.reason == "max_attempts"
    assert [e.message for e in letter.errors] == [f"attempt {n}" for n in range(1, 5)]
    assert [e.at_s for e in letter.errors] == [0.0, 2.0, 4.0, 6.0]
    assert letter.first_failure_s == 0.0 and letter.last_failure_s == 6.0
    assert report.statistics.retried == 3


def test_permanent_error_is_not_retried(config):
    calls = []

    async def handler(x):
        calls.append(x)
        raise PermanentError("bad payload")

    report = run_virtual(Pipeline(handler, config(max_attempts=5)).run([1]))
    assert calls == [1]
    assert report.dead_letters[0].reason == "not_retryable"


def test_item_succeeding_on_last_attempt_is_completed(config):
    attempts = {}

    async def handler(x):
        attempts[x] = attempts.get(x, 0) + 1
        if attempts[x] < 3:
            raise ValueError("flaky")

    report = run_virtual(Pipeline(handler, config(max_attempts=3)).run(range(5)))
    assert report.completed == 5 and report.dead_letters == []
    assert report.attempts == 15


@pytest.mark.parametrize(
    "error",
    [ValueError("v"), TimeoutError(), KeyError("k"), PermanentError("p"), ZeroDivisionError()],
)
def test_accounting_is_balanced_on_every_exception_path(config, error):
    async def handler(x):
        await asyncio.sleep(0.5)
        if x % 2:
            raise error
        return x

    report = run_virtual(Pipeline(handler, config()).run(range(11)))
    assert report.balanced
    assert report.completed == 6 and len(report.dead_letters) == 5
    assert report.statistics.workers_busy == 0 and report.statistics.queue_size == 0


def test_a_handlers_own_cancelled_error_is_a_failed_attempt_and_the_pool_stays_whole(config):
    async def handler(x):
        if x == 3:
            raise asyncio.CancelledError  # raised, not a cancellation of the worker
        await asyncio.sleep(1.0)

    cfg = config(concurrency=1, drain_timeout_s=None)
    report = run_virtual(Pipeline(handler, cfg).run(range(8)))
    assert report.balanced and report.completed == 7 and report.unfinished == []
    (letter,) = report.dead_letters
    assert letter.payload == 3 and letter.attempts == 3 and letter.reason == "max_attempts"
    assert {error.type for error in letter.errors} == {"CancelledError"}
    # The one worker carried on: the seven others took seven seconds after it.
    assert report.duration_s == pytest.approx(7.0)


def test_retry_storm_with_one_slot_and_one_worker_finishes(config):
    async def handler(x):
        await asyncio.sleep(0.1)
        raise RuntimeError("downstream down")

    cfg = config(concurrency=1, queue_maxsize=1, max_attempts=5, backoff=Backoff.constant(0.3))
    report = run_virtual(Pipeline(handler, cfg).run(range(50)))
    assert report.balanced and len(report.dead_letters) == 50
    assert report.attempts == 250


def test_retries_hold_a_slot_so_memory_stays_bounded(config):
    peak = 0

    async def handler(x):
        await asyncio.sleep(0.1)
        raise RuntimeError("fail")

    def watch(kind, now, item):
        nonlocal peak
        stats = pipe.statistics()
        peak = max(peak, stats.queue_size + stats.retry_waiting + stats.workers_busy)

    cfg = config(concurrency=3, queue_maxsize=5, max_attempts=3, backoff=Backoff.constant(10.0))
    pipe = Pipeline(handler, cfg, on_event=watch)
    report = run_virtual(pipe.run(range(200)))
    assert report.balanced
    # Queued + held may exceed maxsize by at most the items running when they failed.
    assert peak <= cfg.queue_maxsize + 2 * cfg.concurrency


def test_drain_timeout_returns_stuck_items_as_unfinished_within_the_timeout(config):
    async def handler(x):
        await asyncio.sleep(3600.0 if x >= 5 else 1.0)

    cfg = config(concurrency=2, queue_maxsize=10, drain_timeout_s=20.0)
    pipe = Pipeline(handler, cfg)
    report = run_virtual(pipe.run(range(10)))
    assert report.drain_timed_out
    assert report.completed == 5
    assert sorted(report.unfinished) == [5, 6, 7, 8, 9]
    assert report.balanced
    # All ten fit at t=0, so the source ended then; the drain gave up 20 s later.
    assert report.finished_s == pytest.approx(20.0)


def test_unbounded_drain_waits_as_long_as_it_takes(config):
    async def handler(x):
        await asyncio.sleep(1000.0)

    report = run_virtual(Pipeline(handler, config(drain_timeout_s=None)).run(range(4)))
    assert report.completed == 4 and not report.drain_timed_out


def test_reject_sheds_when_full_and_reports_every_shed_item(config):
    async def handler(x):
        await asyncio.sleep(10.0)

    async def burst():
        for item in range(20):
            await asyncio.sleep(0.01)
            yield item

    report = run_virtual(Pipeline(handler, config(on_full="reject")).run(burst()))
    # 2 workers + 4 slots hold the first 6 (K = maxsize + concurrency); the rest,
    # arriving within the first 10 s, find it full and are shed.
    assert report.admitted == 6 and report.completed == 6
    assert report.shed == list(range(6, 20))
    assert report.balanced and report.statistics.shed == 14


def test_stop_stops_intake_and_closes_async_source(config):
    closed = []

    async def endless():
        try:
            n = 0
            while True:
                await asyncio.sleep(1.0)
                yield n
                n += 1
        finally:
            closed.append(True)

    async def handler(x):
        await asyncio.sleep(0.5)

    async def main():
        pipe = Pipeline(handler, config())
        run = asyncio.ensure_future(pipe.run(endless()))
        await asyncio.sleep(10.5)
        pipe.stop()
        return await run

    report = run_virtual(main())
    assert closed == [True]
    assert report.offered == 10 and report.completed == 10 and report.balanced


def test_put_after_stop_raises_pipeline_closed(config):
    async def handler(x):
        return x

    async def main():
        async with Pipeline(handler, config()) as pipe:
            await pipe.put(1)
            pipe.stop()
            with pytest.raises(PipelineClosed):
                await pipe.put(2)
        return pipe.report

    assert run_virtual(main()).completed == 1


def test_cancelling_run_cancels_cleanly(config):
    async def handler(x):
        await asyncio.sleep(100.0)

    async def main():
        pipe = Pipeline(handler, config())
        run = asyncio.ensure_future(pipe.run(range(100)))
        await asyncio.sleep(1.0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return pipe

    pipe = run_virtual(main())
    assert pipe.state.value == "closed"
    assert pipe.report.balanced and len(pipe.report.unfinished) == 6


def test_source_error_drains_admitted_items_and_carries_the_report(config):
    def source():
        yield from range(5)
        raise OSError("partner API went away")

    async def handler(x):
        await asyncio.sleep(1.0)

    with pytest.raises(SourceError) as caught:
        run_virtual(Pipeline(handler, config()).run(source()))
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.report.completed == 5


def test_several_producers_feed_one_queue(config):
    async def handler(x):
        await asyncio.sleep(0.1)
        return x

    report = run_virtual(Pipeline(handler, config()).run(range(10), "abc", [None]))
    assert report.completed == 14 and report.balanced


def test_exponential_backoff_is_measured_in_loop_time(config):
    times = []

    async def handler(x):
        times.append(asyncio.get_running_loop().time())
        raise RuntimeError

    backoff = Backoff(kind="exponential", base_s=60.0, factor=2.0, cap_s=300.0)
    cfg = config(max_attempts=5, backoff=backoff, drain_timeout_s=None)
    run_virtual(Pipeline(handler, cfg).run([0]))
    assert times == [0.0, 60.0, 180.0, 420.0, 720.0]


def test_full_jitter_is_reproducible_with_a_seeded_rng(config):
    def run_once(seed):
        times = []

        async def handler(x):
            times.append(asyncio.get_running_loop().time())
            raise RuntimeError

        backoff = Backoff(base_s=10.0, jitter=True)
        pipe = Pipeline(handler, config(max_attempts=4, backoff=backoff), rng=random.Random(seed))
        run_virtual(pipe.run([0]))
        return times

    assert run_once(7) == run_once(7)
    assert run_once(7) != run_once(8)
    gaps = [b - a for a, b in zip(run_once(7), run_once(7)[1:], strict=False)]
    assert all(0 <= gap <= cap for gap, cap in zip(gaps, [10.0, 20.0, 40.0], strict=True))


def test_attempt_timeout_counts_as_a_failure(config):
    async def handler(x):
        await asyncio.sleep(5.0)

    report = run_virtual(Pipeline(handler, config(attempt_timeout_s=1.0, max_attempts=2)).run([1]))
    (letter,) = report.dead_letters
    assert [e.type for e in letter.errors] == ["TimeoutError", "TimeoutError"]
    assert [e.at_s for e in letter.errors] == [1.0, 2.0]


def test_rate_limit_is_respected_in_loop_time(config):
    starts = []

    async def handler(x):
        starts.append(asyncio.get_running_loop().time())

    limit = RateLimit(requests_per_minute=60, tokens_per_minute=600, tokens_per_item=20)
    cfg = config(concurrency=8, queue_maxsize=10, rate_limit=limit, drain_timeout_s=None)
    run_virtual(Pipeline(handler, cfg).run(range(100)))
    # Tokens bind: 600 tokens/min at 20 per item is 30 items in any 60 s window. The
    # first 30 start at once; each later one starts the moment the start that kept it
    # out is 60 s old, so the pattern repeats every minute.
    assert starts == [0.0] * 30 + [60.0] * 30 + [120.0] * 30 + [180.0] * 10
    # No 60-second window ever holds more than 30 items (600 tokens), let alone 60 requests.
    for index, start in enumerate(starts):
        in_window = sum(1 for other in starts[index:] if other < start + 60.0)
        assert in_window <= 30


def test_blocking_plain_function_handler_does_not_block_the_loop(config):
    import threading

    # Each call blocks its thread until a coroutine on the event loop has run after the call
    # began. Were the call made on the loop's own thread, the loop could not run that
    # coroutine: the wait would time out (a liveness guard, 60 s, far beyond any machine's
    # speed) instead of being released.
    loop_ran = threading.Event()
    timed_out = []

    async def main():
        loop = asyncio.get_running_loop()
        call_started = asyncio.Event()

        def blocking(x):
            loop.call_soon_threadsafe(call_started.set)
            if not loop_ran.wait(timeout=60):
                timed_out.append(x)
                loop_ran.set()  # fail once, not once per item
            return x

        async def release_from_the_loop():
            await call_started.wait()
            loop_ran.set()

        release = asyncio.ensure_future(release_from_the_loop())
        report = await Pipeline(blocking, config(concurrency=2, prefetch=2)).run(range(8))
        release.cancel()
        return report

    report = asyncio.run(main())
    assert report.completed == 8
    assert timed_out == [], "a handler call blocked the event loop"


def test_prefetch_keeps_several_thread_calls_in_flight_per_worker(config):
    import threading

    lock = threading.Lock()
    in_flight = peak = 0
    # Each call waits for two others to be in flight with it: the run only completes if the
    # one worker keeps 3 calls going at once (the timeout is a liveness guard: with fewer in
    # flight the barrier breaks and every call fails).
    together = threading.Barrier(3, timeout=60)

    def blocking(x):
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        try:
            together.wait()
        finally:
            with lock:
                in_flight -= 1

    report = asyncio.run(
        Pipeline(blocking, config(concurrency=1, prefetch=3, max_attempts=1)).run(range(9))
    )
    assert report.completed == 9 and report.dead_letters == []
    assert peak == 3  # never more than prefetch


def test_results_stream_yields_every_item_and_applies_backpressure(config):
    async def handler(x):
        return x * 10

    async def main():
        pipe = Pipeline(handler, config(concurrency=2))
        stream = pipe.results(maxsize=2)
        run = asyncio.ensure_future(pipe.run(range(10)))
        await asyncio.sleep(1.0)
        # Nobody consumed yet: only maxsize results wait, the rest of the pipeline is stalled.
        assert pipe.statistics().completed <= 2 + 2
        got = [result async for result in stream]
        await run
        return got

    got = run_virtual(main())
    assert sorted(r.value for r in got) == [x * 10 for x in range(10)]
    assert all(r.ok for r in got)


def test_statistics_snapshot_and_repr(config):
    async def handler(x):
        await asyncio.sleep(1.0)

    async def main():
        async with Pipeline(handler, config(concurrency=2, queue_maxsize=3), name="demo") as pipe:
            for item in range(5):
                await pipe.put(item)
            await asyncio.sleep(0)
            stats = pipe.statistics()
            text = repr(pipe)
        return stats, text

    stats, text = run_virtual(main())
    assert stats.workers_busy == 2 and stats.queue_size == 3 and stats.admitted == 5
    assert "demo" in text and "state=open" in text and "queue=3/3" in text
    with pytest.raises(AttributeError):
        stats.queue_size = 0


def test_events_are_reported_with_loop_time(config):
    seen = []

    async def handler(x):
        await asyncio.sleep(2.0)
        if x == 1:
            raise RuntimeError

    def listener(kind, now, item):
        seen.append((kind, now))

    run_virtual(Pipeline(handler, config(max_attempts=1), on_event=listener).run([0, 1]))
    kinds = [kind for kind, _ in seen]
    assert kinds.count(EventKind.ADMITTED) == 2
    assert kinds.count(EventKind.STARTED) == 2
    assert (EventKind.COMPLETED, 2.0) in seen
    assert (EventKind.DEAD_LETTERED, 2.0) in seen
    assert kinds.count(EventKind.INTAKE_CLOSED) == 1


def test_pipeline_runs_only_once(config):
    async def handler(x):
        return x

    async def main():
        pipe = Pipeline(handler, config())
        await pipe.run([1])
        with pytest.raises(PipelineClosed, match="already run"):
            await pipe.run([2])
        assert await pipe.drain() is pipe.report

    run_virtual(main())


def test_bad_source_and_handler_are_type_errors():
    with pytest.raises(TypeError, match="handler must be callable"):
        Pipeline(42)

    async def handler(x):
        return x

    with pytest.raises(TypeError, match="source 0 must be an iterable"):
        run_virtual(Pipeline(handler).run(17))


def test_sigterm_stops_intake_and_the_run_drains(config):
    import os
    import signal

    async def handler(x):
        await asyncio.sleep(0.001)

    async def endless():
        n = 0
        while True:
            await asyncio.sleep(0.001)
            yield n
            n += 1

    async def main():
        pipe = Pipeline(handler, config())
        run = asyncio.ensure_future(pipe.run(endless()))
        # Signal once items flow, however long the start takes on a busy machine.
        while pipe.statistics().offered == 0:
            await asyncio.sleep(0.001)
        pipe.stop_on_signals(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        return await asyncio.wait_for(run, 60.0)  # liveness guard only

    report = asyncio.run(main())
    assert report.offered > 0 and report.balanced and not report.drain_timed_out
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize("burst_s", [None, 60.0])
@pytest.mark.parametrize("start_s", [0.0, 1e6, 3e7])
def test_rate_limit_never_spins_on_float_rounding(config, start_s, burst_s):
    # Token-bucket refills in float steps used to leave the level a hair short
    # of an item's tokens; the loop then waited 1e-15 s forever. The sliding
    # window (burst_s=None) waits for exact expiry times instead.
    starts = []

    async def handler(x):
        starts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(2.0 + (x % 7) * 0.37)

    tokens = [404, 1337, 2456, 977, 3001, 1500, 812]
    limit = RateLimit(
        tokens_per_minute=400_000, tokens_per_item=lambda x: tokens[x % 7], burst_s=burst_s
    )
    cfg = config(concurrency=24, queue_maxsize=50, rate_limit=limit, drain_timeout_s=None)
    report = run_virtual(Pipeline(handler, cfg).run(range(3000)), start_s=start_s)
    assert report.completed == 3000
    # Sustained rate cannot beat the token budget: 400,000 tokens per minute.
    spent = sum(tokens[x % 7] for x in range(3000))
    minutes = (max(starts) - start_s) / 60.0
    assert spent - 400_000 <= 400_000 * minutes * (1 + 1e-9)
