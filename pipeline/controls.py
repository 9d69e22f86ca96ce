"""Overload controls in the engine: the concurrency limit's gate and CoDel's sheds.

With ``PipelineConfig(concurrency_limit=AIMD(...) | Gradient2(...))`` each worker
passes a :class:`LimitGate` before it takes an item: at most ``limit`` workers
hold a place there, from before the take to the end of the attempt, so an
attempt starts only while the attempts in flight, itself included, are within
the limit. A worker that got an item while the limit fell beneath the places
held puts it back first in line (``WorkQueue.unget``) and waits again, so the
queue keeps every item and backpressure stays honest. Each attempt that ends
gives the limit a sample (:mod:`pipeline.overload.limits`): its duration
(from its start to the worker's return, which in a chain's stage includes
handing a success on), the attempts in flight then, itself included, and
whether it failed (a drop); an attempt the close cancels gives none. Each change
of the limit is a ``LIMIT_CHANGED`` event carrying the new limit. A
limit that falls never cuts an attempt short: the attempts in flight may
exceed it until they end, as in the reference's semaphore.

With ``PipelineConfig(codel=CoDel(...))`` the queue is a
:class:`~pipeline.codelqueue.CoDelWorkQueue`; a head it sheds is counted here
with the outcome ``shed`` (``report.shed``, ``statistics().codel_shed``, the
``QUEUE_SHED`` event and a ``pipeline.shed`` log line).

With neither, workers run :meth:`~pipeline.attempts.Attempts._work` unchanged. A
worker that :meth:`~pipeline.Pipeline.resize` retires leaves as in ``_work``; the
limit's maximum stays the starting ``concurrency`` (an autoscaler is refused with a
limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from .codelqueue import CoDelWorkQueue
from .config import PipelineConfig
from .events import EventKind
from .fields import PipelineFields
from .intake import trace_id
from .items import WorkItem
from .overload.limits import LimitState
from .queue import PriorityWorkQueue, WorkerRetired, WorkQueue

__all__ = ["LimitGate", "work_queue"]


def work_queue(config: PipelineConfig) -> WorkQueue[WorkItem]:
    """The queue ``config`` asks for: FIFO, by priority, or shedding by CoDel's rule."""
    if config.codel is not None:
        return CoDelWorkQueue(config.queue_maxsize, config.codel.start(), config.codel.lifo)
    if config.priority is not None:
        return PriorityWorkQueue(config.queue_maxsize)
    return WorkQueue(config.queue_maxsize)


class LimitGate:
    """At most ``state.limit`` holders at once; waiters served first come, first served.

    Args:
        state: the run's limit (its ``limit`` may change at every sample).
    """

    __slots__ = ("_waiters", "holders", "state")

    def __init__(self, state: LimitState) -> None:
        self.state = state
        self.holders = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def __repr__(self) -> str:
        return (
            f"<LimitGate holders={self.holders} limit={self.state.limit} "
            f"waiting={len(self._waiters)}>"
        )

    @property
    def over(self) -> bool:
        """True when more places are held than the limit allows now."""
        return self.holders > self.state.limit

    async def acquire(self) -> None:
        """Wait for a place under the limit, then hold it."""
        if self.holders < self.state.limit and not self._waiters:
            self.holders += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the place is counted as held when granted
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted, then cancelled: pass the place on
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Give a place back and let waiters in while the limit allows."""
        self.holders -= 1
        self._grant()

    def sample(self, rtt_s: float, inflight: int, dropped: bool) -> None:
        """Feed one attempt's sample to the limit; a higher limit lets waiters in."""
        self.state.on_sample(rtt_s, inflight, dropped)
        self._grant()

    def _grant(self) -> None:
        waiters = self._waiters
        while waiters and self.holders < self.state.limit:
            waiter = waiters.popleft()
            if not waiter.done():
                self.holders += 1
                waiter.set_result(None)


class Controls(PipelineFields):
    """The controlled worker loop and CoDel's sheds (mixed into ``Pipeline``)."""

    def _start_controls(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make the run's control states and choose the loop every worker runs."""
        config = self.config
        if config.concurrency_limit is not None:
            self._gate = LimitGate(config.concurrency_limit.start(config.concurrency))
        queue = self._queue
        if isinstance(queue, CoDelWorkQueue):
            queue.start(loop.time, self._shed_queued)
        if self._gate is not None or config.codel is not None:
            self._worker_loop = self._work_controlled

    async def _work_controlled(self) -> None:
        """A worker's loop under a concurrency limit and/or CoDel (see the module)."""
        queue = self._queue
        gate = self._gate
        cancelling = asyncio.current_task().cancelling
        try:
            await self._work_controlled_until_cancelled(queue, gate, cancelling)
        except WorkerRetired:
            return  # resize() retired this worker while it waited for an item
        raise asyncio.CancelledError

    async def _work_controlled_until_cancelled(
        self, queue: WorkQueue[WorkItem], gate: LimitGate | None, cancelling: Callable[[], int]
    ) -> None:
        while not cancelling():
            if queue.retiring:
                queue.leave()  # resize() asked a worker to leave: this one
                return
            if gate is None:
                item = await queue.get()  # a CoDel queue's get: it may shed on the way
                await self._attempt(item)
                continue
            held = False
            try:
                await gate.acquire()
                held = True
                item = await queue.get()
                while gate.over:
                    # The limit fell while this worker waited for an item: give both back.
                    queue.unget(item)
                    gate.release()
                    held = False
                    await gate.acquire()
                    held = True
                    item = await queue.get()
                errors, attempts = len(item.errors), item.attempts
                await self._attempt(item)
                if item.attempts != attempts:  # an attempt ran (not expired, not cancelled)
                    now = self._loop.time()
                    limit = gate.state.limit
                    gate.sample(now - item.started_s, self._busy + 1, len(item.errors) != errors)
                    if gate.state.limit != limit:
                        self._emit_at(EventKind.LIMIT_CHANGED, now, gate.state.limit)
            finally:
                if held:
                    gate.release()

    def _control_statistics(self) -> dict[str, Any]:
        """The controls' ``statistics()`` fields."""
        gate = self._gate
        return {
            "concurrency_limit": None if gate is None else gate.state.limit,
            "codel_shed": self._codel_shed,
        }

    def _shed_queued(self, item: WorkItem, now: float) -> None:
        """CoDel shed ``item`` from the queue: count it as shed, settle it, report it."""
        item.queued = False
        self._shed.append(item.payload)
        self._codel_shed += 1
        self._settle()
        try:
            self._emit_at(EventKind.QUEUE_SHED, now, item)  # guarded: a listener cannot raise
            self._note_expired(item)  # in a chain: settled at its joint, handed nothing on
        except BaseException as error:
            # Counted already; a worker taking an item must not die of its report.
            self._abort(error)
        if self._log_warning:
            self._log(
                logging.WARNING,
                "pipeline.shed",
                trace_id=trace_id(item),
                attempts=item.attempts,
                waited_s=now - item.admitted_s,
            )
