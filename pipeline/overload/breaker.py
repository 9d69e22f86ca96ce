"""``CircuitBreaker``: stop calling a downstream that keeps failing (Resilience4j's, count-based).

Three states. **Closed**: every call goes through; the outcomes of the last
``window`` calls are kept, and once at least ``min_calls`` are in the window,
the breaker opens when the failed share reaches ``failure_rate`` (``>=``) or,
with ``slow_call_s`` set, when the share of calls that lasted at least
``slow_call_s`` seconds reaches ``slow_call_rate`` (judged separately; a slow
call may have succeeded or failed). **Open**: no call goes through; after
``open_s`` seconds it turns half-open by itself. **Half-open**: exactly
``half_open_calls`` probes go through; once all of them have ended, the same
two rates over the probes alone decide: open again (for ``open_s``) or closed,
with an empty window.

Where the references leave a choice:

- A call's outcome counts only in the state, and the spell of it, that let the
  call through: a call let through while closed that ends after the breaker
  opened is not recorded anywhere (its decision is already made).
- A call let through that never reached the handler (the engine was closed
  meanwhile, or a rate limit refused it) is given back: a probe slot is free
  again, nothing is recorded.
- The rates are compared exactly (``failures >= failure_rate x calls`` with the
  rate taken as the decimal number it prints as), so 10 failures in 20 calls
  opens a breaker at 0.5 whatever float rounding would say.

What an item does while the breaker refuses it is the engine's choice
(:mod:`pipeline.overload.guard`): its worker holds it and waits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from .._validate import integer, real

__all__ = ["CLOSED", "HALF_OPEN", "OPEN", "STATES", "BreakerState", "CircuitBreaker"]

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"
STATES: tuple[str, ...] = (CLOSED, OPEN, HALF_OPEN)
"""The breaker's states, in the order of Resilience4j's state gauge codes (0, 1, 2)."""

_MAX_CALLS = 10_000_000  # window and probes: a deque of outcomes; a typo must not fill memory
_MAX_OPEN_S = 86_400.0 * 366


@dataclass(frozen=True, kw_only=True)
class CircuitBreaker:
    """When to stop calling the handler, and how to try again (count-based).

    Args:
        failure_rate: share of failed calls in the window that opens the breaker
            (> 0 and <= 1; reached or passed: ``>=``).
        window: the last calls whose outcomes are judged (>= 1).
        min_calls: calls the window must hold before it is judged (1 to ``window``).
        open_s: seconds of loop time the breaker stays open (> 0).
        half_open_calls: probes let through when half-open (>= 1); all of them
            must end before the breaker decides.
        slow_call_s: seconds from which a call counts as slow (> 0), or None:
            no call is slow.
        slow_call_rate: share of slow calls that opens the breaker (> 0 and <= 1).

    Raises:
        ValueError: a value outside what is allowed (NaN, inf, a rate above 1,
            ``min_calls`` above ``window``); the message names the parameter,
            the value and the bounds.
        TypeError: a value of the wrong type (a ``bool`` is not a number).

    Example:
        >>> PipelineConfig(breaker=CircuitBreaker(failure_rate=0.5, window=100, open_s=60))
    """

    failure_rate: float = 0.5
    window: int = 100
    min_calls: int = 20
    open_s: float = 30.0
    half_open_calls: int = 5
    slow_call_s: float | None = None
    slow_call_rate: float = 1.0

    def __post_init__(self) -> None:
        share, calls = "a share of calls", "calls"
        values = {
            "failure_rate": real("failure_rate", self.failure_rate, share, above=0, at_most=1),
            "window": integer("window", self.window, "calls", at_least=1),
            "min_calls": integer("min_calls", self.min_calls, "calls", at_least=1),
            "open_s": real("open_s", self.open_s, "seconds", above=0, at_most=_MAX_OPEN_S),
            "half_open_calls": integer("half_open_calls", self.half_open_calls, calls, at_least=1),
            "slow_call_rate": real(
                "slow_call_rate", self.slow_call_rate, share, above=0, at_most=1
            ),
        }
        if self.slow_call_s is not None:
            values["slow_call_s"] = real(
                "slow_call_s", self.slow_call_s, "seconds, or None", above=0
            )
        for name in ("window", "half_open_calls"):
            if values[name] > _MAX_CALLS:
                raise ValueError(f"{name} must be <= {_MAX_CALLS:,} calls, got {values[name]}")
        if values["min_calls"] > values["window"]:
            raise ValueError(
                f"min_calls must be <= window ({values['window']} calls): the window never "
                f"holds more, got {values['min_calls']}"
            )
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def state(self, on_change: Callable[[str, float], None] | None = None) -> BreakerState:
        """A fresh breaker for one run, closed (the engine makes one at the start)."""
        return BreakerState(self, on_change)


def _exact(value: float) -> Fraction:
    return Fraction(repr(value))


class BreakerState:
    """One run's breaker under a :class:`CircuitBreaker`; the caller passes the clock's ``now``.

    No clock of its own and no asyncio: the engine passes ``loop.time()``, a test
    passes hand-computed times (which must not decrease). Open turns half-open
    at exactly ``opened + open_s``, whenever the next call of :meth:`advance`,
    :meth:`acquire` or :meth:`record` comes; ``on_change(state, at_s)`` hears
    every change with the time it happened.

    Memory: the outcomes of the last ``window`` calls (a bounded deque).

    Attributes:
        state: ``"closed"``, ``"open"`` or ``"half_open"``, as of the last call.
        refused: calls refused (:meth:`acquire` returned None with ``count``).
        generation: bumps at every change; a permit is the generation it was given in.
    """

    __slots__ = (
        "_calls",
        "_failed",
        "_half_open_calls",
        "_min_calls",
        "_on_change",
        "_open_s",
        "_open_total_s",
        "_opened_s",
        "_probes",
        "_rate",
        "_slow",
        "_slow_call_s",
        "_slow_rate",
        "_window",
        "generation",
        "refused",
        "state",
    )

    def __init__(
        self, breaker: CircuitBreaker, on_change: Callable[[str, float], None] | None = None
    ) -> None:
        self._rate = _exact(breaker.failure_rate)
        self._slow_rate = _exact(breaker.slow_call_rate)
        self._slow_call_s = breaker.slow_call_s
        self._window = breaker.window
        self._min_calls = breaker.min_calls
        self._open_s = breaker.open_s
        self._half_open_calls = breaker.half_open_calls
        self._on_change = on_change
        self._calls: deque[tuple[bool, bool]] = deque()  # (failed, slow), oldest first
        self._failed = 0  # failed calls in _calls (or among the probes, half-open)
        self._slow = 0
        self._probes = 0  # probes let through this half-open spell
        self._opened_s = 0.0
        self._open_total_s = 0.0  # open time of the spells that ended
        self.state = CLOSED
        self.generation = 0
        self.refused = 0

    @property
    def open_until_s(self) -> float | None:
        """When the current open spell ends (loop seconds), or None when not open."""
        return self._opened_s + self._open_s if self.state == OPEN else None

    def advance(self, now: float) -> None:
        """Turn half-open if the open spell has ended by ``now``."""
        if self.state == OPEN and now >= self._opened_s + self._open_s:
            self._enter(HALF_OPEN, self._opened_s + self._open_s)

    def acquire(self, now: float, *, count: bool = True) -> int | None:
        """Ask to make a call at ``now``: its permit (pass it to :meth:`record`), or None.

        Args:
            count: count a refusal in :attr:`refused` (False when asking again for
                a call already refused once).
        """
        self.advance(now)
        if self.state == CLOSED:
            return self.generation
        if self.state == HALF_OPEN and self._probes < self._half_open_calls:
            self._probes += 1
            return self.generation
        if count:
            self.refused += 1
        return None

    def release(self, permit: int) -> None:
        """Give back a permit whose call never reached the handler (nothing is recorded)."""
        if permit == self.generation and self.state == HALF_OPEN:
            self._probes -= 1

    def record(self, permit: int, now: float, *, failed: bool, duration_s: float) -> None:
        """Record a call that ended at ``now`` after ``duration_s`` seconds."""
        self.advance(now)
        if permit != self.generation:
            return  # let through in a state (or spell) that has since ended
        slow = self._slow_call_s is not None and duration_s >= self._slow_call_s
        if self.state == CLOSED:
            calls = self._calls
            if len(calls) == self._window:
                old_failed, old_slow = calls.popleft()
                self._failed -= old_failed
                self._slow -= old_slow
            calls.append((failed, slow))
            self._failed += failed
            self._slow += slow
            if len(calls) >= self._min_calls and self._trips(len(calls)):
                self._enter(OPEN, now)
        elif self.state == HALF_OPEN:
            calls = self._calls
            calls.append((failed, slow))
            self._failed += failed
            self._slow += slow
            if len(calls) == self._half_open_calls:
                self._enter(OPEN if self._trips(len(calls)) else CLOSED, now)

    def _trips(self, calls: int) -> bool:
        """Whether ``calls`` outcomes with the counts held reach either rate (exactly)."""
        rate = self._rate
        if self._failed * rate.denominator >= rate.numerator * calls:
            return True
        if self._slow_call_s is None:
            return False
        slow = self._slow_rate
        return self._slow * slow.denominator >= slow.numerator * calls

    def _enter(self, state: str, at_s: float) -> None:
        if self.state == OPEN:
            # Open ends only by turning half-open at opened + open_s: the spell
            # lasted open_s exactly (the difference of two loop times can round short).
            self._open_total_s += self._open_s
        if state == OPEN:
            self._opened_s = at_s
        self._calls.clear()  # closed starts empty; half-open counts its probes alone
        self._failed = 0
        self._slow = 0
        self._probes = 0
        self.state = state
        self.generation += 1
        if self._on_change is not None:
            self._on_change(state, at_s)

    def state_at(self, now: float) -> str:
        """The state at ``now`` (an open spell over by then is half-open), changing nothing."""
        if self.state == OPEN and now >= self._opened_s + self._open_s:
            return HALF_OPEN
        return self.state

    def open_time_s(self, now: float) -> float:
        """Seconds spent open from the start to ``now`` (open spells only), changing nothing."""
        if self.state != OPEN:
            return self._open_total_s
        return self._open_total_s + min(self._open_s, max(0.0, now - self._opened_s))

    def __repr__(self) -> str:
        return (
            f"<BreakerState {self.state} calls={len(self._calls)} failed={self._failed} "
            f"slow={self._slow} refused={self.refused}>"
        )
