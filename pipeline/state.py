"""``State``: a pipeline's lifecycle, shown in its ``repr``."""

from __future__ import annotations

import enum

__all__ = ["State"]


class State(enum.Enum):
    """Lifecycle: IDLE -> OPEN -> DRAINING -> CLOSED.

    OPEN takes items; DRAINING has stopped intake and finishes (or, at the
    drain timeout, hands back) what is inside; CLOSED has its report.
    """

    IDLE = "idle"
    OPEN = "open"
    DRAINING = "draining"
    CLOSED = "closed"
