"""A handler can tell the engine when to try again (HTTP Retry-After), on the virtual clock."""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from pipeline import Backoff, EventKind, Pipeline, PipelineConfig, RateLimited, RetryLater
from pipeline.retry import requested_delay
from pipeline.sim.vloop import run_virtual


def starts_of(error_for_attempt, *, backoff, max_attempts=3):
    """Loop times at which each attempt of one item started."""
    starts: list[float] = []
    attempts = [0]

    async def handler(_):
        attempts[0] += 1
        error = error_for_attempt(attempts[0])
        if error is not None:
            raise error
        return "ok"

    def listen(kind, now_s, _item):
        if kind is EventKind.STARTED:
            starts.append(now_s)

    config = PipelineConfig(concurrency=1, max_attempts=max_attempts, backoff=backoff)
    report = run_virtual(Pipeline(handler, config, on_event=listen).run([1]))
    return report, starts


def test_the_next_attempt_waits_what_the_downstream_asked_when_longer_than_the_backoff():
    report, starts = starts_of(
        lambda n: RetryLater("429", retry_after_s=5.0) if n == 1 else None,
        backoff=Backoff.constant(0.1),
    )
    assert report.completed == 1
    assert starts == [0.0, 5.0]


def test_a_longer_backoff_wins_over_a_shorter_request():
    _, starts = starts_of(
        lambda n: RetryLater("503", retry_after_s=0.5) if n == 1 else None,
        backoff=Backoff.constant(2.0),
    )
    assert starts == [0.0, 2.0]


def test_rate_limited_carries_retry_after_and_counts_against_max_attempts():
    report, starts = starts_of(
        lambda n: RateLimited("429", retry_after_s=3.0), backoff=Backoff.none(), max_attempts=3
    )
    assert starts == [0.0, 3.0, 6.0]
    assert len(report.dead_letters) == 1
    assert report.dead_letters[0].attempts == 3
    assert report.dead_letters[0].reason == "max_attempts"


class Odd(Exception):
    def __init__(self, value):
        super().__init__("odd")
        self._value = value

    @property
    def retry_after_s(self):
        if self._value == "raise":
            raise RuntimeError("a property that fails")
        return self._value


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, "5", None, True, "raise", 10**400])
def test_a_nonsensical_request_is_ignored_and_the_backoff_decides(value):
    report, starts = starts_of(
        lambda n: Odd(value) if n == 1 else None, backoff=Backoff.constant(0.25)
    )
    assert report.completed == 1
    assert starts == [0.0, 0.25]


def test_requested_delay_reads_only_finite_non_negative_numbers():
    assert requested_delay(RetryLater(retry_after_s=2)) == 2.0
    assert requested_delay(RetryLater()) is None
    assert requested_delay(ValueError()) is None
    assert requested_delay(Odd("raise")) is None


# Every kind of real number a caller may hold: numpy's, the standard library's, and ints
# and fractions beyond the largest float.
REAL_TWOS = [
    2,
    2.0,
    np.int64(2),
    np.int8(2),
    np.uint64(2),
    np.float32(2.0),
    np.float64(2.0),
    Decimal("2"),
    Decimal("2.000"),
    Fraction(4, 2),
]


@pytest.mark.parametrize("two", REAL_TWOS, ids=lambda v: f"{type(v).__name__}({v})")
@pytest.mark.parametrize("cls", [RetryLater, RateLimited])
def test_any_real_number_of_seconds_is_honoured(cls, two):
    error = cls("429", retry_after_s=two)
    assert error.retry_after_s == 2.0 and type(error.retry_after_s) is float
    _, starts = starts_of(
        lambda n: cls("429", retry_after_s=two) if n == 1 else None, backoff=Backoff.constant(0.1)
    )
    assert starts == [0.0, 2.0]


@pytest.mark.parametrize("two", REAL_TWOS, ids=lambda v: f"{type(v).__name__}({v})")
def test_any_real_number_on_an_exception_of_ones_own_is_honoured(two):
    # Not a RetryLater: nothing validated the attribute, the engine reads it as it is.
    _, starts = starts_of(lambda n: Odd(two) if n == 1 else None, backoff=Backoff.constant(0.1))
    assert starts == [0.0, 2.0]
    assert requested_delay(Odd(two)) == 2.0


BAD_VALUES = [
    (math.nan, ValueError, "must be finite and >= 0"),
    (np.float64("nan"), ValueError, "must be finite and >= 0"),
    (Decimal("NaN"), ValueError, "must be finite and >= 0"),
    (Decimal("sNaN"), ValueError, "must be finite and >= 0"),
    (math.inf, ValueError, "must be finite and >= 0"),
    (Decimal("Infinity"), ValueError, "must be finite and >= 0"),
    (-0.5, ValueError, "must be >= 0"),
    (np.int64(-1), ValueError, "must be >= 0"),
    (Fraction(-1, 3), ValueError, "must be >= 0"),
    (10**400, ValueError, r"must be >= 0 and <= 1.8e\+308 .*got 1e\+400 \(a number of 401"),
    (Fraction(10**400, 3), ValueError, r"must be >= 0 and <= 1.8e\+308"),
    (Decimal("1e400"), ValueError, r"must be >= 0 and <= 1.8e\+308"),
    (True, TypeError, "must be a real number .*got True of type bool"),
    ("3", TypeError, "must be a real number .*got '3' of type str"),
    (object(), TypeError, "must be a real number"),
]


@pytest.mark.parametrize(("bad", "error", "message"), BAD_VALUES)
@pytest.mark.parametrize("cls", [RetryLater, RateLimited])
def test_retry_later_refuses_a_bad_delay_in_one_line_naming_it(cls, bad, error, message):
    with pytest.raises(error, match=rf"^retry_after_s {message}") as caught:
        cls("x", retry_after_s=bad)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("bad", "_error", "_message"), BAD_VALUES)
def test_a_bad_value_on_an_exception_of_ones_own_never_raises_and_the_backoff_decides(
    bad, _error, _message
):
    # The engine reads it while recording a failure, where nothing may raise.
    assert requested_delay(Odd(bad)) is None
    report, starts = starts_of(
        lambda n: Odd(bad) if n == 1 else None, backoff=Backoff.constant(0.25)
    )
    assert report.completed == 1 and starts == [0.0, 0.25]


def test_a_huge_request_is_honoured_in_loop_time_and_the_drain_bounds_it():
    async def handler(_):
        raise RetryLater("come back next year", retry_after_s=365 * 86400.0)

    config = PipelineConfig(concurrency=1, max_attempts=2, drain_timeout_s=10.0)

    async def run():
        return await Pipeline(handler, config).run([1]), asyncio.get_running_loop().time()

    report, ended = run_virtual(run())
    assert report.unfinished == [1]  # the drain's bound holds, nothing is lost
    assert ended < 20.0
