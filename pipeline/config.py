"""``PipelineConfig``: every knob of a pipeline, validated once, frozen.

Each bad value raises at construction with a message that names the
parameter, the value given and what is allowed, so a typo in a notebook
fails on the line that made it rather than an hour into a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._validate import real, show
from .retry import Backoff, RetryPolicy

__all__ = ["PipelineConfig", "RateLimit"]


def _require_int(name: str, value: object, *, minimum: int, allowed: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer ({allowed}), got {show(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be {allowed}, got {show(value)}")


def _require_seconds(name: str, value: object, *, allow_none: bool, allow_zero: bool) -> None:
    if value is None and allow_none:
        return
    unit = "seconds, or None" if allow_none else "seconds"
    if allow_zero:
        real(name, value, unit, at_least=0)
    else:
        real(name, value, unit, above=0)


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """A downstream's limits, enforced with token buckets in loop time.

    Workers wait on the limiter before each attempt. Each bucket holds one
    minute's allowance and refills continuously, which is how providers that
    quote "requests per minute" and "tokens per minute" behave.

    Args:
        requests_per_minute: attempts allowed per minute, or None for no limit.
        tokens_per_minute: tokens allowed per minute, or None for no limit.
        tokens_per_item: tokens one attempt spends: a number, or a function of
            the payload returning one (an estimate of prompt plus completion).
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    tokens_per_item: float | Callable[[Any], float] = 1.0

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None:
                real(name, value, "per minute, or None", above=0)
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError(
                "RateLimit needs requests_per_minute or tokens_per_minute (or both), got neither"
            )
        tokens = self.tokens_per_item
        if not callable(tokens):
            real(
                "tokens_per_item",
                tokens,
                "tokens per attempt, or a function of the payload",
                at_least=0,
            )
            if self.tokens_per_minute is not None and tokens > self.tokens_per_minute:
                raise ValueError(
                    f"tokens_per_item ({tokens!r}) must not exceed tokens_per_minute "
                    f"({self.tokens_per_minute!r}): such an item could never be sent"
                )


_ON_FULL = ("block", "reject")


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """How a :class:`~pipeline.Pipeline` admits, works, retries and drains.

    Args:
        concurrency: worker tasks taking items from the queue (>= 1).
        queue_maxsize: items the queue may hold (>= 1), or None for an explicit
            unbounded queue (memory then grows without limit under overload).
            Items waiting for a retry count against this bound too.
        on_full: ``"block"`` makes producers wait for a free slot
            (backpressure); ``"reject"`` sheds the item at once.
        max_attempts: attempts per item before it is dead-lettered (>= 1).
        backoff: delay before each retry (:class:`Backoff`).
        retry: which errors earn a retry (:class:`RetryPolicy`).
        attempt_timeout_s: seconds one attempt may take before it counts as
            failed with ``TimeoutError``, or None.
        drain_timeout_s: seconds the drain waits for queued, running and
            retry-waiting items before cancelling them, or None to wait as long
            as it takes.
        prefetch: calls of a plain (non-async) handler one worker keeps in
            flight on threads (>= 1).
        rate_limit: a :class:`RateLimit` workers wait on before each attempt.

    Raises:
        ValueError: a value outside what is allowed (the message names it).
        TypeError: a value of the wrong type.

    Example:
        >>> PipelineConfig(concurrency=4, queue_maxsize=100, max_attempts=3)
        PipelineConfig(concurrency=4, queue_maxsize=100, on_full='block', max_attempts=3, ...)
    """

    concurrency: int = 4
    queue_maxsize: int | None = 100
    on_full: Literal["block", "reject"] = "block"
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=Backoff)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    attempt_timeout_s: float | None = None
    drain_timeout_s: float | None = 30.0
    prefetch: int = 1
    rate_limit: RateLimit | None = None

    def __post_init__(self) -> None:
        _require_int("concurrency", self.concurrency, minimum=1, allowed=">= 1 worker")
        if self.queue_maxsize is not None:
            if isinstance(self.queue_maxsize, bool) or not isinstance(self.queue_maxsize, int):
                raise TypeError(
                    "queue_maxsize must be an integer >= 1, or None for an explicitly "
                    f"unbounded queue, got {show(self.queue_maxsize)}"
                )
            if self.queue_maxsize < 1:
                raise ValueError(
                    f"queue_maxsize must be >= 1, got {show(self.queue_maxsize)}: a size of 0 or "
                    "less would mean an unbounded queue, which defeats backpressure; pass "
                    "queue_maxsize=None if you really want one"
                )
        if self.on_full not in _ON_FULL:
            raise ValueError(f"on_full must be 'block' or 'reject', got {self.on_full!r}")
        _require_int("max_attempts", self.max_attempts, minimum=1, allowed=">= 1")
        if not isinstance(self.backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, got {self.backoff!r}")
        if not isinstance(self.retry, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, got {self.retry!r}")
        _require_seconds(
            "attempt_timeout_s", self.attempt_timeout_s, allow_none=True, allow_zero=False
        )
        _require_seconds("drain_timeout_s", self.drain_timeout_s, allow_none=True, allow_zero=True)
        _require_int("prefetch", self.prefetch, minimum=1, allowed=">= 1 call in flight")
        if self.rate_limit is not None and not isinstance(self.rate_limit, RateLimit):
            raise TypeError(f"rate_limit must be a RateLimit or None, got {self.rate_limit!r}")

    @property
    def capacity(self) -> int | None:
        """Items the pipeline can hold at once (queue plus workers), or None if unbounded.

        With Poisson arrivals and ``on_full="reject"`` this is the K of M/M/c/K.
        """
        if self.queue_maxsize is None:
            return None
        return self.queue_maxsize + self.concurrency
