"""Flat, frozen records a run hands back: errors, dead letters, results, the report.

Each one drops straight into pandas (``pd.DataFrame(map(dataclasses.asdict, ...))``)
and keeps the payload exactly as it was given, audit fields and all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .stats import Statistics

__all__ = ["AttemptError", "DeadLetter", "Result", "RunReport"]


@dataclass(frozen=True, slots=True)
class AttemptError:
    """One failed attempt.

    Attributes:
        attempt: which attempt failed (1-based).
        type: the exception's class name, e.g. ``"TimeoutError"``.
        message: ``str()`` of the exception.
        at_s: loop time of the failure, in seconds.
    """

    attempt: int
    type: str
    message: str
    at_s: float

    @classmethod
    def from_exception(cls, attempt: int, error: BaseException, at_s: float) -> AttemptError:
        return cls(attempt=attempt, type=type(error).__name__, message=str(error), at_s=at_s)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An item that used its attempt budget, or failed permanently.

    Attributes:
        payload: the item as it entered the pipeline, unchanged.
        attempts: attempts made (``max_attempts`` unless it failed permanently).
        errors: every failure, oldest first.
        reason: ``"max_attempts"`` or ``"not_retryable"``.
    """

    payload: Any
    attempts: int
    errors: tuple[AttemptError, ...]
    reason: str

    @property
    def first_failure_s(self) -> float:
        """Loop time of the first failure, in seconds."""
        return self.errors[0].at_s

    @property
    def last_failure_s(self) -> float:
        """Loop time of the last failure, in seconds."""
        return self.errors[-1].at_s


@dataclass(frozen=True, slots=True)
class Result:
    """What the results stream yields for each finished item.

    Attributes:
        payload: the item.
        value: what the handler returned (None for a dead letter).
        attempts: attempts it took.
        dead_letter: the dead-letter record if the item failed, else None.
    """

    payload: Any
    value: Any
    attempts: int
    dead_letter: DeadLetter | None = None

    @property
    def ok(self) -> bool:
        """True when the handler succeeded."""
        return self.dead_letter is None


@dataclass(frozen=True)
class RunReport:
    """The account of one run: every offered item appears exactly once.

    ``offered == completed + len(dead_letters) + len(unfinished) + len(shed)``
    always holds, and ``admitted == offered - len(shed)``.

    Attributes:
        offered: items taken from the source(s) or handed to ``put``.
        admitted: items that entered the queue.
        completed: items whose handler succeeded.
        dead_letters: items that failed for good, with every error.
        unfinished: payloads still queued, running or waiting for a retry when
            the drain timed out (or the pipeline was stopped hard).
        shed: payloads rejected at admission (``on_full="reject"``).
        attempts: handler calls made, retries included.
        drain_timed_out: the drain hit ``drain_timeout_s``.
        started_s, finished_s: loop time of start and end of the run, seconds.
        statistics: the final statistics snapshot.
    """

    offered: int
    admitted: int
    completed: int
    dead_letters: list[DeadLetter]
    unfinished: list[Any]
    shed: list[Any]
    attempts: int
    drain_timed_out: bool
    started_s: float
    finished_s: float
    statistics: Statistics

    @property
    def duration_s(self) -> float:
        """Loop seconds from start to the end of the drain."""
        return self.finished_s - self.started_s

    @property
    def balanced(self) -> bool:
        """True when every offered item is accounted for (it always should be)."""
        accounted = self.completed + len(self.dead_letters) + len(self.unfinished)
        return self.offered == accounted + len(self.shed) and self.admitted == accounted
