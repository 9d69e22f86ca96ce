"""Token-bucket rate limiting in loop time, for requests and tokens per minute.

Workers call :meth:`RateLimiter.acquire` before each attempt. Waiters are
served in arrival order (a lock is held while one waits), so a large item is
not starved by a stream of small ones.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from ._validate import real, show
from .config import RateLimit

__all__ = ["RateLimiter", "TokenBucket"]


class TokenBucket:
    """A bucket of ``capacity`` tokens refilling at ``rate_per_s``.

    Args:
        rate_per_s: tokens added per second of loop time.
        capacity: the most tokens the bucket holds; it starts full.
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

    def take(self, amount: float, now_s: float) -> None:
        """Spend ``amount`` tokens (call after :meth:`shortfall_s` returned 0)."""
        self._refill(now_s)
        self._level -= amount


class RateLimiter:
    """Waits, in loop time, until a request and its tokens fit both buckets.

    Args:
        limit: the limits to enforce.
        now_s: loop time at creation (buckets start full).
    """

    def __init__(self, limit: RateLimit, now_s: float) -> None:
        self.limit = limit
        self._requests = (
            None
            if limit.requests_per_minute is None
            else TokenBucket(limit.requests_per_minute / 60.0, limit.requests_per_minute, now_s)
        )
        self._tokens = (
            None
            if limit.tokens_per_minute is None
            else TokenBucket(limit.tokens_per_minute / 60.0, limit.tokens_per_minute, now_s)
        )
        self._lock = asyncio.Lock()

    def tokens_for(self, payload: Any) -> float:
        """Tokens one attempt on ``payload`` spends, checked.

        A function given as ``tokens_per_item`` must return a real number from
        0 to ``tokens_per_minute``: NaN would silently disable the limit (every
        comparison with it is false), infinity or a larger count could never be
        sent. The engine counts the error as the attempt's failure.

        Raises:
            ValueError: the estimate is NaN, infinite, negative or larger than
                one minute's allowance, or the function raised (the cause is chained).
            TypeError: the estimate is not a real number (a bool, a str, a coroutine).
        """
        estimate = self.limit.tokens_per_item
        if not callable(estimate):
            return float(estimate)  # checked when the RateLimit was made
        most = self.limit.tokens_per_minute
        allowed = f"tokens per attempt; tokens_per_minute is {most:g}"
        try:
            value = estimate(payload)
        except Exception as error:
            raise ValueError(
                f"tokens_per_item raised {type(error).__name__} for payload {show(payload)}: "
                f"{_message(error)}; it must return a number of tokens >= 0 and <= {most:g} "
                "(tokens_per_minute)"
            ) from error
        name = f"tokens_per_item for payload {show(payload)}"
        if inspect.iscoroutine(value):
            value.close()  # never awaited: close it, or it warns when collected
            raise TypeError(
                f"{name} returned a coroutine: it must be a plain function returning a "
                f"real number ({allowed}), not an async def"
            )
        return real(name, value, allowed, at_least=0, at_most=most)

    async def acquire(self, payload: Any) -> None:
        """Wait until one attempt on ``payload`` may start."""
        tokens = self.tokens_for(payload) if self._tokens is not None else 0.0
        loop = asyncio.get_running_loop()
        async with self._lock:
            while True:
                now = loop.time()
                wait = 0.0
                if self._requests is not None:
                    wait = self._requests.shortfall_s(1.0, now)
                if self._tokens is not None:
                    wait = max(wait, self._tokens.shortfall_s(tokens, now))
                if wait <= 0.0 or now + wait == now:
                    break
                await asyncio.sleep(wait)
            if self._requests is not None:
                self._requests.take(1.0, now)
            if self._tokens is not None:
                self._tokens.take(tokens, now)


def _message(error: BaseException) -> str:
    """``str(error)``, cut short, or a placeholder when its ``__str__`` raises."""
    try:
        text = str(error)
    except Exception:
        return "<str() of the error raised>"
    return text if len(text) <= 200 else text[:200] + "..."
