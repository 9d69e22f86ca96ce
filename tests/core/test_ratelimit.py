"""The rate limiter, on the virtual clock: what it lets through, when, and what it refuses."""

from __future__ import annotations

import asyncio
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline import Backoff, Pipeline, PipelineConfig, RateLimit
from pipeline.ratelimit import RateLimiter, SlidingWindow
from pipeline.sim import Exponential, Poisson, Scenario, TokenQuota, simulate
from pipeline.sim.vloop import VirtualEventLoop, run_virtual
from tests.tiers import examples


def now() -> float:
    return asyncio.get_running_loop().time()


# -- a bad token estimate is an error that names it -------------------------------------


class Unprintable:
    def __repr__(self):
        raise RuntimeError("repr is broken")


class BadStr(Exception):
    def __str__(self):
        raise RuntimeError("str is broken")


def _raises(error):
    def estimate(payload):
        raise error

    return estimate


@pytest.mark.parametrize(
    ("estimate", "error", "words"),
    [
        (lambda p: math.nan, ValueError, ["nan", "finite", ">= 0", "<= 1000"]),
        (lambda p: math.inf, ValueError, ["inf", "finite"]),
        (lambda p: -math.inf, ValueError, ["-inf", "finite"]),
        (lambda p: -1, ValueError, ["-1", ">= 0"]),
        (lambda p: 1001, ValueError, ["1001", "<= 1000", "tokens_per_minute"]),
        (lambda p: 10**400, ValueError, ["1e+400", "<= 1000"]),
        (lambda p: "12", TypeError, ["'12'", "str"]),
        (lambda p: True, TypeError, ["True", "bool"]),
        (lambda p: None, TypeError, ["None"]),
        (lambda p: [3], TypeError, ["[3]", "list"]),
    ],
)
def test_a_bad_token_estimate_names_the_estimate_the_value_the_payload_and_the_bounds(
    estimate, error, words
):
    limiter = RateLimiter(RateLimit(tokens_per_minute=1000, tokens_per_item=estimate), 0.0)
    with pytest.raises(error) as caught:
        limiter.tokens_for("prompt-7")
    message = str(caught.value)
    for word in ["tokens_per_item", "'prompt-7'", *words]:
        assert word in message


def test_a_token_estimate_that_raises_is_reported_with_its_cause():
    limiter = RateLimiter(
        RateLimit(tokens_per_minute=1000, tokens_per_item=_raises(KeyError(7))), 0.0
    )
    with pytest.raises(ValueError) as caught:
        limiter.tokens_for(7)
    message = str(caught.value)
    assert "tokens_per_item raised KeyError" in message and "payload 7" in message
    assert "<= 1000" in message
    assert isinstance(caught.value.__cause__, KeyError)


def test_hostile_payloads_and_errors_still_give_a_message():
    limit = RateLimit(tokens_per_minute=1000, tokens_per_item=_raises(BadStr()))
    with pytest.raises(ValueError) as caught:
        RateLimiter(limit, 0.0).tokens_for(Unprintable())
    assert "tokens_per_item raised BadStr" in str(caught.value)
    limit = RateLimit(tokens_per_minute=1000, tokens_per_item=lambda p: math.nan)
    with pytest.raises(ValueError, match="tokens_per_item"):
        RateLimiter(limit, 0.0).tokens_for("x" * 1_000_000)
    with pytest.raises(ValueError) as caught:
        RateLimiter(limit, 0.0).tokens_for("x" * 1_000_000)
    assert len(str(caught.value)) < 400


def test_an_async_token_estimate_is_refused_without_leaving_a_coroutine_behind():
    async def estimate(payload):
        return 10

    limiter = RateLimiter(RateLimit(tokens_per_minute=1000, tokens_per_item=estimate), 0.0)
    with pytest.raises(TypeError, match=r"tokens_per_item .*coroutine"):
        limiter.tokens_for("p")  # warnings are errors: an un-awaited coroutine would fail here


def test_good_estimates_of_any_real_type_are_accepted():
    import fractions

    import numpy as np

    for value, tokens in [
        (0, 0.0),
        (12, 12.0),
        (np.int64(7), 7.0),
        (np.float32(2.5), 2.5),
        (fractions.Fraction(1, 2), 0.5),
        (1000, 1000.0),
        (-0.0, 0.0),
    ]:
        limit = RateLimit(tokens_per_minute=1000, tokens_per_item=lambda p, v=value: v)
        assert RateLimiter(limit, 0.0).tokens_for("p") == tokens


def test_a_nan_estimate_fails_its_item_and_leaves_the_limit_in_force():
    starts = {}

    async def handler(x):
        starts[x] = now()

    # 100 tokens per minute at 10 per item: ten items per minute. Item 0's estimate is NaN.
    limit = RateLimit(tokens_per_minute=100, tokens_per_item=lambda x: math.nan if x == 0 else 10)
    config = PipelineConfig(
        concurrency=4,
        queue_maxsize=30,
        max_attempts=2,
        backoff=Backoff.none(),
        rate_limit=limit,
        drain_timeout_s=None,
    )
    report = run_virtual(Pipeline(handler, config).run(range(21)))
    (letter,) = report.dead_letters
    assert letter.payload == 0 and letter.attempts == 2
    assert all(
        e.type == "ValueError" and "tokens_per_item" in e.message and "nan" in e.message
        for e in letter.errors
    )
    assert report.completed == 20 and 0 not in starts
    # The NaN did not poison the limiter: the 20 good items still need two minutes' allowance.
    assert max(starts.values()) >= 60.0


# -- the default: no sliding 60 s window ever exceeds the limits ------------------------


def _exact_windows(starts, amounts):
    """For each start s_i, the amounts started in [s_i, s_i + 60 s), in exact arithmetic."""
    exact = [Fraction(s) for s in starts]
    totals, j, running = [], 0, Fraction(0)
    for i, s in enumerate(exact):
        while j < len(exact) and exact[j] - s < 60:
            running += Fraction(amounts[j])
            j += 1
        totals.append((j - i, running))
        running -= Fraction(amounts[i])
    return totals


async def _sleep_until(when):
    loop = asyncio.get_running_loop()
    wake = loop.create_future()
    loop.call_at(when, wake.set_result, None)
    await wake


def _run_limiter(limit, arrivals, start_s=0.0):
    """Start one acquire per payload (its index) at its arrival time; return the start times."""
    starts = [None] * len(arrivals)

    async def one(index, limiter):
        await _sleep_until(arrivals[index])
        await limiter.acquire(index)
        starts[index] = now()

    async def main():
        limiter = RateLimiter(limit, now())
        await asyncio.gather(*(one(i, limiter) for i in range(len(arrivals))))

    run_virtual(main(), start_s=start_s)
    return starts


def test_requests_per_minute_60_means_at_most_60_in_any_60_s():
    # The token bucket this replaces let 119 start in the first 60 s: a full minute's
    # allowance at once, then its refill on top.
    starts = _run_limiter(RateLimit(requests_per_minute=60), [0.0] * 200)
    assert starts == [0.0] * 60 + [60.0] * 60 + [120.0] * 60 + [180.0] * 20
    assert max(count for count, _ in _exact_windows(starts, [1] * 200)) == 60


def test_an_attempt_starts_the_moment_the_one_blocking_it_is_60_s_old():
    arrivals = [0.0, 10.0, 25.5, 26.0, 70.0]
    starts = _run_limiter(RateLimit(requests_per_minute=2), arrivals)
    assert starts == [0.0, 10.0, 60.0, 70.0, 120.0]


@settings(max_examples=examples(150), deadline=None)
@given(
    rpm=st.one_of(st.none(), st.integers(1, 40), st.floats(1.0, 40.0)),
    tpm=st.one_of(st.none(), st.floats(1.0, 5000.0)),
    start_s=st.sampled_from([0.0, 1.0 / 3.0, -100.0, 1e6, 3e7, 2.0**40 + 0.5]),
    data=st.data(),
)
def test_no_window_exceeds_the_limits_and_no_attempt_starts_later_than_it_must(
    rpm, tpm, start_s, data
):
    assume(rpm is not None or tpm is not None)
    n = data.draw(st.integers(1, 120), label="n")
    tokens = data.draw(
        st.lists(
            st.one_of(
                st.integers(0, int(tpm or 1)).map(float),
                st.floats(0.0, tpm or 1.0),
                st.sampled_from([0.1, 1 / 3, tpm or 1.0]),
            ),
            min_size=n,
            max_size=n,
        ),
        label="tokens",
    )
    gaps = data.draw(
        st.lists(
            st.one_of(st.just(0.0), st.floats(0.0, 90.0), st.sampled_from([1e-9, 60.0])),
            min_size=n,
            max_size=n,
        ),
        label="gaps",
    )
    arrivals = list(itertools.accumulate(gaps, initial=start_s))[1:]
    limit = RateLimit(
        requests_per_minute=rpm, tokens_per_minute=tpm, tokens_per_item=lambda index: tokens[index]
    )
    starts = _run_limiter(limit, arrivals, start_s=start_s)

    # Served in arrival order, never before arrival.
    assert all(s >= a for s, a in zip(starts, arrivals, strict=True))
    assert starts == sorted(starts)
    # No 60 s window [s, s + 60) holds more than either limit (exact arithmetic).
    for count, spent in _exact_windows(starts, tokens):
        assert rpm is None or count <= rpm
        assert tpm is None or spent <= Fraction(tpm)
    # Not conservative: an attempt that waited could not have started one float earlier,
    # when the attempts of the 60 s before, plus its own, were over a limit.
    for j, s in enumerate(starts):
        ready = max(arrivals[j], starts[j - 1] if j else -math.inf)
        if s == ready:
            continue
        before = Fraction(math.nextafter(s, -math.inf))
        counting = [i for i in range(j) if Fraction(starts[i]) + 60 > before]
        over_requests = rpm is not None and len(counting) + 1 > rpm
        over_tokens = tpm is not None and (
            sum(Fraction(tokens[i]) for i in counting) + Fraction(tokens[j]) > Fraction(tpm)
        )
        assert over_requests or over_tokens, (j, s, ready)


@settings(max_examples=60, deadline=None)
@given(
    rpm=st.one_of(st.none(), st.integers(1, 30), st.floats(1.0, 30.0)),
    tpm=st.one_of(st.none(), st.floats(100.0, 5000.0)),
    sizes=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=200),
)
def test_a_backlog_gets_the_limits_full_throughput_every_minute(rpm, tpm, sizes):
    assume(rpm is not None or tpm is not None)
    tokens = [size * (tpm or 1.0) for size in sizes]
    limit = RateLimit(
        requests_per_minute=rpm, tokens_per_minute=tpm, tokens_per_item=lambda index: tokens[index]
    )
    starts = _run_limiter(limit, [0.0] * len(tokens))
    largest = max(tokens)
    # Each minute (60(k-1), 60k] before the last start is full: its requests reach the
    # limit, or its tokens are within one item of it. In the long run, then, the
    # throughput is the limit's (to within one item per minute), not less.
    for k in range(1, int(starts[-1] // 60) + 1):
        if not starts[-1] > 60.0 * k:
            break
        minute = [
            i
            for i, s in enumerate(starts)
            if 60.0 * (k - 1) < s <= 60.0 * k or (k == 1 and s == 0.0)
        ]
        requests_full = rpm is not None and len(minute) >= math.floor(rpm)
        tokens_full = tpm is not None and sum(tokens[i] for i in minute) > tpm - largest
        assert requests_full or tokens_full, k


def test_a_provider_counting_the_same_window_never_refuses_a_client_at_its_limit():
    rng = np.random.default_rng(3)
    n, tpm = 2000, 50_000.0
    tokens = rng.integers(50, 3000, n).astype(float)
    tokens[::7] += 0.25  # some counts with a fraction: still summed exactly on both sides

    def run(burst_s):
        limit = RateLimit(
            tokens_per_minute=tpm, tokens_per_item=lambda i: tokens[i], burst_s=burst_s
        )
        scenario = Scenario(
            arrivals=Poisson(rate=2.0),
            service=Exponential(mean=3.0),
            n_items=n,
            seed=1,
            failures=TokenQuota(tpm, tokens, refuse_s=0.2),
            config=PipelineConfig(
                concurrency=64,
                queue_maxsize=100,
                max_attempts=8,
                drain_timeout_s=None,
                rate_limit=limit,
                backoff=Backoff(base_s=1.0, jitter=True),
            ),
        )
        return simulate(scenario).summary

    exact = run(None)
    assert exact["items_completed"] == n and exact["attempts_total"] == n  # not one 429
    bursty = run(60.0)  # a bucket holding a minute's allowance overshoots the window
    assert bursty["attempts_total"] > n


# -- the token bucket, an explicit choice ----------------------------------------------


def test_a_bucket_allows_its_burst_then_the_steady_rate():
    starts = _run_limiter(RateLimit(requests_per_minute=60, burst_s=10), [0.0] * 30)
    assert starts == pytest.approx([0.0] * 10 + [float(k) for k in range(1, 21)])


def test_a_bucket_of_a_full_minute_lets_nearly_twice_the_limit_into_one_window():
    # The old default, now asked for by name: documented as up to (1 + burst_s / 60) x the limit.
    starts = _run_limiter(RateLimit(requests_per_minute=60, burst_s=60), [0.0] * 200)
    assert starts[:60] == [0.0] * 60
    assert max(count for count, _ in _exact_windows(starts, [1] * 200)) == 119


def test_a_bucket_refills_after_a_quiet_spell_but_never_beyond_its_burst():
    arrivals = [0.0] * 5 + [1000.0] * 8
    starts = _run_limiter(RateLimit(requests_per_minute=60, burst_s=5), arrivals)
    assert starts[:5] == [0.0] * 5
    assert starts[5:10] == [1000.0] * 5
    assert starts[10:] == pytest.approx([1001.0, 1002.0, 1003.0])


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: RateLimit(requests_per_minute=60, burst_s=0), ValueError, ["burst_s", "0", "> 0"]),
        (lambda: RateLimit(requests_per_minute=60, burst_s=-5.0), ValueError, ["burst_s", "-5.0"]),
        (
            lambda: RateLimit(requests_per_minute=60, burst_s=math.nan),
            ValueError,
            ["burst_s", "nan"],
        ),
        (
            lambda: RateLimit(requests_per_minute=60, burst_s=math.inf),
            ValueError,
            ["burst_s", "inf"],
        ),
        (
            lambda: RateLimit(requests_per_minute=60, burst_s=10**400),
            ValueError,
            ["burst_s", "401 digits"],
        ),
        (lambda: RateLimit(requests_per_minute=60, burst_s="10"), TypeError, ["burst_s", "'10'"]),
        (lambda: RateLimit(requests_per_minute=60, burst_s=True), TypeError, ["burst_s", "True"]),
        (
            lambda: RateLimit(requests_per_minute=1e308, burst_s=1e300),
            ValueError,
            ["burst_s", "overflows"],
        ),
        (
            lambda: RateLimit(requests_per_minute=0.5),
            ValueError,
            ["requests_per_minute", "0.5", ">= 1", "burst_s=120"],
        ),
        (
            lambda: RateLimit(requests_per_minute=60, burst_s=0.5),
            ValueError,
            ["burst_s", ">= 1", "0.5", "requests_per_minute=60"],
        ),
        (
            lambda: RateLimit(tokens_per_minute=6000, tokens_per_item=200, burst_s=1),
            ValueError,
            ["tokens_per_item", "200", "burst_s", "100"],
        ),
    ],
)
def test_burst_and_window_settings_are_checked_at_construction(make, error, words):
    with pytest.raises(error) as caught:
        make()
    for word in words:
        assert word in str(caught.value)


def test_fewer_than_one_request_per_minute_works_as_a_bucket_holding_one():
    limit = RateLimit(requests_per_minute=0.5, burst_s=120)
    assert _run_limiter(limit, [0.0] * 3) == [0.0, 120.0, 240.0]


def test_a_token_estimate_must_fit_the_bucket():
    limit = RateLimit(tokens_per_minute=6000, tokens_per_item=lambda p: 200, burst_s=1)
    with pytest.raises(ValueError) as caught:
        RateLimiter(limit, 0.0).tokens_for("p")
    assert "<= 100" in str(caught.value) and "burst_s" in str(caught.value)


# -- the window itself ----------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e20, 1e20))
def test_an_entry_counts_until_exactly_60_s_after_it_started(start):
    window = SlidingWindow(1.0)
    window.take(1.0, start)
    expiry = window.ready_at(1.0, start)
    # The first float at or after start + 60: one float earlier it still counts.
    assert Fraction(expiry) >= Fraction(start) + 60
    assert Fraction(math.nextafter(expiry, -math.inf)) < Fraction(start) + 60
    assert not window.fits(1.0, math.nextafter(expiry, -math.inf))
    assert window.fits(1.0, expiry)


def test_the_window_sums_exactly_and_forgets_exactly():
    window = SlidingWindow(1.0)
    for k in range(9):
        window.take(0.1, float(k))
    # Nine float 0.1s are a hair over 0.9: a tenth does not fit under 1.0, though float
    # addition would say 0.9999999999999999 and let it in. What is left fits to the last bit.
    assert not window.fits(0.1, 9.0)
    room = 1 - 9 * Fraction(0.1)
    largest = float(room) if Fraction(float(room)) <= room else math.nextafter(float(room), 0)
    assert window.fits(largest, 9.0)
    assert not window.fits(math.nextafter(largest, 1.0), 9.0)
    assert window.fits(1.0, 69.0) and window.used == 0.0 and len(window) == 0


def test_the_window_keeps_one_entry_per_attempt_of_the_last_minute():
    window = SlidingWindow(1e9)
    for second in range(1000):
        window.take(1.0, float(second))
    window.fits(0.0, 999.0)
    assert len(window) == 60


# -- waiting: cancellation, clocks that cannot reach a deadline ---------------------------


def test_a_cancelled_wait_counts_nothing():
    async def main():
        limiter = RateLimiter(RateLimit(requests_per_minute=1), now())
        await limiter.acquire("a")
        waiting = asyncio.ensure_future(limiter.acquire("b"))
        await asyncio.sleep(30.0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await limiter.acquire("c")
        return now()

    assert run_virtual(main()) == 60.0


class _EarlyTimersLoop(VirtualEventLoop):
    """Fires timers while its clock still reads 1 ms short of them (a coarse clock).

    It gives up after a bounded number of iterations, so a limiter that spins fails
    the test instead of hanging it.
    """

    def time(self):
        return self._now - 1e-3

    def _run_once(self):
        self.iterations = getattr(self, "iterations", 0) + 1
        if self.iterations > 10_000:
            raise RuntimeError("the loop spun: 10,000 iterations without finishing")
        super()._run_once()


@pytest.mark.parametrize("burst_s", [None, 60.0])
def test_a_clock_that_never_reaches_the_deadline_does_not_make_the_limiter_spin(burst_s):
    loop = _EarlyTimersLoop()
    starts = []

    async def main():
        limiter = RateLimiter(RateLimit(requests_per_minute=2, burst_s=burst_s), now())
        for item in range(6):
            await limiter.acquire(item)
            starts.append(now())

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert len(starts) == 6 and starts[-1] > 59.0
