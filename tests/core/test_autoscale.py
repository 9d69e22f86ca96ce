"""``Autoscaler``: the HPA's rules, step by step, and a pipeline that follows them.

The decision traces are worked out by hand from the rules in :mod:`pipeline.autoscale`
(the Kubernetes HPA's); the engine tests run on the virtual clock, where each sync is at
an exact time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
from collections import Counter
from decimal import Decimal

import numpy as np
import pytest

from pipeline import Autoscaler, Backoff, EventKind, Pipeline, PipelineConfig
from pipeline.autoscale import Recommender
from pipeline.sim.vloop import run_virtual
from tests.accounting import assert_nothing_lost

# -- the rules, on numbers worked out by hand ---------------------------------------------


def test_the_ramp_from_one_to_a_hundred_takes_six_syncs():
    # Each sync adds max(4, 100% of current): 1+4=5, 5+5=10, 20, 40, 80, then 100 (the max).
    hpa = Recommender(Autoscaler(max_workers=100, target=5.0, sync_s=15.0))
    sizes, current = [], 1
    for sync in range(1, 8):
        current = hpa.decide(15.0 * sync, current, depth=10_000, oldest_age_s=0.0)
        sizes.append(current)
    assert sizes == [5, 10, 20, 40, 80, 100, 100]


def test_desired_is_the_queue_over_the_target_in_one_division():
    hpa = Recommender(Autoscaler(target=0.3, tolerance=0.0))
    # 3 / 0.3 is 10.0 in floats; 1 * (3 / 1) / 0.3 is too, but other pairs are not:
    assert hpa.desired_count(current=1, depth=3, oldest_age_s=0.0) == 10
    hpa = Recommender(Autoscaler(target=5.0, tolerance=0.0))
    overshoots = [
        (c, d)
        for c in range(1, 60)
        for d in range(1, 400)
        if math.ceil(c * (d / c) / 5.0) != math.ceil(d / 5.0)
    ]
    for current, depth in overshoots:
        assert hpa.desired_count(current, depth, 0.0) == math.ceil(depth / 5.0)


@pytest.mark.parametrize(
    ("depth", "current", "expected"),
    [
        (15, 3, 3),  # 5 per worker: on target
        (16, 3, 3),  # 16/15 = 1.067: within 10%
        (17, 3, 4),  # 17/15 = 1.133: ceil(17 / 5) = 4
        # 5.5 per worker: 11 / 2 / 5 is 1.1000000000000001 in floats, 0.1 above 1 by
        # 9e-17 more than the tolerance 0.1: outside, as the HPA's float64 test finds it
        (11, 2, 3),
        (13, 3, 3),  # 13/15 = 0.867: ceil(13 / 5) = 3, the same count
        (0, 4, 0),  # an empty queue asks for none (the minimum applies later)
    ],
)
def test_the_tolerance_keeps_the_count(depth, current, expected):
    hpa = Recommender(Autoscaler(target=5.0, tolerance=0.1))
    assert hpa.desired_count(current, depth, 0.0) == expected


def test_a_ratio_exactly_at_the_tolerance_keeps_the_count():
    hpa = Recommender(Autoscaler(target=4.0, tolerance=0.25))  # both exact in binary
    assert hpa.desired_count(2, depth=10, oldest_age_s=0.0) == 2  # ratio 1.25: within
    assert hpa.desired_count(2, depth=6, oldest_age_s=0.0) == 2  # ratio 0.75: within
    assert hpa.desired_count(2, depth=11, oldest_age_s=0.0) == 3  # 1.375: ceil(11 / 4)


def test_oldest_age_scales_the_count_by_the_ratio():
    hpa = Recommender(Autoscaler(metric="oldest_age_s", target=10.0))
    assert hpa.desired_count(4, depth=0, oldest_age_s=30.0) == 12  # ceil(3.0 x 4)
    assert hpa.desired_count(4, depth=99, oldest_age_s=10.5) == 4  # 1.05: within 10%
    assert hpa.desired_count(4, depth=99, oldest_age_s=2.5) == 1  # ceil(0.25 x 4)


def test_a_scale_down_waits_for_its_stabilisation_window():
    # Syncs every 15 s, window 60 s: the desired counts at 15 and 30 s were 10; from 45 s
    # on the queue is empty (desired 0). The highest desired count of the last 60 s keeps
    # the pool at 10 until 30 s leaves the window: at 90 s (30 <= 90 - 60).
    hpa = Recommender(
        Autoscaler(max_workers=10, target=1.0, sync_s=15.0, scale_down_stabilization_s=60.0)
    )
    current, sizes = 10, []
    for sync, depth in enumerate([10, 10, 0, 0, 0, 0, 0], start=1):
        current = hpa.decide(15.0 * sync, current, depth, 0.0)
        sizes.append((15 * sync, current))
    assert sizes == [(15, 10), (30, 10), (45, 10), (60, 10), (75, 10), (90, 1), (105, 1)]


def test_a_scale_up_is_capped_by_the_lowest_count_of_its_window():
    # Up window 30 s: at 15 s the desired count is 2; at 30 s it is 8, but the lowest of
    # the last 30 s (15 and 30 s, both inside: 15 > 30 - 30) is 2; at 45 s the window holds
    # 30 s and 45 s (8 and 8): 8, of which one sync may add max(4, 100% of 2) = 4.
    hpa = Recommender(
        Autoscaler(target=1.0, sync_s=15.0, scale_up_stabilization_s=30.0, tolerance=0.0)
    )
    current, sizes = 2, []
    for sync, depth in enumerate([2, 8, 8], start=1):
        current = hpa.decide(15.0 * sync, current, depth, 0.0)
        sizes.append(current)
    assert sizes == [2, 2, 6]


@pytest.mark.parametrize(
    ("max_scale_up", "current", "expected"),
    [((4, 1.0), 3, 7), ((4, 1.0), 7, 14), ((1, 0.0), 7, 8), ((2, 0.5), 7, 11), ((10, 0.1), 7, 17)],
)
def test_the_scale_up_policy_takes_the_larger_step(max_scale_up, current, expected):
    hpa = Recommender(Autoscaler(max_workers=1000, target=1.0, max_scale_up=max_scale_up))
    assert hpa.decide(15.0, current, depth=10_000, oldest_age_s=0.0) == expected


def test_the_bounds_hold_whatever_the_metric_asks():
    hpa = Recommender(Autoscaler(min_workers=3, max_workers=6, target=1.0, max_scale_up=(99, 9.0)))
    assert hpa.decide(15.0, 4, depth=10_000, oldest_age_s=0.0) == 6
    hpa = Recommender(
        Autoscaler(min_workers=3, max_workers=6, target=1.0, scale_down_stabilization_s=0)
    )
    assert hpa.decide(15.0, 4, depth=0, oldest_age_s=0.0) == 3


def test_the_history_stays_bounded():
    hpa = Recommender(Autoscaler(sync_s=1.0, scale_down_stabilization_s=10.0))
    for sync in range(1, 10_001):
        hpa.decide(float(sync), 5, depth=sync % 50, oldest_age_s=0.0)
    assert len(hpa._history) <= 11


# -- bad settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "error", "words"),
    [
        ({"min_workers": 0}, ValueError, "min_workers must be >= 1"),
        ({"max_workers": 2_000_000}, ValueError, "max_workers must be at most 1,000,000"),
        ({"min_workers": 5, "max_workers": 4}, ValueError, "min_workers must be <= max_workers"),
        ({"min_workers": True}, TypeError, "min_workers must be an integer"),
        ({"max_workers": 3.0}, TypeError, "max_workers must be an integer"),
        ({"metric": "cpu"}, ValueError, "metric must be 'queue_per_worker' or 'oldest_age_s'"),
        ({"target": 0}, ValueError, "target must be > 0"),
        ({"target": float("nan")}, ValueError, "target must be finite"),
        ({"target": -1.0}, ValueError, "target must be > 0"),
        ({"sync_s": 0.0}, ValueError, "sync_s must be > 0"),
        ({"sync_s": math.inf}, ValueError, "sync_s must be finite"),
        ({"tolerance": -0.1}, ValueError, "tolerance must be >= 0"),
        ({"scale_down_stabilization_s": -1}, ValueError, "scale_down_stabilization_s must be"),
        ({"scale_up_stabilization_s": float("nan")}, ValueError, "scale_up_stabilization_s"),
        ({"cold_start_s": -5}, ValueError, "cold_start_s must be >= 0"),
        ({"max_scale_up": 4}, TypeError, r"max_scale_up must be a \(pods, fraction\) pair"),
        ({"max_scale_up": (0, 1.0)}, ValueError, "max_scale_up's pods must be >= 1"),
        ({"max_scale_up": (4, -1.0)}, ValueError, "max_scale_up's fraction must be >= 0"),
        ({"max_scale_up": (4, "x")}, TypeError, "max_scale_up's fraction must be a real"),
    ],
)
def test_bad_settings_are_refused_at_construction(settings, error, words):
    with pytest.raises(error, match=words):
        Autoscaler(**settings)


def test_numpy_and_decimal_numbers_are_taken_as_plain_ones():
    scaler = Autoscaler(
        min_workers=np.int64(2), target=Decimal("2.5"), sync_s=np.float32(5), cold_start_s=1
    )
    assert type(scaler.min_workers) is int and scaler.target == 2.5 and scaler.sync_s == 5.0
    assert type(scaler.cold_start_s) is float


def test_the_starting_pool_must_lie_within_the_bounds():
    with pytest.raises(ValueError, match=r"concurrency must be within .* \(2\.\.8\), got 1"):
        PipelineConfig(concurrency=1, autoscale=Autoscaler(min_workers=2, max_workers=8))
    with pytest.raises(TypeError, match="autoscale must be an Autoscaler or None"):
        PipelineConfig(autoscale={"max_workers": 3})


# -- the pipeline, on the virtual clock ---------------------------------------------------


def _recorder(times: list[tuple[float, int]], pipe_box: list[Pipeline]):
    def listen(kind: EventKind, now: float, item: object) -> None:
        if kind is EventKind.SCALED:
            times.append((now, pipe_box[0].statistics().workers))

    return listen


def test_a_pipeline_ramps_up_at_its_syncs():
    scaled: list[tuple[float, int]] = []
    box: list[Pipeline] = []

    async def handle(item: int) -> int:
        await asyncio.sleep(1000.0)
        return item

    async def main():
        config = PipelineConfig(
            concurrency=1, queue_maxsize=None, autoscale=Autoscaler(max_workers=100)
        )
        pipe = Pipeline(handle, config, on_event=_recorder(scaled, box))
        box.append(pipe)
        async with pipe:
            for item in range(5000):
                await pipe.put(item)
            await asyncio.sleep(100.0)
            stats = pipe.statistics()
            pipe.stop()
        return stats

    stats = run_virtual(main())
    assert scaled == [(15.0, 5), (30.0, 10), (45.0, 20), (60.0, 40), (75.0, 80), (90.0, 100)]
    # At the last sync (90 s) 80 items were running: 4,920 waiting, ceil(4920 / 5) = 984.
    assert stats.scale_events == 6 and stats.workers == 100 and stats.workers_desired == 984
    # Worker-seconds at 100 s: 1 x 100, plus each sync's new workers from their sync on.
    expected = 100 + 4 * 85 + 5 * 70 + 10 * 55 + 20 * 40 + 40 * 25 + 20 * 10
    assert stats.worker_seconds == pytest.approx(expected, rel=1e-12)


def test_new_workers_take_items_only_after_their_cold_start():
    starts: list[float] = []

    async def handle(item: int) -> int:
        starts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(500.0)
        return item

    async def main():
        scaler = Autoscaler(max_workers=5, target=1.0, sync_s=10.0, cold_start_s=30.0)
        pipe = Pipeline(handle, PipelineConfig(concurrency=1, queue_maxsize=None, autoscale=scaler))
        async with pipe:
            for item in range(50):
                await pipe.put(item)
            await asyncio.sleep(10.5)
            at_sync = pipe.statistics()
            await asyncio.sleep(35.0)
            pipe.stop()
        return at_sync

    at_sync = run_virtual(main())
    assert at_sync.workers == 5 and at_sync.workers_starting == 4  # counted from the sync
    assert starts == [0.0, 40.0, 40.0, 40.0, 40.0]  # the four new ones start at 10 + 30


def test_scaling_down_removes_idle_then_starting_then_busy_workers():
    async def main():
        loop = asyncio.get_running_loop()

        async def handle(item: int) -> int:
            await asyncio.sleep(100.0 - loop.time())
            return item

        # Two busy workers and two idle ones. At the sync at 2 s the oldest item is 2 s
        # old against a target of 0.5 s: ratio 4, desired ceil(4 x 4) = 16, at most
        # 4 + max(4, 4) = 8 workers, so four new ones start their 50 s cold start.
        scaler = Autoscaler(
            max_workers=8, metric="oldest_age_s", target=0.5, sync_s=2.0, cold_start_s=50.0
        )
        config = PipelineConfig(concurrency=4, drain_timeout_s=None, autoscale=scaler)
        pipe = Pipeline(handle, config)
        async with pipe:
            await pipe.put(1)
            await pipe.put(2)
            await asyncio.sleep(2.5)
            stats = pipe.statistics()
            assert (stats.workers, stats.workers_starting, stats.workers_busy) == (8, 4, 2)
            pipe.resize(5)  # -3: the two idle ones, then one starting one
            stats = pipe.statistics()
            assert (stats.workers, stats.workers_starting, stats.workers_busy) == (5, 3, 2)
            pipe.resize(1)  # -4: the three starting ones, then one busy one after its item
            stats = pipe.statistics()
            assert (stats.workers, stats.workers_starting, stats.workers_busy) == (2, 0, 2)
            pipe.stop()  # the drain: no more syncs
        return pipe

    pipe = run_virtual(main())
    assert pipe.report.completed == 2 and pipe.statistics().workers == 1


def test_syncs_stop_when_the_drain_begins():
    kinds: list[tuple[float, EventKind]] = []

    async def handle(item: int) -> int:
        await asyncio.sleep(4.0)
        return item

    async def main():
        scaler = Autoscaler(max_workers=10, target=1.0, sync_s=15.0)
        config = PipelineConfig(
            concurrency=1, queue_maxsize=None, drain_timeout_s=None, autoscale=scaler
        )
        pipe = Pipeline(handle, config, on_event=lambda k, t, _: kinds.append((t, k)))
        report = await pipe.run(range(30))  # the source is read at once: the drain begins
        return report

    report = run_virtual(main())
    assert report.completed == 30
    assert not [k for _, k in kinds if k is EventKind.SCALED]


def test_worker_seconds_count_every_worker_alive():
    async def main():
        pipe = Pipeline(lambda x: x, PipelineConfig(concurrency=2))
        async with pipe:
            await asyncio.sleep(10.0)
            pipe.resize(5)
            await asyncio.sleep(10.0)
            pipe.resize(1)
            await asyncio.sleep(10.0)
            assert pipe.statistics().worker_seconds == pytest.approx(2 * 10 + 5 * 10 + 1 * 10)
        return pipe.statistics()

    after = run_virtual(main())
    assert after.worker_seconds == pytest.approx(80.0)


async def _fuzzed_autoscaled_run(seed: int) -> tuple[object, Counter, list, list[str]]:
    rng = random.Random(seed)
    calls: Counter = Counter()
    succeeded: list[int] = []  # a list: an item that succeeded twice would show
    problems: list[str] = []
    running = [0]
    pipe: Pipeline

    async def handle(item: int) -> int:
        calls[item] += 1
        running[0] += 1
        try:
            if running[0] > pipe.statistics().workers:
                problems.append(f"{running[0]} calls with {pipe.statistics().workers} workers")
            await asyncio.sleep(rng.expovariate(1.0))
            if rng.random() < 0.25:
                raise ValueError("flaky")
            succeeded.append(item)
            return item
        finally:
            running[0] -= 1

    low = rng.randint(1, 3)
    scaler = Autoscaler(
        min_workers=low,
        max_workers=rng.randint(low, 12),
        metric=rng.choice(["queue_per_worker", "oldest_age_s"]),
        target=rng.choice([0.5, 2.0, 5.0]),
        sync_s=rng.choice([0.5, 1.0, 3.0]),
        scale_down_stabilization_s=rng.choice([0.0, 2.0, 10.0]),
        cold_start_s=rng.choice([0.0, 0.7, 2.0]),
    )
    config = PipelineConfig(
        concurrency=low,
        queue_maxsize=rng.choice([None, 3, 30]),
        max_attempts=rng.randint(1, 3),
        backoff=Backoff(base_s=0.2),
        max_wait_s=rng.choice([None, 4.0]),
        drain_timeout_s=rng.choice([None, 1.0]),
        autoscale=scaler,
    )

    def check_scaled(kind: EventKind, now: float, item: object) -> None:
        if kind is EventKind.SCALED:
            stats = pipe.statistics()
            # the pool within its bounds, plus at most the busy workers due to leave
            if not scaler.min_workers <= stats.workers <= scaler.max_workers + stats.workers_busy:
                problems.append(f"{stats.workers} workers after a sync at {now}")
            if now % scaler.sync_s > 1e-9 * now:
                problems.append(f"a sync at {now}, not a multiple of {scaler.sync_s}")

    pipe = Pipeline(handle, config, rng=random.Random(seed), on_event=check_scaled)

    async def source():
        for item in range(rng.choice([0, 10, 80])):
            await asyncio.sleep(rng.expovariate(rng.choice([0.5, 4.0, 20.0])))
            yield item

    run = asyncio.ensure_future(pipe.run(source()))
    ending = rng.choice(["drain", "cancel", "cancel twice"])
    if ending != "drain":
        await asyncio.sleep(rng.uniform(0, 20))
        run.cancel()
        if ending == "cancel twice":
            await asyncio.sleep(rng.choice([0, 0.01]))
            run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    return pipe.report, calls, succeeded, problems


@pytest.mark.parametrize("seed", range(120))
def test_fuzzed_autoscaled_runs_lose_and_duplicate_nothing(seed):
    report, calls, succeeded, problems = run_virtual(_fuzzed_autoscaled_run(seed))
    assert problems == []
    assert_nothing_lost(report, list(range(report.offered)), succeeded)
    assert report.attempts == sum(calls.values())


def test_on_the_real_clock_a_burst_scales_the_pool_and_nothing_is_lost():
    async def handle(item: int) -> int:
        await asyncio.sleep(0.01)
        return item

    async def main():
        scaler = Autoscaler(
            max_workers=20, target=2.0, sync_s=0.02, scale_down_stabilization_s=0.05
        )
        pipe = Pipeline(handle, PipelineConfig(concurrency=1, queue_maxsize=None, autoscale=scaler))
        async with pipe:
            for item in range(400):
                await pipe.put(item)
            while pipe.statistics().completed < 400:
                await asyncio.sleep(0.01)
            grown = pipe.statistics()
            pipe.stop()
        return grown, pipe.report

    grown, report = asyncio.run(main())
    assert report.completed == 400
    assert grown.scale_events >= 1 and grown.worker_seconds > 0


def _scaled_from(offset_s: float, burst_s: float) -> list[tuple[float, int]]:
    """The (seconds after the start, workers) of each scale event of a run that starts
    ``offset_s`` into the loop's clock: a burst of ``burst_s`` seconds, then quiet."""
    scaled: list[tuple[float, int]] = []
    box: list[Pipeline] = []

    async def handle(item: float) -> float:
        await asyncio.sleep(item)
        return item

    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(offset_s)
        start = loop.time()
        scaler = Autoscaler(max_workers=50, target=2.0, sync_s=15.0)
        pipe = Pipeline(handle, PipelineConfig(concurrency=1, queue_maxsize=None, autoscale=scaler))
        box.append(pipe)
        pipe.add_listener(_recorder(scaled, box))
        async with pipe:
            while loop.time() - start < burst_s:
                await pipe.put(4.0)
                await asyncio.sleep(0.25)
            await asyncio.sleep(900.0)
            pipe.stop()
        return [(round(t - start, 6), n) for t, n in scaled]

    return run_virtual(main())


@pytest.mark.parametrize("burst_s", [200.0, 230.0, 260.0, 300.0, 330.0, 600.0])
def test_a_run_scales_the_same_wherever_the_loop_clock_starts(burst_s):
    # The windows are judged on seconds since the run's start: loop-clock readings far
    # from zero make "300 s before this sync" round onto either side of an older sync.
    at_zero = _scaled_from(0.0, burst_s)
    assert any(n < m for (_, m), (_, n) in itertools.pairwise(at_zero)), "no scale-down"
    for offset_s in (0.1, 3.3, 1000.1):
        assert _scaled_from(offset_s, burst_s) == at_zero, offset_s
