"""Intake: how items get into a :class:`~pipeline.Pipeline`.

A producer per source reserves a slot *before* it reads the next item
(``on_full="block"``), so a lazy source is never read ahead of capacity; with
``on_full="reject"`` it reads, then admits or sheds at once. ``put`` and
``put_nowait`` are the same two paths for callers that push items.

Two rules keep intake fair and lossless:

- **Every producer gives the loop a turn after each item when admission
  cannot wait** (reject mode, or an unbounded queue). A sync source never
  suspends, and neither does an async generator that yields without awaiting;
  without a turn the workers, ``stop()`` and signal handlers would starve,
  and a burst would be shed while workers sat idle. The turn comes after the
  admission, whatever the source did while producing the item, so a worker
  takes each item before the next one is offered: sync and async sources
  behave the same.
- **Every source iterator is closed** when its producer stops early
  (``stop()``, cancellation, a failure), including a producer stopped before
  its first step, so the source's ``finally`` blocks always run.

This module holds that half of the engine's state machine; the class that
owns the state is :class:`~pipeline.engine.Pipeline`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Iterable
from typing import Any

from .errors import PipelineClosed, QueueFull
from .events import EventKind
from .fields import PipelineFields
from .items import WorkItem
from .state import State

__all__: list[str] = []

log = logging.getLogger("pipeline")

# Enum members looked up once, for the per-item paths: on Python 3.11 every
# ``State.OPEN`` goes through ``EnumType.__getattr__`` (about 0.1 us a time).
_OPEN = State.OPEN
_ADMITTED = EventKind.ADMITTED


class Intake(PipelineFields):
    """Producers, ``put``/``put_nowait`` and admission (mixed into ``Pipeline``)."""

    async def _produce(self, index: int, source: Iterable[Any] | AsyncIterable[Any]) -> None:
        del self._unread_sources[index]
        if isinstance(source, AsyncIterable):
            iterator: Any = aiter(source)
            is_async = True
        else:
            iterator = iter(source)
            is_async = False
        # What anext() and next() call, looked up once: called from Python, a Python
        # __anext__ runs without the builtin's trip through C (once per item).
        step = type(iterator).__anext__ if is_async else type(iterator).__next__
        reject = self.config.on_full == "reject"
        queue = self._queue
        # Admission that never waits needs a turn of the loop per item (see above).
        give_turns = reject or self.config.queue_maxsize is None
        exhausted = False
        try:
            while self.state is _OPEN:
                if not reject:
                    try:
                        if not queue.try_reserve():  # no coroutine when a slot is free
                            await self._wait_for_slot()
                    except PipelineClosed:
                        return
                try:
                    payload = await step(iterator) if is_async else step(iterator)
                except (StopIteration, StopAsyncIteration):
                    exhausted = True
                    if not reject:
                        queue.release()
                    return
                except BaseException:
                    if not reject:
                        queue.release()
                    raise
                if reject:
                    self._offer_or_shed(payload)
                else:
                    self._admit(payload)
                if give_turns:
                    await asyncio.sleep(0)
        except Exception:
            self.stop()
            raise
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise  # the close's cancel; the interrupts go straight through, as asyncio wants
        except BaseException as error:
            # Any other BaseException, from the source or from the user's key or deadline
            # function, stops the run as a handler's does: run() raises it as itself (not as
            # a SourceError) once the close has accounted for every item.
            self._abort(error)
            raise
        finally:
            if not exhausted:
                await close_iterator(iterator)

    async def _close_unread_sources(self) -> None:
        """Close sources whose producer was stopped before its first step."""
        unread = list(self._unread_sources.values())
        self._unread_sources.clear()
        for source in unread:
            if hasattr(source, "__anext__") or hasattr(source, "__next__"):
                await close_iterator(source)

    async def put(self, payload: Any) -> bool:
        """Offer one item, waiting for a slot while the queue is full (``on_full="block"``).

        Returns:
            True when admitted; False when shed (``on_full="reject"`` and full).

        Raises:
            PipelineClosed: intake has stopped, or stopped while waiting; the
                item was not taken.
        """
        if not self._accepting():
            raise PipelineClosed(f"{self!r} is not taking items (use 'async with' or run())")
        if self.config.on_full == "reject":
            return self._offer_or_shed(payload)
        if not self._queue.try_reserve():
            await self._wait_for_slot()
        self._admit(payload)
        return True

    def put_nowait(self, payload: Any) -> None:
        """Admit one item now.

        Raises:
            QueueFull: no slot is free (the item was not taken).
            PipelineClosed: intake has stopped.
        """
        if not self._accepting():
            raise PipelineClosed(f"{self!r} is not taking items")
        self._queue.reserve_nowait()
        self._admit(payload)

    def _offer_or_shed(self, payload: Any) -> bool:
        try:
            self._queue.reserve_nowait()
        except QueueFull:
            self._offered += 1
            self._shed.append(payload)
            self._emit(EventKind.SHED, payload)
            return False
        except PipelineClosed:
            # Intake closed while this payload was being read: hand it back.
            self._admit(payload, reserved=False)
            return False
        self._admit(payload)
        return True

    async def _wait_for_slot(self) -> None:
        """Wait for a free slot and take it, counting the time a producer is blocked."""
        queue = self._queue
        loop = self._loop
        since = loop.time()
        self._blocked_now += 1
        self._blocked_since_sum += since
        self._emit_at(EventKind.PRODUCER_BLOCKED, since, None)
        try:
            await queue.reserve()
        finally:
            now = loop.time()
            self._blocked_now -= 1
            self._blocked_since_sum -= since
            self._blocked_s += now - since
            self._emit_at(EventKind.PRODUCER_UNBLOCKED, now, None)

    def _admit(self, payload: Any, *, reserved: bool = True) -> None:
        """Take custody of ``payload`` (its slot already reserved, unless ``reserved`` is False)."""
        item = WorkItem(payload, self._admitted, self._loop.time())
        classify = self._classified
        if classify:
            try:
                self._classify(item)  # never raises an Exception: a bad key refuses the item
            except BaseException:
                # A KeyboardInterrupt from the user's key function: the payload is not
                # admitted (its caller sees the interrupt), so its slot is free again.
                if reserved:
                    self._queue.release()
                raise
        self._offered += 1
        self._admitted += 1
        listener = self._on_admitted  # inline, not the guarded wrapper: the hot path
        if listener is not None:
            try:
                listener(_ADMITTED, item.admitted_s, item)
            except BaseException as error:
                self._listener_failed(_ADMITTED, error)
        if self.state is not _OPEN:
            # stop() ran while the producer was inside the source reading this
            # payload: it is accounted for and handed back unfinished, not queued.
            if reserved:
                self._queue.release()
            self._handed_back.append(item)
            return
        self._unsettled += 1
        if not classify:
            self._queue.put_reserved(item)
        elif item.refusal is not None:
            self._queue.put_refused(item)
        else:
            item.queued = True
            self._queue.put_reserved(item)
            if item.deadline_s is not None:
                self._sweep.watch(item)
        if self._log_debug:
            self._log(
                logging.DEBUG,
                "pipeline.enqueued",
                trace_id=trace_id(item),
                queue_depth=len(self._queue),
            )


def trace_id(item: WorkItem) -> str:
    """The payload's ``trace_id`` if it has one, else the admission number; never raises."""
    try:
        trace = getattr(item.payload, "trace_id", None)
        if trace is not None:
            return str(trace)
    except Exception:
        pass
    return f"seq-{item.seq}"


async def close_iterator(iterator: Any) -> None:
    """Close a source we stopped reading early, so its ``finally`` blocks run now."""
    for name in ("aclose", "close"):
        closer = getattr(iterator, name, None)
        if closer is None:
            continue
        try:
            outcome = closer()
            if name == "aclose":
                await outcome
        except Exception:
            log.exception("pipeline.source_close_failed")
        return
