"""Deadlines and priority keys at admission, and how an item expires.

With ``PipelineConfig(max_wait_s=S)`` an admitted item must start an attempt
before ``admitted_s + S`` (or the seconds its per-item function returned).
It expires instead of running when:

- it is still queued at its deadline: the :class:`~pipeline.deadlines.DeadlineSweep`
  takes it out then, whether or not a worker is free, so its slot frees at
  once and a blocked producer proceeds;
- a worker takes it at or after its deadline (the sweep and the worker meet at
  the same instant), or its deadline comes while it waits for the rate limit
  (that wait is not part of an attempt);
- an attempt failed and the retry's backoff would end at or after the
  deadline: that retry could only start too late, so the item expires at the
  failure (events RETRY_SCHEDULED, READMITTED, EXPIRED at one instant).

An attempt that started before the deadline always runs to its end
(non-preemptive). An expired item is counted (``report.expired``, a bounded
:class:`~pipeline.records.ShedLog` with an exact count, and
``statistics().expired``), then reported: the ``EXPIRED`` event, the
``on_expired`` hook and a ``pipeline.expired`` log line, each guarded so that
none of them can lose the item or stall the run. It gets no result in
``results()``, as a shed item gets none.

Priority keys and per-item deadlines are computed once, at admission. One
that cannot be used (the function raises, returns NaN, None, something that
does not compare with the other keys, a deadline <= 0) refuses the item: it
is admitted, served before every other item, and its first attempt fails with
that error without calling the handler, so it is dead-lettered (reason
``"bad_priority"`` or ``"bad_deadline"``) like any item whose handler fails
for good, results stream and chain hand-offs included. Raising at ``put``
instead would leave ``run()``'s sources with nobody to tell.
"""

from __future__ import annotations

import logging
import math

from .config import max_wait
from .events import EventKind
from .fields import PipelineFields
from .intake import trace_id
from .items import WorkItem

__all__: list[str] = []

_EXPIRED = EventKind.EXPIRED


class Expiry(PipelineFields):
    """Keys and deadlines at admission, and expiry (mixed into ``Pipeline``)."""

    def _classify(self, item: WorkItem) -> None:
        """Give ``item`` its priority key and deadline, or its refusal; raises no Exception."""
        keys = self._keys
        if keys is not None:
            try:
                item.key = keys.of(item.payload)
            except Exception as error:
                item.refusal = ("bad_priority", error)
                return
        if self._max_wait_s is not None:
            item.deadline_s = item.admitted_s + self._max_wait_s
        elif self._wait_of is not None:
            try:
                seconds = self._wait_of(item.payload)
                if seconds is not None:
                    seconds = max_wait("max_wait_s(payload)", seconds)
            except Exception as error:
                item.refusal = ("bad_deadline", error)
                return
            if seconds is not None and seconds < math.inf:
                item.deadline_s = item.admitted_s + seconds

    def _expire_queued(self, item: WorkItem, now: float) -> None:
        """The sweep found ``item`` still queued at its deadline: take it out, expire it."""
        item.queued = False
        self._queue.remove(item)
        self._expire(item, now)

    def _expire(self, item: WorkItem, now: float) -> None:
        """Count ``item`` (out of the queue, not running) as expired, then report it."""
        self._expired.append(item.payload)
        self._settle()
        self._emit_at(_EXPIRED, now, item)
        hook = self._on_expired
        if hook is not None:
            try:
                hook(item.payload)
            except BaseException as error:
                self._listener_failed(_EXPIRED, error)
        self._note_expired(item)
        if self._log_warning:
            self._log(
                logging.WARNING,
                "pipeline.expired",
                trace_id=trace_id(item),
                attempts=item.attempts,
                waited_s=now - item.admitted_s,
            )

    def _note_expired(self, item: WorkItem) -> None:
        """For a chain's stage: account for the expired item at its joint (nothing here)."""
