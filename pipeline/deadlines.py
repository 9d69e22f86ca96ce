"""``DeadlineSweep``: one loop timer that expires queued items at their deadlines.

``PipelineConfig(max_wait_s=...)`` gives each admitted item a deadline: the
loop time by which its next attempt must start. Workers check it when they
take an item, but a queue whose workers are all busy (or hung) must still let
its items go at their deadlines, freeing their slots for blocked producers.
So the sweep keeps a heap of ``(deadline_s, seq, item)`` for the queued items
and one ``loop.call_at`` timer on the earliest; when it fires, every item
whose deadline has come and that is still queued is handed to ``expire``.

Entries of items that left the queue meanwhile (a worker took them) are
skipped when they come up, and compacted away whenever they outnumber the
queued items, so the heap stays within about twice the queue. It reads time
only through ``loop.time()``: on the virtual clock the sweep fires exactly at
each deadline.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["DeadlineSweep"]


class DeadlineSweep:
    """Expire queued items at their deadlines, whether or not a worker is free.

    Args:
        loop: the running loop (its clock and timers).
        expire: called with each item whose deadline has come while it is
            still queued (``item.queued``), and the loop time; it must take the
            item out of the queue. It must not raise (the engine's guards it).
        queued: the number of items queued now, for the compaction bound.
    """

    __slots__ = ("_at", "_expire", "_heap", "_loop", "_queued", "_timer")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        expire: Callable[[Any, float], None],
        queued: Callable[[], int],
    ) -> None:
        self._loop = loop
        self._expire = expire
        self._queued = queued
        self._heap: list[tuple[float, int, Any]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    def __repr__(self) -> str:
        armed = "idle" if self._timer is None else f"armed_at={self._at!r}"
        return f"<DeadlineSweep entries={len(self._heap)} {armed}>"

    def __len__(self) -> int:
        return len(self._heap)

    def watch(self, item: Any) -> None:
        """Expire ``item`` (just queued, with a deadline) at its deadline if still queued."""
        heap = self._heap
        heapq.heappush(heap, (item.deadline_s, item.seq, item))
        if len(heap) > 64 and len(heap) > 2 * self._queued():
            self._compact()
        if self._timer is None or item.deadline_s < self._at:
            self._arm()

    def close(self) -> None:
        """Stop the timer and forget every entry (the pipeline closes)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()

    def _compact(self) -> None:
        heap = [entry for entry in self._heap if entry[2].queued]
        heapq.heapify(heap)
        self._heap = heap

    def _arm(self) -> None:
        heap = self._heap
        while heap and not heap[0][2].queued:
            heapq.heappop(heap)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if heap:
            self._at = heap[0][0]
            self._timer = self._loop.call_at(self._at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        # asyncio runs a timer up to one clock resolution early: the time it was set
        # for has come, as far as the loop can tell, so those deadlines are due.
        now = max(self._loop.time(), self._at)
        heap = self._heap
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)[2]
            if item.queued:
                self._expire(item, self._loop.time())
        self._arm()
