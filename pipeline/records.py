"""Flat, frozen records a run hands back: errors, dead letters, results, the report.

Each one drops straight into pandas (``pd.DataFrame(map(dataclasses.asdict, ...))``)
and keeps the payload exactly as it was given, audit fields and all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .statistics import Statistics

__all__ = ["AttemptError", "DeadLetter", "Result", "RunReport", "ShedLog", "describe_error"]


def describe_error(error: BaseException) -> str:
    """``str(error)``, or a stand-in when formatting the exception itself fails.

    The engine formats errors after an item has left its attempt; an exception
    whose ``__str__`` raises must not take the item's bookkeeping down with it.
    """
    try:
        text = str(error)
    except BaseException as failure:  # any failure to format is survivable
        if isinstance(failure, KeyboardInterrupt | SystemExit):
            raise
        return f"<{type(error).__name__}: str() raised {type(failure).__name__}>"
    return text if isinstance(text, str) else f"<{type(error).__name__}>"


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
        """Record ``error``; never raises, even if the exception cannot be formatted."""
        return cls(
            attempt=attempt,
            type=type(error).__name__,
            message=describe_error(error),
            at_s=at_s,
        )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An item that used its attempt budget, or failed permanently.

    Attributes:
        payload: the item as it entered the pipeline, unchanged.
        attempts: attempts made (``max_attempts`` unless it failed permanently).
        errors: every failure, oldest first.
        reason: ``"max_attempts"`` or ``"not_retryable"``; ``"retry_budget"`` when
            it would have been retried but the retry budget denied it
            (``PipelineConfig.retry_budget``); ``"bad_priority"`` or
            ``"bad_deadline"`` when its priority key or per-item ``max_wait_s``
            could not be used (refused at its first attempt, the handler never
            called; the error says why).
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


class ShedLog:
    """The items shed at admission (or expired): an exact count and the latest payloads.

    A service that sheds load for hours must not keep every rejected payload,
    so the log keeps at most ``keep`` of them (the most recent) and counts the
    rest. ``len()`` is always the exact number shed, which keeps the report's
    balance ``offered == completed + len(dead_letters) + len(unfinished) +
    len(shed)`` exact; iterating (or ``+`` with a list) gives the payloads
    kept, oldest first. While nothing has been forgotten (``dropped == 0``) it
    compares equal to a list of the same payloads.

    Args:
        keep: payloads to keep (>= 0), or None to keep every one.

    Attributes:
        dropped: payloads counted but no longer kept.
    """

    __slots__ = ("_kept", "dropped", "keep")

    def __init__(self, keep: int | None = None, payloads: Iterable[Any] = ()) -> None:
        self.keep = keep
        self._kept: deque[Any] = deque(maxlen=keep)
        self.dropped = 0
        for payload in payloads:
            self.append(payload)

    def append(self, payload: Any) -> None:
        """Count one shed payload, forgetting the oldest kept one if the log is full."""
        if self.keep is not None and len(self._kept) == self.keep:
            self.dropped += 1
        self._kept.append(payload)

    @property
    def kept(self) -> list[Any]:
        """The payloads kept, oldest first."""
        return list(self._kept)

    def __len__(self) -> int:
        return len(self._kept) + self.dropped

    def __iter__(self) -> Iterator[Any]:
        return iter(self._kept)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ShedLog):
            return self.dropped == other.dropped and self.kept == other.kept
        if isinstance(other, list | tuple):
            return self.dropped == 0 and self.kept == list(other)
        return NotImplemented

    def __add__(self, other: object) -> list[Any]:
        if isinstance(other, list | tuple | ShedLog):
            return [*self._kept, *other]
        return NotImplemented

    def __radd__(self, other: object) -> list[Any]:
        if isinstance(other, list | tuple):
            return [*other, *self._kept]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kept = ", ".join(repr(payload) for payload in list(self._kept)[:5])
        more = ", ..." if len(self._kept) > 5 else ""
        return f"<ShedLog shed={len(self)} kept=[{kept}{more}] dropped={self.dropped}>"


@dataclass(frozen=True)
class RunReport:
    """The account of one run: every offered item appears exactly once.

    ``offered == completed + len(dead_letters) + len(unfinished) + len(shed)
    + len(expired)`` always holds, and ``admitted == offered - len(shed) +
    codel_shed`` (an item CoDel shed was admitted first).

    Attributes:
        offered: items taken from the source(s) or handed to ``put``.
        admitted: items that entered the queue.
        completed: items whose handler succeeded.
        dead_letters: items that failed for good, with every error.
        unfinished: payloads still queued, running or waiting for a retry when
            the drain timed out (or the pipeline was stopped hard).
        shed: items rejected at admission (``on_full="reject"``) or shed from
            the queue by CoDel (``PipelineConfig.codel``): ``len()`` is
            the exact count; the most recent ``PipelineConfig.keep_shed``
            payloads are kept (a :class:`ShedLog`).
        attempts: handler calls made, retries included.
        drain_timed_out: the drain hit ``drain_timeout_s``.
        started_s, finished_s: loop time of start and end of the run, seconds.
        statistics: the final statistics snapshot.
        abandoned: the unfinished payloads whose handler call was still running
            on a thread when the run ended (threads cannot be cancelled). Each
            is also in ``unfinished``, but its side effect may still happen:
            sending it again gives at-least-once, not exactly-once, delivery.
        results_dropped: results of finished items that the ``results()``
            stream never handed to a consumer (it detached, or the run closed
            while a worker waited for room). 0 when nobody asked for results.
        results_waiting: results still in the stream when the run closed; an
            attached consumer can read them after the run. Every finished
            item's result is delivered, dropped or waiting.
        expired: items whose deadline (``PipelineConfig.max_wait_s``) came
            before their next attempt could start: ``len()`` is the exact
            count; the most recent ``keep_shed`` payloads are kept (a
            :class:`ShedLog`). An expired item has no result in ``results()``.
    """

    offered: int
    admitted: int
    completed: int
    dead_letters: list[DeadLetter]
    unfinished: list[Any]
    shed: ShedLog
    attempts: int
    drain_timed_out: bool
    started_s: float
    finished_s: float
    statistics: Statistics
    abandoned: list[Any] = field(default_factory=list)
    results_dropped: int = 0
    results_waiting: int = 0
    expired: ShedLog = field(default_factory=ShedLog)

    @property
    def codel_shed(self) -> int:
        """The items of ``shed`` that CoDel shed from the queue after admitting them (no
        result in ``results()`` either; from ``statistics``)."""
        return self.statistics.codel_shed

    @property
    def duration_s(self) -> float:
        """Loop seconds from start to the end of the drain."""
        return self.finished_s - self.started_s

    @property
    def retries_denied(self) -> int:
        """Retries the retry budget denied (``PipelineConfig.retry_budget``); each item is
        among the dead letters with reason ``"retry_budget"``."""
        return self.statistics.retries_denied

    @property
    def balanced(self) -> bool:
        """True when every offered item is accounted for (it always should be)."""
        accounted = (
            self.completed + len(self.dead_letters) + len(self.unfinished) + len(self.expired)
        )
        return (
            self.offered == accounted + len(self.shed)
            and self.admitted == accounted + self.codel_shed
        )
