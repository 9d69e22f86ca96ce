"""Priorities and deadlines under faults: nothing lost, whatever happens, whenever it stops."""

from __future__ import annotations

import asyncio
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Backoff, PermanentError, Pipeline, PipelineConfig, RateLimit
from tests import accounting
from tests.accounting import run_interrupted


def faulty_run(seed, *, stop_at=None, cancel_at=None, cancel_twice=False, **overrides):
    """One randomized run on the virtual clock; returns (report, offered, completed, pipe)."""
    rng = random.Random(seed)
    offered, completed = [], []

    async def handler(x):
        await asyncio.sleep(rng.expovariate(1.0))
        roll = rng.random()
        if roll < 0.1:
            raise RuntimeError("transient")
        if roll < 0.2:
            raise PermanentError("bad")
        completed.append(x)

    async def source():
        for item in range(40):
            await asyncio.sleep(rng.expovariate(2.0))
            offered.append(item)
            yield item

    keys = [rng.choice([0, 1, 2, math.nan, None]) for _ in range(100)]
    waits = [rng.choice([None, 0.5, 2.0, 8.0, math.inf, -1.0]) for _ in range(100)]
    settings_ = {
        "concurrency": 2,
        "queue_maxsize": 4,
        "max_attempts": 3,
        "backoff": Backoff(base_s=0.5, jitter=True),
        "drain_timeout_s": 20.0,
        "priority": keys.__getitem__,
        "max_wait_s": waits.__getitem__,
        **overrides,
    }
    pipe = Pipeline(handler, PipelineConfig(**settings_), rng=random.Random(seed))
    report = run_interrupted(
        pipe, source(), stop_at=stop_at, cancel_at=cancel_at, cancel_twice=cancel_twice
    )
    return report, offered, completed, pipe


def assert_nothing_lost(report, offered, completed):
    accounting.assert_nothing_lost(report, offered, completed)
    for letter in report.dead_letters:
        if letter.reason in ("bad_priority", "bad_deadline"):
            assert letter.attempts == 1


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    concurrency=st.integers(1, 4),
    maxsize=st.one_of(st.none(), st.integers(1, 6)),
    on_full=st.sampled_from(["block", "reject"]),
    constant_wait=st.one_of(st.none(), st.floats(0.1, 10.0), st.just(math.inf)),
    rate=st.one_of(st.none(), st.floats(30.0, 600.0)),
    stop_at=st.one_of(st.none(), st.floats(0.0, 30.0)),
    drain_timeout_s=st.one_of(st.none(), st.floats(0.0, 30.0)),
)
def test_randomized_faults_priorities_and_deadlines_lose_nothing(
    seed, concurrency, maxsize, on_full, constant_wait, rate, stop_at, drain_timeout_s
):
    overrides = {
        "concurrency": concurrency,
        "queue_maxsize": maxsize,
        "on_full": on_full,
        "drain_timeout_s": drain_timeout_s,
    }
    if constant_wait is not None:
        overrides["max_wait_s"] = constant_wait
    if rate is not None:
        overrides["rate_limit"] = RateLimit(requests_per_minute=rate, burst_s=2.0)
    report, offered, completed, _ = faulty_run(seed, stop_at=stop_at, **overrides)
    assert_nothing_lost(report, offered, completed)


def test_the_randomized_run_is_deterministic_in_virtual_time():
    first = faulty_run(7)[0]
    second = faulty_run(7)[0]
    assert first.expired == second.expired and first.completed == second.completed
    assert [d.payload for d in first.dead_letters] == [d.payload for d in second.dead_letters]
    assert first.finished_s == second.finished_s
    assert len(first.expired) > 0 and any(d.reason == "bad_priority" for d in first.dead_letters)


@pytest.mark.parametrize("stop_at", [0.0, 0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0])
def test_stop_at_every_moment(stop_at):
    report, offered, completed, _ = faulty_run(11, stop_at=stop_at)
    assert_nothing_lost(report, offered, completed)


@pytest.mark.parametrize("cancel_at", [0.0, 0.3, 1.0, 2.5, 6.0, 15.0])
@pytest.mark.parametrize("twice", [False, True])
def test_cancel_once_or_twice_at_any_moment(cancel_at, twice):
    report, offered, completed, pipe = faulty_run(5, cancel_at=cancel_at, cancel_twice=twice)
    assert pipe.state.value == "closed"
    assert_nothing_lost(report, offered, completed)
    assert len(pipe._sweep) == 0  # the close forgot every deadline
