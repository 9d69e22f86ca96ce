"""Retry policy: how long to wait before the next attempt, and which errors earn one.

The backoff is measured in loop time (``loop.time()``), so an hour-long
backoff costs nothing in virtual time. Jitter draws only from the random
generator handed in, never from module-level state.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Literal

from ._validate import real
from .errors import PermanentError

__all__ = ["Backoff", "RetryPolicy", "requested_delay"]


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
        real("backoff base_s", self.base_s, "seconds", at_least=0)
        real("backoff factor", self.factor, "growth per retry", at_least=1)
        real("backoff cap_s", self.cap_s, "seconds", at_least=0)
        if not isinstance(self.jitter, bool):
            raise TypeError(f"backoff jitter must be True or False, got {self.jitter!r}")

    @classmethod
    def constant(cls, delay_s: float, *, jitter: bool = False) -> Backoff:
        """The same delay before every retry."""
        # base_s is checked first, so a bad delay_s is reported under that name.
        return cls(kind="constant", base_s=delay_s, cap_s=delay_s, jitter=jitter)

    @classmethod
    def none(cls) -> Backoff:
        """Retry at once."""
        return cls(kind="constant", base_s=0.0, cap_s=0.0)

    def delay(self, failed_attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after attempt number ``failed_attempt`` (1-based) failed."""
        if self.kind == "constant":
            delay = float(self.base_s)
        else:
            # In floats, with the exponent capped: an int factor would otherwise
            # build a huge integer, and factor**1000 overflows a float.
            exponent = min(failed_attempt - 1, 1023)
            base, cap = float(self.base_s), float(self.cap_s)
            try:
                delay = min(cap, base * float(self.factor) ** exponent)
            except OverflowError:
                delay = cap if base > 0 else 0.0
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


def requested_delay(error: BaseException) -> float | None:
    """Seconds the failed attempt's error asks to wait before the next one, or None.

    An error asks by carrying a ``retry_after_s`` attribute (as
    :class:`~pipeline.errors.RetryLater` does): any real number of seconds >= 0
    that fits a float (``int``, ``float``, numpy numbers, ``Decimal``,
    ``Fraction``), by the rule :class:`~pipeline.errors.RetryLater` checks at
    construction. Anything else there (None, NaN, infinity, a negative number,
    ``10**400``, a ``bool``, a string, a property that raises) is no request,
    and the backoff alone decides: this runs while the engine records a
    failure, where nothing may raise.
    """
    try:
        value = getattr(error, "retry_after_s", None)
        if value is None:
            return None
        return real("retry_after_s", value, "seconds", at_least=0)
    except Exception:  # not a usable number, or a hostile one: no request
        return None
