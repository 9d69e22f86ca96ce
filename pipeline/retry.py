"""Retry policy: how long to wait before the next attempt, and which errors earn one.

The backoff is measured in loop time (``loop.time()``), so an hour-long
backoff costs nothing in virtual time. Jitter draws only from the random
generator handed in, never from module-level state.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass
from typing import Literal

from .errors import PermanentError

__all__ = ["Backoff", "RetryPolicy"]


def _check_number(name: str, value: object, *, minimum: float, allowed: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number ({allowed}), got {value!r}")
    if not math.isfinite(value) or value < minimum:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """Delay before retry number *n*, in seconds of loop time.

    ``kind="constant"`` waits ``base_s`` every time. ``kind="exponential"`` waits
    ``base_s * factor**(n - 1)``, capped at ``cap_s``. With ``jitter=True`` the
    delay is drawn uniformly from ``[0, delay]`` ("full jitter"), which spreads
    out a crowd of items that failed together.

    Example:
        >>> Backoff(kind="exponential", base_s=0.5, factor=2.0, cap_s=10.0).delay(3)
        2.0
    """

    kind: Literal["constant", "exponential"] = "exponential"
    base_s: float = 0.1
    factor: float = 2.0
    cap_s: float = 30.0
    jitter: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("constant", "exponential"):
            raise ValueError(f"backoff kind must be 'constant' or 'exponential', got {self.kind!r}")
        _check_number("backoff base_s", self.base_s, minimum=0.0, allowed=">= 0 seconds")
        _check_number("backoff factor", self.factor, minimum=1.0, allowed=">= 1")
        _check_number("backoff cap_s", self.cap_s, minimum=0.0, allowed=">= 0 seconds")
        if not isinstance(self.jitter, bool):
            raise TypeError(f"backoff jitter must be True or False, got {self.jitter!r}")

    @classmethod
    def constant(cls, delay_s: float, *, jitter: bool = False) -> Backoff:
        """The same delay before every retry."""
        return cls(kind="constant", base_s=delay_s, cap_s=max(delay_s, 0.0), jitter=jitter)

    @classmethod
    def none(cls) -> Backoff:
        """Retry at once."""
        return cls(kind="constant", base_s=0.0, cap_s=0.0)

    def delay(self, failed_attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after attempt number ``failed_attempt`` (1-based) failed."""
        if self.kind == "constant":
            delay = self.base_s
        else:
            # Cap the exponent first: factor**1000 would overflow a float.
            exponent = min(failed_attempt - 1, 1023)
            try:
                delay = min(self.cap_s, self.base_s * self.factor**exponent)
            except OverflowError:
                delay = self.cap_s
        if self.jitter and delay > 0.0:
            if rng is None:
                raise ValueError("backoff with jitter needs a random generator (rng)")
            delay = rng.uniform(0.0, delay)
        return delay


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Which errors earn another attempt.

    An error is retried when it is an instance of one of ``retry_on`` and of
    none of ``give_up_on``. A cancellation of the worker (drain timeout, the
    run cancelled) never reaches the policy; a ``CancelledError`` that the
    handler raises itself is a failed attempt, retried by default like any
    ``Exception``.
    """

    retry_on: tuple[type[BaseException], ...] = (Exception, asyncio.CancelledError)
    give_up_on: tuple[type[BaseException], ...] = (PermanentError,)

    def __post_init__(self) -> None:
        for name in ("retry_on", "give_up_on"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(
                isinstance(t, type) and issubclass(t, BaseException) for t in value
            ):
                raise TypeError(f"{name} must be a tuple of exception classes, got {value!r}")

    def is_retryable(self, error: BaseException) -> bool:
        """True when ``error`` should be retried (budget permitting)."""
        return isinstance(error, self.retry_on) and not isinstance(error, self.give_up_on)
