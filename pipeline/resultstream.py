"""``ResultStream``: a bounded hand-off of finished items to a consumer.

Workers wait when it is full, so a slow consumer slows the pipeline down
(backpressure on the way out, as the queue gives it on the way in) instead of
letting finished results pile up in memory.

Every result is either handed over or counted as dropped, never lost
silently. A result is dropped when nobody is left to read it: every consumer
that started reading has closed its iterator (``aclose()``, the end of the
stream, or the end of the task that was reading: a ``break`` out of
``async for`` followed by the task returning, or a cancelled consumer), or the
run closed while a worker still waited for room.

A consumer that stops reading *without* closing its iterator keeps the
workers waiting: that is backpressure, and the drain timeout only starts once
intake stops. Close the iterator when you stop reading (``async with
contextlib.aclosing(pipe.results()) as results:``), or cancel the consumer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from .queue import wait_in_line, wake_first
from .records import Result

__all__ = ["ResultReader", "ResultStream"]


class ResultStream:
    """At most ``maxsize`` results waiting for the consumer.

    Args:
        maxsize: results held before workers wait (>= 1).

    Attributes:
        delivered: results handed to a consumer.
        dropped: results nobody will read (see the module docstring).
    """

    def __init__(self, maxsize: int) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int):
            raise TypeError(f"results maxsize must be an integer >= 1, got {maxsize!r}")
        if maxsize < 1:
            raise ValueError(f"results maxsize must be >= 1, got {maxsize!r}")
        self.maxsize = maxsize
        self._results: deque[Result] = deque()
        self._senders: deque[asyncio.Future[None]] = deque()
        self._receivers: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._consumers = 0
        self._detached = False
        self.delivered = 0
        self.dropped = 0

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        state += " detached" if self._detached else ""
        return (
            f"<ResultStream maxsize={self.maxsize} waiting={len(self._results)} "
            f"delivered={self.delivered} dropped={self.dropped}{state}>"
        )

    def __len__(self) -> int:
        """Results waiting for the consumer."""
        return len(self._results)

    async def send(self, result: Result) -> None:
        """Wait for room, then hand ``result`` over.

        Returns at once, counting the result as dropped, when the stream is
        closed or its consumers have all gone. A sender cancelled while it
        waits counts its result as dropped too.
        """
        while len(self._results) >= self.maxsize and not (self._closed or self._detached):
            try:
                await wait_in_line(self._senders)
            except asyncio.CancelledError:
                self.dropped += 1
                raise
        if self._closed or self._detached:
            self.dropped += 1
            return
        self._results.append(result)
        wake_first(self._receivers)

    def close(self) -> None:
        """No more results: the consumer gets what is left, then stops."""
        self._closed = True
        self._wake_all()

    def reader(self) -> ResultReader:
        """A new async iterator over the results (see :class:`ResultReader`)."""
        return ResultReader(self)

    def join(self) -> None:
        """A consumer (a :class:`ResultReader`) starts reading."""
        self._consumers += 1
        self._detached = False

    def leave(self) -> None:
        """A consumer stopped reading; when the last one leaves, results are dropped."""
        self._consumers -= 1
        if self._consumers == 0 and not self._closed:
            self._detach()

    async def receive(self) -> Result:
        """The next result, waiting for one; StopAsyncIteration once closed and empty."""
        while not self._results:
            if self._closed:
                raise StopAsyncIteration
            await wait_in_line(self._receivers)
        result = self._results.popleft()
        wake_first(self._senders)
        self.delivered += 1
        return result

    def _detach(self) -> None:
        """The last consumer left: drop what waits and release every sender."""
        self._detached = True
        self.dropped += len(self._results)
        self._results.clear()
        self._wake_all()

    def _wake_all(self) -> None:
        for waiters in (self._senders, self._receivers):
            while waiters:
                wake_first(waiters)


class ResultReader:
    """An async iterator over a :class:`ResultStream`, for one consumer.

    The consumer is attached from its creation until it closes:
    ``aclose()`` (or ``contextlib.aclosing``), the stream's end, or the end of
    the task that was reading (a task that did ``break`` and returned, or was
    cancelled). A ``break`` in a task that carries on doing other things is
    not a close: that consumer still holds the workers until it closes.
    """

    __slots__ = ("_state", "_stream")

    def __init__(self, stream: ResultStream) -> None:
        self._stream = stream
        self._state = "new"  # -> "reading" -> "closed"
        stream.join()

    def __repr__(self) -> str:
        return f"<ResultReader {self._state} of {self._stream!r}>"

    def __aiter__(self) -> ResultReader:
        return self

    async def __anext__(self) -> Result:
        if self._state == "closed":
            raise StopAsyncIteration
        if self._state == "new":
            self._state = "reading"
            task = asyncio.current_task()
            if task is not None:
                task.add_done_callback(self._reader_task_done)
        try:
            return await self._stream.receive()
        except StopAsyncIteration:
            self._close()
            raise

    async def aclose(self) -> None:
        """Detach: results nobody else reads are dropped (and counted) from now on."""
        self._close()

    def _reader_task_done(self, _task: asyncio.Task[Any]) -> None:
        self._close()

    def _close(self) -> None:
        if self._state != "closed":
            self._stream.leave()
        self._state = "closed"
