"""What a deadlocked virtual run reports: each waiting task, what it waits on, and where.

:class:`~pipeline.sim.vloop.VirtualEventLoop` raises
:class:`~pipeline.errors.DeadlockError` when nothing is ready, no timer is
pending, no thread works and no file descriptor is watched; its message has one
line per waiting task, made by :func:`describe_waiting_task`.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

__all__ = ["describe_waiting_task"]

_ASYNCIO_DIR = os.path.dirname(asyncio.__file__)
# Friendlier names, in deadlock messages, for futures asyncio makes on the user's behalf.
_FUTURE_LABELS = {"_GatheringFuture": "asyncio.gather(...)"}


def describe_waiting_task(task: asyncio.Task) -> str:
    """Return ``Task 'name' (coro qualname) waiting on WHAT at FILE:LINE``."""
    coro = task.get_coro()
    chain = []  # (coroutine, frame), outermost first
    link: Any = coro
    while link is not None:
        frame = getattr(link, "cr_frame", None) or getattr(link, "gi_frame", None)
        if frame is None:
            break
        chain.append((link, frame))
        link = getattr(link, "cr_await", None) or getattr(link, "gi_yieldfrom", None)
    # The innermost frame of user code says where; the asyncio call below it says what.
    user = [i for i, (_, frame) in enumerate(chain) if not _in_asyncio(frame)]
    at = user[-1] if user else len(chain) - 1
    waiter = getattr(task, "_fut_waiter", None)
    if isinstance(waiter, asyncio.Task):
        what = f"Task {waiter.get_name()!r}"
    elif waiter is not None:
        what = _FUTURE_LABELS.get(type(waiter).__name__, type(waiter).__name__)
    else:
        what = type(link).__name__ if link is not None else "nothing"
    if 0 <= at < len(chain) - 1:
        inner = getattr(chain[at + 1][0], "__qualname__", "?")
        what = inner if what in ("Future", "nothing") else f"{inner} -> {what}"
    where = ""
    if chain:
        frame = chain[at][1]
        where = f" at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    name = getattr(coro, "__qualname__", type(coro).__name__)
    return f"Task {task.get_name()!r} ({name}) waiting on {what}{where}"


def _in_asyncio(frame: Any) -> bool:
    return os.path.dirname(frame.f_code.co_filename) == _ASYNCIO_DIR
