"""The engine's event kinds as plain ints, as the kernels' event logs store them (int8).

The replay's log stores them (:mod:`.replay`): an int compares faster than
an enum member in its inner loop, and the recorder reads the same codes the
engine's listener writes.
"""

from __future__ import annotations

from pipeline.events import EventKind

ADMITTED = int(EventKind.ADMITTED)
SHED = int(EventKind.SHED)
STARTED = int(EventKind.STARTED)
COMPLETED = int(EventKind.COMPLETED)
RETRY_SCHEDULED = int(EventKind.RETRY_SCHEDULED)
READMITTED = int(EventKind.READMITTED)
DEAD_LETTERED = int(EventKind.DEAD_LETTERED)
UNFINISHED = int(EventKind.UNFINISHED)
PRODUCER_BLOCKED = int(EventKind.PRODUCER_BLOCKED)
PRODUCER_UNBLOCKED = int(EventKind.PRODUCER_UNBLOCKED)
INTAKE_CLOSED = int(EventKind.INTAKE_CLOSED)
DRAIN_TIMEOUT = int(EventKind.DRAIN_TIMEOUT)
