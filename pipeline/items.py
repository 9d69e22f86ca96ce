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
        errors: failures so far, oldest first.
    """

    __slots__ = ("admitted_s", "attempts", "errors", "first_start_s", "payload", "seq")

    def __init__(self, payload: Any, seq: int, admitted_s: float) -> None:
        self.payload = payload
        self.seq = seq
        self.admitted_s = admitted_s
        self.attempts = 0
        self.first_start_s: float | None = None
        self.errors: list[AttemptError] = []

    def __repr__(self) -> str:
        return f"<WorkItem seq={self.seq} attempts={self.attempts} payload={self.payload!r}>"
