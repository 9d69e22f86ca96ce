"""Work outside the virtual clock: executor threads freeze it, file descriptors are polled.

:class:`RealWork` is the part of :class:`~pipeline.sim.vloop.VirtualEventLoop`
that deals with real time (mixed into it; it reads and writes only the loop's
own state, which the loop's ``__init__`` makes):

- **threads freeze time**: ``run_in_executor`` (and so ``asyncio.to_thread``)
  queues each job's futures in submission order in ``_jobs``; the loop, when
  idle, delivers the oldest finished one (:meth:`RealWork._deliver_oldest_job`),
  so concurrent offloaded calls resume in the same order on every run, and it
  never moves the clock while a job (or the executor's shutdown, ``_held``) is
  outstanding;
- **no needless polling**: ``_io_watched`` says whether a file descriptor other
  than the loop's self-pipe is registered; only then does the loop poll the OS.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

__all__ = ["RealWork"]


class RealWork(asyncio.SelectorEventLoop):
    """Executor jobs and watched file descriptors of a virtual loop (see the module docstring)."""

    _jobs: Any
    """Executor jobs not yet delivered, in submission order: (concurrent, asyncio) futures."""
    _held: int
    """Other thread work the loop must wait for (the executor's shutdown thread)."""
    _io_watched: bool
    """Whether a file descriptor other than the self-pipe is registered."""

    def run_in_executor(self, executor, func, *args):
        """Like :meth:`asyncio.loop.run_in_executor`; time is frozen until ``func`` returns."""
        self._check_closed()
        if self._debug:
            self._check_callback(func, "run_in_executor")
        if executor is None:
            executor = self._default_executor
            self._check_default_executor()
            if executor is None:
                executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="asyncio")
                self._default_executor = executor
        job = executor.submit(func, *args)
        # Not futures.wrap_future: that delivers results in the order threads finish,
        # which depends on machine load. _run_once delivers them in submission order.
        result = self.create_future()
        result.add_done_callback(lambda fut: job.cancel() if fut.cancelled() else None)
        self._jobs.append((job, result))
        job.add_done_callback(self._wake_from_thread)
        return result

    async def shutdown_default_executor(self, *args: Any, **kwargs: Any) -> None:
        """Shut the default executor down; time is frozen while its threads join."""
        # asyncio joins the executor on a plain thread that reports back with
        # call_soon_threadsafe; without the hold that wait would look like a deadlock.
        self._held += 1
        try:
            await super().shutdown_default_executor(*args, **kwargs)
        finally:
            self._held -= 1

    def _wake_from_thread(self, _job: concurrent.futures.Future) -> None:
        # Runs in the worker thread: wake the loop if it is blocked in select().
        self._write_to_self()

    def _deliver_oldest_job(self) -> None:
        job, result = self._jobs.popleft()
        if result.cancelled():
            return
        if job.cancelled():
            result.cancel()
            return
        error = job.exception()
        if isinstance(error, StopIteration):
            # A future cannot carry StopIteration (3.11 and 3.12 raise TypeError
            # inside the loop); hand it over as 3.13's set_exception does.
            wrapped = RuntimeError(
                "StopIteration interacts badly with generators and cannot be raised into a Future"
            )
            wrapped.__cause__ = wrapped.__context__ = error
            error = wrapped
        if error is not None:
            result.set_exception(error)
        else:
            result.set_result(job.result())

    # -- file descriptors: poll the OS only when one is watched --------------

    def _update_io_watched(self) -> None:
        selector = self._selector
        self._io_watched = selector is not None and len(selector.get_map()) > self._internal_fds

    def _add_reader(self, fd, callback, *args):
        handle = super()._add_reader(fd, callback, *args)
        self._update_io_watched()
        return handle

    def _remove_reader(self, fd):
        removed = super()._remove_reader(fd)
        self._update_io_watched()
        return removed

    def _add_writer(self, fd, callback, *args):
        handle = super()._add_writer(fd, callback, *args)
        self._update_io_watched()
        return handle

    def _remove_writer(self, fd):
        removed = super()._remove_writer(fd)
        self._update_io_watched()
        return removed
