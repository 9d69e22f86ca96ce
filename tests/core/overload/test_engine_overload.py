"""The retry budget and the circuit breaker in the engine: real time, then the hostile cases.

Real time first (they protect a service that embeds the engine): there the tests check
invariants that hold whatever the machine's speed; the exact counts are checked on the
virtual clock, where the same code runs.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import (
    Backoff,
    CircuitBreaker,
    EventKind,
    PermanentError,
    Pipeline,
    PipelineConfig,
    RateLimit,
    RetryBudget,
)
from pipeline.sim.vloop import run_virtual
from tests import accounting
from tests.accounting import run_interrupted

TINY = Backoff(kind="constant", base_s=0.001, jitter=False)
BREAKER_KINDS = {EventKind.BREAKER_OPEN, EventKind.BREAKER_HALF_OPEN, EventKind.BREAKER_CLOSED}


class Downstream:
    """A handler that fails its first ``failures`` calls and logs when each call started."""

    def __init__(self, failures, *, seconds=0.001):
        self.failures = failures
        self.seconds = seconds
        self.starts = []

    async def __call__(self, x):
        self.starts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(self.seconds)
        if len(self.starts) <= self.failures:
            raise ConnectionError("down")
        return x


def breaker_spells(events):
    """[(state, from_s, to_s)] from the breaker's events (the last spell ends at inf)."""
    changes = [(kind, t) for kind, t, _ in events if kind in BREAKER_KINDS]
    ends = [t for _, t in changes[1:]] + [math.inf]
    return [(kind, t, end) for (kind, t), end in zip(changes, ends, strict=True)]


def test_real_time_budget_dead_letters_what_it_denies():
    handler = Downstream(failures=10**9)
    config = PipelineConfig(
        concurrency=20,
        max_attempts=4,
        backoff=TINY,
        retry_budget=RetryBudget(ratio=0.1, min_retries_per_s=0, window_s=60),
    )
    pipe = Pipeline(handler, config)
    report = asyncio.run(pipe.run(range(20)))
    stats = report.statistics
    assert report.balanced and report.completed == 0
    assert report.attempts == len(handler.starts) == 20 + stats.retried
    assert stats.retried <= 2  # 0.1 x 20 first attempts, no floor, one window
    assert stats.retries_denied == report.retries_denied == 20  # each ends denied
    assert Counter(d.reason for d in report.dead_letters) == {"retry_budget": 20}
    assert all(d.attempts == len(d.errors) for d in report.dead_letters)


def test_real_time_breaker_never_calls_while_open_and_probes_exactly():
    handler = Downstream(failures=10)
    events = []
    breaker = CircuitBreaker(window=4, min_calls=4, open_s=0.02, half_open_calls=2)
    config = PipelineConfig(concurrency=4, max_attempts=20, backoff=TINY, breaker=breaker)
    pipe = Pipeline(handler, config, on_event=lambda *event: events.append(event))
    report = asyncio.run(pipe.run(range(30)))
    assert report.balanced and report.completed == 30
    assert report.attempts == len(handler.starts)
    spells = breaker_spells(events)
    assert spells[0][0] == EventKind.BREAKER_OPEN and spells[-1][0] == EventKind.BREAKER_CLOSED
    for kind, start, end in spells:
        inside = [t for t in handler.starts if start <= t < end]
        if kind == EventKind.BREAKER_OPEN:
            assert inside == [] and end - start >= 0.02 - 1e-9
        elif kind == EventKind.BREAKER_HALF_OPEN:
            assert len(inside) <= 2
    stats = pipe.statistics()
    assert stats.breaker_state == "closed" and stats.breaker_calls_refused > 0
    # Closed at the end: every open spell lasted open_s exactly, whatever the loop clock read.
    opened = sum(kind == EventKind.BREAKER_OPEN for kind, _, _ in spells)
    assert stats.breaker_open_s == pytest.approx(0.02 * opened, rel=1e-12)
    assert all(item is None for kind, _, item in events if kind in BREAKER_KINDS)


def test_real_time_plain_function_handler_on_threads_with_prefetch():
    import threading
    import time

    lock = threading.Lock()
    calls = []

    def blocking(x):
        with lock:
            calls.append(x)
            failing = len(calls) <= 8
        time.sleep(0.001)
        if failing:
            raise ConnectionError("down")
        return x

    breaker = CircuitBreaker(window=4, min_calls=4, open_s=0.01, half_open_calls=2)
    config = PipelineConfig(
        concurrency=2,
        prefetch=3,
        max_attempts=10,
        backoff=TINY,
        breaker=breaker,
        retry_budget=RetryBudget(ratio=1.0, min_retries_per_s=100),
    )
    pipe = Pipeline(blocking, config)
    report = asyncio.run(pipe.run(range(20)))
    assert report.balanced and report.completed == 20 and report.attempts == len(calls)
    assert pipe.statistics().breaker_state == "closed" and report.abandoned == []


def test_breaker_changes_are_logged(caplog):
    handler = Downstream(failures=1, seconds=1.0)
    breaker = CircuitBreaker(window=1, min_calls=1, open_s=5, half_open_calls=1)
    config = PipelineConfig(concurrency=1, max_attempts=1, drain_timeout_s=None, breaker=breaker)
    with caplog.at_level("INFO", logger="pipeline"):
        run_virtual(Pipeline(handler, config).run(range(2)))
    changes = [
        (r.levelname, r.event, r.at_s) for r in caplog.records if "breaker" in r.getMessage()
    ]
    assert changes == [
        ("WARNING", "pipeline.breaker_open", 1.0),
        ("INFO", "pipeline.breaker_half_open", 6.0),
        ("INFO", "pipeline.breaker_closed", 7.0),
    ]


def test_virtual_breaker_exact_timeline():
    # One worker, 1 s calls, every call fails, max_attempts 1: window 4 -> open at 4; each
    # later item is held (refused once), probes at the half-open (14, 25, 36, ...), fails,
    # reopens. 8 items: probes at 14, 25, 36, 47 end at 15, 26, 37, 48; open at 48 to the end.
    handler = Downstream(failures=10**9, seconds=1.0)
    events = []
    breaker = CircuitBreaker(window=4, min_calls=4, open_s=10, half_open_calls=1)
    config = PipelineConfig(concurrency=1, max_attempts=1, drain_timeout_s=None, breaker=breaker)
    pipe = Pipeline(handler, config, on_event=lambda *event: events.append(event))
    report = run_virtual(pipe.run(range(8)))
    assert handler.starts == [0.0, 1.0, 2.0, 3.0, 14.0, 25.0, 36.0, 47.0]
    assert [(k.name, t) for k, t, _ in events if k in BREAKER_KINDS] == [
        ("BREAKER_OPEN", 4.0),
        ("BREAKER_HALF_OPEN", 14.0),
        ("BREAKER_OPEN", 15.0),
        ("BREAKER_HALF_OPEN", 25.0),
        ("BREAKER_OPEN", 26.0),
        ("BREAKER_HALF_OPEN", 36.0),
        ("BREAKER_OPEN", 37.0),
        ("BREAKER_HALF_OPEN", 47.0),
        ("BREAKER_OPEN", 48.0),
    ]
    stats = report.statistics
    assert (stats.breaker_calls_refused, stats.breaker_open_s, stats.attempts) == (4, 40.0, 8)
    assert stats.breaker_state == "open" and report.finished_s == 48.0
    assert Counter(d.reason for d in report.dead_letters) == {"max_attempts": 8}


def test_timeouts_of_a_hanging_handler_open_the_breaker():
    # Calls hang until the 2 s attempt timeout: each is a failure (TimeoutError). Window 2,
    # rate 1: open at 4 (two timeouts end at 2 and 4), half-open at 9; the downstream
    # has recovered by then (calls 3 on return at once).
    calls = []

    async def hang_twice(x):
        calls.append(asyncio.get_running_loop().time())
        if len(calls) <= 2:
            await asyncio.Event().wait()
        return x

    breaker = CircuitBreaker(failure_rate=1.0, window=2, min_calls=2, open_s=5, half_open_calls=1)
    config = PipelineConfig(
        concurrency=1,
        max_attempts=3,
        attempt_timeout_s=2.0,
        backoff=Backoff(kind="constant", base_s=0.5, jitter=False),
        drain_timeout_s=None,
        breaker=breaker,
    )
    pipe = Pipeline(hang_twice, config)
    report = run_virtual(pipe.run(range(3)))
    # Item 0: 0-2 timeout, its retry queued at 2.5 (at the front); item 1: 2-4 timeout ->
    # open at 4 until 9, its retry queued at 4.5. Item 0's retry is taken at 4 and held;
    # at 9 it is the probe and returns at once -> closed at 9; then item 1's retry and
    # item 2 run at 9.
    assert calls == [0.0, 2.0, 9.0, 9.0, 9.0]
    assert report.completed == 3 and report.statistics.attempts_timed_out == 2
    assert report.statistics.breaker_open_s == 5.0 and report.statistics.breaker_state == "closed"


def test_slow_calls_open_the_breaker_though_they_succeed():
    handler = Downstream(failures=0, seconds=3.0)
    breaker = CircuitBreaker(window=2, min_calls=2, open_s=10, slow_call_s=3.0, half_open_calls=1)
    config = PipelineConfig(concurrency=1, drain_timeout_s=None, breaker=breaker)
    report = run_virtual(Pipeline(handler, config).run(range(3)))
    # 0-3, 3-6 slow -> open at 6 until 16; the third is the probe 16-19: slow -> open again.
    assert handler.starts == [0.0, 3.0, 16.0]
    assert report.completed == 3 and report.statistics.breaker_state == "open"


def test_a_handler_that_raises_cancelled_error_itself_is_a_failure():
    async def cancels(x):
        await asyncio.sleep(1)
        raise asyncio.CancelledError

    breaker = CircuitBreaker(window=2, min_calls=2, open_s=100, half_open_calls=1)
    config = PipelineConfig(concurrency=2, max_attempts=1, drain_timeout_s=5.0, breaker=breaker)
    pipe = Pipeline(cancels, config)
    report = run_virtual(pipe.run(range(5)))
    # Items 0 and 1 start at 0 and fail at 1. The first failure recorded (1 call < min_calls)
    # leaves the breaker closed, and its worker takes item 2 at once: let through at 1,
    # while closed. The second opens it at 1 until 101: items 3 and 4 are held, one per
    # worker (item 2's failure at 2 was let through before the opening: not recorded).
    # The drain gives up at 5: three dead letters, two unfinished, open from 1 to 5.
    assert report.balanced and len(report.dead_letters) == 3 and len(report.unfinished) == 2
    assert [d.errors[0].type for d in report.dead_letters] == ["CancelledError"] * 3
    stats = report.statistics
    assert (stats.breaker_calls_refused, stats.breaker_open_s) == (2, 4.0)
    assert stats.workers_busy == 0 and stats.breaker_state == "open"


def test_an_item_held_by_the_open_breaker_expires_at_its_deadline():
    handler = Downstream(failures=10**9, seconds=1.0)
    breaker = CircuitBreaker(window=1, min_calls=1, open_s=50, half_open_calls=1)
    config = PipelineConfig(
        concurrency=1, max_attempts=1, max_wait_s=10.0, drain_timeout_s=None, breaker=breaker
    )
    report = run_virtual(Pipeline(handler, config).run(range(3)))
    # Item 0 fails at 1: open until 51. Items 1 and 2 were admitted at 0: deadline 10.
    # Item 1 waits at the breaker, item 2 in the queue: both expire at 10, never called.
    assert handler.starts == [0.0] and len(report.expired) == 2 and report.balanced
    assert report.finished_s == 10.0


def test_a_rate_limit_refusal_gives_the_probe_back():
    # tokens_per_item above what a bucket holds for item 1 only: its attempt is refused by
    # the limiter after the breaker let it through; the probe slot goes back, so item 2
    # probes and closes the breaker.
    handler = Downstream(failures=1, seconds=1.0)
    limit = RateLimit(tokens_per_minute=100, tokens_per_item=lambda x: 1000 if x == 1 else 1)
    breaker = CircuitBreaker(window=1, min_calls=1, open_s=5, half_open_calls=1)
    config = PipelineConfig(
        concurrency=1, max_attempts=1, drain_timeout_s=None, rate_limit=limit, breaker=breaker
    )
    pipe = Pipeline(handler, config)
    report = run_virtual(pipe.run(range(3)))
    # Item 0 fails 0-1: open until 6. Item 1 held to 6, let through, refused by the limiter
    # (dead letter, no call). Item 2 probes at 6 and succeeds -> closed.
    assert handler.starts == [0.0, 6.0] and report.completed == 1
    assert pipe.statistics().breaker_state == "closed"
    assert sorted(d.payload for d in report.dead_letters) == [0, 1]


def test_a_probe_given_back_wakes_the_items_waiting_for_it():
    # Two workers, one probe, one request a minute. Item 0 calls at 0 (the minute's
    # request) and fails at 1: open until 6. Items 1 and 2 arrive at 2 and are held, one
    # per worker. At 6 item 1 takes the probe and waits for the rate limit (until 60);
    # item 2 asks again and is refused. Item 1's deadline (admitted at 2, max_wait 10 s)
    # comes at 12: it expires and gives the probe back, which must wake item 2 (deadline
    # 102): it takes the probe at 12, waits for the limit, calls at 60 and closes it.
    handler = Downstream(failures=1, seconds=1.0)
    breaker = CircuitBreaker(window=1, min_calls=1, open_s=5, half_open_calls=1)
    config = PipelineConfig(
        concurrency=2,
        max_attempts=1,
        drain_timeout_s=None,
        rate_limit=RateLimit(requests_per_minute=1),
        max_wait_s=lambda x: 100.0 if x == 2 else 10.0,
        breaker=breaker,
    )
    pipe = Pipeline(handler, config)

    async def source():
        yield 0
        await asyncio.sleep(2)
        yield 1
        yield 2

    report = run_virtual(pipe.run(source()))
    assert handler.starts == [0.0, 60.0] and report.completed == 1 and report.balanced
    assert list(report.expired) == [1]
    assert pipe.statistics().breaker_state == "closed"


def faulty_run(seed, *, stop_at=None, cancel_at=None, cancel_twice=False, **overrides):
    """One randomized run with a budget and a breaker; (report, offered, completed, pipe)."""
    rng = random.Random(seed)
    offered, completed = [], []

    async def handler(x):
        roll = rng.random()
        if roll < 0.05:
            await asyncio.Event().wait()  # hangs: only the attempt timeout ends it
        await asyncio.sleep(rng.expovariate(1.0))
        if roll < 0.45:
            raise RuntimeError("transient")
        if roll < 0.5:
            raise PermanentError("bad")
        if roll < 0.55:
            raise asyncio.CancelledError  # its own: a failure
        completed.append(x)

    async def source():
        for item in range(40):
            await asyncio.sleep(rng.expovariate(2.0))
            offered.append(item)
            yield item

    settings_ = {
        "concurrency": 3,
        "queue_maxsize": 4,
        "max_attempts": 4,
        "attempt_timeout_s": 5.0,
        "backoff": Backoff(base_s=0.5, jitter=True),
        "drain_timeout_s": 30.0,
        "retry_budget": RetryBudget(ratio=0.2, min_retries_per_s=0.2, window_s=10),
        "breaker": CircuitBreaker(window=6, min_calls=4, open_s=3.0, half_open_calls=2),
        **overrides,
    }
    pipe = Pipeline(handler, PipelineConfig(**settings_), rng=random.Random(seed))
    report = run_interrupted(
        pipe, source(), stop_at=stop_at, cancel_at=cancel_at, cancel_twice=cancel_twice
    )
    return report, offered, completed, pipe


def assert_nothing_lost(report, offered, completed):
    accounting.assert_nothing_lost(report, offered, completed)
    denied = sum(letter.reason == "retry_budget" for letter in report.dead_letters)
    assert denied == report.statistics.retries_denied


def test_the_faulty_run_exercises_both_controls():
    report, offered, completed, _ = faulty_run(3)
    assert_nothing_lost(report, offered, completed)
    stats = report.statistics
    assert stats.retries_denied > 0 and stats.breaker_calls_refused > 0
    assert stats.breaker_open_s > 0 and stats.attempts_timed_out > 0


@pytest.mark.parametrize("stop_at", [0.0, 0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0])
def test_stop_at_every_moment(stop_at):
    report, offered, completed, _ = faulty_run(11, stop_at=stop_at)
    assert_nothing_lost(report, offered, completed)


@pytest.mark.parametrize("cancel_at", [0.0, 0.3, 1.0, 2.5, 6.0, 15.0])
@pytest.mark.parametrize("twice", [False, True])
def test_cancel_once_or_twice_at_any_moment(cancel_at, twice):
    report, offered, completed, pipe = faulty_run(5, cancel_at=cancel_at, cancel_twice=twice)
    assert pipe.state.value == "closed"
    assert_nothing_lost(report, offered, completed)
    assert pipe._guard._timer is None  # the close stopped the breaker's timer


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    concurrency=st.integers(1, 4),
    maxsize=st.one_of(st.none(), st.integers(1, 6)),
    on_full=st.sampled_from(["block", "reject"]),
    max_wait_s=st.one_of(st.none(), st.floats(0.5, 20.0)),
    stop_at=st.one_of(st.none(), st.floats(0.0, 40.0)),
    drain_timeout_s=st.one_of(st.none(), st.floats(0.0, 30.0)),
    budget=st.booleans(),
    breaker=st.booleans(),
    rate=st.one_of(st.none(), st.floats(30.0, 600.0)),
)
def test_randomized_faults_with_the_controls_lose_nothing(
    seed, concurrency, maxsize, on_full, max_wait_s, stop_at, drain_timeout_s, budget, breaker, rate
):
    overrides = {
        "concurrency": concurrency,
        "queue_maxsize": maxsize,
        "on_full": on_full,
        "max_wait_s": max_wait_s,
        "drain_timeout_s": drain_timeout_s,
    }
    if not budget:
        overrides["retry_budget"] = None
    if not breaker:
        overrides["breaker"] = None
    if rate is not None:
        overrides["rate_limit"] = RateLimit(requests_per_minute=rate, burst_s=2.0)
    report, offered, completed, _ = faulty_run(seed, stop_at=stop_at, **overrides)
    assert_nothing_lost(report, offered, completed)


def test_config_refuses_other_types_for_the_controls():
    with pytest.raises(TypeError, match=r"^retry_budget must be a RetryBudget or None"):
        PipelineConfig(retry_budget=0.2)
    with pytest.raises(TypeError, match=r"^breaker must be a CircuitBreaker or None"):
        PipelineConfig(breaker=RetryBudget())


def test_statistics_without_controls_keep_their_defaults():
    report = asyncio.run(Pipeline(Downstream(0), PipelineConfig()).run(range(3)))
    stats = report.statistics
    assert (stats.retries_denied, stats.breaker_state) == (0, None)
    assert (stats.breaker_calls_refused, stats.breaker_open_s) == (0, 0.0)
