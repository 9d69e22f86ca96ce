"""``ResultStream``: a bounded hand-off of finished items to a consumer.

Workers wait when it is full, so a slow consumer slows the pipeline down
(backpressure on the way out, as the queue gives it on the way in) instead of
letting finished results pile up in memory.
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

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<ResultStream maxsize={self.maxsize} waiting={len(self._results)}{state}>"

    async def send(self, result: Result) -> None:
        """Wait for room, then hand ``result`` over (dropped silently once closed)."""
        while len(self._results) >= self.maxsize and not self._closed:
            await self._wait(self._senders)
        if self._closed:
            return
        self._results.append(result)
        wake_first(self._receivers)

    def close(self) -> None:
        """No more results: the consumer gets what is left, then stops."""
        self._closed = True
        for waiters in (self._senders, self._receivers):
            while waiters:
                wake_first(waiters)

    async def __aiter__(self) -> AsyncIterator[Result]:
        while True:
            while not self._results:
                if self._closed:
                    return
                await self._wait(self._receivers)
            result = self._results.popleft()
            wake_first(self._senders)
            yield result

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
