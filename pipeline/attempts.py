"""Workers and attempts: how a :class:`~pipeline.Pipeline` works an item.

A worker takes an item, waits for the rate limit, calls the handler (on a
thread for a plain function) and then records the outcome: completed, a retry
held for its backoff, or a dead letter.

What keeps every item accounted for, whatever the handler does:

- **Only the handler's own outcome is an attempt failure.** An ``Exception``
  and a ``CancelledError`` the handler raised itself (nobody cancelled the
  worker) are failures, retried by the policy. A real cancellation (drain
  timeout, ``run()`` cancelled) leaves the item running, so the close hands it
  back unfinished. Any other ``BaseException`` stops the run: the pipeline
  closes and ``run()``/``drain()`` raise it, with ``pipeline.report``
  balanced. ``KeyboardInterrupt`` and ``SystemExit`` go straight through, as
  asyncio wants.
- **Bookkeeping after an attempt cannot lose the item.** Everything that can
  fail (formatting the error, the backoff's random draw, listeners, logging)
  either never raises or runs before the item changes state; if it fails
  anyway, the item stays running (unfinished) and the run stops loudly.
- **A thread cannot be cancelled.** A plain-function call still running when
  the run ends is reported in ``report.abandoned`` as well as unfinished:
  its side effect may still happen.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from .events import EventKind
from .fields import PipelineFields
from .intake import trace_id
from .items import WorkItem
from .overload.guard import Guard
from .queue import WorkerRetired
from .records import AttemptError, DeadLetter, Result, describe_error
from .retry import requested_delay
from .state import State

__all__ = ["is_async_callable"]

# Enum members looked up once, for the per-item paths: on Python 3.11 every
# ``EventKind.STARTED`` goes through ``EnumType.__getattr__`` (about 0.1 us a time).
_STARTED = EventKind.STARTED
_COMPLETED = EventKind.COMPLETED
_OPEN = State.OPEN
_EXPIRED_WAITING = object()  # _by_deadline: the deadline came during the wait


def is_async_callable(handler: object) -> bool:
    """Whether ``handler`` is awaited (an ``async def``, or an object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    )


class Attempts(PipelineFields):
    """The worker loop and one attempt's life (mixed into ``Pipeline``)."""

    async def _work(self) -> None:
        queue = self._queue
        if self._is_async or self.config.prefetch == 1:
            # Until the close cancels this worker, even if a handler swallowed that cancel
            # (work already woken when the close begins still happens).
            cancelling = asyncio.current_task().cancelling
            try:
                while not cancelling():
                    if queue.retiring:
                        queue.leave()  # resize() asked a worker to leave: this one
                        return
                    # get_nowait when something is queued: no coroutine for the common case
                    item = await queue.get() if queue.empty() else queue.get_nowait()
                    await self._attempt(item)  # which marks it taken at once: see _attempt
            except WorkerRetired:
                return  # resize() retired this worker while it waited for an item
            raise asyncio.CancelledError
        # A plain-function handler runs on threads: keep up to `prefetch` in flight.
        in_flight = asyncio.Semaphore(self.config.prefetch)
        calls: set[asyncio.Task[None]] = set()
        retired = False
        try:
            while True:
                await in_flight.acquire()
                try:
                    if queue.retiring:
                        queue.leave()  # resize() asked a worker to leave: this one
                        raise WorkerRetired
                    item = await queue.get()
                except BaseException:
                    in_flight.release()
                    raise
                item.queued = False
                call = self._loop.create_task(self._attempt(item))
                calls.add(call)
                self._own_tasks.add(call)
                call.add_done_callback(calls.discard)
                call.add_done_callback(self._own_tasks.discard)
                call.add_done_callback(lambda _: in_flight.release())
        except WorkerRetired:
            retired = True  # its calls in flight still finish, unless the close comes first
        finally:
            if not retired:
                for call in calls:
                    call.cancel()
            if calls:
                await asyncio.gather(*calls, return_exceptions=True)

    async def _attempt(self, item: WorkItem) -> None:
        config = self.config
        deadline = item.deadline_s
        if deadline is not None:
            # Taken from the queue just now (the worker awaits this at once; a prefetching
            # worker marks it itself), so the sweep must not expire it from there.
            item.queued = False
            if deadline <= self._loop.time():
                self._expire(item, self._loop.time())  # taken at its deadline: too late
                return
        self._busy += 1
        self._running[item] = None
        guard = self._guard
        try:
            refused: Exception | None = None
            if item.refusal is not None:
                refused = item.refusal[1]  # a bad key or deadline: fails without a call
            elif guard is not None or self._limiter is not None:
                refused = await self._wait_to_start(item, guard)
                if refused is _EXPIRED_WAITING:
                    self._busy -= 1
                    del self._running[item]
                    self._expire(item, self._loop.time())
                    return
            # The attempt starts now (written out here: this runs once per attempt).
            now = self._loop.time()
            item.attempts += 1
            self._attempts += 1
            item.started_s = now
            if item.first_start_s is None:
                item.first_start_s = now
            listener = self._on_started
            if listener is not None:
                try:
                    listener(_STARTED, now, item)
                except BaseException as error:
                    self._listener_failed(_STARTED, error)
            if refused is not None:
                raise refused
            if config.attempt_timeout_s is None:
                # _call written out for a coroutine handler: one Python call less an attempt
                value = await (self.handler(item.payload) if self._is_async else self._call(item))
            else:
                async with asyncio.timeout(config.attempt_timeout_s):
                    value = await self._call(item)
        except asyncio.CancelledError as error:
            if _cancel_requested():
                self._busy -= 1  # the close hands the item back as unfinished
                raise
            failure: BaseException = error  # the handler's own CancelledError
        except (KeyboardInterrupt, SystemExit):
            self._busy -= 1
            raise
        except Exception as error:
            failure = error
        except BaseException as error:
            self._busy -= 1
            self._abort(error)  # the item stays running: the close hands it back
            return
        else:
            self._busy -= 1
            del self._running[item]
            if guard is not None:
                guard.ended(item, self._loop.time(), failed=False)
            if not self._is_async:
                self._thread_calls.pop(item, None)
            self._completed += 1
            listener = self._on_completed  # inline, not the guarded wrapper: the hot path
            if listener is not None:
                try:
                    # _clock: loop.time, or time.monotonic itself (a C call) under asyncio
                    listener(_COMPLETED, self._clock(), item)
                except BaseException as error:
                    self._listener_failed(_COMPLETED, error)
            if self._stream is None:
                # _settle, written out (once per item)
                self._unsettled -= 1
                if not self._unsettled and self.state is not _OPEN:
                    self._settled.set()
            else:
                await self._finish(Result(item.payload, value, item.attempts))
            return
        self._busy -= 1
        try:
            letter = self._fail(item, failure)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as bug:
            self._abort(bug)  # the item is still in _running: unfinished
            return
        if letter is not None:
            await self._finish(Result(item.payload, None, item.attempts, letter))

    async def _wait_to_start(self, item: WorkItem, guard: Guard | None) -> Any:
        """Wait for the circuit breaker, then the rate limit, before an attempt.

        Waiting is not part of the attempt: the item counts as taken (its worker
        is busy) but not started until both let it go. The breaker comes first,
        so the rate limiter's window counts the times calls really start.

        Returns:
            None when the attempt may start, the limiter's error when it refused
            the item (that is then its attempt, with no handler call), or
            :data:`_EXPIRED_WAITING` when the item's deadline came first.
        """
        if guard is not None and guard.breaker is not None:
            if item.deadline_s is None:
                await guard.admit(item)
            elif await self._by_deadline(item, guard.admit(item)) is _EXPIRED_WAITING:
                return _EXPIRED_WAITING
        refused = None
        if self._limiter is not None:
            if item.deadline_s is None:
                try:
                    await self._limiter.acquire(item.payload)
                except Exception as error:
                    refused = error  # refused outright: that is its attempt
            else:
                refused = await self._by_deadline(item, self._limiter.acquire(item.payload))
            if refused is not None and guard is not None:
                guard.release(item)  # the breaker let it through; no call will be made
            if refused is _EXPIRED_WAITING:
                return refused
        if guard is not None:
            # The attempt starts at this loop time (the caller does not wait again).
            guard.starting(item, self._loop.time())
        return refused

    async def _by_deadline(self, item: WorkItem, waiting: Awaitable[Any]) -> Any:
        """Await ``waiting`` (the breaker or the rate limit), but no later than ``item``'s deadline.

        Returns None when it ended, its error when it refused the item, or
        :data:`_EXPIRED_WAITING` when the deadline came first (the limiter and the
        breaker count nothing for a wait abandoned).
        """
        limit = asyncio.timeout_at(item.deadline_s)
        try:
            async with limit:
                await waiting
        except TimeoutError as error:
            return _EXPIRED_WAITING if limit.expired() else error
        except Exception as error:
            return error
        return None

    def _call(self, item: WorkItem) -> Awaitable[Any]:
        if self._is_async:
            return self.handler(item.payload)
        return self._call_on_thread(item)

    async def _call_on_thread(self, item: WorkItem) -> Any:
        call = ThreadCall(self.handler, item.payload)
        self._thread_calls[item] = call
        try:
            value = await asyncio.to_thread(call.run)
        except asyncio.CancelledError:
            if not _cancel_requested():
                del self._thread_calls[item]
            raise  # cancelled: the thread may still run; the close asks it
        except BaseException:
            del self._thread_calls[item]
            raise
        del self._thread_calls[item]
        if inspect.isawaitable(value):
            # A plain function that returns a coroutine (a lambda or decorator
            # around an async def): the work is in that coroutine, so run it.
            value = await value
        return value

    def _fail(self, item: WorkItem, error: BaseException) -> DeadLetter | None:
        """Record a failed attempt: hold the item for a retry, or dead-letter it.

        Everything that may raise runs before the item changes state, so if
        this raises the item is still running and nothing is half done.

        Returns:
            The dead letter, or None when a retry was scheduled.
        """
        config = self.config
        now = self._loop.time()
        record = AttemptError.from_exception(item.attempts, error, now)
        guard = self._guard
        if guard is not None:
            guard.ended(item, now, failed=True)  # a handler call (no permit: none was made)
        # A refused item's key or deadline would be as bad next time: no retry.
        retryable = item.refusal is None and config.retry.is_retryable(error)
        wants_retry = retryable and item.attempts < config.max_attempts
        if wants_retry and (guard is None or guard.may_retry(item, now)):
            delay = config.backoff.delay(item.attempts, self._rng)
            if not (isinstance(delay, int | float) and 0.0 <= delay < math.inf):
                raise ValueError(
                    f"the backoff delay must be a finite number of seconds >= 0, got {delay!r} "
                    f"(from {config.backoff!r} with rng {self._rng!r})"
                )
            asked = requested_delay(error)
            if asked is not None and asked > delay:
                delay = asked  # the downstream said when (Retry-After): no sooner
            del self._running[item]
            self._count_failure(record)
            item.errors.append(record)
            self._retried += 1
            if item.deadline_s is not None and now + delay >= item.deadline_s:
                # The retry could only start at or after its deadline: it expires now,
                # through the same events as a retry readmitted and expired at once.
                self._thread_calls.pop(item, None)
                self._emit_at(EventKind.RETRY_SCHEDULED, now, item)
                self._emit_at(EventKind.READMITTED, now, item)
                self._expire(item, now)
                return None
            self._queue.hold()
            self._retry_timers[item] = self._loop.call_later(delay, self._readmit, item)
            self._emit_at(EventKind.RETRY_SCHEDULED, now, item)
            if self._log_info:
                self._log(
                    logging.INFO,
                    "pipeline.retry_scheduled",
                    trace_id=trace_id(item),
                    attempt=item.attempts,
                    delay_s=delay,
                    error=f"{record.type}: {record.message}",
                )
            return None
        del self._running[item]
        self._count_failure(record)
        item.errors.append(record)
        self._thread_calls.pop(item, None)
        letter = DeadLetter(
            payload=item.payload,
            attempts=item.attempts,
            errors=tuple(item.errors),
            reason=(
                item.refusal[0]
                if item.refusal is not None
                else "retry_budget"  # wanted a retry; the budget denied it
                if wants_retry
                else "max_attempts"
                if retryable
                else "not_retryable"
            ),
        )
        self._dead_letters.append(letter)
        self._emit_at(EventKind.DEAD_LETTERED, now, item)
        if self._log_warning:
            self._log(
                logging.WARNING,
                "pipeline.dead_lettered",
                trace_id=trace_id(item),
                attempts=item.attempts,
                reason=letter.reason,
                error=f"{record.type}: {record.message}",
            )
        return letter

    def _count_failure(self, record: AttemptError) -> None:
        """Count a failed attempt as timed out (a ``TimeoutError``) or failed."""
        if record.type == "TimeoutError":
            self._attempts_timed_out += 1
        else:
            self._attempts_failed += 1

    def _readmit(self, item: WorkItem) -> None:
        del self._retry_timers[item]
        item.queued = True
        self._queue.readmit(item)
        if item.deadline_s is not None:
            self._sweep.watch(item)
        self._emit(EventKind.READMITTED, item)

    async def _finish(self, result: Result) -> None:
        """Hand ``result`` to the results stream (if anyone asked), then settle the item.

        In a chain the stream is the hand-off to the next stage, whose admission calls the
        user's key and deadline functions there. What they raise that is not an
        ``Exception`` stops the run, as a handler's would (``KeyboardInterrupt`` and
        ``SystemExit`` go straight through): it must not end this worker silently.
        """
        try:
            if self._stream is not None:
                await self._stream.send(result)
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:
            self._abort(error)  # run()/drain() raise it as itself after the close
        finally:
            self._settle()

    def _settle(self) -> None:
        self._unsettled -= 1
        if self._unsettled == 0 and not self._accepting():
            self._settled.set()


class ThreadCall:
    """One plain-function handler call on a thread, which the close can ask about.

    A thread cannot be cancelled: once it runs, the call's side effect will
    happen whatever the pipeline does. The close uses :meth:`abandon` to
    cancel calls that have not started and to learn which ones have.
    """

    __slots__ = ("_lock", "handler", "payload", "state")

    def __init__(self, handler: Callable[[Any], Any], payload: Any) -> None:
        self.handler = handler
        self.payload = payload
        self.state = "pending"  # -> "running" -> "done", or -> "skipped"
        self._lock = threading.Lock()

    def run(self) -> Any:
        """Call the handler (on the executor's thread)."""
        with self._lock:
            if self.state == "skipped":
                return None
            self.state = "running"
        try:
            return self.handler(self.payload)
        except StopIteration as stop:
            # A future cannot carry StopIteration (asyncio refuses it, and on
            # 3.11/3.12 the awaiting task then waits forever); report it as
            # generators do since PEP 479.
            raise RuntimeError(f"handler raised StopIteration: {describe_error(stop)}") from stop
        finally:
            with self._lock:
                self.state = "done"

    def abandon(self) -> bool:
        """Stop the call from starting; True if it had started (its effect may happen)."""
        with self._lock:
            if self.state == "pending":
                self.state = "skipped"
                return False
            return self.state != "skipped"


def _cancel_requested() -> bool:
    """True when someone cancelled the current task (not a CancelledError raised by a handler)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or cancelling() > 0
