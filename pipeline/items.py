"""``WorkItem``: the pipeline's envelope around one payload.

The payload is never modified; what the pipeline learns about an item
(attempts, times, errors) lives on the envelope. Event listeners receive it.
"""

from __future__ import annotations

from typing import Any

from .records import AttemptError

__all__ = ["WorkItem"]


class WorkItem:
    """One admitted item on its way through the pipeline.

    Attributes:
        payload: the item as given, unchanged.
        seq: admission order, from 0.
        attempts: attempts started so far.
        admitted_s: loop time of admission, seconds.
        first_start_s: loop time the first attempt started, or None.
        started_s: loop time the latest attempt started, or None before the first
            (exporters read an attempt's duration from it when the attempt ends).
        errors: failures so far, oldest first.
        key: its priority key (``PipelineConfig(priority=...)``), or None without one.
        deadline_s: loop time by which its next attempt must start, or None
            (``PipelineConfig(max_wait_s=...)``); past it the item expires.
        queued: True while it waits in the queue (the deadline sweep reads it).
        refusal: the error that refused it at admission (a bad priority key or
            deadline), or None; a worker dead-letters it without calling the handler.
    """

    __slots__ = (
        "admitted_s",
        "attempts",
        "deadline_s",
        "errors",
        "first_start_s",
        "key",
        "payload",
        "queued",
        "refusal",
        "seq",
        "started_s",
    )

    def __init__(self, payload: Any, seq: int, admitted_s: float) -> None:
        self.payload = payload
        self.seq = seq
        self.admitted_s = admitted_s
        self.attempts = 0
        self.first_start_s: float | None = None
        self.started_s: float | None = None
        self.errors: list[AttemptError] = []
        self.key: Any = None
        self.deadline_s: float | None = None
        self.queued = False
        self.refusal: Exception | None = None

    def __repr__(self) -> str:
        return f"<WorkItem seq={self.seq} attempts={self.attempts} payload={self.payload!r}>"

    @property
    def in_first_attempt(self) -> bool:
        """Whether its first attempt has started and not failed (running, or cut short).

        Its wait (admission to first start) is then known but not yet observed by an
        exporter, which observes it when that attempt ends (:mod:`pipeline.metrics`).
        """
        return self.attempts == 1 and not self.errors and self.first_start_s is not None
