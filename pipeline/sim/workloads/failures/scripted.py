"""Scripted failures: item *i* fails its first ``fails[i]`` attempts, as a trace recorded.

Deterministic (the failure stream is not used): a replayed trace's ``fails``
column, or a test's exact script.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...._validate import integer
from ....errors import PermanentError
from .model import AttemptFailures, Failure, FailureModel, SimulatedFailure

__all__ = ["ScriptedFailures"]


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
