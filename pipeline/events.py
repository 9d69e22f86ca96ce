"""Event kinds the engine reports, for recorders and live plots.

A listener is any callable ``listener(kind, now_s, item)``; the engine calls it
synchronously at every state change with the loop time and the
:class:`~pipeline.items.WorkItem` concerned (None for producer, breaker, ``SCALED``,
``SYNCED`` and ``WORKER_LEFT`` events; the bare payload for ``SHED``; the new limit, an
int, for ``LIMIT_CHANGED``). With no
listener the engine skips the call entirely, so observing costs nothing when
nobody listens. Listeners must be quick and must not raise.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any

__all__ = ["EventKind", "Listener", "fan_out"]


class EventKind(IntEnum):
    """What happened. Integer values are stable: recorders store them compactly."""

    ADMITTED = 0
    """The item entered the queue (queue depth +1)."""
    SHED = 1
    """The item was rejected at admission (``on_full="reject"``); ``item`` is the payload."""
    STARTED = 2
    """A worker took the item for an attempt (queue depth -1, in flight +1)."""
    COMPLETED = 3
    """The handler succeeded (in flight -1)."""
    RETRY_SCHEDULED = 4
    """The attempt failed and a retry waits out its backoff (in flight -1, retry waiting +1)."""
    READMITTED = 5
    """A retry's backoff ended and it re-entered the queue (retry waiting -1, queue depth +1)."""
    DEAD_LETTERED = 6
    """The attempt failed and the item went to the dead-letter store (in flight -1)."""
    UNFINISHED = 7
    """The drain ended with the item still inside; it is handed back to the caller."""
    PRODUCER_BLOCKED = 8
    """A producer started waiting for a free slot (item is None)."""
    PRODUCER_UNBLOCKED = 9
    """A producer stopped waiting for a slot (item is None)."""
    INTAKE_CLOSED = 10
    """Intake stopped: the source ended or ``stop()`` was called (item is None)."""
    DRAIN_TIMEOUT = 11
    """The drain hit ``drain_timeout_s`` (item is None)."""
    EXPIRED = 12
    """The item's deadline came before its next attempt could start: it left the queue
    (queue depth -1). A retry whose backoff would end at or after the deadline is
    scheduled, readmitted and expires at the same instant (RETRY_SCHEDULED, READMITTED,
    EXPIRED), so an attempt's end is always told the same way."""
    SCALED = 13
    """The autoscaler changed the pool's size at a sync (``statistics().workers``; item is
    None)."""
    BREAKER_OPEN = 14
    """The circuit breaker opened: no attempt reaches the handler (item is None)."""
    BREAKER_HALF_OPEN = 15
    """The breaker's open spell ended: it lets its probes through (item is None)."""
    BREAKER_CLOSED = 16
    """The breaker closed after its probes: every attempt goes through again (item is None)."""
    QUEUE_SHED = 17
    """CoDel shed the queued item (``PipelineConfig.codel``): it left the queue (queue
    depth -1) and its outcome is ``shed``, as an item rejected at admission is."""
    RETRY_DENIED = 18
    """The retry budget denied the failed item's retry (``statistics().retries_denied``);
    the item's DEAD_LETTERED (reason ``retry_budget``) follows at the same instant."""
    BREAKER_REFUSED = 19
    """The open (or half-open, probes all out) breaker held the item's next attempt back
    (``statistics().breaker_calls_refused``): once per attempt, however long it waits."""
    LIMIT_CHANGED = 20
    """The adaptive concurrency limit changed after an attempt's sample; ``item`` is the new
    limit, an int (``statistics().concurrency_limit``)."""
    SYNCED = 21
    """The autoscaler synced (every ``sync_s``, after SCALED when the size changed):
    ``statistics().workers_desired`` is this sync's desired count (item is None)."""
    WORKER_LEFT = 22
    """A busy worker the pool was shrunk by (an autoscaler's sync or ``resize``) finished
    and left: ``statistics().workers`` fell by one (item is None)."""


Listener = Callable[[EventKind, float, Any], None]


def fan_out(*listeners: Listener) -> Listener:
    """One listener that calls each of ``listeners`` in turn."""

    def listener(kind: EventKind, now_s: float, item: Any) -> None:
        for each in listeners:
            each(kind, now_s, item)

    return listener
