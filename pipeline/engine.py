"""``Pipeline``: producers, one bounded queue, a worker pool, retries, dead letters, drain.

The engine reads time only through ``loop.time()``, draws random numbers only
from the generator it is given, and never prints, so the same code runs on a
service's event loop, in a Jupyter kernel and on the virtual-time loop of
:mod:`pipeline.sim`.

Life of an item::

    source --(producer: reserve a slot, then read)--> queue --> worker --> handler
                                                        ^                   |  failure
                                   readmit (front) <----+--- held for a ----+  retryable,
                                                            backoff            budget left
                                                                            |  otherwise
                                                                            v
                                                                       dead letters

Every admitted item ends as exactly one of completed, dead-lettered or
unfinished (handed back when the drain times out); every offered item is
admitted or shed. :class:`~pipeline.records.RunReport` keeps that account.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import random
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from .config import PipelineConfig
from .errors import PipelineClosed, QueueFull, SourceError
from .events import EventKind, Listener
from .items import WorkItem
from .queue import WorkQueue
from .ratelimit import RateLimiter
from .records import AttemptError, DeadLetter, Result, RunReport
from .results import ResultStream
from .stats import Statistics

__all__ = ["Pipeline", "State"]

log = logging.getLogger("pipeline")

Handler = Callable[[Any], Any] | Callable[[Any], Awaitable[Any]]


class State(enum.Enum):
    """Lifecycle: IDLE -> OPEN -> DRAINING -> CLOSED."""

    IDLE = "idle"
    OPEN = "open"
    DRAINING = "draining"
    CLOSED = "closed"


def _is_async_callable(handler: object) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    )


def _trace_id(item: WorkItem) -> str:
    trace = getattr(item.payload, "trace_id", None)
    return str(trace) if trace is not None else f"seq-{item.seq}"


class Pipeline:
    """A bounded asyncio work pipeline.

    Args:
        handler: ``async def handler(payload)`` or a plain function (run on a
            thread with ``asyncio.to_thread``). Its return value is the result.
        config: a :class:`~pipeline.config.PipelineConfig` (defaults if None).
        on_event: a listener ``f(kind, now_s, item)`` called at every state
            change (see :mod:`pipeline.events`).
        rng: random generator for backoff jitter; pass a seeded one for
            repeatable runs.
        name: used in task names, logs and ``repr``.

    Use it either with a source::

        report = await Pipeline(handle, PipelineConfig(concurrency=4)).run(items)

    or as a service you push into::

        async with Pipeline(handle, config) as pipe:
            await pipe.put(item)          # waits while the queue is full
        report = pipe.report

    Raises:
        TypeError: ``handler`` is not callable or ``config`` is not a PipelineConfig.
    """

    def __init__(
        self,
        handler: Handler,
        config: PipelineConfig | None = None,
        *,
        on_event: Listener | None = None,
        rng: random.Random | None = None,
        name: str = "pipeline",
    ) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {handler!r}")
        config = PipelineConfig() if config is None else config
        if not isinstance(config, PipelineConfig):
            raise TypeError(f"config must be a PipelineConfig, got {config!r}")
        if on_event is not None and not callable(on_event):
            raise TypeError(f"on_event must be callable or None, got {on_event!r}")
        self.handler = handler
        self.config = config
        self.name = name
        self._on_event = on_event
        self._rng = rng if rng is not None else random.Random()
        self._is_async = _is_async_callable(handler)
        self._queue: WorkQueue[WorkItem] = WorkQueue(config.queue_maxsize)
        self.state = State.IDLE
        self.report: RunReport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._producers: list[asyncio.Task[None]] = []
        self._running: dict[WorkItem, None] = {}
        self._retry_timers: dict[WorkItem, asyncio.TimerHandle] = {}
        self._limiter: RateLimiter | None = None
        self._stream: ResultStream | None = None
        self._settled: asyncio.Event | None = None
        self._unsettled = 0
        self._offered = 0
        self._admitted = 0
        self._completed = 0
        self._retried = 0
        self._attempts = 0
        self._busy = 0
        self._dead_letters: list[DeadLetter] = []
        self._shed: list[Any] = []
        self._unfinished: list[Any] = []
        self._handed_back: list[WorkItem] = []
        self._closing: asyncio.Task[RunReport] | None = None
        self._blocked_s = 0.0
        self._blocked_now = 0
        self._blocked_since_sum = 0.0
        self._drain_timed_out = False
        self._signals: tuple[int, ...] = ()
        self._started_s = 0.0
        self._log_debug = False
        self._log_info = False
        self._log_warning = False

    def __repr__(self) -> str:
        bound = "unbounded" if self.config.queue_maxsize is None else self.config.queue_maxsize
        return (
            f"<Pipeline {self.name!r} state={self.state.value} queue={len(self._queue)}/{bound} "
            f"busy={self._busy}/{self.config.concurrency} completed={self._completed} "
            f"dead_lettered={len(self._dead_letters)}>"
        )

    # -- lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> Pipeline:
        self._start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            await self._shutdown()
        else:
            await self.drain()

    def _start(self) -> None:
        if self.state is not State.IDLE:
            raise PipelineClosed(f"{self!r} has already run; make a new Pipeline")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._started_s = loop.time()
        self._settled = asyncio.Event()
        self._log_debug = log.isEnabledFor(logging.DEBUG)
        self._log_info = log.isEnabledFor(logging.INFO)
        self._log_warning = log.isEnabledFor(logging.WARNING)
        if self.config.rate_limit is not None:
            self._limiter = RateLimiter(self.config.rate_limit, self._started_s)
        self.state = State.OPEN
        self._workers = [
            loop.create_task(self._work(), name=f"{self.name}-worker-{index}")
            for index in range(self.config.concurrency)
        ]

    def stop(self) -> None:
        """Stop intake: producers stop reading, waiting ``put`` calls get PipelineClosed.

        Items already admitted carry on; :meth:`drain` (or leaving ``async with``,
        or the end of :meth:`run`) waits for them. Calling it again is harmless.
        """
        if self.state is not State.OPEN:
            return
        self.state = State.DRAINING
        self._queue.close()
        current = asyncio.current_task()
        for producer in self._producers:
            if producer is not current:
                producer.cancel()
        self._emit(EventKind.INTAKE_CLOSED, None)
        if self._unsettled == 0 and self._settled is not None:
            self._settled.set()

    def stop_on_signals(self, *signals: int) -> None:
        """Call :meth:`stop` when the process receives one of ``signals`` (default SIGTERM, SIGINT).

        For a service: the orchestrator's SIGTERM stops intake and the run
        drains within ``drain_timeout_s``. Unix only (``loop.add_signal_handler``);
        the handlers are removed when the pipeline closes.

        Raises:
            PipelineClosed: the pipeline is not running.
        """
        import signal

        if self._loop is None or self.state is State.CLOSED:
            raise PipelineClosed(f"{self!r} is not running; call this inside run() or 'async with'")
        chosen = signals or (signal.SIGTERM, signal.SIGINT)
        for each in chosen:
            self._loop.add_signal_handler(each, self.stop)
        self._signals = chosen

    async def drain(self) -> RunReport:
        """Stop intake, wait for every admitted item, then close.

        Waits at most ``drain_timeout_s`` seconds of loop time for queued,
        running and retry-waiting items; whatever is left is cancelled and
        handed back in ``report.unfinished``. Calling it again returns the same
        report.

        Returns:
            The :class:`~pipeline.records.RunReport`, also kept as ``self.report``.
        """
        if self.state is State.IDLE:
            self._start()
        if self._closing is not None:  # closing or closed already: share its report
            return await asyncio.shield(self._closing)
        self.stop()
        assert self._settled is not None
        try:
            if self._unsettled:
                try:
                    async with asyncio.timeout(self.config.drain_timeout_s):
                        await self._settled.wait()
                except TimeoutError:
                    self._note_drain_timeout()
        except asyncio.CancelledError:
            # Cancelled while waiting: still hand back what is inside, then propagate.
            await self._shutdown()
            raise
        return await self._shutdown()

    def _note_drain_timeout(self) -> None:
        if self._drain_timed_out or self._closing is not None:
            return  # another drain call timed out at the same instant, or a close began
        self._drain_timed_out = True
        self._emit(EventKind.DRAIN_TIMEOUT, None)
        log.warning(
            "pipeline.drain_timeout",
            extra={
                "event": "pipeline.drain_timeout",
                "pipeline": self.name,
                "left": self._unsettled,
                "drain_timeout_s": self.config.drain_timeout_s,
            },
        )

    async def _shutdown(self) -> RunReport:
        """Close once, however many callers ask (a drain, a cancelled run, ``async with``).

        The work runs in its own task, shielded: a caller cancelled meanwhile
        does not leave the pipeline half closed, and every caller gets the
        same report.
        """
        if self._closing is None:
            loop = asyncio.get_running_loop()
            self._closing = loop.create_task(self._close(), name=f"{self.name}-close")
        return await asyncio.shield(self._closing)

    async def _close(self) -> RunReport:
        """Cancel workers and retry timers; whatever is still inside is unfinished."""
        self.state = State.DRAINING
        self._queue.close()
        tasks = [*self._producers, *self._workers]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        left = [
            *self._handed_back,
            *self._running,
            *self._queue.drain_items(),
            *self._retry_timers,
        ]
        for timer in self._retry_timers.values():
            timer.cancel()
            self._queue.unhold()
        self._retry_timers.clear()
        self._running.clear()
        left.sort(key=lambda item: item.seq)
        for item in left:
            self._emit(EventKind.UNFINISHED, item)
        self._unfinished = [item.payload for item in left]
        self._unsettled -= len(left) - len(self._handed_back)
        if self._stream is not None:
            self._stream.close()
        for each in self._signals:
            self._loop.remove_signal_handler(each)  # type: ignore[union-attr]
        self.state = State.CLOSED
        assert self._settled is not None
        self._settled.set()  # wake any drain() still waiting in another task
        self.report = RunReport(
            offered=self._offered,
            admitted=self._admitted,
            completed=self._completed,
            dead_letters=list(self._dead_letters),
            unfinished=self._unfinished,
            shed=list(self._shed),
            attempts=self._attempts,
            drain_timed_out=self._drain_timed_out,
            started_s=self._started_s,
            finished_s=self._now(),
            statistics=self.statistics(),
        )
        return self.report

    # -- intake --------------------------------------------------------------------

    async def run(
        self,
        source: Iterable[Any] | AsyncIterable[Any],
        *more_sources: Iterable[Any] | AsyncIterable[Any],
    ) -> RunReport:
        """Feed every item of ``source`` (and ``more_sources``, one producer each), then drain.

        Sources are read lazily: a producer waits for a free slot before it
        takes the next item, so nothing is read ahead of capacity. An async
        iterator left unfinished (``stop()``, cancellation) is ``aclose()``d.

        Returns:
            The :class:`~pipeline.records.RunReport`.

        Raises:
            TypeError: a source is neither iterable nor async iterable.
            SourceError: a source raised; the run was drained first and the
                report is on the exception.
            PipelineClosed: this pipeline has already run.
        """
        sources = (source, *more_sources)
        for index, each in enumerate(sources):
            if not isinstance(each, Iterable | AsyncIterable):
                raise TypeError(
                    f"source {index} must be an iterable or async iterable, got {each!r}"
                )
        self._start()
        loop = asyncio.get_running_loop()
        self._producers = [
            loop.create_task(self._produce(each), name=f"{self.name}-producer-{index}")
            for index, each in enumerate(sources)
        ]
        try:
            outcomes = await asyncio.gather(*self._producers, return_exceptions=True)
        except asyncio.CancelledError:
            await self._shutdown()
            raise
        failures = [
            outcome
            for outcome in outcomes
            if isinstance(outcome, BaseException)
            and not isinstance(outcome, asyncio.CancelledError)
        ]
        try:
            report = await self.drain()
        except asyncio.CancelledError:
            await self._shutdown()
            raise
        if failures:
            raise SourceError(
                f"source raised {type(failures[0]).__name__}: {failures[0]}", report
            ) from failures[0]
        return report

    async def _produce(self, source: Iterable[Any] | AsyncIterable[Any]) -> None:
        if isinstance(source, AsyncIterable):
            iterator: Any = aiter(source)
            is_async = True
        else:
            iterator = iter(source)
            is_async = False
        reject = self.config.on_full == "reject"
        queue = self._queue
        yield_each = not is_async and (reject or self.config.queue_maxsize is None)
        exhausted = False
        try:
            while True:
                if not reject:
                    try:
                        await self._reserve_slot()
                    except PipelineClosed:
                        return
                try:
                    payload = await anext(iterator) if is_async else next(iterator)
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
                if yield_each:
                    # A sync source never suspends, and here neither does admission:
                    # let workers (and stop(), timers, signals) run between items.
                    await asyncio.sleep(0)
        except Exception:
            self.stop()
            raise
        finally:
            if not exhausted:
                await _close_iterator(iterator)

    async def put(self, payload: Any) -> bool:
        """Offer one item, waiting for a slot while the queue is full (``on_full="block"``).

        Returns:
            True when admitted; False when shed (``on_full="reject"`` and full).

        Raises:
            PipelineClosed: intake has stopped, or stopped while waiting; the
                item was not taken.
        """
        if self.state is not State.OPEN:
            raise PipelineClosed(f"{self!r} is not taking items (use 'async with' or run())")
        if self.config.on_full == "reject":
            return self._offer_or_shed(payload)
        await self._reserve_slot()
        self._admit(payload)
        return True

    def put_nowait(self, payload: Any) -> None:
        """Admit one item now.

        Raises:
            QueueFull: no slot is free (the item was not taken).
            PipelineClosed: intake has stopped.
        """
        if self.state is not State.OPEN:
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

    async def _reserve_slot(self) -> None:
        queue = self._queue
        if not queue.full():
            queue.reserve_nowait()
            return
        loop = self._loop
        assert loop is not None
        since = loop.time()
        self._blocked_now += 1
        self._blocked_since_sum += since
        if self._on_event is not None:
            self._on_event(EventKind.PRODUCER_BLOCKED, since, None)
        try:
            await queue.reserve()
        finally:
            now = loop.time()
            self._blocked_now -= 1
            self._blocked_since_sum -= since
            self._blocked_s += now - since
            if self._on_event is not None:
                self._on_event(EventKind.PRODUCER_UNBLOCKED, now, None)

    def _admit(self, payload: Any, *, reserved: bool = True) -> None:
        """Take custody of ``payload`` (its slot already reserved, unless ``reserved`` is False)."""
        assert self._loop is not None
        item = WorkItem(payload, self._admitted, self._loop.time())
        self._offered += 1
        self._admitted += 1
        if self._on_event is not None:
            self._on_event(EventKind.ADMITTED, item.admitted_s, item)
        if self.state is not State.OPEN:
            # stop() ran while the producer was inside the source reading this
            # payload: it is accounted for and handed back unfinished, not queued.
            if reserved:
                self._queue.release()
            self._handed_back.append(item)
            return
        self._unsettled += 1
        self._queue.put_reserved(item)
        if self._log_debug:
            log.debug(
                "pipeline.enqueued",
                extra={
                    "event": "pipeline.enqueued",
                    "trace_id": _trace_id(item),
                    "queue_depth": len(self._queue),
                },
            )

    # -- work ----------------------------------------------------------------------

    async def _work(self) -> None:
        queue = self._queue
        if self._is_async or self.config.prefetch == 1:
            while True:
                item = await queue.get()
                await self._attempt(item)
        # A plain-function handler runs on threads: keep up to `prefetch` in flight.
        in_flight = asyncio.Semaphore(self.config.prefetch)
        calls: set[asyncio.Task[None]] = set()
        try:
            while True:
                await in_flight.acquire()
                try:
                    item = await queue.get()
                except BaseException:
                    in_flight.release()
                    raise
                call = asyncio.get_running_loop().create_task(self._attempt(item))
                calls.add(call)
                call.add_done_callback(calls.discard)
                call.add_done_callback(lambda _: in_flight.release())
        finally:
            for call in calls:
                call.cancel()
            if calls:
                await asyncio.gather(*calls, return_exceptions=True)

    async def _attempt(self, item: WorkItem) -> None:
        loop = self._loop
        assert loop is not None
        config = self.config
        self._busy += 1
        self._running[item] = None
        started = False
        try:
            if self._limiter is not None:
                # Waiting for the rate limit is not part of the attempt: the item
                # counts as waiting (not started) until the limiter lets it go.
                await self._limiter.acquire(item.payload)
            started = True
            self._begin(item)
            if config.attempt_timeout_s is None:
                value = await self._call(item.payload)
            else:
                async with asyncio.timeout(config.attempt_timeout_s):
                    value = await self._call(item.payload)
        except Exception as error:
            if not started:  # the limiter refused the item outright: that is its attempt
                self._begin(item)
            self._busy -= 1
            del self._running[item]
            await self._fail(item, error)
            return
        except BaseException:
            # Cancelled (drain timeout, or run() cancelled): the item stays in
            # _running so the shutdown hands it back as unfinished.
            self._busy -= 1
            raise
        self._busy -= 1
        del self._running[item]
        self._completed += 1
        if self._on_event is not None:
            self._on_event(EventKind.COMPLETED, loop.time(), item)
        if self._stream is not None:
            await self._stream.send(Result(item.payload, value, item.attempts))
        self._settle()

    def _begin(self, item: WorkItem) -> None:
        """Count one attempt as started now."""
        assert self._loop is not None
        now = self._loop.time()
        item.attempts += 1
        self._attempts += 1
        if item.first_start_s is None:
            item.first_start_s = now
        if self._on_event is not None:
            self._on_event(EventKind.STARTED, now, item)

    def _call(self, payload: Any) -> Awaitable[Any]:
        if self._is_async:
            return self.handler(payload)
        return self._call_on_thread(payload)

    async def _call_on_thread(self, payload: Any) -> Any:
        value = await asyncio.to_thread(self.handler, payload)
        if inspect.isawaitable(value):
            # A plain function that returns a coroutine (a lambda or decorator
            # around an async def): the work is in that coroutine, so run it.
            value = await value
        return value

    async def _fail(self, item: WorkItem, error: Exception) -> None:
        loop = self._loop
        assert loop is not None
        config = self.config
        now = loop.time()
        item.errors.append(AttemptError.from_exception(item.attempts, error, now))
        retryable = config.retry.is_retryable(error)
        if retryable and item.attempts < config.max_attempts:
            self._retried += 1
            delay = config.backoff.delay(item.attempts, self._rng)
            self._queue.hold()
            self._retry_timers[item] = loop.call_later(delay, self._readmit, item)
            if self._on_event is not None:
                self._on_event(EventKind.RETRY_SCHEDULED, now, item)
            if self._log_info:
                log.info(
                    "pipeline.retry_scheduled",
                    extra={
                        "event": "pipeline.retry_scheduled",
                        "trace_id": _trace_id(item),
                        "attempt": item.attempts,
                        "delay_s": delay,
                        "error": f"{type(error).__name__}: {error}",
                    },
                )
            return
        letter = DeadLetter(
            payload=item.payload,
            attempts=item.attempts,
            errors=tuple(item.errors),
            reason="max_attempts" if retryable else "not_retryable",
        )
        self._dead_letters.append(letter)
        if self._on_event is not None:
            self._on_event(EventKind.DEAD_LETTERED, now, item)
        if self._log_warning:
            log.warning(
                "pipeline.dead_lettered",
                extra={
                    "event": "pipeline.dead_lettered",
                    "trace_id": _trace_id(item),
                    "attempts": item.attempts,
                    "reason": letter.reason,
                    "error": f"{type(error).__name__}: {error}",
                },
            )
        if self._stream is not None:
            await self._stream.send(Result(item.payload, None, item.attempts, letter))
        self._settle()

    def _readmit(self, item: WorkItem) -> None:
        del self._retry_timers[item]
        self._queue.readmit(item)
        self._emit(EventKind.READMITTED, item)

    def _settle(self) -> None:
        self._unsettled -= 1
        if self._unsettled == 0 and self.state is not State.OPEN:
            assert self._settled is not None
            self._settled.set()

    # -- observation ---------------------------------------------------------------

    def results(self, maxsize: int = 100) -> AsyncIterator[Result]:
        """Stream a :class:`~pipeline.records.Result` per finished item, in finish order.

        Call it before or while the pipeline runs and consume it concurrently
        (another task). At most ``maxsize`` results wait for the consumer;
        beyond that workers wait too, so a slow consumer applies backpressure.
        The iterator ends when the pipeline closes.

        Raises:
            ValueError: ``maxsize`` < 1.
            PipelineClosed: the pipeline is already closed.
        """
        if self.state is State.CLOSED:
            raise PipelineClosed(f"{self!r} is closed; ask for results before it finishes")
        if self._stream is None:
            self._stream = ResultStream(maxsize)
        return aiter(self._stream)

    def statistics(self) -> Statistics:
        """A frozen snapshot of the pipeline's state now."""
        queue = self._queue
        now = self._now()
        blocked = self._blocked_s + self._blocked_now * now - self._blocked_since_sum
        return Statistics(
            state=self.state.value,
            queue_size=len(queue),
            queue_peak=queue.peak,
            queue_maxsize=self.config.queue_maxsize,
            workers=self.config.concurrency,
            workers_busy=self._busy,
            retry_waiting=len(self._retry_timers),
            tasks_waiting_put=queue.waiting_put,
            offered=self._offered,
            admitted=self._admitted,
            completed=self._completed,
            retried=self._retried,
            dead_lettered=len(self._dead_letters),
            shed=len(self._shed),
            attempts=self._attempts,
            producer_blocked_s=blocked,
        )

    def _now(self) -> float:
        return self._loop.time() if self._loop is not None else 0.0

    def _emit(self, kind: EventKind, item: Any) -> None:
        if self._on_event is not None:
            self._on_event(kind, self._now(), item)


async def _close_iterator(iterator: Any) -> None:
    """Close a source we stopped reading early, so its ``finally`` blocks run now."""
    closer = getattr(iterator, "aclose", None)
    if closer is not None:
        try:
            await closer()
        except Exception:
            log.exception("pipeline.source_close_failed")
        return
    closer = getattr(iterator, "close", None)
    if closer is not None:
        try:
            closer()
        except Exception:
            log.exception("pipeline.source_close_failed")
