"""Failures by chance: each attempt fails, each item is poisoned, or an attempt hangs.

:class:`IndependentFailures` (each attempt fails with probability ``p``),
:class:`PermanentFailures` (a share of items fails every attempt) and
:class:`Hangs` (an attempt hangs, then fails) draw from the run's failure
stream, in blocks (:mod:`.uniforms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._validate import real
from ....errors import PermanentError
from .model import AttemptFailures, Failure, FailureModel, SimulatedFailure, SimulatedHang
from .uniforms import BLOCK, Uniforms

__all__ = ["Hangs", "IndependentFailures", "PermanentFailures"]


class _BoundIndependent(AttemptFailures):
    __slots__ = ("_p", "_u")
    model_kind = "independent"

    def __init__(self, p: float, rng: np.random.Generator) -> None:
        self._p = p
        self._u = Uniforms(rng)

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
        self._u = Uniforms(rng)

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
