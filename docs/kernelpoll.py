"""The notebooks' kernel replies, read even when the socket's wake-up was lost.

myst-nb executes the site's notebooks through jupyter_client's asyncio channels.
A channel waits for a reply with one ``socket.poll(timeout)``, woken by the
socket's file descriptor, which libzmq signals edge-triggered: any other
operation on the socket that happens to process its commands (a send, a read
of ``zmq.EVENTS``) can consume the edge, and the reply then sits in the socket
while the poll sleeps out its whole timeout. Seen in a loaded CI run: the kernel
had finished the cell and answered a second client at once, while the build
waited for the reply it already held (600 s a time, the execution timeout).
The same lost wake-up is reported for nbclient with widgets (jupyter/nbclient
#312) and, on the kernel's side, ipykernel #1554.

:func:`install` makes the channels wait in slices of :data:`SLICE_S` seconds:
each new poll asks libzmq for the socket's state directly, so a reply that is
there is read within one slice, and the caller's timeout still holds.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

__all__ = ["SLICE_S", "get_msg", "install"]

SLICE_S = 1.0
"""Seconds a single poll may sleep before the socket's state is asked again."""


async def get_msg(self: Any, timeout: float | None = None) -> dict[str, Any]:
    """The next message of channel ``self`` within ``timeout`` seconds (None: no limit).

    Raises:
        queue.Empty: no message came within ``timeout``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
        if await self.socket.poll(int(min(SLICE_S, left) * 1000)):
            return await self._recv()
        if deadline is not None and time.monotonic() >= deadline:
            raise Empty


def install() -> None:
    """Make every asyncio kernel channel of this process wait with :func:`get_msg`."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    AsyncZMQSocketChannel.get_msg = get_msg  # type: ignore[method-assign]
