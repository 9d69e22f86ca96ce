"""A virtual-time asyncio event loop: the clock jumps to the next timer.

:class:`VirtualEventLoop` is a real asyncio selector event loop (tasks,
futures, ``asyncio.sleep``, ``asyncio.timeout``, ``wait_for``, ``Queue``,
``Event``, ``to_thread`` and ``call_soon_threadsafe`` all work unchanged) whose
``time()`` is a virtual clock in seconds. When no callback is ready, the clock
jumps straight to the earliest timer's deadline instead of sleeping, so an hour
of simulated traffic through unchanged pipeline code takes milliseconds.

Rules that keep runs exact and repeatable:

- **Exact deadlines.** Time is a plain float, never rounded; a timer fires when
  ``when <= now``, i.e. at exactly its ``when``. (asyncio fires timers up to
  ``_clock_resolution`` = 1e-9 s early; past 2**24 s of loop time
  ``now + 1e-9 == now`` and a loop that jumps to ``when`` spins forever. Our
  test is the same as a resolution of one ulp of the clock, at any magnitude.)
  Timers with equal deadlines fire in the order they were scheduled (stock
  asyncio's heap leaves that order unspecified).
- **Threads freeze time.** While executor work (``run_in_executor``,
  ``asyncio.to_thread``) is outstanding, virtual time does not move: the loop
  runs what is ready, then blocks for real until the thread reports back. Work
  done in threads therefore takes zero virtual seconds, whatever the load of
  the machine. Results are handed back one at a time, when the loop is idle,
  in submission order (not in the order threads happen to finish), so
  concurrent offloaded calls resume in the same order on every run.
- **Sleeps are cheap.** A timer whose callback only resolves a future (every
  ``asyncio.sleep``, :func:`wake_unless_cancelled` and
  :func:`resolve_unless_cancelled`) is a lean handle, and
  when the clock jumps to a batch made only of such timers their futures are
  resolved straight from the heap: the sleepers wake in the same iteration
  instead of the next one. Callbacks and tasks run in exactly the order the
  plain two-step path gives (see ``VirtualEventLoop._fire_due_timers``).
- **No needless polling.** The OS poll (epoll) is skipped unless a file
  descriptor other than the loop's self-pipe is registered or a thread is
  working; in a pure simulation it never runs.
- **Deadlocks are errors.** If nothing is ready, no timer is pending, no thread
  is working and no file descriptor is watched, the program could never make
  progress: the run raises :class:`~pipeline.errors.DeadlockError` listing
  every waiting task and what it waits on, then cancels those tasks.

Caveats: ``call_soon_threadsafe`` from threads the loop did not start (not
executor jobs) is not waited for, and time may jump past it; a thread that
waits for the loop to advance virtual time hangs (time is frozen for it);
real file-descriptor I/O does not freeze time (the loop takes what has
arrived, then jumps); a callback that executor threads post with
``call_soon_threadsafe`` while they run lands whenever it lands.

Why :func:`run_virtual` may use a helper thread: a Jupyter kernel cell already
runs inside the kernel's event loop, where ``asyncio.run()`` and
``loop.run_until_complete()`` raise ("cannot be called from a running event
loop"). Patching asyncio with ``nest_asyncio`` is not an option (the package is
archived, and "Run All" in real JupyterLab hangs with it). A fresh loop on a
worker thread works in a kernel, a script and pytest alike and patches
nothing, so when the calling thread already runs a loop, :func:`run_virtual`
runs the virtual loop on a helper thread and blocks until it is done.

The loop's scheduling (``call_at``, ``call_soon``, the timer heap, ``_run_once``)
is here; the lean handles it makes are in :mod:`~pipeline.sim.wakers`, its
dealings with threads and file descriptors in :mod:`~pipeline.sim.realwork`, and
the deadlock report's wording in :mod:`~pipeline.sim.deadlocks`.

Example::

    async def main():
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    assert run_virtual(main()) == 3600.0
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import heapq
import threading
import time
from asyncio import base_events, events
from asyncio.log import logger
from collections.abc import Coroutine
from typing import Any, TypeVar

from pipeline._validate import real
from pipeline.errors import DeadlockError

from .deadlocks import describe_waiting_task
from .realwork import RealWork
from .wakers import (
    WAKERS,
    LeanHandle,
    WakeTimer,
    new_instance,
    new_wake_timer,
    report_callback_error,
    resolve_unless_cancelled,
    wake_unless_cancelled,
)

__all__ = [
    "VirtualEventLoop",
    "new_virtual_loop",
    "resolve_unless_cancelled",
    "run_virtual",
    "wake_unless_cancelled",
]

T = TypeVar("T")

# Same thresholds as asyncio's own _run_once, so cancelled-timer cleanup behaves alike.
_MIN_SCHEDULED_TIMER_HANDLES = base_events._MIN_SCHEDULED_TIMER_HANDLES
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION


class VirtualEventLoop(RealWork, asyncio.SelectorEventLoop):
    """An asyncio event loop whose clock is virtual and jumps to the next timer.

    Args:
        start_s: virtual time, in seconds, that ``time()`` returns at the start.
        selector: optional :mod:`selectors` selector (as for
            :class:`asyncio.SelectorEventLoop`); only used for real I/O and for
            waiting on threads.

    Raises:
        ValueError: if ``start_s`` is not finite (NaN, infinite, or too large for a float).
        TypeError: if ``start_s`` is not a real number.
    """

    def __init__(self, *, start_s: float = 0.0, selector: Any = None) -> None:
        super().__init__(selector)
        try:
            start = real("start_s", start_s, "seconds of virtual time")
        except (TypeError, ValueError):
            self.close()  # a half-built loop would warn when garbage-collected
            raise
        # The timer heap holds (when, seq, handle) tuples rather than handles: equal
        # deadlines then fire FIFO, and tuples compare in C, not in TimerHandle.__lt__.
        self._scheduled: list[tuple[float, int, events.TimerHandle]] = []
        self._now = start
        self._timer_seq = 0
        # Executor jobs not yet delivered, in submission order: (concurrent, asyncio) futures.
        self._jobs: collections.deque[tuple[concurrent.futures.Future, asyncio.Future]] = (
            collections.deque()
        )
        # Other thread work the loop must wait for (the executor shutdown thread).
        self._held = 0
        self._update_io_watched()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} now={self._now!r} running={self.is_running()} "
            f"closed={self.is_closed()} ready={len(self._ready)} "
            f"timers={len(self._scheduled)} jobs={len(self._jobs)}>"
        )

    # -- debug mode ----------------------------------------------------------

    # asyncio's C futures ask their loop get_debug() as they are made (2.4 times an item
    # in a simulation): bool() answers False without a Python frame. set_debug(True)
    # gives the loop a getter of its own.
    get_debug = staticmethod(bool)

    def set_debug(self, enabled: bool) -> None:
        """Like :meth:`asyncio.loop.set_debug`; :meth:`get_debug` then says ``enabled``."""
        super().set_debug(enabled)
        # Never through self.__dict__: reading it turns the loop's attributes into a plain
        # dict, and every attribute read of the loop (several an item) gets slower.
        if enabled:
            self.get_debug = functools.partial(getattr, self, "_debug")
        elif self.get_debug is not bool:
            del self.get_debug

    # -- the clock -----------------------------------------------------------

    def time(self) -> float:
        """Return the virtual time, in seconds (exact float, never rounded)."""
        return self._now

    def call_at(self, when, callback, *args, context=None):
        """Like :meth:`asyncio.loop.call_at`; equal ``when`` values fire FIFO."""
        if (
            when.__class__ is float
            and when == when
            and callback in WAKERS
            and not self._closed
            and not self._debug
        ):
            # A sleep's wake-up (most timers): the checks below, made cheaply, and
            # new_wake_timer written out (this runs for every simulated arrival: its call
            # costs 0.6k instructions an item, bench/RESULTS.md).
            timer = new_instance(WakeTimer)
            timer._when = when
            timer._callback = callback
            timer._args = args
            timer._loop = self
            timer._cancelled = False
            timer._scheduled = True
            timer._context = None
            timer._repr = None
            timer._source_traceback = None
            self._timer_seq += 1
            heapq.heappush(self._scheduled, (when, self._timer_seq, timer))
            return timer
        if when is None:
            raise TypeError("when cannot be None")
        return self._schedule(when, callback, args, context, "call_at")

    def call_later(self, delay, callback, *args, context=None):
        """Like :meth:`asyncio.loop.call_later`, ``delay`` in virtual seconds."""
        if delay is None:
            raise TypeError("delay must not be None")
        # Not via call_at, as asyncio does: every asyncio.sleep comes here.
        when = self._now + delay
        if (
            when.__class__ is float
            and when == when
            and callback in WAKERS
            and not self._closed
            and not self._debug
        ):
            timer = new_wake_timer(when, callback, args, self)
            self._timer_seq += 1
            heapq.heappush(self._scheduled, (when, self._timer_seq, timer))
            return timer
        return self._schedule(when, callback, args, context, "call_later")

    def _schedule(self, when, callback, args, context, caller):
        # A numpy scalar would otherwise leak into time(); NaN would never fire and spin.
        when = float(when)
        if when != when:
            raise ValueError(f"{caller}() got a NaN deadline; it would never fire")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if callback in WAKERS and not self._debug:
            timer = new_wake_timer(when, callback, args, self)
        else:
            if self._debug:
                self._check_thread()
                self._check_callback(callback, caller)
            timer = events.TimerHandle(when, callback, args, self, context)
            if timer._source_traceback:
                # Drop our own frames so the traceback ends at the user's call.
                del timer._source_traceback[-2:]
            timer._scheduled = True
        self._timer_seq += 1
        heapq.heappush(self._scheduled, (when, self._timer_seq, timer))
        return timer

    def call_soon(self, callback, *args, context=None):
        """Like :meth:`asyncio.loop.call_soon` (FIFO), with less overhead per call.

        Every task wake-up and future callback comes through here; outside
        debug mode the handle is made and queued directly.
        """
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        # A bare LeanHandle filled in here (see new_wake_timer for why).
        handle = new_instance(LeanHandle)
        handle._context = contextvars.copy_context() if context is None else context
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = None
        self._ready.append(handle)
        return handle

    # -- one iteration ---------------------------------------------------------

    def _run_once(self) -> None:
        """Run one iteration: advance the clock if idle, then run what is ready.

        Same semantics as asyncio's ``BaseEventLoop._run_once`` (cancelled-timer
        cleanup, callbacks added while running wait for the next iteration),
        except how the loop waits: it jumps the clock instead of sleeping. In a
        pure simulation, sleepers whose timers the jump makes due are woken at
        once (see :meth:`_fire_due_timers`).
        """
        if self._timer_cancelled_count:  # no cancelled timer in the heap otherwise
            self._drop_cancelled_timers()
        scheduled = self._scheduled
        ready = self._ready
        now = self._now
        if ready or self._stopping or (scheduled and scheduled[0][0] <= now):
            if self._io_watched:
                self._process_events(self._selector.select(0))
            # Timers due now join the callbacks already queued, behind them.
            while scheduled and scheduled[0][0] <= now:
                handle = heapq.heappop(scheduled)[2]
                handle._scheduled = False
                ready.append(handle)
        elif scheduled and not (self._jobs or self._held or self._io_watched or self._debug):
            # A pure simulation, idle: jump the clock to the next deadline.
            now = self._now = scheduled[0][0]
            handle = heapq.heappop(scheduled)[2]
            handle._scheduled = False
            if handle.__class__ is WakeTimer and (not scheduled or scheduled[0][0] > now):
                # The usual case: one sleep is due. Wake it now (see _fire_due_timers).
                if handle._cancelled:
                    pass
                elif handle._callback is wake_unless_cancelled:
                    future = handle._args[0]
                    if not future.done():
                        future.set_result(None)
                elif handle._callback is resolve_unless_cancelled:
                    future, value = handle._args
                    if not future.done():
                        future.set_result(value)
                else:
                    handle._run()
            else:
                self._fire_due_timers(handle, scheduled, now)
        else:
            self._wait_when_idle(scheduled, now)

        # Run only the callbacks queued so far; those they add wait a turn (as asyncio).
        ntodo = len(ready)
        if self._debug:
            self._run_ready_debug(ntodo)
            return
        popleft = ready.popleft
        while ntodo:
            ntodo -= 1
            handle = popleft()
            if handle._cancelled:
                continue
            if handle.__class__ is not LeanHandle:
                handle._run()
                continue
            # Handle._run written out for call_soon's handles (task steps, future
            # callbacks: most of what runs), saving a Python call for each.
            try:
                handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                report_callback_error(handle, exc)

    def _wait_when_idle(self, scheduled: list, now: float) -> None:
        """Nothing is ready and the loop is not a pure simulation: wait, jump or give up."""
        jobs = self._jobs
        if jobs and jobs[0][0].done():
            # Only when idle, one job at a time, oldest first: the same order on every run.
            self._deliver_oldest_job()
        elif jobs or self._held:
            # Frozen: wait for real until a thread reports back (it writes to the self-pipe).
            self._process_events(self._selector.select(None))
        elif self._io_watched:
            # Real I/O cannot be predicted: take what has arrived, then move on.
            self._process_events(self._selector.select(0 if scheduled else None))
            if not self._ready and scheduled:
                self._now = max(now, scheduled[0][0])
        elif scheduled:  # debug mode: jump, and run the timers as plain callbacks
            self._now = max(now, scheduled[0][0])
        else:
            raise self._deadlock_error()
        now = self._now
        ready = self._ready
        while scheduled and scheduled[0][0] <= now:
            handle = heapq.heappop(scheduled)[2]
            handle._scheduled = False
            ready.append(handle)

    def _fire_due_timers(self, first: events.TimerHandle, scheduled: list, now: float) -> None:
        """Queue the timers due at ``now`` (``first`` already popped), or wake their sleepers.

        Called only in a pure simulation with nothing else ready (no thread
        working, no file descriptor watched, not stopping, not in debug mode),
        after the clock jumped to ``now``. If every due timer (cancelled ones
        aside) is a :class:`WakeTimer`, they are run here, in heap order: each
        resolves its future, whose callbacks (the sleeping tasks' wake-ups)
        land in the ready queue and run in this same iteration. The plain path
        would run those timers in this iteration and the wake-ups in the next;
        as the timers run no other code, the callbacks then run in exactly the
        same order either way, one iteration sooner. A batch with any other
        timer in it takes the plain path, which keeps callbacks that timers add
        behind the wake-ups queued before them. (``_run_once`` handles the
        usual batch, one sleep, inline.)
        """
        batch = [first]
        while scheduled and scheduled[0][0] <= now:
            handle = heapq.heappop(scheduled)[2]
            handle._scheduled = False
            batch.append(handle)
        if all(h.__class__ is WakeTimer or h._cancelled for h in batch):
            for handle in batch:
                if not handle._cancelled:
                    handle._run()
        else:
            self._ready.extend(batch)

    def _drop_cancelled_timers(self) -> None:
        """As asyncio's ``_run_once``: rebuild the heap when cancelled timers are many, else
        drop the cancelled ones at its head."""
        scheduled = self._scheduled
        sched_count = len(scheduled)
        if (
            sched_count > _MIN_SCHEDULED_TIMER_HANDLES
            and self._timer_cancelled_count / sched_count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            self._purge_cancelled_timers()
            return
        while scheduled and scheduled[0][2]._cancelled:
            self._timer_cancelled_count -= 1
            heapq.heappop(scheduled)[2]._scheduled = False

    def _purge_cancelled_timers(self) -> None:
        kept = []
        for entry in self._scheduled:
            if entry[2]._cancelled:
                entry[2]._scheduled = False
            else:
                kept.append(entry)
        heapq.heapify(kept)
        self._scheduled = kept
        self._timer_cancelled_count = 0

    def _run_ready_debug(self, ntodo: int) -> None:
        ready = self._ready
        for _ in range(ntodo):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            # Virtual time never moves inside a callback: measure slowness in real time.
            started = time.perf_counter()
            self._current_handle = handle
            try:
                handle._run()
            finally:
                self._current_handle = None
            took = time.perf_counter() - started
            if took >= self.slow_callback_duration:
                logger.warning("Executing %r took %.3f seconds", handle, took)

    # -- deadlocks -----------------------------------------------------------

    def _deadlock_error(self) -> DeadlockError:
        waiting = sorted(asyncio.all_tasks(self), key=lambda task: task.get_name())
        lines = [
            f"deadlock at virtual time {self._now!r} s: no callback is ready, no timer is "
            f"pending and no thread is working, so {len(waiting)} task(s) wait forever:"
        ]
        lines += ["  " + describe_waiting_task(task) for task in waiting]
        return DeadlockError("\n".join(lines))

    def run_until_complete(self, future):
        """Like :meth:`asyncio.loop.run_until_complete`, with deadlock clean-up.

        Raises:
            DeadlockError: if the run can never finish; every waiting task has
                been cancelled (and given the chance to clean up) before it is
                raised.
        """
        try:
            return super().run_until_complete(future)
        except DeadlockError:
            self.cancel_all_tasks()
            raise

    def cancel_all_tasks(self) -> None:
        """Cancel every pending task and run the loop until they have finished."""
        pending = [task for task in asyncio.all_tasks(self) if not task.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        try:
            super().run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except DeadlockError:
            # A task swallowed its cancellation and waits again: nothing can wake it.
            # Keep asyncio from warning about it when it is garbage-collected.
            for task in pending:
                if not task.done():
                    task._log_destroy_pending = False
        for task in pending:
            if task.done() and not task.cancelled() and task.exception() is not None:
                self.call_exception_handler(
                    {
                        "message": "unhandled exception while cancelling a task",
                        "exception": task.exception(),
                        "task": task,
                    }
                )


def new_virtual_loop(start_s: float = 0.0) -> VirtualEventLoop:
    """Return a new :class:`VirtualEventLoop` whose clock starts at ``start_s`` seconds.

    Usable as a loop factory, e.g. ``asyncio.Runner(loop_factory=new_virtual_loop)``
    (Python 3.11) or ``asyncio.run(main(), loop_factory=new_virtual_loop)`` (3.12+).

    Raises:
        ValueError: if ``start_s`` is not a finite number.
    """
    return VirtualEventLoop(start_s=start_s)


def run_virtual(main: Coroutine[Any, Any, T], *, start_s: float = 0.0) -> T:
    """Run ``main`` to completion in virtual time and return its result.

    A fresh :class:`VirtualEventLoop` runs the coroutine; afterwards remaining
    tasks are cancelled, async generators and the default executor are shut
    down and the loop is closed. If the calling thread already runs an event
    loop (a Jupyter cell, an async test), the virtual loop runs on a helper
    thread and this call blocks until it finishes (see the module docstring).

    Args:
        main: the coroutine to run.
        start_s: virtual time, in seconds, at which the clock starts.

    Returns:
        What ``main`` returns.

    Raises:
        DeadlockError: if every task waits forever (the message says on what).
        TypeError: if ``main`` is not a coroutine.
        ValueError: if ``start_s`` is not a finite number.
        Whatever ``main`` raises, with its traceback.

    Example::

        >>> async def nap():
        ...     await asyncio.sleep(365 * 86400)
        ...     return asyncio.get_running_loop().time()
        >>> run_virtual(nap())
        31536000.0
    """
    if not asyncio.iscoroutine(main):
        raise TypeError(f"run_virtual() needs a coroutine, got {main!r}")
    try:
        loop = new_virtual_loop(start_s)
    except BaseException:
        main.close()  # never started: avoid "coroutine was never awaited"
        raise
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_and_close(loop, main)
    return _run_on_helper_thread(loop, main)


def _run_and_close(loop: VirtualEventLoop, main: Coroutine[Any, Any, T]) -> T:
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            loop.cancel_all_tasks()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _run_on_helper_thread(loop: VirtualEventLoop, main: Coroutine[Any, Any, T]) -> T:
    outcome: dict[str, Any] = {}
    # Context variables set by the caller stay visible, as with asyncio.run().
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["result"] = context.run(_run_and_close, loop, main)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="pipeline-virtual-loop", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        error = outcome.pop("error")
        try:
            raise error  # keeps the helper thread's traceback, adds ours
        finally:
            del error
    return outcome["result"]
