"""The rate limiter, on the virtual clock: what it lets through, when, and what it refuses."""

from __future__ import annotations

import asyncio
import math

import pytest

from pipeline import Backoff, Pipeline, PipelineConfig, RateLimit
from pipeline.ratelimit import RateLimiter
from pipeline.sim.vloop import run_virtual


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
