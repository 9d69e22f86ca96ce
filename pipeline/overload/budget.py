"""``RetryBudget``: at most a share of first attempts may be retried (Finagle's budget).

Retries are how an overloaded downstream is kept overloaded: at 100% failure,
``max_attempts=4`` multiplies the load by exactly 4. A budget caps the extra
load whatever the failure rate: at each retry, counting it, the retries in
``(t - window_s, t]`` are at most ``ratio`` x the first attempts in that
window plus ``min_retries_per_s`` x ``window_s`` (a floor, so that a quiet
pipeline still retries). This is Finagle's ``RetryBudget`` (and Linkerd's):
20% of requests plus 10 retries a second over 10 s by default.

The rule, exactly, as the engine applies it:

- A *first attempt* is counted at the loop time its attempt starts (an item
  refused at admission, for a bad priority key or deadline, makes none).
- The budget is asked when a failed attempt would schedule a retry (a
  retryable error with attempts left), at the loop time of the failure. If
  the retry fits, it is counted at that time and scheduled; if not, it is not
  made: the item is dead-lettered with reason ``"retry_budget"`` and its
  ``attempts`` are the calls made.
- Only time moves the window: a retry allowed is never taken back.

The arithmetic is exact: the ratio and the floor are taken as the decimal
numbers they print as (``0.1`` is 1/10, not the float just above it), and the
comparison is made in integers, so a boundary case (exactly 10% of 30 first
attempts is 3 retries) does not depend on float rounding.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction

from .._validate import real

__all__ = ["BudgetState", "RetryBudget"]

_MAX_WINDOW_S = 86_400.0 * 366  # a year: a window longer than that is a typo


@dataclass(frozen=True, kw_only=True)
class RetryBudget:
    """How many retries a pipeline may make, relative to its first attempts.

    Args:
        ratio: retries allowed per first attempt in the window (>= 0;
            0.2: one retry for every five first attempts).
        min_retries_per_s: retries allowed per second whatever the traffic
            (>= 0); the floor is ``min_retries_per_s * window_s`` retries
            per window.
        window_s: seconds of loop time the counts cover (> 0, at most a year).

    Raises:
        ValueError: a value outside what is allowed (NaN, inf, negative, a zero
            window); the message names the parameter, the value and the bounds.
        TypeError: not a real number (a ``bool`` is not).

    Example:
        >>> PipelineConfig(max_attempts=4, retry_budget=RetryBudget(ratio=0.1))
    """

    ratio: float = 0.2
    min_retries_per_s: float = 10.0
    window_s: float = 10.0

    def __post_init__(self) -> None:
        # Stored as floats (numpy, Fraction and Decimal numbers are accepted): loop times
        # are floats, and float - Decimal would raise in the engine.
        checked = {
            "ratio": real("ratio", self.ratio, "retries per first attempt", at_least=0),
            "min_retries_per_s": real(
                "min_retries_per_s", self.min_retries_per_s, "retries per second", at_least=0
            ),
            "window_s": real("window_s", self.window_s, "seconds", above=0, at_most=_MAX_WINDOW_S),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def state(self) -> BudgetState:
        """A fresh count for one run (the engine makes one at the start)."""
        return BudgetState(self)


class BudgetState:
    """One run's counts under a :class:`RetryBudget`; the caller passes the clock's ``now``.

    No clock of its own and no asyncio: the engine passes ``loop.time()``, a
    test passes hand-computed times (which must not decrease).

    Memory: two deques of timestamps, trimmed to the window as time passes. The
    first attempts held are those of the last ``window_s`` seconds (the arrival
    rate times the window); the retries held are at most what the window allows
    (``ratio`` x those plus the floor). Neither grows with the length of the run.

    Attributes:
        denied: retries refused since the start.
        allowed: retries allowed since the start.
    """

    __slots__ = ("_firsts", "_floor", "_ratio", "_retries", "_window_s", "allowed", "denied")

    def __init__(self, budget: RetryBudget) -> None:
        self._window_s = budget.window_s
        # ratio = p/q, floor = a/b as written: retries + 1 <= ratio * firsts + floor
        # becomes (retries + 1) * q * b <= p * b * firsts + a * q, exactly, in integers.
        ratio = Fraction(repr(budget.ratio))
        floor = Fraction(repr(budget.min_retries_per_s)) * Fraction(repr(budget.window_s))
        self._ratio = ratio
        self._floor = floor
        self._firsts: deque[float] = deque()
        self._retries: deque[float] = deque()
        self.denied = 0
        self.allowed = 0

    def first_attempt(self, now: float) -> None:
        """Count a first attempt starting at ``now``."""
        self._trim(now)  # also here: a run with no failures must not keep every start
        self._firsts.append(now)

    def try_retry(self, now: float) -> bool:
        """Count a retry at ``now`` if it fits the budget; False (and count it denied) if not."""
        self._trim(now)
        if self._fits(len(self._retries) + 1, len(self._firsts)):
            self._retries.append(now)
            self.allowed += 1
            return True
        self.denied += 1
        return False

    def _fits(self, retries: int, firsts: int) -> bool:
        ratio, floor = self._ratio, self._floor
        q, b = ratio.denominator, floor.denominator
        return retries * q * b <= ratio.numerator * b * firsts + floor.numerator * q

    def _trim(self, now: float) -> None:
        """Forget what fell out of ``(now - window_s, now]``."""
        edge = now - self._window_s
        for stamps in (self._firsts, self._retries):
            while stamps and stamps[0] <= edge:
                stamps.popleft()

    def window(self, now: float) -> tuple[int, int]:
        """(first attempts, retries) in ``(now - window_s, now]``."""
        self._trim(now)
        return len(self._firsts), len(self._retries)

    def __repr__(self) -> str:
        return (
            f"<BudgetState firsts={len(self._firsts)} retries={len(self._retries)} "
            f"allowed={self.allowed} denied={self.denied}>"
        )
