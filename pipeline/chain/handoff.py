"""The joints of a chain: handing finished items on, and forming batches.

:class:`HandOff` is what a stage's pipeline gives each finished item to. The
engine awaits it in the worker, after the attempt has ended and before the
worker takes its next item, so:

- **blocking after service**: when the next stage's queue is full the worker
  waits, holding its slot, and backpressure travels stage by stage up to the
  source;
- **a hand-off wait is not an attempt**: the attempt has already succeeded, so
  no ``attempt_timeout_s`` runs and nothing is retried because the next queue
  is full;
- **the stage's drain waits for its hand-offs** (an item settles only once its
  outputs are handed on), and a hand-off cut short (the close cancelled the
  worker, or the next stage stopped on its own) keeps the outputs it could not
  deliver as ``stranded``: counted, never lost;
- **a hand-off admits as a source does**: into a stage whose admission never
  waits (``on_full="reject"``, or an unbounded queue) it gives the loop a turn
  after each output, so an idle worker there takes that output before the
  next one is judged. A burst of children into a ``reject`` stage is shed
  only when ``queue_maxsize + concurrency`` items are already there, as for
  items from a source (without the turn the woken workers would not have run
  yet, and the queue would count their items as waiting).

:class:`BatchFormer` sits in front of a batching stage's pipeline: it collects
payloads into :class:`~pipeline.chain.stage.Batch` es of at most ``batch_size``,
sending a batch when it is full or ``batch_window_s`` after its first payload,
and holds at most one batch (an upstream hand-off waits while it is full).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import PipelineClosed
from ..queue import wait_in_line, wake_first
from ..records import Result, ShedLog
from ..state import State
from .stage import Batch

__all__ = ["BatchFormer", "Downstream", "HandOff"]


class Downstream(Protocol):
    """Where a hand-off puts outputs: a stage's pipeline or its batch former."""

    async def put(self, payload: Any) -> bool: ...


class HandOff:
    """Receives a stage's finished items; hands their outputs to the next stage.

    It speaks the engine's results-sink protocol (``send``, ``close``,
    ``dropped``, ``len()``), the one :class:`~pipeline.resultstream.ResultStream`
    speaks, which is what lets a finished item wait for room downstream while
    its worker holds its slot.

    Args:
        time: the loop's clock.
        downstream: the next stage, or None at the chain's tail (outputs are counted).
        expands: the item's outputs are the tuple it returned (fan-out and
            batching stages), not the value itself.
        batching: payloads are batches, counted per item.
        on_downstream_closed: called when the next stage refused an output
            because it stopped on its own (it failed).
        turns: give the loop a turn after each output (the next stage's
            admission never waits: ``on_full="reject"`` or an unbounded queue).

    Attributes:
        outputs: outputs produced by completed items (children of a fan-out).
        handed_on: outputs the next stage took (admitted or shed there).
        stranded: outputs that never reached the next stage, oldest first.
        pending: outputs waiting for room downstream now.
        blocked_s: seconds hand-offs spent waiting for room, summed over workers.
        settled_items: payloads completed, dead-lettered or expired so far.
        completed_items: payloads completed so far.
    """

    __slots__ = (
        "_batching",
        "_downstream",
        "_expands",
        "_on_downstream_closed",
        "_time",
        "_turns",
        "blocked_s",
        "completed_items",
        "dropped",
        "handed_on",
        "outputs",
        "pending",
        "settled_items",
        "stranded",
    )

    def __init__(
        self,
        time: Callable[[], float],
        downstream: Downstream | None,
        *,
        expands: bool,
        batching: bool,
        on_downstream_closed: Callable[[], None],
        turns: bool = False,
    ) -> None:
        self._time = time
        self._turns = turns
        self._downstream = downstream
        self._expands = expands
        self._batching = batching
        self._on_downstream_closed = on_downstream_closed
        self.outputs = 0
        self.handed_on = 0
        self.stranded: list[Any] = []
        self.pending = 0
        self.blocked_s = 0.0
        self.settled_items = 0
        self.completed_items = 0
        self.dropped = 0  # engine protocol: results nobody read; undelivered outputs are stranded

    def __repr__(self) -> str:
        return (
            f"<HandOff outputs={self.outputs} handed_on={self.handed_on} "
            f"pending={self.pending} stranded={len(self.stranded)}>"
        )

    def __len__(self) -> int:
        return 0  # engine protocol: nothing is buffered here

    def close(self) -> None:
        """Engine protocol: the stage closed. Nothing to release."""

    async def send(self, result: Result) -> None:
        """Account for one finished item and hand its outputs on, waiting for room."""
        count = len(result.payload) if self._batching else 1
        self.settled_items += count
        if result.dead_letter is not None:
            return
        self.completed_items += count
        outputs = result.value if self._expands else (result.value,)
        self.outputs += len(outputs)
        downstream = self._downstream
        if downstream is None:
            return
        time = self._time
        turns = self._turns
        self.pending += len(outputs)
        delivered = 0
        try:
            for output in outputs:
                started = time()
                await downstream.put(output)
                self.blocked_s += time() - started
                delivered += 1
                self.pending -= 1
                self.handed_on += 1
                if turns:
                    # As the intake does (pipeline.intake): an idle worker of the next
                    # stage takes this output before the next one is judged full.
                    await asyncio.sleep(0)
        except PipelineClosed:
            self._strand(outputs[delivered:])
            self._on_downstream_closed()
        except BaseException:
            self._strand(outputs[delivered:])
            raise

    def expire(self, payload: Any) -> None:
        """Account for one item that expired in this stage (no result, nothing handed on)."""
        self.settled_items += len(payload) if self._batching else 1

    def _strand(self, outputs: tuple[Any, ...]) -> None:
        self.pending -= len(outputs)
        self.stranded.extend(outputs)


class BatchFormer:
    """Collects payloads into batches for a batching stage's pipeline.

    ``put`` adds a payload to the batch being formed, waiting while that batch
    is sealed (full, or its window ended) and being sent. A flusher task sends
    each sealed batch with the pipeline's own ``put``, so a full stage queue
    blocks the flusher, then the former, then the stage upstream. With
    ``on_full="reject"`` a batch the queue cannot take is shed, every payload
    of it counted.

    Args:
        pipe: the stage's pipeline (its payloads are batches).
        size: payloads per batch, at most.
        window_s: seconds after the first payload at which a batch is sealed
            however full, or None (sealed when full, or at the drain).
        keep_shed: shed payloads to keep (as ``PipelineConfig.keep_shed``).

    Lineage: ``lineages`` maps a key to a hook ``() -> origin`` that :meth:`put`
    calls in the putting task (an upstream stage's worker, right after the item
    whose output this is completed there); each sent batch carries the origins
    of its payloads as ``Batch.origins[key]``. :mod:`pipeline.tracing` uses it to
    link a batch's span to the spans that made its payloads. A hook that raises
    gives None for that payload; with no hook ``put`` does nothing more.

    Attributes:
        offered: payloads taken. admitted: payloads in batches the pipeline took.
        shed: payloads in batches it shed (a :class:`~pipeline.records.ShedLog`).
        batches: batches sent.
    """

    def __init__(self, pipe: Any, size: int, window_s: float | None, keep_shed: int | None) -> None:
        self._pipe = pipe
        self.size = size
        self.window_s = window_s
        self._forming: list[Any] = []
        self._sealed = False
        self._closed = False
        self._room_waiters: deque[asyncio.Future[None]] = deque()
        self._flush_waiters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.offered = 0
        self.admitted = 0
        self.shed = ShedLog(keep_shed)
        self.batches = 0
        self.lineages: dict[Any, Callable[[], Any]] = {}
        self._origins: dict[Any, list[Any]] = {}

    def __repr__(self) -> str:
        state = " sealed" if self._sealed else ""
        state += " closed" if self._closed else ""
        return (
            f"<BatchFormer forming={len(self._forming)}/{self.size} batches={self.batches}{state}>"
        )

    def __len__(self) -> int:
        """Payloads in the batch being formed (or sent)."""
        return len(self._forming)

    def start(self, name: str) -> None:
        """Start the flusher task on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._flush_loop(), name=f"{name}-batcher")

    async def put(self, payload: Any) -> bool:
        """Add ``payload`` to the forming batch, waiting while it is sealed.

        Returns:
            True (the payload is in the stage's custody).

        Raises:
            PipelineClosed: the former or the stage's pipeline has stopped.
        """
        while True:
            if self._closed or self._pipe.state is not State.OPEN:
                raise PipelineClosed(f"{self!r} is not taking payloads")
            if not self._sealed:
                break
            await wait_in_line(self._room_waiters)
        forming = self._forming
        forming.append(payload)
        self.offered += 1
        if self.lineages:
            self._trace(len(forming))
        if len(forming) >= self.size:
            self._seal()
        elif len(forming) == 1 and self.window_s is not None:
            self._timer = self._loop.call_later(self.window_s, self._seal)
        return True

    def _trace(self, count: int) -> None:
        """Ask each lineage hook for the origin of the payload just added (the count-th)."""
        for key, hook in tuple(self.lineages.items()):
            try:
                origin = hook()
            except Exception:
                origin = None  # a hook must not cost a payload
            kept = self._origins.setdefault(key, [])
            # A hook attached while this batch formed knows nothing of the payloads before it.
            kept.extend([None] * (count - 1 - len(kept)))
            kept.append(origin)

    def _batch(self) -> Batch:
        """The sealed batch, with its payloads' origins (padded to the batch's length)."""
        batch = Batch(self._forming)
        if self._origins:
            size = len(batch)
            batch.origins = {
                key: (*kept, *([None] * (size - len(kept))))[:size]
                for key, kept in self._origins.items()
            }
        return batch

    def _seal(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._forming and not self._sealed:
            self._sealed = True
            wake_first(self._flush_waiters)

    async def _flush_loop(self) -> None:
        while True:
            while not self._sealed:
                if self._closed:
                    return
                await wait_in_line(self._flush_waiters)
            batch = self._batch()
            try:
                accepted = await self._pipe.put(batch)
            except PipelineClosed:
                # The stage's pipeline stopped on its own: the batch stays here, unfinished.
                self._closed = True
                self._wake_room_waiters()
                return
            if accepted:
                self.admitted += len(batch)
            else:
                for payload in batch:
                    self.shed.append(payload)
            self.batches += 1
            self._forming.clear()
            self._origins.clear()
            self._sealed = False
            self._wake_room_waiters()

    def _wake_room_waiters(self) -> None:
        while self._room_waiters:
            wake_first(self._room_waiters)

    async def drain(self, timeout_s: float | None) -> bool:
        """Stop taking payloads, send the partial batch, wait at most ``timeout_s`` for it.

        Returns:
            True if it was sent in time; False if not (it stays in :meth:`unsent`).
        """
        self._closed = True
        self._seal()
        wake_first(self._flush_waiters)
        self._wake_room_waiters()
        task = self._task
        if task is None or task.done():
            return not self._forming
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(task)
        except TimeoutError:
            await self.abort()
            return False
        return not self._forming

    async def abort(self) -> None:
        """Stop now: the batch being formed or sent stays unsent."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake_room_waiters()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def unsent(self) -> list[Any]:
        """Payloads taken but never sent to the pipeline (unfinished at the close)."""
        return list(self._forming)
