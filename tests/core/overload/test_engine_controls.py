"""The concurrency limit and CoDel in the engine: hostile handlers, stops, cancels, accounting.

Virtual time (``run_virtual``) unless a test says real time: a service embeds the engine on
a real loop, so one test runs there too (no wall-clock thresholds).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import AIMD, CoDel, EventKind, Gradient2, Pipeline, PipelineConfig
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_each_payload_once

CONTROLS = {
    "aimd": dict(concurrency_limit=AIMD(min_limit=2, backoff_ratio=0.5)),
    "gradient2": dict(concurrency_limit=Gradient2(min_limit=2)),
    "codel": dict(codel=CoDel()),
    "aimd+codel": dict(concurrency_limit=AIMD(min_limit=1), codel=CoDel(lifo=False)),
    "gradient2+codel": dict(concurrency_limit=Gradient2(min_limit=1), codel=CoDel()),
}


def hostile(watch=None):
    """Slow, failing, hanging and self-cancelling attempts, chosen by the payload."""

    async def handler(x):
        if watch is not None:
            watch(x)
        kind = x % 6
        if kind == 0:
            raise ValueError(f"fails {x}")
        if kind == 1:
            await asyncio.sleep(3600)  # hangs: the attempt timeout cuts it
        if kind == 2:
            raise asyncio.CancelledError  # the handler's own cancel: a failure
        await asyncio.sleep(0.001 * (1 + x % 7))
        return x

    return handler


def cfg(**controls):
    return PipelineConfig(
        concurrency=6, queue_maxsize=20, max_attempts=2, attempt_timeout_s=0.05, **controls
    )


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_every_item_once_with_hostile_handlers(name):
    report = run_virtual(Pipeline(hostile(), cfg(**CONTROLS[name])).run(range(300)))
    assert_each_payload_once(report, range(300))
    assert report.unfinished == []


@pytest.mark.parametrize("name", ["aimd", "gradient2", "aimd+codel", "gradient2+codel"])
def test_no_attempt_starts_above_the_limit_and_the_limit_stays_in_bounds(name):
    seen = []

    def watch(_):
        stats = pipe.statistics()
        seen.append((stats.workers_busy, stats.concurrency_limit))

    pipe = Pipeline(hostile(watch), cfg(**CONTROLS[name]))
    report = run_virtual(pipe.run(range(300)))
    assert report.balanced and seen
    minimum = CONTROLS[name]["concurrency_limit"].min_limit
    assert all(busy <= limit for busy, limit in seen), seen
    assert all(minimum <= limit <= 6 for _, limit in seen)
    assert minimum <= report.statistics.concurrency_limit <= 6


def test_aimd_falls_to_its_minimum_when_every_attempt_fails():
    # 10 failures at ratio 0.5 from 8: 4, 2, 1, 1, ... (every attempt is a drop)
    async def fail(x):
        raise ValueError(x)

    config = PipelineConfig(
        concurrency=8, max_attempts=1, concurrency_limit=AIMD(backoff_ratio=0.5)
    )
    report = run_virtual(Pipeline(fail, config).run(range(10)))
    assert report.statistics.concurrency_limit == 1
    assert len(report.dead_letters) == 10


def test_aimd_counts_timeouts_as_drops():
    async def hang(x):
        await asyncio.sleep(10)

    config = PipelineConfig(
        concurrency=4, max_attempts=1, attempt_timeout_s=1.0, concurrency_limit=AIMD()
    )
    report = run_virtual(Pipeline(hang, config).run(range(4)))
    # four drops from 4: floor(3.6)=3, floor(2.7)=2, floor(1.8)=1, 1
    assert report.statistics.concurrency_limit == 1
    assert report.statistics.attempts_timed_out == 4


def test_a_limit_without_a_sample_is_concurrency_and_none_without_a_limit():
    pipe = Pipeline(hostile(), PipelineConfig(concurrency=5, concurrency_limit=AIMD()))
    assert pipe.statistics().concurrency_limit is None  # not started: no state yet
    report = run_virtual(Pipeline(hostile(), PipelineConfig()).run(range(5)))
    assert report.statistics.concurrency_limit is None and report.codel_shed == 0


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_cancel_twice_keeps_the_account(name):
    async def main():
        pipe = Pipeline(hostile(), cfg(**CONTROLS[name]))
        task = asyncio.ensure_future(pipe.run(range(200)))
        await asyncio.sleep(0.03)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pipe.report

    report = run_virtual(main())
    assert_each_payload_once(report, range(report.offered))  # the source is read in order


@pytest.mark.parametrize("name", sorted(CONTROLS))
@pytest.mark.parametrize("moment", [0.0, 0.0005, 0.002, 0.01, 0.03, 0.051, 0.1, 0.2])
def test_stop_at_any_moment_drains_every_item(name, moment):
    async def main():
        pipe = Pipeline(hostile(), cfg(**CONTROLS[name]))
        task = asyncio.ensure_future(pipe.run(range(100)))
        await asyncio.sleep(moment)
        pipe.stop()
        return await task

    report = run_virtual(main())
    assert_each_payload_once(report, range(report.offered))


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_a_drain_timeout_hands_back_what_is_left(name):
    async def main():
        config = cfg(**CONTROLS[name])
        config = PipelineConfig(**{**config.__dict__, "drain_timeout_s": 0.02})
        pipe = Pipeline(hostile(), config)
        task = asyncio.ensure_future(pipe.run(range(100)))
        await asyncio.sleep(0.01)
        pipe.stop()
        return await task

    report = run_virtual(main())
    assert_each_payload_once(report, range(report.offered))


def codel_run(lifo):
    """One worker, 30 ms per item, 10 items queued at t=0: CoDel's trace by hand.

    FIFO: takes at 0, .03, .06, .09, .12 (first above at .03: first_above .13), at .15 shed
    i5 (count 1, drop_next .25) and serve i6; .18 < drop_next: serve i7; .21: i8 has one
    behind: below, leave dropping; .24: i9. LIFO: at .03 the queue stands: serve i9, i8,
    i7, i6 at .03-.12; .15 shed the head i1, still dropping: serve the newest, i5; .18 i4;
    .21 i2 has one behind (below): FIFO, i2; .24 i3.
    """
    order, events = [], []

    async def work(x):
        await asyncio.sleep(0.03)
        order.append(x)

    def on_event(kind, now, item):
        if kind is EventKind.QUEUE_SHED:
            events.append((round(now, 9), item.payload))

    config = PipelineConfig(concurrency=1, queue_maxsize=None, codel=CoDel(lifo=lifo))
    report = run_virtual(Pipeline(work, config, on_event=on_event).run(range(10)))
    return report, order, events


def test_codel_in_the_engine_fifo_sheds_as_the_hand_trace_says():
    report, order, events = codel_run(lifo=False)
    assert order == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert events == [(0.15, 5)]
    assert report.shed == [5] and report.codel_shed == 1 and report.admitted == 10
    assert report.statistics.codel_shed == 1 and report.balanced


def test_codel_in_the_engine_lifo_serves_the_newest_while_the_queue_stands():
    report, order, events = codel_run(lifo=True)
    assert order == [0, 9, 8, 7, 6, 5, 4, 2, 3]
    assert events == [(0.15, 1)]
    assert report.shed == [1] and report.codel_shed == 1
    assert_each_payload_once(report, range(10))


def test_retries_readmitted_are_judged_from_their_readmission():
    # Every item fails once then succeeds: retries re-enter the queue and CoDel still
    # accounts for each item once.
    tries = {}

    async def flaky(x):
        tries[x] = tries.get(x, 0) + 1
        await asyncio.sleep(0.01)
        if tries[x] == 1:
            raise ValueError(x)

    config = PipelineConfig(concurrency=2, queue_maxsize=None, codel=CoDel())
    report = run_virtual(Pipeline(flaky, config).run(range(100)))
    assert_each_payload_once(report, range(100))
    assert report.codel_shed > 0


def test_real_time_service_with_both_controls_keeps_the_account():
    # On a real asyncio loop, as a service embeds it.
    async def main():
        config = PipelineConfig(
            concurrency=8,
            queue_maxsize=50,
            max_attempts=2,
            attempt_timeout_s=0.02,
            concurrency_limit=AIMD(min_limit=1),
            codel=CoDel(target_s=0.002, interval_s=0.01),
        )
        return await Pipeline(hostile(), config).run(range(300))

    report = asyncio.run(main())
    assert_each_payload_once(report, range(300))
    assert 1 <= report.statistics.concurrency_limit <= 8


@settings(max_examples=40, deadline=None)
@given(
    fails=st.lists(st.booleans(), min_size=1, max_size=60),
    concurrency=st.integers(1, 8),
    data=st.data(),
    gradient=st.booleans(),
)
def test_any_failure_pattern_keeps_the_limit_in_bounds_and_every_item(
    fails, concurrency, data, gradient
):
    minimum = data.draw(st.integers(1, concurrency))
    limit = Gradient2(min_limit=minimum) if gradient else AIMD(min_limit=minimum)
    seen = []

    async def handler(x):
        stats = pipe.statistics()
        seen.append((stats.workers_busy, stats.concurrency_limit))
        await asyncio.sleep(0.001 * (1 + x % 3))
        if fails[x]:
            raise ValueError(x)

    config = PipelineConfig(concurrency=concurrency, max_attempts=2, concurrency_limit=limit)
    pipe = Pipeline(handler, config)
    report = run_virtual(pipe.run(range(len(fails))))
    assert_each_payload_once(report, range(len(fails)))
    assert all(busy <= now <= concurrency and now >= minimum for busy, now in seen), seen


def test_a_chain_stage_with_both_controls_accounts_for_every_item():
    from pipeline import Chain, Stage

    async def first(x):
        await asyncio.sleep(0.01)
        return x

    async def second(x):
        await asyncio.sleep(0.03)
        return x

    controlled = PipelineConfig(
        concurrency=2, queue_maxsize=5, concurrency_limit=AIMD(), codel=CoDel(interval_s=0.05)
    )
    chain = Chain(
        [
            Stage("first", first, PipelineConfig(concurrency=4)),
            Stage("second", second, controlled),
        ]
    )
    report = run_virtual(chain.run(range(100)))
    assert report.balanced, report
    assert report.completed + report.shed == 100 and report.shed > 0
    assert report.stages["second"].codel_shed == report.shed


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_resize_while_controlled_keeps_every_item_and_new_workers_are_controlled(name):
    # Workers added by resize() run the controlled loop too (a plain loop would take from
    # CoDel's queue without its sheds, or pass the limit's gate by).
    seen = []

    def watch(_):
        stats = pipe.statistics()
        seen.append((stats.workers_busy, stats.concurrency_limit))

    async def main():
        task = asyncio.ensure_future(pipe.run(range(200)))
        for size in (2, 9, 1, 6):
            await asyncio.sleep(0.02)
            pipe.resize(size)
        return await task

    pipe = Pipeline(hostile(watch), cfg(**CONTROLS[name]))
    report = run_virtual(main())
    assert_each_payload_once(report, range(200))
    if "concurrency_limit" in CONTROLS[name]:
        assert all(busy <= limit for busy, limit in seen)
