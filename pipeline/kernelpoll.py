"""Kernel replies read even when their socket's wake-up was lost, wherever notebooks run.

The project runs notebooks through jupyter_client in three places: the docs
build (myst-nb, through nbclient), the test suite (nbval, and the tests that
grade), and the grading of a room's notebooks (otter, through nbclient). A
kernel channel waits for a reply with one ``socket.poll(timeout)``. An asyncio
channel is woken by the socket's file descriptor, which libzmq signals
edge-triggered: any other operation on the socket that happens to process its
commands (a send, a read of ``zmq.EVENTS``) can consume the edge, and the reply
then sits in the socket while the poll sleeps out its whole timeout. Seen in a
loaded CI run: the kernel had finished the cell and answered a second client
at once, while the build waited for the reply it already held (600 s a time,
the execution timeout); a notebook run once took 611 s and 14 s on a rerun.
The same lost wake-up is reported for nbclient with widgets (jupyter/nbclient
#312) and, on the kernel's side, ipykernel #1554.

:func:`install` makes every kernel channel of the process, asyncio and
blocking alike, wait in slices of :data:`SLICE_S` seconds: each new poll asks
libzmq for the socket's state directly, so a reply that is there is read within
one slice, and the caller's timeout still holds. Each place that runs notebooks
calls it: ``docs/conf.py``, the repository's ``conftest.py`` (every pytest run,
nbval's included), :func:`pipeline.lessons.exercises.grade`'s runner and
:func:`pipeline.lessons.prose.refresh`.
Importing this module loads nothing; :func:`install` loads jupyter_client.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from queue import Empty
from typing import Any

__all__ = ["SLICE_S", "get_msg", "get_msg_blocking", "install", "installed", "uninstall"]

SLICE_S = 1.0
"""Seconds a single poll may sleep before the socket's state is asked again."""


def _slices_ms(timeout: float | None) -> Iterator[int]:
    """The polls' timeouts (ms) that together wait ``timeout`` seconds (None: no limit).

    There is always a first poll (of 0 ms for a zero timeout), and none ends after
    the deadline.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
        yield int(min(SLICE_S, left) * 1000)
        if deadline is not None and time.monotonic() >= deadline:
            return


async def get_msg(self: Any, timeout: float | None = None) -> dict[str, Any]:
    """The next message of asyncio channel ``self`` within ``timeout`` seconds (None: no limit).

    Raises:
        queue.Empty: no message came within ``timeout``.
    """
    for wait_ms in _slices_ms(timeout):
        if await self.socket.poll(wait_ms):
            return await self._recv()
    raise Empty


def get_msg_blocking(self: Any, timeout: float | None = None) -> dict[str, Any]:
    """The next message of blocking channel ``self`` within ``timeout`` seconds (None: no limit).

    Raises:
        queue.Empty: no message came within ``timeout``.
    """
    for wait_ms in _slices_ms(timeout):
        if self.socket.poll(wait_ms):
            return self._recv()
    raise Empty


def _channels() -> list[tuple[type, Any]]:
    """Each kernel channel class and the wait :func:`install` gives it (none without jupyter)."""
    try:
        from jupyter_client.channels import AsyncZMQSocketChannel, ZMQSocketChannel
    except ImportError:
        return []
    return [(AsyncZMQSocketChannel, get_msg), (ZMQSocketChannel, get_msg_blocking)]


_SHIPPED: dict[type, Any] = {}
"""Each channel class's own ``get_msg``, as jupyter_client ships it (kept by :func:`install`)."""


def install() -> None:
    """Make this process's kernel channels, asyncio and blocking, wait in slices.

    Idempotent. Without jupyter_client installed no notebook can run here, and
    there is nothing to patch.
    """
    for channel, wait in _channels():
        _SHIPPED.setdefault(channel, channel.__dict__["get_msg"])
        channel.get_msg = wait


def uninstall() -> None:
    """Give the kernel channels their shipped ``get_msg`` back (for a test of the shipped wait)."""
    for channel, _ in _channels():
        if channel in _SHIPPED:
            channel.get_msg = _SHIPPED[channel]


def installed() -> bool:
    """Whether this process's kernel channels wait in slices (:func:`install` ran)."""
    found = _channels()
    return bool(found) and all(channel.get_msg is wait for channel, wait in found)
