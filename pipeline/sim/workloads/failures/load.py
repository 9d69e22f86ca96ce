"""Failures that depend on the load: a downstream's refusals past a limit or a quota.

:class:`Overload` refuses attempts (``RateLimited``, as HTTP 429) while more than
``limit`` are in flight; :class:`TokenQuota` refuses them past a provider's
tokens-per-minute quota, counted over a sliding minute of loop time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...._validate import integer, real
from ....errors import RateLimited
from ....ratelimit import SlidingWindow
from .model import AttemptFailures, Failure, FailureModel
from .uniforms import Uniforms

__all__ = ["Overload", "TokenQuota"]


class _BoundOverload(AttemptFailures):
    __slots__ = ("_limit", "_p", "_refuse_s", "_u")

    def __init__(
        self, limit: int, p: float, refuse_s: float | None, rng: np.random.Generator
    ) -> None:
        self._limit = limit
        self._p = p
        self._refuse_s = refuse_s
        self._u = Uniforms(rng)

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        if in_flight > self._limit and (self._p >= 1.0 or self._u.next() < self._p):
            return Failure(
                RateLimited(
                    f"simulated 429: {in_flight} attempts in flight, limit {self._limit} "
                    f"(item {item_id}, attempt {attempt})"
                ),
                self._refuse_s,
            )
        return None


@dataclass(frozen=True)
class Overload(FailureModel):
    """A downstream that answers ``RateLimited`` (like HTTP 429) when overloaded.

    An attempt made while more than ``limit`` attempts are in flight
    (``in_flight > limit``, this one included) is refused with probability
    ``p``; at or below the limit it always succeeds. Uniforms are drawn only
    above the limit and only when ``p < 1``.

    With ``refuse_s=None`` a refusal comes after the attempt's full service
    time (a server that works, then gives up); with a number it comes after
    that many seconds instead, as a real 429 does: quickly.
    """

    limit: int
    p: float = 1.0
    refuse_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "limit", integer("limit", self.limit, "attempts in flight", at_least=1)
        )
        object.__setattr__(
            self,
            "p",
            real("p", self.p, "refusal probability above limit", at_least=0, at_most=1),
        )
        if self.refuse_s is not None:
            object.__setattr__(
                self, "refuse_s", real("refuse_s", self.refuse_s, "seconds", above=0)
            )

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return _BoundOverload(self.limit, self.p, self.refuse_s, rng)


class _BoundTokenQuota(AttemptFailures):
    __slots__ = ("_refuse_s", "_tokens", "_window")

    def __init__(self, limit: float, tokens: tuple[float, ...], refuse_s: float | None) -> None:
        self._tokens = tokens
        self._refuse_s = refuse_s
        # The same window, counted the same way (exactly), as a client's RateLimit.
        self._window = SlidingWindow(limit)

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        if not 0 <= item_id < len(self._tokens):
            raise ValueError(
                f"item_id must be 0 to {len(self._tokens) - 1} (TokenQuota has token counts "
                f"for {len(self._tokens)} items), got {item_id}"
            )
        now = asyncio.get_running_loop().time()
        window = self._window
        cost = self._tokens[item_id]
        if not window.fits(cost, now):
            return Failure(
                RateLimited(
                    f"simulated 429: {window.used:,.0f} tokens started in the last minute "
                    f"+ {cost:,.0f} > {window.limit:,.0f} (item {item_id}, attempt {attempt})"
                ),
                self._refuse_s,
            )
        window.take(cost, now)
        return None

    def cancel(self, item_id: int, attempt: int) -> None:
        self._window.undo()


@dataclass(frozen=True, repr=False)
class TokenQuota(FailureModel):
    """A provider's tokens-per-minute quota: refuses with ``RateLimited`` past it.

    Attempt *n* of item *i* costs ``tokens[i]`` tokens. It is refused when the
    tokens of the attempts started in the last 60 s of loop time, plus its
    own, exceed ``tokens_per_minute`` (a sliding window, as providers count,
    summed exactly; a client ``RateLimit`` with the same limit is never refused);
    refused attempts cost nothing, and neither do attempts another model in a
    combination refused. ``refuse_s`` is as for :class:`Overload`: seconds
    until the refusal arrives, or None for the attempt's full service time.

    Deterministic (the failure stream is not used). ``check`` reads the
    running loop's clock, so it must be called from inside the simulation.

    Example:
        >>> provider = Overload(limit=24, refuse_s=0.2) | TokenQuota(400_000, tokens)
    """

    tokens_per_minute: float
    tokens: tuple[float, ...]
    refuse_s: float | None = 0.2

    def __post_init__(self) -> None:
        limit = real("tokens_per_minute", self.tokens_per_minute, "tokens", above=0)
        object.__setattr__(self, "tokens_per_minute", limit)
        if isinstance(self.tokens, str | bytes) or not isinstance(
            self.tokens, Sequence | np.ndarray
        ):
            raise TypeError(
                f"tokens must be a sequence of token counts, one per item, got {self.tokens!r}"
            )
        tokens = tuple(
            real(f"tokens[{i}]", t, "tokens", at_least=0, at_most=limit)
            for i, t in enumerate(self.tokens)
        )
        object.__setattr__(self, "tokens", tokens)
        if self.refuse_s is not None:
            object.__setattr__(
                self, "refuse_s", real("refuse_s", self.refuse_s, "seconds", above=0)
            )

    def __repr__(self) -> str:
        shown = (
            repr(self.tokens)
            if len(self.tokens) <= 10
            else f"<{len(self.tokens)} items, {sum(self.tokens):,.0f} tokens>"
        )
        return (
            f"TokenQuota(tokens_per_minute={self.tokens_per_minute!r}, tokens={shown}, "
            f"refuse_s={self.refuse_s!r})"
        )

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return _BoundTokenQuota(self.tokens_per_minute, self.tokens, self.refuse_s)
