"""``CoDelWorkQueue``: a :class:`~pipeline.queue.WorkQueue` that sheds by CoDel's rule.

With ``PipelineConfig(codel=CoDel(...))`` every take runs CoDel's control law
(:mod:`pipeline.overload.codel`) on the head of the queue, the item that
waited longest in FIFO order (the retry lane first, as workers serve it). A
head CoDel sheds leaves the queue at once (its slot frees) and is handed to
``on_shed(item, now)``, which counts it as the outcome ``shed``. With
``lifo=True``, while the queue stands, the worker gets the newest item
instead and the head stays where it was.

Each item's sojourn runs from when it entered the queue (admission, or
readmission after a backoff) to the take, on the clock given at the start
(``loop.time``). CoDel needs a FIFO of live items: the engine refuses it
with priorities and deadlines, so no item leaves from the middle here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .overload.codel import CoDelState
from .queue import WorkQueue, wake_first

__all__ = ["CoDelWorkQueue"]

T = TypeVar("T")


class CoDelWorkQueue(WorkQueue[T]):
    """A FIFO whose takes shed heads by CoDel's rule and may serve the newest (adaptive LIFO).

    Args:
        maxsize: the bound (>= 1), or None for no bound.
        codel: the run's CoDel state.
        lifo: serve the newest item while the queue stands.
    """

    def __init__(self, maxsize: int | None, codel: CoDelState, lifo: bool) -> None:
        super().__init__(maxsize)
        self.codel = codel
        self.lifo = lifo
        self._entered: dict[T, float] = {}
        self._lane: deque[T] = self._items  # the lane the last head came from
        # The last take: (item, its entry time, its lane, served as the newest), for unget
        self._taken: tuple[Any, float, deque[T], bool] = (None, 0.0, self._items, False)
        self._clock: Callable[[], float] = lambda: 0.0
        self._on_shed: Callable[[T, float], None] = lambda item, now: None

    def start(self, clock: Callable[[], float], on_shed: Callable[[T, float], None]) -> None:
        """Read time from ``clock`` and hand each shed item to ``on_shed(item, now)``."""
        self._clock = clock
        self._on_shed = on_shed

    def put_reserved(self, item: T) -> None:
        self._entered[item] = self._clock()
        super().put_reserved(item)

    def readmit(self, item: T) -> None:
        self._entered[item] = self._clock()
        super().readmit(item)

    def unget(self, item: T) -> None:
        """Put back the item just taken where it was, with its entry time (see the base)."""
        taken, entered, lane, newest = self._taken
        if taken is not item:
            super().unget(item)  # not the last take: first in line, as the base does
            self._entered[item] = self._clock()
            return
        self._entered[item] = entered
        if newest:
            lane.append(item)  # served by adaptive LIFO: back at the tail
        else:
            lane.appendleft(item)
        self._size += 1
        wake_first(self._getters)

    def get_nowait(self) -> T:
        now = self._clock()
        item = self.codel.dequeue(
            now, lambda: self._pop_head(now), lambda shed: self._shed(shed, now)
        )
        if item is None:
            raise asyncio.QueueEmpty
        lane, newest = self._lane, False
        if self.lifo and self._size and self.codel.standing:
            lane.appendleft(item)  # the head stays; the newest is served
            item, lane = self._pop_newest()
            newest = True
        self._taken = (item, self._entered.pop(item), lane, newest)
        if self._slot_waiters:
            wake_first(self._slot_waiters)
        return item

    async def get(self) -> T:
        while True:
            if not self._size:
                self.codel.dequeue(self._clock(), _empty, _empty)  # empty: not dropping
            try:
                return await super().get()
            except asyncio.QueueEmpty:
                continue  # CoDel shed every item queued: wait for the next

    def _pop_head(self, now: float) -> tuple[T, float, int] | None:
        lane: deque[T] = self._retries if self._retries else self._items
        if not lane:
            return None
        item = lane.popleft()
        self._lane = lane
        self._size -= 1
        return item, now - self._entered[item], self._size

    def _pop_newest(self) -> tuple[T, deque[T]]:
        items, retries = self._items, self._retries
        if not retries or (items and self._entered[items[-1]] >= self._entered[retries[-1]]):
            return items.pop(), items
        return retries.pop(), retries

    def _shed(self, item: T, now: float) -> None:
        del self._entered[item]
        wake_first(self._slot_waiters)
        self._on_shed(item, now)

    def drain_items(self) -> list[T]:
        self._entered.clear()
        return super().drain_items()


def _empty(*_: Any) -> None:
    """An empty queue's head (None), and a shed that cannot happen there."""
