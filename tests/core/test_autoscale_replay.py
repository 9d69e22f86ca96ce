"""The HPA's arithmetic, replayed on what a run exposes, gives the pool's size at every sync.

A recorded run of the real engine with an autoscaler is replayed by an HPA written here
from the Kubernetes documentation ("Horizontal Pod Autoscaling", its algorithm and
``behavior`` sections), not by :class:`~pipeline.autoscale.Recommender`:

- ``desiredReplicas = ceil(currentReplicas x currentMetricValue / desiredMetricValue)``,
  unchanged when the ratio is within the tolerance; for a per-pod average of a total
  (the queue over the workers, an ``AverageValue`` target) Kubernetes divides the total
  by the target once, ``ceil(total / target)``, which is what the project asks;
- the recommendation is the current count raised to the lowest desired count of the
  scale-up window and lowered to the highest of the scale-down window (samples strictly
  after ``now - window``, this sync's included); every sync records its desired count;
- a sync adds at most ``max(pods, ceil(current x fraction))`` (the project's rule: the
  HPA's ``Percent`` policy writes ``ceil(current x (1 + fraction))``, which in floats
  gives 12 for 10 x 1.1), and the result lies within ``[min, max]``.

What the run exposes, and only that: ``statistics()`` read at each sync instant by a
timer of the test's own (scheduled before the pipeline's, so it fires first at equal
deadlines on the virtual loop, and the autoscaler reads in a later step), and the
listener's events. ``statistics().workers`` counts the busy workers due to leave, which
the autoscaler does not count (the HPA's ``currentReplicas`` is the spec's count), and
no public field separates them; the replay keeps them by the rule ``resize`` documents
(idle workers leave first, then cold-starting ones, then busy ones, each as its attempt
ends) and checks ``workers`` against the count plus them at every sync.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass, field

import pytest

from pipeline import Autoscaler, Backoff, EventKind, Pipeline, PipelineConfig
from pipeline.sim.vloop import run_virtual
from tests.tiers import examples

ATTEMPT_ENDS = {EventKind.COMPLETED, EventKind.RETRY_SCHEDULED, EventKind.DEAD_LETTERED}


@dataclass
class Hpa:
    """The HPA of the module docstring, for one pool: its settings and past desired counts."""

    scaler: Autoscaler
    history: list[tuple[float, int]] = field(default_factory=list)

    def desired(self, current: int, depth: int, oldest_age_s: float) -> int:
        s = self.scaler
        if s.metric == "queue_per_worker":
            ratio = depth / current / s.target  # the metric per worker, over its target
            proposal = math.ceil(depth / s.target)
        else:
            ratio = oldest_age_s / s.target
            proposal = math.ceil(ratio * current)
        return current if abs(1.0 - ratio) <= s.tolerance else proposal

    def sync(self, now: float, current: int, depth: int, oldest_age_s: float) -> tuple[int, int]:
        """(desired, new count) at the sync at ``now``."""
        s = self.scaler
        desired = self.desired(current, depth, oldest_age_s)
        self.history.append((now, desired))
        up_cutoff = now - s.scale_up_stabilization_s
        down_cutoff = now - s.scale_down_stabilization_s
        up = min(d for t, d in self.history if t > up_cutoff or t == now)
        down = max(d for t, d in self.history if t > down_cutoff or t == now)
        recommendation = current
        if recommendation < up:
            recommendation = up
        if recommendation > down:
            recommendation = down
        pods, fraction = s.max_scale_up
        highest = min(s.max_workers, current + max(pods, math.ceil(current * fraction)))
        if recommendation > highest:
            return desired, highest
        return desired, max(recommendation, s.min_workers)


@dataclass
class Pool:
    """The count the autoscaler works from, and the busy workers due to leave (``resize``'s
    rule), kept from the replay's own decisions and the run's events."""

    size: int
    leaving: int = 0

    def resize(self, new: int, idle: int, starting: int) -> None:
        if new > self.size:
            self.leaving -= min(self.leaving, new - self.size)  # they stay instead
        else:
            surplus = self.size - new
            surplus -= min(idle, surplus)
            surplus -= min(starting, surplus)
            self.leaving += surplus  # busy ones, each after its attempt
        self.size = new

    def attempt_ended(self) -> None:
        if self.leaving:
            self.leaving -= 1  # the worker comes for its next item and leaves


def replay(scaler: Autoscaler, concurrency: int, timeline: list[tuple]) -> int:
    """Replay ``timeline`` and assert the run followed the HPA at every sync; return the
    syncs checked."""
    hpa, pool = Hpa(scaler), Pool(concurrency)
    expected: tuple | None = None  # a change the last sync must show: (time, size, desired)
    last_desired: int | None = None
    instant: float | None = None  # the last sync's, until its decision is seen
    syncs = 0
    for entry in timeline:
        kind, now, stats = entry
        if kind == "probe":
            if stats.state != "open":
                break  # the drain began: no more syncs
            assert expected is None, f"the sync at {expected[0]} s did not change the pool"
            assert stats.workers_desired == last_desired, f"desired count before {now} s"
            assert stats.workers == pool.size + pool.leaving, f"workers before the sync at {now}"
            desired, size = hpa.sync(now, pool.size, stats.queue_size, stats.oldest_age_s)
            idle = stats.workers - stats.workers_busy - stats.workers_starting
            if size != pool.size:
                expected = (now, size, desired)
            pool.resize(size, idle, stats.workers_starting)
            last_desired = desired
            instant = now
            syncs += 1
        elif kind == "scaled":
            assert expected is not None and expected[0] == now, f"a scale event at {now} s"
            _, size, desired = expected
            assert stats.workers_desired == desired and stats.workers == size + pool.leaving
            expected = instant = None  # what follows at this instant follows the decision
        elif kind == "synced":
            # Every sync ends with SYNCED, after its SCALED: the desired count it computed.
            assert expected is None, f"the sync at {expected[0]} s did not change the pool"
            assert instant in (now, None) and stats.workers_desired == last_desired
            instant = None
        else:
            # Nothing else happens at a sync instant (times are continuous): were it to,
            # whether the autoscaler read before or after it would not show.
            assert now != instant, f"an event at the sync instant {now} s"
            if kind == "end":
                pool.attempt_ended()
    return syncs


def _settings(rng: random.Random) -> tuple[Autoscaler, int]:
    low = rng.randint(1, 3)
    metric = rng.choice(["queue_per_worker", "oldest_age_s"])
    targets = [0.5, 2.0, 5.0] if metric == "queue_per_worker" else [0.3, 1.0, 4.0]  # seconds
    sync_s = rng.choice([0.5, 1.0, 3.0])
    scaler = Autoscaler(
        min_workers=low,
        max_workers=rng.randint(low, 40),
        metric=metric,
        target=rng.choice(targets),
        sync_s=sync_s,
        tolerance=rng.choice([0.0, 0.1, 0.25]),
        scale_up_stabilization_s=rng.choice([0.0, 0.0, sync_s, 2.5]),
        scale_down_stabilization_s=rng.choice([0.0, 2.0, 10.0]),
        max_scale_up=rng.choice([(4, 1.0), (1, 0.0), (2, 0.5), (1, 0.1), (3, 0.3)]),
        cold_start_s=rng.choice([0.0, 0.7, 2.3]),  # never a sync instant after a sync
    )
    return scaler, rng.randint(low, scaler.max_workers)


async def _recorded_run(
    seed: int, settings: tuple[Autoscaler, int] | None = None
) -> tuple[Autoscaler, int, list[tuple], object]:
    """A bursty run with failures, retries and deadlines, and what it exposed."""
    rng = random.Random(seed)
    scaler, concurrency = _settings(rng) if settings is None else settings
    loop = asyncio.get_running_loop()
    timeline: list[tuple] = []
    pipe: Pipeline

    def listen(kind: EventKind, now: float, item: object) -> None:
        if kind is EventKind.SCALED:
            timeline.append(("scaled", now, pipe.statistics()))
        elif kind is EventKind.SYNCED:
            timeline.append(("synced", now, pipe.statistics()))
        else:
            timeline.append(("end" if kind in ATTEMPT_ENDS else "event", now, None))

    async def handle(item: int) -> int:
        await asyncio.sleep(rng.expovariate(rng.choice([0.5, 2.0])))
        if rng.random() < 0.2:
            raise ValueError("flaky")
        return item

    config = PipelineConfig(
        concurrency=concurrency,
        queue_maxsize=rng.choice([None, 20]),
        max_attempts=rng.randint(1, 3),
        backoff=Backoff(base_s=0.3),
        max_wait_s=rng.choice([None, 6.0]),
        autoscale=scaler,
    )
    pipe = Pipeline(handle, config, rng=random.Random(seed), on_event=listen)

    async def source():
        for _ in range(rng.randint(3, 8)):  # bursts and lulls
            rate = rng.choice([0.3, 3.0, 15.0])
            for _ in range(rng.randint(5, 120)):
                await asyncio.sleep(rng.expovariate(rate))
                yield 0

    # A probe at every sync instant. Each schedules the next before the autoscaler (whose
    # step follows the probe's) schedules its own, so at equal deadlines the probe fires first.
    start = loop.time()

    def probe(sync: int) -> None:
        stats = pipe.statistics()
        timeline.append(("probe", loop.time(), stats))
        if stats.state in ("idle", "open"):
            loop.call_at(start + (sync + 1) * scaler.sync_s, probe, sync + 1)

    loop.call_at(start + scaler.sync_s, probe, 1)
    report = await pipe.run(source())
    return scaler, concurrency, timeline, report


@pytest.mark.parametrize("seed", range(examples(120)))  # 24 seeds in the fast tier
def test_the_hpa_replayed_on_the_recorded_metric_gives_the_same_pool(seed):
    scaler, concurrency, timeline, report = run_virtual(_recorded_run(seed))
    syncs = replay(scaler, concurrency, timeline)
    assert syncs >= 3 and report.offered > 0


def test_a_tenth_more_of_a_hundred_workers_is_ten():
    # ceil(100 x 0.1) = 10 workers more; the HPA's Percent form, ceil(100 x 1.1), adds 11:
    # 100 x 1.1 is 110.00000000000001 in floats.
    async def main():
        scaler = Autoscaler(
            min_workers=100, max_workers=300, target=1.0, sync_s=1.0, max_scale_up=(1, 0.1)
        )
        config = PipelineConfig(concurrency=100, queue_maxsize=None, autoscale=scaler)
        pipe = Pipeline(asyncio.sleep, config)
        async with pipe:
            for _ in range(400):
                pipe.put_nowait(1000.0)  # each item holds its worker 1,000 s
            await asyncio.sleep(1.5)
            stats = pipe.statistics()
            pipe.stop()
        return stats

    stats = run_virtual(main())
    assert (stats.workers_desired, stats.workers) == (300, 110)


# -- on the real clock ------------------------------------------------------------------------


async def _real_clock_run(seed: int, rounds: int) -> tuple[list[str], int]:
    """Items that never finish until the end, put only right after each scale event.

    On the real clock a probe cannot be placed at the autoscaler's instant (and the
    oldest item's age moves between its reading and any other), so the state is frozen
    between syncs instead: every worker holds its item until the end, and the test puts
    items only just after a scale event (``call_soon`` from the listener runs after the
    new workers take their items and before the next sync's step). The queue the next
    sync reads is then known, and the test picks how many to put so that the HPA must
    change the pool: every sync that happens is a scale event, read exactly by the
    listener. Syncs that a busy machine skips change nothing (both windows are 0).
    """
    rng = random.Random(seed)
    low = rng.randint(1, 3)
    scaler = Autoscaler(
        min_workers=low,
        max_workers=rng.randint(100, 400),  # room: the queue only grows
        target=rng.choice([1.0, 2.0, 3.0]),  # >= 1: a new worker always finds an item
        sync_s=0.02,
        tolerance=rng.choice([0.0, 0.1, 0.25]),
        scale_down_stabilization_s=0.0,
        max_scale_up=rng.choice([(4, 1.0), (1, 0.0), (2, 0.5)]),
    )
    loop = asyncio.get_running_loop()
    hold = loop.create_future()
    hpa, pool = Hpa(scaler), Pool(low)
    problems: list[str] = []
    scaled: list = []
    ended: list[float] = []
    changes = 0
    pipe: Pipeline

    async def handle(item: int) -> int:
        await hold
        return item

    def put_to_change(stats) -> bool:
        """Put items so that the next sync must change the pool, up or down (at random
        among those possible); False if no number of items can."""
        nonlocal changes
        depth = stats.queue_size
        ways: dict[bool, list[int]] = {True: [], False: []}
        for extra in range(3 * scaler.max_workers + 1):
            _, size = Hpa(scaler).sync(0.0, pool.size, depth + extra, 0.0)
            if size != pool.size:
                ways[size > pool.size].append(extra)
        possible = [way for way in ways.values() if way]
        if not possible:
            return False
        for _ in range(rng.choice(rng.choice(possible)[:3])):  # few: the queue stays short
            pipe.put_nowait(0)
        changes += 1
        return True

    def after_scaling() -> None:
        now, stats = scaled[-1]
        depth = stats.queue_size  # unchanged since the autoscaler read it
        desired, size = hpa.sync(now, pool.size, depth, 0.0)
        pool.resize(size, idle=0, starting=0)  # every worker is busy
        if (stats.workers_desired, stats.workers) != (desired, size + pool.leaving):
            problems.append(f"at {now}: {stats} against desired {desired}, size {size}")
        if len(scaled) < rounds and not put_to_change(pipe.statistics()):
            ended.append(now)  # a full pool and a long queue: no put can change it

    def listen(kind: EventKind, now: float, item: object) -> None:
        if kind is EventKind.SCALED:
            scaled.append((now, pipe.statistics()))
            loop.call_soon(after_scaling)

    config = PipelineConfig(concurrency=low, queue_maxsize=None, autoscale=scaler)
    pipe = Pipeline(handle, config, on_event=listen)
    async with pipe:
        for _ in range(low):
            pipe.put_nowait(0)
        await asyncio.sleep(0)  # the first workers take their items
        put_to_change(pipe.statistics())
        for _ in range(5000):  # 5,000 syncs without the change the HPA must make: fail
            if len(scaled) >= rounds or problems or ended:
                break
            await asyncio.sleep(scaler.sync_s)
        await asyncio.sleep(0)  # the last scale event's check
        hold.set_result(None)
        pipe.stop()
    if len(scaled) < min(rounds, changes) and not problems:
        problems.append(f"{changes} changes due, {len(scaled)} scale events in 5,000 syncs")
    return problems, len(scaled)


@pytest.mark.parametrize("seed", range(6))
def test_on_the_real_clock_every_sync_is_the_hpas(seed):
    problems, syncs = asyncio.run(_real_clock_run(seed, rounds=25))
    assert problems == [] and syncs >= 25
