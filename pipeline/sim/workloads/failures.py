"""Failure models for simulated handlers.

A model is a frozen, validated value object with a ``repr`` that rebuilds it
(``IndependentFailures(p=0.1)``). Before a run the simulator binds it to that
run's failure stream -- ``model.bind(rng, n_items)`` -- and then calls the
bound object once per attempt, after drawing the attempt's service time::

    failure = bound.check(item_id, attempt, in_flight)

``None`` means the attempt succeeds after its service time. A :class:`Failure`
means it fails: if ``failure.hang_s`` is ``None`` the handler raises
``failure.error`` after its normal service time; otherwise the attempt hangs
for ``hang_s`` seconds instead (so a configured ``attempt_timeout_s`` can cut
it) and raises ``failure.error`` if it was not cut.

``check`` is on the hot path (100,000+ calls per run): random models pre-draw
uniforms in blocks of :data:`BLOCK` and keep them as a Python list, so a call
costs a list index and a comparison, not a numpy call.

Models: :class:`NoFailures`, :class:`IndependentFailures`,
:class:`PermanentFailures`, :class:`Hangs`, :class:`Overload`,
:class:`TokenQuota` and :class:`CombinedFailures` (also spelled ``a | b``; the
first failure wins).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._validate import integer, real
from ...errors import PermanentError, RateLimited
from ...ratelimit import SlidingWindow
from .distributions import generator

__all__ = [
    "BLOCK",
    "AttemptFailures",
    "CombinedFailures",
    "Failure",
    "FailureModel",
    "Hangs",
    "IndependentFailures",
    "NoFailures",
    "Overload",
    "PermanentFailures",
    "ScriptedFailures",
    "SimulatedFailure",
    "SimulatedHang",
    "TokenQuota",
]

BLOCK = 4096
"""Uniforms (or per-item decisions) drawn per numpy call by bound models."""


class SimulatedFailure(RuntimeError):
    """Raised by a simulated handler for an injected, retryable attempt failure."""


class SimulatedHang(SimulatedFailure):
    """Raised by a simulated handler after an injected hang that no timeout cut."""


@dataclass(frozen=True)
class Failure:
    """How one attempt fails.

    Attributes:
        error: the exception instance the attempt raises (a fresh one per attempt).
        hang_s: ``None`` to fail after the normal service time; otherwise the
            attempt hangs this many seconds first (> 0).
    """

    error: BaseException
    hang_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.error, BaseException):
            raise TypeError(f"error must be an exception instance, got {self.error!r}")
        if self.hang_s is not None:
            object.__setattr__(self, "hang_s", real("hang_s", self.hang_s, "seconds", above=0))


class AttemptFailures:
    """A failure model bound to one run's random stream (see :meth:`FailureModel.bind`).

    Attributes:
        model_kind: which built-in model this is, for the kernel's array replay
            (``"independent"``, ``"permanent"``, ``"scripted"``), or None for
            any other (the replay then leaves the run to the closures' path).
    """

    __slots__ = ()
    model_kind: str | None = None

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        """Decide attempt ``attempt`` (1-based) of item ``item_id`` (from 0).

        Args:
            item_id: the item's arrival index, from 0.
            attempt: the attempt number, from 1.
            in_flight: attempts in flight at the downstream, this one included.

        Returns:
            ``None`` if the attempt succeeds, else a :class:`Failure`.
        """
        return None

    def cancel(self, item_id: int, attempt: int) -> None:
        """Forget the last :meth:`check`, which returned ``None``: the attempt did not run.

        :class:`CombinedFailures` calls it when another model failed the
        attempt, so a stateful model (:class:`TokenQuota`) charges only the
        attempts that really start. Stateless models ignore it.
        """


class _Uniforms:
    """Block-buffered uniforms on [0, 1); ``next()`` costs a list index."""

    __slots__ = ("_buf", "_i", "_rng")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._buf: list[float] = []
        self._i = 0

    def next(self) -> float:
        i = self._i
        if i >= len(self._buf):
            self._buf = self._rng.random(BLOCK).tolist()
            i = 0
        self._i = i + 1
        return self._buf[i]

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` uniforms, exactly those ``count`` calls of :meth:`next` return."""
        rest = self._buf[self._i :]
        if len(rest) >= count:
            self._i += count
            return np.array(rest[:count], dtype=np.float64)
        blocks = -(-(count - len(rest)) // BLOCK)
        fresh = self._rng.random(blocks * BLOCK)  # the same numbers as `blocks` calls of BLOCK
        used = count - len(rest)
        self._buf, self._i = fresh[-BLOCK:].tolist(), BLOCK - (len(fresh) - used)
        return np.concatenate([np.array(rest, dtype=np.float64), fresh[:used]])


class FailureModel:
    """Base class of failure models: frozen, validated, combinable with ``|``."""

    __slots__ = ()

    def bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        """Bind to one run: ``rng`` is the run's failure stream, ``n_items`` the expected items.

        ``n_items`` only sizes up-front draws; items beyond it are still handled.

        Raises:
            TypeError: ``rng`` is not a ``numpy.random.Generator``.
            ValueError: ``n_items`` is negative.
        """
        return self._bind(generator(rng), integer("n_items", n_items, "items in the run"))

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        raise NotImplementedError

    def __or__(self, other: object) -> CombinedFailures:
        if not isinstance(other, FailureModel):
            return NotImplemented
        return CombinedFailures(self, other)


# -- the models --------------------------------------------------------------------------


@dataclass(frozen=True)
class NoFailures(FailureModel):
    """Every attempt succeeds."""

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return AttemptFailures()


class _BoundIndependent(AttemptFailures):
    __slots__ = ("_p", "_u")
    model_kind = "independent"

    def __init__(self, p: float, rng: np.random.Generator) -> None:
        self._p = p
        self._u = _Uniforms(rng)

    def draws(self, count: int) -> np.ndarray:
        """The uniforms of the next ``count`` checks (an attempt fails when one is < ``p``)."""
        return self._u.take(count)

    def failing(self, count: int) -> np.ndarray:
        """Whether each of the next ``count`` checks fails its attempt (bool), drawn at once.

        The same outcomes, and the same stream left behind, as ``count`` calls of
        :meth:`check`, without building their failures (the kernel's chain path).
        """
        return self._u.take(count) < self._p

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        if self._u.next() < self._p:
            return self.failure(item_id, attempt)
        return None

    def failure(self, item_id: int, attempt: int) -> Failure:
        """The failure of attempt ``attempt`` of ``item_id`` when its draw fails it.

        The kernel's compiled chain path draws the outcomes up front (:meth:`check`
        in attempt order) and builds the errors of its dead letters here after the run.
        """
        return Failure(SimulatedFailure(f"simulated failure (item {item_id}, attempt {attempt})"))


@dataclass(frozen=True)
class IndependentFailures(FailureModel):
    """Each attempt fails independently with probability ``p`` (:class:`SimulatedFailure`).

    With a budget of ``k`` attempts an item is dead-lettered with probability
    ``p**k`` (see :func:`pipeline.sim.analysis.theory.dead_letter_rate`).
    """

    p: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "p",
            real("p", self.p, "failure probability per attempt", at_least=0, at_most=1),
        )

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return _BoundIndependent(self.p, rng)


class _BoundPermanent(AttemptFailures):
    __slots__ = ("_bad", "_fraction", "_rng")
    model_kind = "permanent"

    def __init__(self, fraction: float, rng: np.random.Generator, n_items: int) -> None:
        self._fraction = fraction
        self._rng = rng
        self._bad: list[bool] = []
        self._extend(n_items)

    def _extend(self, length: int) -> None:
        # Whole blocks, in item order, so an item's fate does not depend on call order.
        while len(self._bad) < length:
            self._bad.extend((self._rng.random(BLOCK) < self._fraction).tolist())

    def poisoned(self, n: int) -> np.ndarray:
        """Whether each of items ``0 .. n - 1`` fails every attempt (bool array)."""
        self._extend(n)
        return np.array(self._bad[:n], dtype=bool)

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        if item_id >= len(self._bad):
            self._extend(item_id + 1)
        elif item_id < 0:
            raise ValueError(f"item_id must be >= 0 (arrival index), got {item_id}")
        if self._bad[item_id]:
            return Failure(PermanentError(f"simulated permanent failure (item {item_id})"))
        return None


@dataclass(frozen=True)
class PermanentFailures(FailureModel):
    """A ``fraction`` of items, chosen up front, fail every attempt with ``PermanentError``.

    Each item is poisoned independently with probability ``fraction`` (so the
    poisoned count is binomial, not exactly ``fraction * n_items``); the
    default retry policy dead-letters such an item after its first attempt.
    """

    fraction: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "fraction",
            real("fraction", self.fraction, "share of items", at_least=0, at_most=1),
        )

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return _BoundPermanent(self.fraction, rng, n_items)


class _BoundHangs(AttemptFailures):
    __slots__ = ("_hang_s", "_p", "_u")

    def __init__(self, p: float, hang_s: float, rng: np.random.Generator) -> None:
        self._p = p
        self._hang_s = hang_s
        self._u = _Uniforms(rng)

    def draws(self, count: int) -> np.ndarray:
        """The uniforms of the next ``count`` checks (an attempt fails when one is < ``p``)."""
        return self._u.take(count)

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        if self._u.next() < self._p:
            error = SimulatedHang(
                f"simulated hang of {self._hang_s:g} s (item {item_id}, attempt {attempt})"
            )
            return Failure(error, self._hang_s)
        return None


@dataclass(frozen=True)
class Hangs(FailureModel):
    """Each attempt hangs with probability ``p`` for ``hang_s`` seconds, then fails.

    Without an ``attempt_timeout_s`` shorter than ``hang_s`` the worker is
    stuck for the whole hang: the classic way one slow dependency starves a pool.
    """

    p: float
    hang_s: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "p", real("p", self.p, "hang probability per attempt", at_least=0, at_most=1)
        )
        object.__setattr__(self, "hang_s", real("hang_s", self.hang_s, "seconds", above=0))

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return _BoundHangs(self.p, self.hang_s, rng)


class _BoundOverload(AttemptFailures):
    __slots__ = ("_limit", "_p", "_refuse_s", "_u")

    def __init__(
        self, limit: int, p: float, refuse_s: float | None, rng: np.random.Generator
    ) -> None:
        self._limit = limit
        self._p = p
        self._refuse_s = refuse_s
        self._u = _Uniforms(rng)

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


class _BoundScripted(AttemptFailures):
    __slots__ = ("_fails", "_permanent")
    model_kind = "scripted"

    def __init__(self, fails: tuple[int, ...], permanent: frozenset[int]) -> None:
        self._fails = fails
        self._permanent = permanent

    @property
    def fails(self) -> tuple[int, ...]:
        """Failing attempts of each item (``ScriptedFailures.fails``)."""
        return self._fails

    @property
    def permanent(self) -> frozenset[int]:
        """Items whose last scripted failure is a ``PermanentError``."""
        return self._permanent

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        fails = self._fails
        if 0 <= item_id < len(fails) and attempt <= fails[item_id]:
            message = (
                f"scripted failure (item {item_id}, attempt {attempt} of {fails[item_id]} failing)"
            )
            if attempt == fails[item_id] and item_id in self._permanent:
                return Failure(PermanentError(message))
            return Failure(SimulatedFailure(message))
        return None


@dataclass(frozen=True, repr=False)
class ScriptedFailures(FailureModel):
    """Item *i* fails its first ``fails[i]`` attempts (:class:`SimulatedFailure`), then succeeds.

    Deterministic: the failure stream is not used. Items beyond ``len(fails)``
    never fail. With ``max_attempts`` of *k*, item *i* makes
    ``min(fails[i] + 1, k)`` attempts and is dead-lettered when
    ``fails[i] >= k``. For the item ids in ``permanent`` the last scripted
    failure is a :class:`~pipeline.PermanentError` instead, so the item is
    dead-lettered at once, as an invalid item is in a live run.
    """

    fails: tuple[int, ...]
    permanent: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if isinstance(self.fails, str | bytes) or not isinstance(self.fails, Sequence | np.ndarray):
            raise TypeError(
                f"fails must be a sequence of integers >= 0 (failing attempts per item), "
                f"got {self.fails!r}"
            )
        fails = tuple(
            integer(f"fails[{i}]", n, "failing attempts before success")
            for i, n in enumerate(self.fails)
        )
        object.__setattr__(self, "fails", fails)
        permanent = frozenset(self.permanent)
        for item_id in sorted(permanent, key=repr):
            if not (isinstance(item_id, int) and 0 <= item_id < len(fails) and fails[item_id]):
                raise ValueError(
                    f"permanent must hold ids of items with fails > 0 (0 to {len(fails) - 1}), "
                    f"got {item_id!r}"
                )
        object.__setattr__(self, "permanent", permanent)

    def __repr__(self) -> str:
        extra = f", permanent={sorted(self.permanent)!r}" if self.permanent else ""
        if len(self.fails) <= 10:
            return f"ScriptedFailures(fails={self.fails!r}{extra})"
        return (
            f"ScriptedFailures(<{len(self.fails)} items, {sum(self.fails)} failing attempts, "
            f"{len(self.permanent)} permanent>)"
        )

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        return _BoundScripted(self.fails, self.permanent)


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


class _BoundCombined(AttemptFailures):
    __slots__ = ("_parts",)

    def __init__(self, parts: tuple[AttemptFailures, ...]) -> None:
        self._parts = parts

    @property
    def parts(self) -> tuple[AttemptFailures, ...]:
        """The bound models, in order (the kernel's replay evaluates each per attempt)."""
        return self._parts

    def check(self, item_id: int, attempt: int, in_flight: int) -> Failure | None:
        results = [part.check(item_id, attempt, in_flight) for part in self._parts]
        for failure in results:
            if failure is not None:
                for part, other in zip(self._parts, results, strict=True):
                    if other is None:
                        part.cancel(item_id, attempt)
                return failure
        return None


class CombinedFailures(FailureModel):
    """Several models at once; the first one (in order) that fails an attempt wins.

    Every model sees every attempt, each on its own child stream
    (``rng.spawn``), so adding a model does not change the draws of the others
    (common random numbers across what-if runs). When one fails an attempt,
    the models that let it through are told it never ran
    (:meth:`AttemptFailures.cancel`). ``a | b | c`` flattens to
    ``CombinedFailures(a, b, c)``.
    """

    __slots__ = ("models",)

    def __init__(self, *models: FailureModel) -> None:
        flat: list[FailureModel] = []
        for i, model in enumerate(models):
            if not isinstance(model, FailureModel):
                raise TypeError(
                    f"models[{i}] must be a FailureModel (e.g. IndependentFailures(p=0.1)), "
                    f"got {model!r}"
                )
            flat.extend(model.models if isinstance(model, CombinedFailures) else (model,))
        object.__setattr__(self, "models", tuple(flat))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __repr__(self) -> str:
        return f"CombinedFailures({', '.join(map(repr, self.models))})"

    def __reduce__(self) -> tuple[type[CombinedFailures], tuple[FailureModel, ...]]:
        # rebuild through __init__: the frozen __setattr__ blocks pickle's default
        # (sweep(processes=...) pickles scenarios)
        return (CombinedFailures, self.models)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CombinedFailures):
            return NotImplemented
        return self.models == other.models

    def __hash__(self) -> int:
        return hash(self.models)

    def _bind(self, rng: np.random.Generator, n_items: int) -> AttemptFailures:
        children = rng.spawn(len(self.models))
        return _BoundCombined(
            tuple(m._bind(r, n_items) for m, r in zip(self.models, children, strict=True))
        )
