"""The arithmetic a reader can check: retries multiply load, a budget bounds the extra.

Run on the real engine in virtual time (``run_virtual``), so counts are exact.
"""

from __future__ import annotations

import asyncio
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Backoff, EventKind, Pipeline, PipelineConfig, RetryBudget
from pipeline.sim.vloop import run_virtual

FAST = Backoff(kind="constant", base_s=0.25, jitter=False)


def run(handler, config, items, *, spacing_s=0.0):
    """Run ``items`` through a pipeline in virtual time; (report, events, pipe)."""
    events = []

    def listen(kind, now, item):
        events.append((kind, now, item))

    pipe = Pipeline(handler, config, on_event=listen)

    async def source():
        for item in items:
            if spacing_s:
                await asyncio.sleep(spacing_s)
            yield item

    report = run_virtual(pipe.run(source()))
    return report, events, pipe


async def always_fail(x):
    await asyncio.sleep(0.1)
    raise ConnectionError("down")


def test_three_retries_at_100_percent_failure_multiply_the_load_by_exactly_4():
    # max_attempts=4: each item is called once and retried 3 times, every call failing.
    config = PipelineConfig(concurrency=8, max_attempts=4, backoff=FAST, drain_timeout_s=None)
    report, _, _ = run(always_fail, config, range(1000))
    assert report.attempts == 4000 and f"{report.attempts / report.offered:.2f}" == "4.00"
    assert {d.reason for d in report.dead_letters} == {"max_attempts"}
    assert report.balanced


def test_a_budget_of_ratio_0_1_caps_the_load_at_1_1_plus_the_floor():
    # Everything at once, window 100 s longer than the run: 1000 first attempts allow
    # 0.1 x 1000 + 0.05/s x 100 s = 105 retries, whatever max_attempts says.
    budget = RetryBudget(ratio=0.1, min_retries_per_s=0.05, window_s=100)
    config = PipelineConfig(
        concurrency=1000, max_attempts=4, backoff=FAST, drain_timeout_s=None, retry_budget=budget
    )
    report, _, _ = run(always_fail, config, range(1000))
    assert report.attempts == 1105
    assert report.statistics.retried == 105
    assert report.statistics.retries_denied == 1000  # each item ends denied, once
    assert {d.reason for d in report.dead_letters} == {"retry_budget"}
    assert all(d.attempts == len(d.errors) for d in report.dead_letters)  # the calls made
    assert report.balanced


def budget_holds(events, budget):
    """Check the rule on an engine's event log: at every retry scheduled at t, the retries
    in (t - w, t] <= ratio x first attempts in (t - w, t] + floor; and over ANY window
    (s - w, s], the retries <= ratio x first attempts in (s - 2w, s] + floor.

    The second is what "over any window" can promise: the first attempts that allowed a
    retry may have left a window that still holds the retry (10 first attempts at 0 allow
    a retry at 5; the window (0.5, 10.5] holds that retry and no first attempt).
    """
    w, floor = budget.window_s, budget.min_retries_per_s * budget.window_s
    firsts = [t for kind, t, attempts in events if kind == EventKind.STARTED and attempts == 1]
    retries = [t for kind, t, _ in events if kind == EventKind.RETRY_SCHEDULED]

    def count(times, low, high):
        return sum(low < t <= high for t in times)

    for t in retries:
        assert count(retries, t - w, t) <= budget.ratio * count(firsts, t - w, t) + floor + 1e-9
    for s in sorted(set(firsts + retries)):
        for end in (s, s + w / 2):
            allowed = budget.ratio * count(firsts, end - 2 * w, end) + floor + 1e-9
            assert count(retries, end - w, end) <= allowed


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    failure=st.sampled_from([0.0, 0.3, 0.9, 1.0]),
    floor=st.sampled_from([0.0, 0.5, 2.0]),
    window_s=st.sampled_from([1.0, 5.0, 20.0]),
    concurrency=st.integers(1, 6),
)
def test_a_budget_of_ratio_0_1_never_lets_retries_exceed_its_share(
    seed, failure, floor, window_s, concurrency
):
    rng = random.Random(seed)
    fails = [rng.random() < failure for _ in range(2000)]
    calls = iter(range(2000))

    async def handler(x):
        await asyncio.sleep(rng.expovariate(4.0))
        if fails[next(calls)]:
            raise RuntimeError("failed")

    budget = RetryBudget(ratio=0.1, min_retries_per_s=floor, window_s=window_s)
    config = PipelineConfig(
        concurrency=concurrency,
        max_attempts=5,
        backoff=Backoff(base_s=0.05, jitter=True),
        drain_timeout_s=None,
        retry_budget=budget,
    )
    pipe = Pipeline(handler, config, rng=random.Random(seed))
    events = []
    # The item's attempts as of the event (the WorkItem itself changes afterwards).
    pipe.add_listener(lambda kind, now, item: events.append((kind, now, item and item.attempts)))

    async def source():
        for item in range(150):
            await asyncio.sleep(rng.expovariate(3.0))
            yield item

    report = run_virtual(pipe.run(source()))
    assert report.balanced
    budget_holds(events, budget)
    denied = sum(d.reason == "retry_budget" for d in report.dead_letters)
    assert denied == report.statistics.retries_denied
