"""A pipeline's lifecycle: ``State``, shown in its ``repr``, and closing it exactly once."""

from __future__ import annotations

import asyncio
import enum
from typing import TypeVar

__all__ = ["State", "close_once"]

_Report = TypeVar("_Report")


class State(enum.Enum):
    """Lifecycle: IDLE -> OPEN -> DRAINING -> CLOSED.

    OPEN takes items; DRAINING has stopped intake and finishes (or, at the
    drain timeout, hands back) what is inside; CLOSED has its report.
    """

    IDLE = "idle"
    OPEN = "open"
    DRAINING = "draining"
    CLOSED = "closed"


async def close_once(closing: asyncio.Task[_Report]) -> _Report:
    """Wait for ``closing``, the one task that closes a pipeline (or chain), however cancelled.

    The owner starts the task the first time anyone asks it to close and keeps it, so
    every later caller waits for the same close. A caller cancelled meanwhile keeps
    waiting until the close is done, then raises CancelledError, as a TaskGroup does:
    nobody sees a half-closed pipeline (or chain), and every caller gets the same report.
    """
    cancelled = False
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            if closing.cancelled():
                raise
            cancelled = True
    report = closing.result()
    if cancelled:
        raise asyncio.CancelledError
    return report
