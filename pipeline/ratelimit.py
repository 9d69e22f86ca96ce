"""Rate limiting in loop time: requests and tokens per minute.

Workers call :meth:`RateLimiter.acquire` before each attempt. Waiters are
served in arrival order (a lock is held while one waits), so a large item is
not starved by a stream of small ones.

By default each limit is a :class:`SlidingWindow`: what started in the last
60 s of loop time, kept exactly, so no 60 s window ever holds more than the
limit. A :class:`RateLimit` with ``burst_s`` uses a :class:`TokenBucket` per
limit instead, which allows bursts.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections import deque
from fractions import Fraction
from typing import Any

from ._validate import real, show
from .config import WINDOW_S, RateLimit

__all__ = ["RateLimiter", "SlidingWindow", "TokenBucket"]


def _exact(amount: float) -> int | Fraction:
    """``amount`` as an exact number, so sums and differences never round."""
    return int(amount) if amount.is_integer() else Fraction(amount)


def _expiry(start_s: float) -> float:
    """The first float at or after ``start_s + 60`` exactly: when an entry stops counting.

    ``start_s + 60.0`` rounds to the nearest float, which may be below the
    exact sum: an attempt started then would share a real 60 s window with the
    entry. The checks of ``end - start_s >= 60`` below are exact (Sterbenz).
    """
    end = start_s + WINDOW_S
    if start_s >= WINDOW_S:
        short = end - start_s < WINDOW_S  # start <= end <= 2 start: the difference is exact
    elif start_s >= 0.0:
        short = end - WINDOW_S < start_s  # 60 <= end <= 120: the difference is exact
    else:  # a clock below zero (a virtual loop started there): rare, pay for exactness
        short = Fraction(end) - Fraction(start_s) < WINDOW_S
    return math.nextafter(end, math.inf) if short else end


class SlidingWindow:
    """Amounts spent in the last 60 s of loop time, summed exactly.

    An amount taken at loop time *s* counts at every time *t* with
    ``s > t - 60`` (in exact arithmetic), that is, until the first float at or
    after ``s + 60``. :meth:`ready_at` says when an amount fits under
    ``limit``; :meth:`take` records it. The sum is kept in integers (or
    fractions, for amounts with a fractional part), so it never drifts: an
    empty window is exactly 0 and a full one exactly the limit. Memory is one
    entry per amount taken in the last 60 s.

    Args:
        limit: the most the amounts in any window may add up to.
    """

    __slots__ = ("_entries", "_limit", "_total", "limit")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._limit = _exact(float(limit))  # arithmetic with a float would round
        self._entries: deque[tuple[float, int | Fraction]] = deque()  # (expiry, amount)
        self._total: int | Fraction = 0

    def __repr__(self) -> str:
        return (
            f"<SlidingWindow limit={self.limit:g} used={float(self._total):g} "
            f"entries={len(self._entries)}>"
        )

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def used(self) -> float:
        """The amounts still counting at the last time seen (rounded to a float)."""
        return float(self._total)

    def _expire(self, now_s: float) -> None:
        entries = self._entries
        while entries and entries[0][0] <= now_s:
            self._total -= entries.popleft()[1]

    def fits(self, amount: float, now_s: float) -> bool:
        """True when ``amount`` more fits the window at loop time ``now_s``."""
        self._expire(now_s)
        return self._total + _exact(amount) <= self._limit

    def ready_at(self, amount: float, now_s: float) -> float:
        """Loop time at which ``amount`` fits: ``now_s`` if it fits now, else an entry's expiry.

        Raises:
            ValueError: ``amount`` exceeds ``limit`` and could never fit.
        """
        self._expire(now_s)
        excess = self._total + _exact(amount) - self._limit
        if excess <= 0:
            return now_s
        for expiry, spent in self._entries:
            excess -= spent
            if excess <= 0:
                return expiry
        raise ValueError(f"amount must be <= limit ({self.limit:g}), got {show(amount)}")

    def take(self, amount: float, now_s: float) -> None:
        """Record ``amount`` as spent at loop time ``now_s`` (not earlier than the last take)."""
        self._expire(now_s)
        exact = _exact(amount)
        self._entries.append((_expiry(now_s), exact))
        self._total += exact

    def undo(self) -> None:
        """Forget the most recent :meth:`take` (an attempt that did not happen after all)."""
        self._total -= self._entries.pop()[1]


class TokenBucket:
    """A bucket of ``capacity`` tokens refilling at ``rate_per_s``; it starts full.

    Args:
        rate_per_s: tokens added per second of loop time.
        capacity: the most tokens the bucket holds.
        now_s: loop time at creation.
    """

    __slots__ = ("_level", "_updated_s", "capacity", "rate_per_s")

    def __init__(self, rate_per_s: float, capacity: float, now_s: float) -> None:
        self.rate_per_s = rate_per_s
        self.capacity = capacity
        self._level = capacity
        self._updated_s = now_s

    def __repr__(self) -> str:
        return (
            f"<TokenBucket rate_per_s={self.rate_per_s:g} capacity={self.capacity:g} "
            f"level={self._level:g}>"
        )

    def _refill(self, now_s: float) -> None:
        elapsed = now_s - self._updated_s
        if elapsed > 0:
            self._level = min(self.capacity, self._level + elapsed * self.rate_per_s)
            self._updated_s = now_s

    def shortfall_s(self, amount: float, now_s: float) -> float:
        """Seconds until ``amount`` tokens are available (0.0 if they are now)."""
        self._refill(now_s)
        missing = amount - self._level
        # Refilling in float steps can leave the level a hair below a whole
        # amount (2455.99999999999 of 2456). Waiting for that last ulp would be
        # a delay too small to move the clock, and a virtual loop would spin.
        if missing <= 1e-9 * max(1.0, amount):
            return 0.0
        return missing / self.rate_per_s

    def ready_at(self, amount: float, now_s: float) -> float:
        """Loop time at which ``amount`` tokens are available (``now_s`` if they are now)."""
        return now_s + self.shortfall_s(amount, now_s)

    def take(self, amount: float, now_s: float) -> None:
        """Spend ``amount`` tokens (call once :meth:`ready_at` returned ``now_s``)."""
        self._refill(now_s)
        self._level -= amount


class RateLimiter:
    """Waits, in loop time, until an attempt fits every limit of a :class:`RateLimit`.

    Args:
        limit: the limits to enforce (sliding windows, or buckets with ``burst_s``).
        now_s: loop time at creation (buckets start full then).
    """

    def __init__(self, limit: RateLimit, now_s: float) -> None:
        self.limit = limit
        self._requests = self._gate(limit.requests_per_minute, limit.requests_held, now_s)
        self._tokens = self._gate(limit.tokens_per_minute, limit.tokens_held, now_s)
        self._most_tokens = limit.tokens_held
        self._lock = asyncio.Lock()
        self._last_start_s = -math.inf  # start times never go backwards, whatever the clock

    def _gate(
        self, per_minute: float | None, held: float | None, now_s: float
    ) -> SlidingWindow | TokenBucket | None:
        if per_minute is None or held is None:
            return None
        if self.limit.burst_s is None:
            return SlidingWindow(held)
        return TokenBucket(float(per_minute) / WINDOW_S, held, now_s)

    def __repr__(self) -> str:
        return f"<RateLimiter requests={self._requests!r} tokens={self._tokens!r}>"

    def tokens_for(self, payload: Any) -> float:
        """Tokens one attempt on ``payload`` spends, checked.

        A function given as ``tokens_per_item`` must return a real number from
        0 to what one window (or bucket) holds: NaN would silently disable the
        limit (every comparison with it is false), infinity or a larger count
        could never be sent. The engine counts the error as the attempt's
        failure.

        Raises:
            ValueError: the estimate is NaN, infinite, negative or larger than
                a window (or bucket) holds, or the function raised (the cause
                is chained).
            TypeError: the estimate is not a real number (a bool, a str, a coroutine).
        """
        estimate = self.limit.tokens_per_item
        if not callable(estimate):
            return float(estimate)  # checked when the RateLimit was made
        most = self._most_tokens
        held_by = (
            "tokens_per_minute"
            if self.limit.burst_s is None
            else "the bucket's tokens_per_minute * burst_s / 60"
        )
        allowed = f"tokens per attempt; {held_by} is {most:g}"
        try:
            value = estimate(payload)
        except Exception as error:
            raise ValueError(
                f"tokens_per_item raised {type(error).__name__} for payload {show(payload)}: "
                f"{_message(error)}; it must return a number of tokens >= 0 and <= {most:g} "
                f"({held_by})"
            ) from error
        name = f"tokens_per_item for payload {show(payload)}"
        if inspect.iscoroutine(value):
            value.close()  # never awaited: close it, or it warns when collected
            raise TypeError(
                f"{name} returned a coroutine: it must be a plain function returning a "
                f"real number ({allowed}), not an async def"
            )
        return real(name, value, allowed, at_least=0, at_most=most)

    def _ready_at(self, tokens: float, now_s: float) -> float:
        ready = now_s
        if self._requests is not None:
            ready = self._requests.ready_at(1.0, now_s)
        if self._tokens is not None:
            ready = max(ready, self._tokens.ready_at(tokens, now_s))
        return ready

    async def acquire(self, payload: Any) -> None:
        """Wait until one attempt on ``payload`` may start, and count it as started.

        Raises:
            ValueError, TypeError: the payload's token estimate is bad (see
                :meth:`tokens_for`); nothing is counted then.
        """
        tokens = self.tokens_for(payload) if self._tokens is not None else 0.0
        loop = asyncio.get_running_loop()
        async with self._lock:
            reached = self._last_start_s  # or a deadline the loop woke us for
            while True:
                now = max(loop.time(), reached)
                ready = self._ready_at(tokens, now)
                if ready <= now:
                    break
                await _sleep_until(loop, ready)
                if loop.time() <= now:
                    # Woken without the clock moving (a clock coarser than the wait, or a
                    # virtual one that fires timers early): waiting again cannot get any
                    # closer, and would spin. The deadline has come, as far as the loop can say.
                    reached = ready
            self._last_start_s = now
            if self._requests is not None:
                self._requests.take(1.0, now)
            if self._tokens is not None and tokens > 0:
                self._tokens.take(tokens, now)


async def _sleep_until(loop: asyncio.AbstractEventLoop, when_s: float) -> None:
    """Sleep until loop time ``when_s`` exactly (``asyncio.sleep`` would add it to now)."""
    wake = loop.create_future()
    timer = loop.call_at(when_s, _wake, wake)
    try:
        await wake
    finally:
        timer.cancel()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _message(error: BaseException) -> str:
    """``str(error)``, cut short, or a placeholder when its ``__str__`` raises."""
    try:
        text = str(error)
    except Exception:
        return "<str() of the error raised>"
    return text if len(text) <= 200 else text[:200] + "..."
