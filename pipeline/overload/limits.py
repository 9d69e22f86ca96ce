"""Adaptive concurrency limits: ``AIMD`` and ``Gradient2``, after Netflix's concurrency-limits.

The rules are those of Netflix concurrency-limits v0.5.4 (the release current in
January 2026), ``concurrency-limits-core/src/main/java/com/netflix/concurrency/
limits/limit/AIMDLimit.java``, ``Gradient2Limit.java`` and
``limit/measurement/ExpAvgMeasurement.java``, with the sample the limiter
feeds them (``limiter/AbstractLimiter.java``): each attempt's round-trip time
(its duration, seconds of loop time), the attempts in flight and whether it
was *dropped*.

In the engine the limit is the number of attempts that may be in flight: it
moves between ``min_limit`` and the pipeline's ``concurrency`` (the reference's
``maxLimit``); a worker above the limit waits before it takes an item, so
items stay queued (backpressure is unchanged and nothing is lost). A sample
is made when an attempt ends: a failed or timed-out attempt, or one the rate
limit refused (the reference's ``onDropped``: "rejected by an external limit
or hitting a timeout"), is a drop; an attempt the close cancelled gives no
sample (``onIgnore``). ``inflight`` is the attempts in flight when the attempt
ends, itself included (the reference counts at its start; the two differ only
while the load changes, and counting at the end needs no state per attempt).

Where this differs from the reference, on purpose:

- The bounds default to what a pipeline has: ``min_limit=1`` and the initial
  limit at ``concurrency`` (the reference's 20 and 20 of 200 size a server's
  thread pool). The algorithms' own parameters keep the reference defaults.
- An initial limit outside ``[min_limit, concurrency]`` is refused, not warned
  about and clamped at the first sample.
- Gradient2 with an RTT of exactly 0 (instant work, as virtual time can give):
  Java divides 0.0 by 0.0 and the NaN makes the limit 0; here a zero RTT is
  "no queueing" (gradient 1) and a zero long RTT ratio counts as equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import integer, real, show

__all__ = ["AIMD", "AIMDState", "Gradient2", "Gradient2State", "LimitState"]


class LimitState:
    """The limit one run keeps: ``limit`` (an int in ``[min_limit, max_limit]``).

    Attributes:
        limit: attempts that may be in flight now.
        min_limit, max_limit: its bounds.
        samples: samples taken so far. drops: those that were drops.
    """

    __slots__ = ("drops", "limit", "max_limit", "min_limit", "samples")

    def __init__(self, initial: int, min_limit: int, max_limit: int) -> None:
        self.limit = initial
        self.min_limit = min_limit
        self.max_limit = max_limit
        self.samples = 0
        self.drops = 0

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} limit={self.limit} bounds=[{self.min_limit}, "
            f"{self.max_limit}] samples={self.samples} drops={self.drops}>"
        )

    def on_sample(self, rtt_s: float, inflight: int, dropped: bool) -> int:
        """Take one attempt's sample and return the new limit.

        Args:
            rtt_s: the attempt's duration, seconds (>= 0).
            inflight: attempts in flight, this one included.
            dropped: whether the attempt failed, timed out or was refused.
        """
        self.samples += 1
        if dropped:
            self.drops += 1
        self.limit = self._update(rtt_s, inflight, dropped)
        return self.limit

    def _update(self, rtt_s: float, inflight: int, dropped: bool) -> int:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class _Bounds:
    """What both limits share: the lower bound and where the limit starts."""

    min_limit: int = 1
    initial_limit: int | None = None

    def _check_bounds(self) -> None:
        integer("min_limit", self.min_limit, "attempts in flight", at_least=1)
        if self.initial_limit is not None:
            integer("initial_limit", self.initial_limit, "attempts in flight", at_least=1)
            if self.initial_limit < self.min_limit:
                raise ValueError(
                    f"initial_limit must be >= min_limit ({self.min_limit}), "
                    f"got {show(self.initial_limit)}"
                )
        # numpy integers become ints: the limit is compared and printed as one
        object.__setattr__(self, "min_limit", int(self.min_limit))
        if self.initial_limit is not None:
            object.__setattr__(self, "initial_limit", int(self.initial_limit))

    def check_against(self, concurrency: int) -> None:
        """Raise ValueError unless the bounds fit under ``concurrency`` (the maximum)."""
        name = type(self).__name__
        if self.min_limit > concurrency:
            raise ValueError(
                f"concurrency_limit={name}(min_limit={self.min_limit}) must be <= concurrency "
                f"({concurrency}): the limit moves between min_limit and concurrency"
            )
        if self.initial_limit is not None and self.initial_limit > concurrency:
            raise ValueError(
                f"concurrency_limit={name}(initial_limit={self.initial_limit}) must be "
                f"<= concurrency ({concurrency}), the largest limit"
            )

    def initial(self, max_limit: int) -> int:
        """Where the limit starts in a run whose largest limit is ``max_limit``."""
        return max_limit if self.initial_limit is None else self.initial_limit


@dataclass(frozen=True, slots=True)
class AIMD(_Bounds):
    """Loss-based limit: +1 while attempts succeed, times ``backoff_ratio`` on a drop.

    Netflix's ``AIMDLimit``: on a sample that dropped, or whose RTT exceeds
    ``timeout_s``, ``limit = floor(limit * backoff_ratio)``; otherwise, when
    ``2 * inflight >= limit`` (the limit is in use, not app-limited),
    ``limit + 1``; then clamped to ``[min_limit, concurrency]``.

    Args:
        min_limit: the lowest limit (>= 1 attempt in flight).
        initial_limit: where the limit starts, or None for ``concurrency``.
        backoff_ratio: the multiplicative decrease, in ``[0.5, 1)`` (reference 0.9).
        timeout_s: an attempt slower than this counts as a drop (> 0 seconds;
            reference 5 s).

    Raises:
        ValueError: a value out of range (the message names it).
        TypeError: a value that is not a number.

    Example:
        >>> AIMD(min_limit=2, backoff_ratio=0.5)
        AIMD(min_limit=2, initial_limit=None, backoff_ratio=0.5, timeout_s=5.0)
    """

    backoff_ratio: float = 0.9
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        self._check_bounds()
        ratio = real("backoff_ratio", self.backoff_ratio, "a fraction", at_least=0.5)
        if not ratio < 1.0:
            raise ValueError(
                f"backoff_ratio must be >= 0.5 and < 1 (a fraction), got {show(self.backoff_ratio)}"
            )
        object.__setattr__(self, "backoff_ratio", ratio)
        object.__setattr__(self, "timeout_s", real("timeout_s", self.timeout_s, "seconds", above=0))

    def start(self, max_limit: int) -> AIMDState:
        """The state of one run whose largest limit is ``max_limit`` (its ``concurrency``)."""
        return AIMDState(self, max_limit)


class AIMDState(LimitState):
    """:class:`AIMD`'s limit in one run."""

    __slots__ = ("backoff_ratio", "timeout_s")

    def __init__(self, config: AIMD, max_limit: int) -> None:
        super().__init__(config.initial(max_limit), config.min_limit, max_limit)
        self.backoff_ratio = config.backoff_ratio
        self.timeout_s = config.timeout_s

    def _update(self, rtt_s: float, inflight: int, dropped: bool) -> int:
        limit = self.limit
        if dropped or rtt_s > self.timeout_s:
            limit = int(limit * self.backoff_ratio)
        elif inflight * 2 >= limit:
            limit += 1
        return min(self.max_limit, max(self.min_limit, limit))


@dataclass(frozen=True, slots=True)
class Gradient2(_Bounds):
    """Delay-based limit: the gradient of a long-term RTT over the latest one.

    Netflix's ``Gradient2Limit``, per sample: the long RTT is an exponential
    average (the plain mean over the first 10 samples, then factor
    ``2 / (long_window + 1)``); when it exceeds twice the sample's RTT it is
    cut to 95% (recovery after a long overload). If ``inflight <
    estimate / 2`` the limit stays (app-limited). Otherwise
    ``gradient = max(0.5, min(1, rtt_tolerance * long / rtt))``,
    ``new = estimate * gradient + queue_size``,
    ``estimate = estimate * (1 - smoothing) + new * smoothing``, clamped to
    ``[min_limit, concurrency]``; the limit is ``int(estimate)``.

    Its known pathology, kept: ``queue_size`` is added whatever the gradient,
    so under a modest overload (gradient 0.8, queue size 4) the estimate still
    grows toward ``queue_size / (1 - gradient)`` = 20.

    Args:
        min_limit: the lowest limit (>= 1 attempt in flight).
        initial_limit: where the limit starts, or None for ``concurrency``.
        smoothing: weight of the new estimate, in ``(0, 1]`` (reference 0.2).
        queue_size: attempts the limit may grow by while latency stays low
            (>= 0; reference 4).
        long_window: samples in the long RTT's average (>= 1; reference 600).
        rtt_tolerance: the RTT increase tolerated before the limit falls,
            a factor >= 1 (reference 1.5).

    Raises:
        ValueError: a value out of range (the message names it).
        TypeError: a value that is not a number.
    """

    smoothing: float = 0.2
    queue_size: int = 4
    long_window: int = 600
    rtt_tolerance: float = 1.5

    def __post_init__(self) -> None:
        self._check_bounds()
        smoothing = real("smoothing", self.smoothing, "a fraction", above=0.0, at_most=1.0)
        object.__setattr__(self, "smoothing", smoothing)
        size = integer("queue_size", self.queue_size, "attempts", at_least=0)
        object.__setattr__(self, "queue_size", size)
        window = integer("long_window", self.long_window, "samples", at_least=1)
        object.__setattr__(self, "long_window", window)
        tolerance = real("rtt_tolerance", self.rtt_tolerance, "a factor", at_least=1.0)
        object.__setattr__(self, "rtt_tolerance", tolerance)

    def start(self, max_limit: int) -> Gradient2State:
        """The state of one run whose largest limit is ``max_limit`` (its ``concurrency``)."""
        return Gradient2State(self, max_limit)


_WARMUP = 10  # ExpAvgMeasurement(longWindow, 10): a plain mean over the first 10 samples


class Gradient2State(LimitState):
    """:class:`Gradient2`'s limit in one run.

    Attributes:
        estimate: the estimated limit (a float; ``limit`` is its integer part).
        long_rtt_s: the long-term RTT average, seconds (0.0 before a sample).
        gradient: the last gradient used (1.0 before one).
    """

    __slots__ = (
        "_count",
        "_factor",
        "_sum",
        "estimate",
        "gradient",
        "long_rtt_s",
        "queue_size",
        "smoothing",
        "tolerance",
    )

    def __init__(self, config: Gradient2, max_limit: int) -> None:
        initial = config.initial(max_limit)
        super().__init__(initial, config.min_limit, max_limit)
        self.estimate = float(initial)
        self.smoothing = config.smoothing
        self.queue_size = config.queue_size
        self.tolerance = config.rtt_tolerance
        self._factor = 2.0 / (config.long_window + 1)
        self._count = 0
        self._sum = 0.0
        self.long_rtt_s = 0.0
        self.gradient = 1.0

    def _long_add(self, rtt_s: float) -> float:
        if self._count < _WARMUP:
            self._count += 1
            self._sum += rtt_s
            self.long_rtt_s = self._sum / self._count
        else:
            factor = self._factor
            self.long_rtt_s = self.long_rtt_s * (1 - factor) + rtt_s * factor
        return self.long_rtt_s

    def _update(self, rtt_s: float, inflight: int, dropped: bool) -> int:
        estimate = self.estimate
        long_rtt = self._long_add(rtt_s)
        # long / short, with 0/0 as equal and x/0 as infinite (Java's doubles give NaN, inf)
        ratio = long_rtt / rtt_s if rtt_s > 0 else (math.inf if long_rtt > 0 else 1.0)
        if ratio > 2:
            self.long_rtt_s = long_rtt * 0.95
        if inflight < estimate / 2:
            return int(estimate)
        # Java's order, (tolerance * long) / short, so the floats match the reference's
        scaled = self.tolerance * long_rtt / rtt_s if rtt_s > 0 else self.tolerance * ratio
        gradient = max(0.5, min(1.0, scaled))
        self.gradient = gradient
        new = estimate * gradient + self.queue_size
        new = estimate * (1 - self.smoothing) + new * self.smoothing
        new = max(self.min_limit, min(self.max_limit, new))
        self.estimate = new
        return int(new)
