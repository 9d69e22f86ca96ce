"""The exporter's histograms are exact: every bucket and sum as if each value were bucketed alone.

The listener only appends each observation and buckets a sorted run of them later
(at a scrape, or when ``FOLD_AT`` wait); these tests hold that to the per-value
definition (Prometheus's ``le``: a value equal to a bound is in that bucket), over
runs longer than one fold, with retries, on a scrape racing the run.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
from bisect import bisect_left

import pytest

import pipeline.metrics
from pipeline import Backoff, Pipeline, PipelineConfig
from pipeline._metric_names import BUCKETS_S
from pipeline.events import EventKind
from tests.core.test_metrics import scrape, value

FAST = Backoff(kind="constant", base_s=0.0005)


def expected(values):
    """Cumulative bucket counts, per value, and the sum."""
    counts = [0] * (len(BUCKETS_S) + 1)
    for each in values:
        counts[bisect_left(BUCKETS_S, each)] += 1
    running, cumulative = 0, []
    for count in counts:
        running += count
        cumulative.append(running)
    return cumulative, math.fsum(values)


def test_values_on_the_bounds_and_between_them_fold_as_one_by_one():
    rng = random.Random(3)
    values = [*BUCKETS_S, 0.0, 1e-12, 599.999, 600.0, 600.0001, 1e9]
    values += [rng.choice(BUCKETS_S) * rng.choice([1.0, 1 - 1e-16, 1 + 1e-15]) for _ in range(500)]
    values += [rng.expovariate(3.0) for _ in range(3000)]
    histogram = pipeline.metrics._Histogram(threading.RLock())
    for start in range(0, len(values), 997):  # folds of odd sizes, as scrapes would cut them
        histogram.pending.extend(values[start : start + 997])
        histogram.fold()
    buckets, total = histogram.snapshot()
    counts, fsum = expected(values)
    assert [count for _, count in buckets] == counts
    assert [bound for bound, _ in buckets] == [*map(repr, map(float, BUCKETS_S)), "+Inf"]
    assert total == pytest.approx(fsum, rel=1e-12)
    assert len(histogram.pending) == 0
    empty = pipeline.metrics._Histogram(threading.RLock())
    assert empty.snapshot() == ([(bound, 0) for bound, _ in buckets], 0.0)


class Truth:
    """The engine's own events, turned into the exporter's observations independently."""

    def __init__(self):
        self.wait, self.attempt, self.latency = [], [], []
        self._started = {}

    def __call__(self, kind, now_s, item):
        if kind is EventKind.STARTED:
            self._started[item] = now_s
            if item.attempts == 1:
                self.wait.append(now_s - item.admitted_s)
        elif kind in (EventKind.COMPLETED, EventKind.RETRY_SCHEDULED, EventKind.DEAD_LETTERED):
            started = self._started.pop(item, None)
            if started is not None:
                self.attempt.append(now_s - started)
            if kind is EventKind.COMPLETED:
                self.latency.append(now_s - item.admitted_s)


@pytest.mark.parametrize("seed", range(3))
def test_buckets_and_sums_equal_the_engine_s_times_across_folds_and_racing_scrapes(seed):
    rng = random.Random(seed)
    draws = random.Random(seed + 50)

    async def handle(x):
        if draws.random() < 0.3:
            await asyncio.sleep(draws.choice([0.0, 0.001, 0.003]))
        if draws.random() < 0.2:
            raise ValueError("boom")

    truth = Truth()
    pipe = Pipeline(
        handle,
        PipelineConfig(concurrency=rng.randint(1, 6), max_attempts=3, backoff=FAST),
        name="exact",
        on_event=truth,
    )
    stop = threading.Event()
    seen, waits = [], []

    def race(url):
        while not stop.wait(0.002):
            samples = scrape(url)
            seen.append(value(samples, "pipeline_latency_seconds_count", pipeline="exact"))
            waits.append(value(samples, "pipeline_wait_seconds_count", pipeline="exact"))

    async def run():
        with pipeline.metrics.serve(pipe) as server:
            racer = threading.Thread(target=race, args=(server.url,))
            racer.start()
            try:
                report = await pipe.run(range(pipeline.metrics.FOLD_AT * 2 + 17))
            finally:
                stop.set()
                await asyncio.to_thread(racer.join)
            return report, await asyncio.to_thread(scrape, server.url)

    report, samples = asyncio.run(run())
    assert seen == sorted(seen)  # counts never go back, folds or not
    assert waits == sorted(waits)  # nor do waits, counted while running, then when observed
    for name, values in (
        ("pipeline_wait_seconds", truth.wait),
        ("pipeline_attempt_duration_seconds", truth.attempt),
        ("pipeline_latency_seconds", truth.latency),
    ):
        counts, fsum = expected(values)
        got = [
            value(samples, f"{name}_bucket", pipeline="exact", le=bound)
            for bound in [*map(repr, map(float, BUCKETS_S)), "+Inf"]
        ]
        assert got == counts, name
        assert value(samples, f"{name}_count", pipeline="exact") == len(values)
        assert value(samples, f"{name}_sum", pipeline="exact") == pytest.approx(fsum, rel=1e-9)
    assert len(truth.latency) == report.completed
    assert len(truth.attempt) == report.attempts


def test_a_value_due_then_missing_from_one_read_never_takes_a_count_back():
    # A scrape counts the waits of first attempts still running (``due``); if the loop's
    # thread ends one between the fold and the read of what is due, that answer misses it.
    # What is shown stays at least what was shown, and the truth catches up exactly.
    histogram = pipeline.metrics._Histogram(threading.RLock())
    first, _ = histogram.snapshot(lambda: [0.002, 7.0])
    assert [count for _, count in first][-1] == 2
    missed, total = histogram.snapshot(lambda: [])  # both ended, neither appended yet
    assert [count for _, count in missed] == [count for _, count in first]
    assert total == pytest.approx(7.002)
    histogram.pending.extend([0.002, 7.0, 0.3])  # the listener observes them, and a third
    caught, total = histogram.snapshot(lambda: [])
    assert [count for _, count in caught] == expected([0.002, 7.0, 0.3])[0]
    assert total == pytest.approx(7.302)


def test_waits_of_first_attempts_cut_by_a_stop_are_observed_once():
    # Items whose first attempt is running when the run stops have waited: their waits
    # are in the histogram once, as every started item's is, and no unstarted item's is.
    async def run():
        release = asyncio.Event()

        async def hold(x):
            await release.wait()

        truth = Truth()
        pipe = Pipeline(
            hold,
            PipelineConfig(concurrency=3, queue_maxsize=None, drain_timeout_s=0.01),
            name="cut",
            on_event=truth,
        )
        with pipeline.metrics.serve(pipe) as server:
            task = asyncio.create_task(pipe.run(range(10)))
            while pipe.statistics().workers_busy < 3:
                await asyncio.sleep(0.001)
            during = await asyncio.to_thread(scrape, server.url)
            pipe.stop()  # the drain times out: the three running and seven queued are cut
            report = await task
            after = await asyncio.to_thread(scrape, server.url)
        return truth, report, during, after

    truth, report, during, after = asyncio.run(run())
    assert len(truth.wait) == 3 and len(report.unfinished) == 10
    for samples in (during, after):
        assert value(samples, "pipeline_wait_seconds_count", pipeline="cut") == 3
        assert value(samples, "pipeline_wait_seconds_sum", pipeline="cut") == pytest.approx(
            math.fsum(truth.wait), rel=1e-9
        )
    assert value(after, "pipeline_items_total", pipeline="cut", outcome="unfinished") == 10
