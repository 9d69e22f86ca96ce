"""``ResultStream``: a bounded hand-off of finished items to a consumer.

Workers wait when it is full, so a slow consumer slows the pipeline down
(backpressure on the way out, as the queue gives it on the way in) instead of
letting finished results pile up in memory.

Every result is either handed over or counted as dropped, never lost
silently. A result is dropped when nobody is left to read it: every consumer
that started reading has closed its iterator (``aclose()``, ``break`` out of
``async for`` once the iterator is released, or a cancelled consumer task),
or the run closed while a worker still waited for room.

A consumer that stops reading *without* closing its iterator keeps the
workers waiting: that is backpressure, and the drain timeout only starts once
intake stops. Close the iterator when you stop reading (``async with
contextlib.aclosing(pipe.results()) as results:``), or cancel the consumer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from .queue import wake_first
from .records import Result

__all__ = ["ResultStream"]


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

    async def send(self, result: Result) -> None:
        """Wait for room, then hand ``result`` over.

        Returns at once, counting the result as dropped, when the stream is
        closed or its consumers have all gone. A sender cancelled while it
        waits counts its result as dropped too.
        """
        while len(self._results) >= self.maxsize and not (self._closed or self._detached):
            try:
                await self._wait(self._senders)
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

    async def __aiter__(self) -> AsyncIterator[Result]:
        self._consumers += 1
        self._detached = False
        try:
            while True:
                while not self._results:
                    if self._closed:
                        return
                    await self._wait(self._receivers)
                result = self._results.popleft()
                wake_first(self._senders)
                self.delivered += 1
                yield result
        finally:
            self._consumers -= 1
            if self._consumers == 0 and not self._closed:
                self._detach()

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

    @staticmethod
    async def _wait(waiters: deque[asyncio.Future[None]]) -> None:
        waiter = asyncio.get_running_loop().create_future()
        waiters.append(waiter)
        try:
            await waiter
        finally:
            if not waiter.done():
                waiter.cancel()
                waiters.remove(waiter)
