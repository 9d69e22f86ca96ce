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

Every admitted item ends as exactly one of completed, dead-lettered,
expired (its ``max_wait_s`` deadline came before its next attempt could start)
or unfinished (handed back when the drain times out); every offered item is
admitted or shed. :class:`~pipeline.records.RunReport` keeps that account.

With ``PipelineConfig(priority=...)`` the queue serves the lowest key first
(:mod:`pipeline.queue`); with ``max_wait_s`` a sweep expires queued items at
their deadlines even when no worker is free (:mod:`pipeline.expiry`). During
the drain, queued items keep their deadlines: each runs if a worker takes it
in time and expires at its deadline otherwise (or is handed back unfinished
if the drain timeout comes first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from typing import Any

from .attempts import Attempts, is_async_callable
from .config import PipelineConfig
from .controls import Controls, work_queue
from .deadlines import DeadlineSweep
from .errors import PipelineClosed, SourceError
from .events import EventKind, Listener
from .expiry import Expiry
from .intake import Intake
from .listeners import Listeners
from .overload.guard import Guard
from .pool import WorkerPool
from .priority import PriorityKeys
from .ratelimit import RateLimiter
from .records import Result, RunReport, ShedLog, describe_error
from .resultstream import ResultStream
from .state import State, close_once
from .statistics import Observed

__all__ = ["Pipeline", "State"]

log = logging.getLogger("pipeline")

# Enum members looked up once, for the per-item paths: on Python 3.11 every
# ``State.OPEN`` goes through ``EnumType.__getattr__`` (about 0.1 us a time).
_OPEN = State.OPEN

Handler = Callable[[Any], Any] | Callable[[Any], Awaitable[Any]]


class Pipeline(Intake, Attempts, WorkerPool, Expiry, Controls, Listeners, Observed):
    """A bounded asyncio work pipeline.

    Args:
        handler: ``async def handler(payload)`` or a plain function (run on a
            thread with ``asyncio.to_thread``). Its return value is the result.
        config: a :class:`~pipeline.config.PipelineConfig` (defaults if None).
        on_event: a listener ``f(kind, now_s, item)`` called at every state
            change (see :mod:`pipeline.events`); shed payloads reach it too
            (``EventKind.SHED``). A listener that raises is logged once and
            counted in ``statistics().listener_errors``; the run carries on.
        rng: random generator for backoff jitter (anything with
            ``uniform(a, b)``, such as ``random.Random``); pass a seeded one
            for repeatable runs.
        name: used in task names, logs and ``repr``.
        on_expired: a plain function ``f(payload)`` called when an item
            expires (``PipelineConfig.max_wait_s``), after it is counted: to
            tell its caller it was given up. One that raises is handled as a
            failing ``on_event`` listener (logged once, counted in
            ``statistics().listener_errors``); the item stays expired.

    Use it either with a source::

        report = await Pipeline(handle, PipelineConfig(concurrency=4)).run(items)

    or as a service you push into::

        async with Pipeline(handle, config) as pipe:
            await pipe.put(item)          # waits while the queue is full
        report = pipe.report

    Raises:
        TypeError: ``handler``, ``on_event`` or ``on_expired`` is not callable
            (``on_expired`` must be a plain function), ``config`` is not a
            PipelineConfig, or ``rng`` has no ``uniform`` method.
    """

    def __init__(
        self,
        handler: Handler,
        config: PipelineConfig | None = None,
        *,
        on_event: Listener | None = None,
        rng: random.Random | None = None,
        name: str = "pipeline",
        on_expired: Callable[[Any], None] | None = None,
    ) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {handler!r}")
        config = PipelineConfig() if config is None else config
        if not isinstance(config, PipelineConfig):
            raise TypeError(f"config must be a PipelineConfig, got {config!r}")
        if on_event is not None and not callable(on_event):
            raise TypeError(f"on_event must be callable or None, got {on_event!r}")
        if on_expired is not None and (not callable(on_expired) or is_async_callable(on_expired)):
            raise TypeError(
                "on_expired must be a plain function f(payload) or None (it is called "
                f"synchronously when an item expires), got {on_expired!r}"
            )
        if rng is not None and not callable(getattr(rng, "uniform", None)):
            raise TypeError(
                f"rng must be a random generator with a uniform(a, b) method "
                f"(e.g. random.Random(seed)) or None, got {rng!r}"
            )
        self.handler = handler
        self.config = config
        self.name = name
        self._user_listener = on_event
        self._attached = ()
        self._relisten()
        self._rng = rng if rng is not None else random.Random()
        self._is_async = is_async_callable(handler)
        self._queue = work_queue(config)
        self._keys = None if config.priority is None else PriorityKeys(config.priority)
        wait = config.max_wait_s
        self._wait_of = wait if callable(wait) else None
        self._max_wait_s = wait if isinstance(wait, float) and wait < math.inf else None
        self._on_expired = on_expired
        self._sweep = None
        self._classified = self._keys is not None or wait is not None
        self._expired = ShedLog(config.keep_shed)
        self.state = State.IDLE
        self.report = None
        self._loop = None  # type: ignore[assignment]
        self._workers = {}
        self._workers_made = 0
        self._starting = {}
        self._worker_s = 0.0
        self._worker_starts_s = 0.0
        self._recommender = None
        self._scale_events = 0
        self._pool_tasks = []
        self._worker_target = config.concurrency  # the pool's size, resize() changes it
        self._workers_peak = config.concurrency
        self._producers = []
        self._own_tasks = set()
        self._unread_sources = {}
        self._running = {}
        self._retry_timers = {}
        self._thread_calls = {}
        self._limiter = None
        self._guard = Guard.of(config, self._emit_at, self._log)
        self._gate, self._codel_shed = None, 0  # the overload controls' (pipeline.controls)
        self._worker_loop = self._work  # or, with a control, Controls._work_controlled
        self._stream = None
        self._settled = None  # type: ignore[assignment]
        self._unsettled = 0
        self._offered = 0
        self._admitted = 0
        self._completed = 0
        self._retried = 0
        self._attempts = 0
        self._attempts_failed = 0
        self._attempts_timed_out = 0
        self._unfinished = 0
        self._busy = 0
        self._dead_letters = []
        self._shed = ShedLog(config.keep_shed)
        self._handed_back = []
        self._closing = None
        self._stop_requested = False
        self._aborted = None
        self._listener_errors = 0
        self._blocked_s = 0.0
        self._blocked_now = 0
        self._blocked_since_sum = 0.0
        self._drain_timed_out = False
        self._signals = ()
        self._started_s = 0.0
        self._clock = time.monotonic
        self._log_debug = False
        self._log_info = False
        self._log_warning = False

    def __repr__(self) -> str:
        bound = "unbounded" if self.config.queue_maxsize is None else self.config.queue_maxsize
        workers = self._worker_target + self._queue.retiring
        return (
            f"<Pipeline {self.name!r} state={self.state.value} queue={len(self._queue)}/{bound} "
            f"busy={self._busy}/{workers} completed={self._completed} "
            f"dead_lettered={len(self._dead_letters)}"
            + (f" expired={len(self._expired)}" if self._expired else "")
            + ">"
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
        clock = loop.time
        # asyncio's own loops read time.monotonic() in a Python method: call it directly.
        native = getattr(clock, "__func__", None) is asyncio.BaseEventLoop.time
        self._clock = time.monotonic if native else clock
        self._settled = asyncio.Event()
        self._log_debug = log.isEnabledFor(logging.DEBUG)
        self._log_info = log.isEnabledFor(logging.INFO)
        self._log_warning = log.isEnabledFor(logging.WARNING)
        if self.config.rate_limit is not None:
            self._limiter = RateLimiter(self.config.rate_limit, self._started_s)
        if self._max_wait_s is not None or self._wait_of is not None:
            self._sweep = DeadlineSweep(loop, self._expire_queued, self._queue.__len__)
        self._start_controls(loop)  # the workers' loop: self._work unless a control is on
        self.state = State.OPEN
        self._start_pool()
        if self._stop_requested:
            self.stop()

    def _accepting(self) -> bool:
        return self.state is _OPEN

    def stop(self) -> None:
        """Stop intake: producers stop reading, waiting ``put`` calls get PipelineClosed.

        Items already admitted carry on; :meth:`drain` (or leaving ``async with``,
        or the end of :meth:`run`) waits for them. Calling it again is harmless.
        Called before the pipeline starts, it takes effect at the start: the
        run then reads nothing, closes its sources and drains at once.
        """
        if self.state is State.IDLE:
            self._stop_requested = True
            return
        if self.state is not State.OPEN:
            return
        self.state = State.DRAINING
        self._queue.close()
        current = asyncio.current_task()
        for producer in self._producers:
            if producer is not current:
                producer.cancel()
        self._emit(EventKind.INTAKE_CLOSED, None)
        if self._unsettled == 0:
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
        report. Like a TaskGroup, it does not return or raise before the close
        has finished, however many times its caller is cancelled meanwhile.

        Returns:
            The :class:`~pipeline.records.RunReport`, also kept as ``self.report``.

        Raises:
            RuntimeError: called from inside this pipeline's own handler, where
                it would wait for itself (call :meth:`stop` there instead).
            BaseException: whatever stopped the run (a handler's
                non-``Exception`` error, or a failure of the engine's own
                bookkeeping), after the close; ``self.report`` is balanced.
        """
        if self.state is State.IDLE:
            self._start()
        if asyncio.current_task() in self._own_tasks:
            raise RuntimeError(
                f"drain() called from inside the handler of {self!r} would wait for its own "
                "item forever; call stop() there to stop intake, and drain from outside"
            )
        if self._closing is None:
            self.stop()
            try:
                if self._unsettled and self._aborted is None:
                    try:
                        async with asyncio.timeout(self.config.drain_timeout_s):
                            await self._settled.wait()
                    except TimeoutError:
                        self._note_drain_timeout()
            except asyncio.CancelledError:
                # Cancelled while waiting: still hand back what is inside, then propagate.
                await self._shutdown()
                raise
        report = await self._shutdown()
        if self._aborted is not None:
            raise self._aborted
        return report

    def _note_drain_timeout(self) -> None:
        if self._drain_timed_out or self._closing is not None:
            return  # another drain call timed out at the same instant, or a close began
        self._drain_timed_out = True
        self._emit(EventKind.DRAIN_TIMEOUT, None)
        self._log(
            logging.WARNING,
            "pipeline.drain_timeout",
            pipeline=self.name,
            left=self._unsettled,
            drain_timeout_s=self.config.drain_timeout_s,
        )

    def _abort(self, error: BaseException) -> None:
        """Stop the run because of ``error``: drains stop waiting, close, and raise it."""
        if self._aborted is None:
            self._aborted = error
            self._log(
                logging.ERROR,
                "pipeline.aborted",
                pipeline=self.name,
                error=f"{type(error).__name__}",
            )
        self.stop()
        if self._settled is not None:
            self._settled.set()

    async def _shutdown(self) -> RunReport:
        """Close once, however many callers ask (a drain, a cancelled run, ``async with``)."""
        if self._closing is None:
            self._closing = self._loop.create_task(self._close(), name=f"{self.name}-close")
        return await close_once(self._closing)

    async def _close(self) -> RunReport:
        """Cancel workers and retry timers; whatever is still inside is unfinished."""
        self.state = State.DRAINING
        self._queue.close()
        tasks = [*self._producers, *self._pool_tasks, *self._workers]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._close_unread_sources()
        left = [
            *self._handed_back,
            *self._running,
            *self._queue.drain_items(),
            *self._retry_timers,
        ]
        for timers in (self._sweep, self._guard):
            if timers is not None:
                timers.close()
        for timer in self._retry_timers.values():
            timer.cancel()
            self._queue.unhold()
        self._retry_timers.clear()
        self._running.clear()
        left.sort(key=lambda item: item.seq)
        abandoned = [
            item.payload
            for item in left
            if item in self._thread_calls and self._thread_calls[item].abandon()
        ]
        self._thread_calls.clear()
        self._unfinished = len(left)
        for item in left:
            self._emit(EventKind.UNFINISHED, item)
        if self._stream is not None:
            self._stream.close()
        for each in self._signals:
            self._loop.remove_signal_handler(each)
        self.state = State.CLOSED
        self._settled.set()  # wake any drain() still waiting in another task
        self.report = RunReport(
            offered=self._offered,
            admitted=self._admitted,
            completed=self._completed,
            dead_letters=list(self._dead_letters),
            unfinished=[item.payload for item in left],
            shed=self._shed,
            attempts=self._attempts,
            drain_timed_out=self._drain_timed_out,
            started_s=self._started_s,
            finished_s=self._now(),
            statistics=self.statistics(),
            abandoned=abandoned,
            results_dropped=0 if self._stream is None else self._stream.dropped,
            results_waiting=0 if self._stream is None else len(self._stream),
            expired=self._expired,
        )
        if abandoned:
            self._log(
                logging.WARNING,
                "pipeline.abandoned",
                pipeline=self.name,
                abandoned=len(abandoned),
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
        takes the next item, so nothing is read ahead of capacity. A source
        iterator left unfinished (``stop()``, cancellation, even before its
        first item) is closed (``aclose()``/``close()``).

        Returns:
            The :class:`~pipeline.records.RunReport`.

        Raises:
            TypeError: a source is neither iterable nor async iterable.
            SourceError: a source raised an ``Exception``; the run was drained
                first and the report is on the exception.
            PipelineClosed: this pipeline has already run.
            BaseException: as :meth:`drain`; also what a source, or the
                ``priority`` or ``max_wait_s`` function, raised that is not an
                ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, one of your
                own), as itself, after the close (the payload it was raised for
                was not taken; ``self.report`` balances).
        """
        sources = (source, *more_sources)
        for index, each in enumerate(sources):
            if not isinstance(each, Iterable | AsyncIterable):
                raise TypeError(
                    f"source {index} must be an iterable or async iterable, got {each!r}"
                )
        self._start()
        self._unread_sources = dict(enumerate(sources))
        if self._accepting():
            self._producers = [
                self._loop.create_task(
                    self._produce(index, each), name=f"{self.name}-producer-{index}"
                )
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
        report = await self.drain()
        if failures:
            raise SourceError(
                f"source raised {type(failures[0]).__name__}: {describe_error(failures[0])}",
                report,
            ) from failures[0]
        return report

    # -- observation ---------------------------------------------------------------

    def results(self, maxsize: int = 100) -> AsyncIterator[Result]:
        """Stream a :class:`~pipeline.records.Result` per finished item, in finish order.

        Call it before or while the pipeline runs and consume it concurrently
        (another task). At most ``maxsize`` results wait for the consumer;
        beyond that workers wait too, so a slow consumer applies backpressure,
        and a consumer that stops reading without closing holds the run (the
        drain timeout only starts at ``stop()``). Closing the iterator
        (``aclose()``, or ``break`` in a task that then ends) detaches the
        consumer: later results are dropped and counted in
        ``report.results_dropped``.
        The iterator ends when the pipeline closes.

        Raises:
            ValueError: ``maxsize`` < 1.
            PipelineClosed: the pipeline is already closed.
        """
        if self.state is State.CLOSED:
            raise PipelineClosed(f"{self!r} is closed; ask for results before it finishes")
        if self._stream is None:
            self._stream = ResultStream(maxsize)
        return self._stream.reader()

    def _now(self) -> float:
        return self._loop.time() if self._loop is not None else 0.0

    def _log(self, level: int, event: str, *, exc_info: Any = None, **fields: Any) -> None:
        """Log a structured event; a failing log handler or filter never breaks the run."""
        with contextlib.suppress(Exception):
            log.log(level, event, exc_info=exc_info, stacklevel=3, extra={"event": event, **fields})
