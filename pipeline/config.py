"""``PipelineConfig``: every knob of a pipeline, validated once, frozen.

Each bad value raises at construction with a message that names the
parameter, the value given and what is allowed, so a typo in a notebook
fails on the line that made it rather than an hour into a run.
"""

from __future__ import annotations

import decimal
import fractions
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._validate import FLOAT_MAX, MAX_CONCURRENCY, real, show
from .autoscale import Autoscaler
from .overload import AIMD, CircuitBreaker, CoDel, Gradient2, RetryBudget
from .retry import Backoff, RetryPolicy

__all__ = ["WINDOW_S", "PipelineConfig", "RateLimit", "max_wait"]


def _require_int(
    name: str, value: object, *, minimum: int, allowed: str, maximum: int | None = None
) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer ({allowed}), got {show(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {allowed}, got {show(value)}")


def _require_seconds(name: str, value: object, *, allow_none: bool, allow_zero: bool) -> None:
    if value is None and allow_none:
        return
    unit = "seconds, or None" if allow_none else "seconds"
    if allow_zero:
        real(name, value, unit, at_least=0)
    else:
        real(name, value, unit, above=0)


_MAX_WAIT = "seconds > 0, math.inf or None for no deadline, or a function of the payload"


def max_wait(name: str, value: object) -> float:
    """``value`` as seconds of maximum wait (> 0, or ``inf`` for none), or raise naming ``name``.

    Raises:
        TypeError: not a real number (a ``bool`` is not).
        ValueError: NaN, 0, negative, or finite but beyond a float.
    """
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        infinite = value.is_infinite() and value > 0  # no comparison of a NaN: sNaN signals
        if infinite:
            return math.inf
        raise ValueError(f"{name} must be {_MAX_WAIT}, got {show(value)}")
    if not isinstance(value, bool) and isinstance(value, numbers.Real):
        try:
            as_float = float(value)
        except (TypeError, ValueError, OverflowError):
            as_float = 0.0  # real() below says what is wrong with it
        if as_float == math.inf and not isinstance(value, numbers.Integral | fractions.Fraction):
            return math.inf  # a float inf (Python's or numpy's): no deadline
        if math.isnan(as_float):
            raise ValueError(f"{name} must be {_MAX_WAIT}, got {show(value)}")
    return real(name, value, _MAX_WAIT, above=0)


WINDOW_S = 60.0
"""Seconds over which per-minute limits are counted: the window of a :class:`RateLimit`."""


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """A downstream's limits on requests and tokens per minute, kept in loop time.

    Workers wait on the limiter before each attempt (waiting is not part of
    the attempt). Two ways to keep the limits:

    - **Sliding window** (the default, ``burst_s=None``): an attempt may start
      at time *t* only if the attempts started in ``(t - 60 s, t]``, with it,
      stay within ``requests_per_minute`` and ``tokens_per_minute``. No 60 s
      window ever sees more than the limits, so a provider that counts per
      window (as :class:`~pipeline.sim.TokenQuota` does) never refuses a client
      set to exactly its published limit. Under a steady backlog the limits are
      reached, not undershot: a waiting attempt starts the moment the attempts
      that block it are 60 s old. It does not pace: a window's allowance may
      start at once, and again 60 s later. Against a downstream that also
      limits calls in flight, bound ``concurrency`` to that limit.
    - **Token bucket** (``burst_s=`` a number of seconds): one bucket per limit
      holds ``burst_s`` seconds' worth of allowance (``requests_per_minute *
      burst_s / 60`` requests), starts full and refills continuously. Bursts of
      up to that many start at once after a quiet spell, so a 60 s window may
      see up to ``(1 + burst_s / 60)`` times the limit. ``burst_s=60`` is a
      bucket holding a full minute's allowance. Choose it only for a
      downstream that itself allows such bursts.

    Args:
        requests_per_minute: attempts allowed per minute, or None for no limit.
            With the sliding window at least 1 (a window must hold one request).
        tokens_per_minute: tokens allowed per minute, or None for no limit.
        tokens_per_item: tokens one attempt spends: a number, or a function of
            the payload returning one (an estimate of prompt plus completion),
            from 0 to what one window (or bucket) holds. A bad estimate fails
            that attempt with an error that names it.
        burst_s: None (default) for the sliding window; or seconds of allowance
            (> 0) a token bucket holds, which must come to at least one request.

    Raises:
        ValueError: a value outside what is allowed (the message names it).
        TypeError: a value of the wrong type.

    Example:
        >>> RateLimit(requests_per_minute=60)               # never 61 in any 60 s
        >>> RateLimit(requests_per_minute=60, burst_s=10)   # 10 at once, then 1 per second
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    tokens_per_item: float | Callable[[Any], float] = 1.0
    burst_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None:
                real(name, value, "per minute, or None", above=0)
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError(
                "RateLimit needs requests_per_minute or tokens_per_minute (or both), got neither"
            )
        if self.burst_s is not None:
            real(
                "burst_s",
                self.burst_s,
                "seconds of allowance a token bucket holds, or None for a sliding window",
                above=0,
            )
        requests = self.requests_held
        tokens_held = self.tokens_held
        for name, held in (("requests", requests), ("tokens", tokens_held)):
            if held is not None and not held <= FLOAT_MAX:
                raise ValueError(
                    f"burst_s ({show(self.burst_s)}) is too large: {name}_per_minute * burst_s "
                    f"/ 60 overflows a float; allowed: a bucket of at most {FLOAT_MAX:.2g} {name}"
                )
        if requests is not None and requests < 1:
            if self.burst_s is None:
                raise ValueError(
                    f"requests_per_minute must be >= 1 with the sliding window (burst_s=None), "
                    f"got {show(self.requests_per_minute)}: no 60 s window could hold one "
                    f"request; for fewer than one per minute use a bucket holding one, "
                    f"burst_s={60 / self.requests_per_minute:g}"
                )
            raise ValueError(
                f"burst_s must be >= {60 / self.requests_per_minute:g} seconds at "
                f"requests_per_minute={show(self.requests_per_minute)}, got "
                f"{show(self.burst_s)}: the bucket would hold {requests:g} requests, "
                "and never one whole request"
            )
        estimate = self.tokens_per_item
        if not callable(estimate):
            real(
                "tokens_per_item",
                estimate,
                "tokens per attempt, or a function of the payload",
                at_least=0,
            )
            if tokens_held is not None and estimate > tokens_held:
                held_by = (
                    f"tokens_per_minute ({show(self.tokens_per_minute)})"
                    if self.burst_s is None
                    else f"what the bucket holds, tokens_per_minute * burst_s / 60 "
                    f"({tokens_held:g})"
                )
                raise ValueError(
                    f"tokens_per_item ({show(estimate)}) must not exceed {held_by}: such an "
                    "item could never be sent"
                )

    @property
    def requests_held(self) -> float | None:
        """The most requests one window (or bucket) holds; None: no request limit."""
        return self._capacity(self.requests_per_minute)

    @property
    def tokens_held(self) -> float | None:
        """The most tokens one window (or bucket) holds; None: no token limit."""
        return self._capacity(self.tokens_per_minute)

    def _capacity(self, per_minute: float | None) -> float | None:
        """The most one window (or bucket) holds at a rate of ``per_minute``; None: no limit."""
        if per_minute is None:
            return None
        if self.burst_s is None:
            return float(per_minute)
        return float(per_minute) * float(self.burst_s) / WINDOW_S  # inf if it overflows


_ON_FULL = ("block", "reject")


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """How a :class:`~pipeline.Pipeline` admits, works, retries and drains.

    Args:
        concurrency: worker tasks taking items from the queue (1 to 1,000,000).
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
        keep_shed: payloads shed with ``on_full="reject"`` (or from the queue by
            ``codel``, in the same log) that the run report
            keeps (the most recent ones, >= 0), or None to keep them all. The
            count is always exact, and the Pipeline's ``on_event`` listener
            sees every shed payload as it happens (``EventKind.SHED``). The
            same bound applies, separately, to the expired payloads kept.
        priority: None (first in, first out), or a function of the payload
            returning its key: lower keys are served first, first in, first out
            among equal keys (payloads are never compared). Non-preemptive: a
            running attempt is never interrupted. A retry goes back at its
            item's place, ordered by (key, admission order). A key must be a
            real number, a string, bytes, a datetime or a tuple of those, all
            of one shape; an item whose key raises or is NaN, None or of
            another kind is dead-lettered (reason ``"bad_priority"``) without
            a handler call. See :mod:`pipeline.priority`. In a batching stage of
            a chain, batches are formed first in, first out and the key (like
            ``max_wait_s``) applies to each batch: the function gets the Batch.
        max_wait_s: seconds an item may wait from admission for an attempt to
            start (> 0; ``math.inf`` or None: no deadline), or a function of
            the payload returning such seconds (or None) for that item. An item
            not started by then expires instead of running (``report.expired``);
            so does a retry whose backoff would end at or after the deadline.
            A bad per-item value dead-letters the item (``"bad_deadline"``).
        concurrency_limit: None, or an adaptive limit, :class:`~pipeline.AIMD`
            or :class:`~pipeline.Gradient2` (Netflix's algorithms): the
            attempts in flight adapt between its ``min_limit`` and
            ``concurrency``; workers above the limit wait before taking an
            item. Needs ``prefetch=1``. See :mod:`pipeline.overload.limits`.
        codel: None, or :class:`~pipeline.CoDel`: queued items whose sojourn
            stays above its target for an interval are shed (outcome
            ``shed``), with adaptive LIFO while the queue stands. First in,
            first out only: not with ``priority`` or ``max_wait_s``; needs
            ``prefetch=1``. See :mod:`pipeline.overload.codel`.
        autoscale: an :class:`~pipeline.Autoscaler` that resizes the pool as the run
            goes (the Kubernetes HPA's rules), or None for a fixed pool of
            ``concurrency`` workers. ``concurrency`` is then the starting size, within
            its ``min_workers..max_workers``.
        retry_budget: a :class:`~pipeline.overload.RetryBudget`, or None (no
            budget): a retry it denies is not made, and the item is
            dead-lettered (reason ``"retry_budget"``).
        breaker: a :class:`~pipeline.overload.CircuitBreaker`, or None: while it
            is open no attempt reaches the handler; the worker holds its item
            until the breaker lets a call through (see :mod:`pipeline.overload.guard`).

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
    keep_shed: int | None = 1000
    priority: Callable[[Any], Any] | None = None
    max_wait_s: float | Callable[[Any], float | None] | None = None
    concurrency_limit: AIMD | Gradient2 | None = None
    codel: CoDel | None = None
    autoscale: Autoscaler | None = None
    retry_budget: RetryBudget | None = None
    breaker: CircuitBreaker | None = None

    def __post_init__(self) -> None:
        _require_int(
            "concurrency",
            self.concurrency,
            minimum=1,
            maximum=MAX_CONCURRENCY,
            allowed=f">= 1 and <= {MAX_CONCURRENCY:,} workers",
        )
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
        if self.keep_shed is not None:
            _require_int("keep_shed", self.keep_shed, minimum=0, allowed=">= 0 payloads, or None")
        if self.priority is not None and not callable(self.priority):
            raise TypeError(
                f"priority must be a function of the payload returning its key (lower first), "
                f"or None, got {show(self.priority)}"
            )
        if self.max_wait_s is not None and not callable(self.max_wait_s):
            # Stored as a float: deadlines are loop times, and float + Decimal would raise.
            object.__setattr__(self, "max_wait_s", max_wait("max_wait_s", self.max_wait_s))
        if self.autoscale is not None:
            if not isinstance(self.autoscale, Autoscaler):
                raise TypeError(
                    f"autoscale must be an Autoscaler or None, got {show(self.autoscale)}"
                )
            self.autoscale.check_pool(self.concurrency)
        for name, kind in (("retry_budget", RetryBudget), ("breaker", CircuitBreaker)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"{name} must be a {kind.__name__} or None, got {show(value)}")
        self._check_controls()

    def _check_controls(self) -> None:
        """Validate ``concurrency_limit`` and ``codel``, alone and with the rest."""
        limit, codel = self.concurrency_limit, self.codel
        if limit is not None:
            if not isinstance(limit, AIMD | Gradient2):
                raise TypeError(
                    "concurrency_limit must be AIMD(...), Gradient2(...) or None, "
                    f"got {show(limit)}"
                )
            limit.check_against(self.concurrency)
            if self.autoscale is not None:
                raise ValueError(
                    "concurrency_limit cannot be combined with autoscale: the limit moves "
                    "up to concurrency, the pool size the autoscaler changes; pass one or the other"
                )
        if codel is not None:
            if not isinstance(codel, CoDel):
                raise TypeError(f"codel must be CoDel(...) or None, got {show(codel)}")
            if self.priority is not None:
                raise ValueError(
                    "codel cannot be combined with priority: CoDel sheds the item that waited "
                    "longest in a first-in, first-out queue; pass one or the other"
                )
            if self.max_wait_s is not None:
                raise ValueError(
                    "codel cannot be combined with max_wait_s: both give up on waiting items "
                    "(CoDel by the queue's delay, max_wait_s by each item's); pass one or the other"
                )
        if (limit is not None or codel is not None) and self.prefetch != 1:
            name = "concurrency_limit" if limit is not None else "codel"
            raise ValueError(
                f"prefetch must be 1 with {name} (it counts one attempt per worker), "
                f"got {show(self.prefetch)}"
            )

    @property
    def capacity(self) -> int | None:
        """Items the pipeline can hold at once (queue plus workers), or None if unbounded.

        With Poisson arrivals and ``on_full="reject"`` this is the K of M/M/c/K.
        """
        if self.queue_maxsize is None:
            return None
        return self.queue_maxsize + self.concurrency
