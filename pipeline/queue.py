"""``WorkQueue``: the bounded FIFO between producers and workers.

It differs from ``asyncio.Queue`` in the three ways a retrying pipeline needs:

- **Slots are reserved before an item is read.** A producer first waits for a
  slot (:meth:`reserve`), only then pulls the next item from its source and
  queues it (:meth:`put_reserved`), so a lazy source is never read ahead of
  capacity.
- **Retries never block.** An item waiting out a backoff is *held*
  (:meth:`hold`): it counts against ``maxsize``, so producers see the pipeline
  as fuller and memory stays bounded, but holding never waits. When the
  backoff ends, :meth:`readmit` puts it in a retry lane that workers serve
  before the main FIFO (retries in the order they became due), also
  without waiting.
  A worker therefore never blocks on a full queue (the classic deadlock where
  every worker sits in ``put`` and nobody is left to ``get``).
- **Closing wakes waiting producers** with :class:`~pipeline.errors.PipelineClosed`.

:class:`PriorityWorkQueue` (``PipelineConfig(priority=...)``) keeps one heap
instead of both lanes: items leave in the order of ``(item.key, item.seq)``, lowest first, and
payloads are never compared (``seq`` is unique). A retry re-enters at its
item's own place, ``(key, original seq)``: within its priority it goes ahead of
every item admitted after it (as the retry lane does without priorities), and
never ahead of an item with a better key. Items refused at admission (a bad
key, see :meth:`put_refused`) come out before everything else.

Items can leave from the middle (:meth:`remove`, when they expire): they stop
counting at once, so a blocked producer gets the slot, and are dropped when a
worker reaches them, or sooner when such leftovers would outnumber the live
items (memory stays at most about twice the live queue).

Every state change lives in a non-blocking method; the coroutines only wait
and then delegate, as in CPython's ``asyncio.Queue``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .errors import PipelineClosed, QueueFull

__all__ = ["PriorityWorkQueue", "WorkQueue", "WorkerRetired"]

T = TypeVar("T")


class WorkerRetired(Exception):
    """Raised in a worker waiting in :meth:`WorkQueue.get` that the pool retired."""


class WorkQueue(Generic[T]):
    """A FIFO of at most ``maxsize`` queued, reserved and held items.

    Args:
        maxsize: the bound (>= 1), or None for no bound.
    """

    ordered = False

    def __init__(self, maxsize: int | None) -> None:
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._retries: deque[T] = deque()
        self._removed: set[T] = set()
        self._size = 0
        self._getters: deque[asyncio.Future[None]] = deque()
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._reserved = 0
        self._held = 0
        self._closed = False
        self.retiring = 0
        """Workers due to leave (a pool shrunk while they were busy): the next callers to
        come for an item, or to wait in :meth:`get`, leave instead (the pool counts it)."""
        self.on_leave: Callable[[], None] | None = None
        """Called as each of those workers leaves (:meth:`leave`): the pool's event."""
        self.peak = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._format()}>"

    def _format(self) -> str:
        parts = [f"maxsize={self.maxsize}", f"queued={len(self)}"]
        if self.ordered:
            parts.append("ordered")
        if self._reserved:
            parts.append(f"reserved={self._reserved}")
        if self._held:
            parts.append(f"held={self._held}")
        if self._getters:
            parts.append(f"getters={len(self._getters)}")
        if self._slot_waiters:
            parts.append(f"waiting_put={len(self._slot_waiters)}")
        if self._closed:
            parts.append("closed")
        return " ".join(parts)

    def __len__(self) -> int:
        return self._size

    def empty(self) -> bool:
        """True when no item is queued (as ``asyncio.Queue.empty``).

        ``not len(queue)`` says the same; this is a plain method call, which a worker
        makes once per item without ``len()``'s trip through C.
        """
        return not self._size

    @property
    def held(self) -> int:
        """Items held outside the queue while they wait for a retry."""
        return self._held

    @property
    def waiting_put(self) -> int:
        """Tasks waiting in :meth:`reserve` for a free slot."""
        return len(self._slot_waiters)

    @property
    def closed(self) -> bool:
        return self._closed

    def full(self) -> bool:
        """True when queued + reserved + held items reach ``maxsize``."""
        return self.maxsize is not None and self._size + self._reserved + self._held >= self.maxsize

    # -- producers -----------------------------------------------------------------

    def reserve_nowait(self) -> None:
        """Take a slot for an item about to be put.

        Raises:
            PipelineClosed: the queue was closed.
            QueueFull: no slot is free.
        """
        if self._closed:
            raise PipelineClosed(f"{self!r} is closed to new items")
        if self.full():
            raise QueueFull(f"{self!r} is full")
        self._reserved += 1

    def try_reserve(self) -> bool:
        """Take a slot if one is free; False (nothing taken) when the queue is full.

        Raises:
            PipelineClosed: the queue was closed.
        """
        if self._closed:
            raise PipelineClosed(f"{self!r} is closed to new items")
        if self.maxsize is not None and self._size + self._reserved + self._held >= self.maxsize:
            return False
        self._reserved += 1
        return True

    async def reserve(self) -> None:
        """Wait until a slot is free, then take it.

        Waiters are served first come, first served.

        Raises:
            PipelineClosed: the queue was closed before a slot freed.
        """
        while self.full() and not self._closed:
            waiter = asyncio.get_running_loop().create_future()
            self._slot_waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._slot_waiters.remove(waiter)
                # We may have been woken for a slot we now decline: pass it on.
                if not self.full():
                    wake_first(self._slot_waiters)
                raise
        self.reserve_nowait()

    def put_reserved(self, item: T) -> None:
        """Queue ``item`` in the slot taken by :meth:`reserve`."""
        self._reserved -= 1
        self._items.append(item)
        size = self._size = self._size + 1  # _note_peak, inline: once per item
        if size > self.peak:
            self.peak = size
        if self._getters:
            wake_first(self._getters)

    def put_refused(self, item: T) -> None:
        """Queue ``item`` (in the slot taken by :meth:`reserve`) ahead of every other item.

        For an item refused at admission: a worker only records its refusal,
        so serving it first frees its slot soonest. It is never compared by key.
        """
        self._reserved -= 1
        self._retries.appendleft(item)
        self._size += 1
        self._note_peak()
        wake_first(self._getters)

    def release(self) -> None:
        """Give back a reserved slot that will not be used."""
        self._reserved -= 1
        wake_first(self._slot_waiters)

    def put_nowait(self, item: T) -> None:
        """Queue ``item`` now.

        Raises:
            PipelineClosed: the queue was closed.
            QueueFull: no slot is free.
        """
        self.reserve_nowait()
        self.put_reserved(item)

    # -- retries -------------------------------------------------------------------

    def hold(self) -> None:
        """Count an item that waits for a retry; never waits, may exceed ``maxsize``."""
        self._held += 1

    def readmit(self, item: T) -> None:
        """Queue a held item in the retry lane, served before new items; never waits.

        Ordered, the item goes back at its own place, ``(key, seq)`` (see the module).
        """
        self._held -= 1
        self._retries.append(item)
        self._size += 1
        self._note_peak()
        wake_first(self._getters)

    def unhold(self) -> None:
        """Forget a held item that will not come back (cancelled at drain, or expired)."""
        self._held -= 1
        wake_first(self._slot_waiters)

    # -- leaving from the middle ---------------------------------------------------

    def remove(self, item: T) -> None:
        """Take a queued ``item`` out now (it expired); its slot is free at once.

        ``item`` must be queued (the caller knows: see ``WorkItem.queued``).
        """
        self._removed.add(item)
        self._size -= 1
        removed = len(self._removed)
        if removed > 32 and removed > self._size:
            self._compact()
        wake_first(self._slot_waiters)

    def _compact(self) -> None:
        """Drop the removed items still stored, in one pass (amortised over the removals)."""
        removed = self._removed
        self._items = deque(item for item in self._items if item not in removed)
        self._retries = deque(item for item in self._retries if item not in removed)
        self._removed = set()

    def live(self) -> list[T]:
        """Every queued item, in the order workers would take them."""
        removed = self._removed
        return [item for item in (*self._retries, *self._items) if item not in removed]

    def heads(self) -> list[T]:
        """Queued items among which the longest-queued is (for exporters: cheap when FIFO).

        FIFO, the main lane is in admission order and only its first live item
        counts; the retry lane and an ordered heap are read whole.
        """
        removed = self._removed
        heads = [item for item in self._retries if item not in removed]
        for item in self._items:
            if item not in removed:
                heads.append(item)
                break
        return heads

    # -- workers -------------------------------------------------------------------

    def get_nowait(self) -> T:
        """Remove and return the first item.

        Raises:
            asyncio.QueueEmpty: nothing is queued.
        """
        while True:
            if self._retries:
                item = self._retries.popleft()
            elif self._items:
                item = self._items.popleft()
            else:
                raise asyncio.QueueEmpty
            removed = self._removed
            if not removed or item not in removed:
                break
            removed.discard(item)  # it expired while queued: already counted out
        self._size -= 1
        if self._slot_waiters:
            wake_first(self._slot_waiters)
        return item

    async def get(self) -> T:
        """Wait for an item, then remove and return it.

        Raises:
            WorkerRetired: the caller was asked to stop (:meth:`retire_waiting`, or
                :attr:`retiring` when it came to wait).
        """
        while not self._size:
            if self.retiring:
                self.leave()
                raise WorkerRetired
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                if not getter.cancel() and not getter.cancelled():
                    getter.exception()  # retired, then cancelled first: nothing to log
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if self._size:
                    wake_first(self._getters)
                raise
        return self.get_nowait()

    def unget(self, item: T) -> None:
        """Put back the item just taken, first in line, as if it had not been taken; never waits.

        For a worker that took an item but may not start it (the concurrency limit fell
        while it waited): the item's slot was freed by the take, so it may exceed
        ``maxsize`` by the items put back, at most the workers.
        """
        self._retries.appendleft(item)
        self._size += 1
        wake_first(self._getters)

    def leave(self) -> None:
        """Count out one of the :attr:`retiring` workers: the caller, which leaves now."""
        self.retiring -= 1
        if self.on_leave is not None:
            self.on_leave()

    def retire_waiting(self, count: int) -> int:
        """Make up to ``count`` callers waiting in :meth:`get` raise :class:`WorkerRetired`.

        The most recently idle go first (the longest waiting keep their turn). Returns how
        many were retired. Workers busy now are asked through :attr:`retiring` instead.
        """
        retired = 0
        while self._getters and retired < count:
            getter = self._getters.pop()
            if getter.done():
                continue  # its task was cancelled (wake_first pops the getters it wakes)
            getter.set_exception(WorkerRetired())
            retired += 1
        return retired

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Refuse new items and wake every task waiting for a slot (they get PipelineClosed)."""
        self._closed = True
        while self._slot_waiters:
            wake_first(self._slot_waiters)

    def drain_items(self) -> list[T]:
        """Remove and return every queued item (used when a drain gives up)."""
        items = self.live()
        self._items.clear()
        self._retries.clear()
        self._removed = set()
        self._size = 0
        return items

    # -- helpers -------------------------------------------------------------------

    def _note_peak(self) -> None:
        if self._size > self.peak:
            self.peak = self._size


class PriorityWorkQueue(WorkQueue[T]):
    """A :class:`WorkQueue` serving items by ``(item.key, item.seq)``, lowest first.

    One heap holds new items and retries alike (see the module docstring); an
    entry is ``(rank, key, seq, item)``, where rank 0 puts refused items first
    and ``seq``, unique, settles every tie before ``item`` could be compared.
    """

    ordered = True

    def __init__(self, maxsize: int | None) -> None:
        super().__init__(maxsize)
        self._heap: list[tuple[Any, ...]] = []

    def put_reserved(self, item: T) -> None:
        self._reserved -= 1
        heapq.heappush(self._heap, (1, item.key, item.seq, item))  # type: ignore[attr-defined]
        self._size += 1
        self._note_peak()
        if self._getters:
            wake_first(self._getters)

    def put_refused(self, item: T) -> None:
        self._reserved -= 1
        heapq.heappush(self._heap, (0, None, item.seq, item))  # type: ignore[attr-defined]
        self._size += 1
        self._note_peak()
        wake_first(self._getters)

    def readmit(self, item: T) -> None:
        self._held -= 1
        heapq.heappush(self._heap, (1, item.key, item.seq, item))  # type: ignore[attr-defined]
        self._size += 1
        self._note_peak()
        wake_first(self._getters)

    def unget(self, item: T) -> None:
        rank = 1 if item.refusal is None else 0  # type: ignore[attr-defined]
        key = item.key if rank else None  # type: ignore[attr-defined]
        heapq.heappush(self._heap, (rank, key, item.seq, item))  # type: ignore[attr-defined]
        self._size += 1
        wake_first(self._getters)

    def get_nowait(self) -> T:
        heap = self._heap
        while True:
            if not heap:
                raise asyncio.QueueEmpty
            item = heapq.heappop(heap)[3]
            removed = self._removed
            if not removed or item not in removed:
                break
            removed.discard(item)  # it expired while queued: already counted out
        self._size -= 1
        if self._slot_waiters:
            wake_first(self._slot_waiters)
        return item

    def live(self) -> list[T]:
        removed = self._removed
        entries = sorted(self._heap, key=lambda entry: entry[:3])
        return [entry[3] for entry in entries if entry[3] not in removed]

    def heads(self) -> list[T]:
        removed = self._removed
        return [entry[3] for entry in self._heap if entry[3] not in removed]

    def drain_items(self) -> list[T]:
        items = self.live()
        self._heap.clear()
        self._removed = set()
        self._size = 0
        return items

    def _compact(self) -> None:
        removed = self._removed
        heap = [entry for entry in self._heap if entry[3] not in removed]
        heapq.heapify(heap)
        self._heap = heap
        self._removed = set()


async def wait_in_line(waiters: deque[asyncio.Future[None]]) -> None:
    """Wait until :func:`wake_first` wakes this task; leave the line if cancelled first."""
    waiter = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    finally:
        if not waiter.done():
            waiter.cancel()
        if waiter in waiters:
            waiters.remove(waiter)


def wake_first(waiters: deque[asyncio.Future[Any]]) -> None:
    """Wake the longest-waiting task that is still waiting (skipping cancelled ones)."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return
