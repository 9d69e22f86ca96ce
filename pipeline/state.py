"""A pipeline's lifecycle: ``State``, shown in its ``repr``, and closing it exactly once."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


async def close_once(owner: Any, close: Callable[[], Awaitable[_Report]]) -> _Report:
    """Run ``close()`` once for ``owner``, however many callers ask or are cancelled.

    ``owner`` (a Pipeline or a Chain) has ``name``, ``_loop`` and a
    ``_closing`` slot, None until the close starts; the close runs in its own
    task, kept there. A caller
    cancelled meanwhile keeps waiting until the close is done, then raises
    CancelledError, as a TaskGroup does: nobody sees a half-closed pipeline
    (or chain), and every caller gets the same report.
    """
    if owner._closing is None:
        owner._closing = owner._loop.create_task(close(), name=f"{owner.name}-close")
    closing = owner._closing
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
