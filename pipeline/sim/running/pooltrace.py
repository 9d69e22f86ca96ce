"""``PoolTrace``: an autoscaled run's pool size and desired count over virtual time.

The pool's size (``statistics().workers``) changes at an autoscaler's sync
(:attr:`~pipeline.events.EventKind.SCALED`) and when a busy worker a shrink asked to
leave finishes (:attr:`~pipeline.events.EventKind.WORKER_LEFT`); the desired count
(``statistics().workers_desired``) at every sync (:attr:`~pipeline.events.EventKind.SYNCED`).
A :class:`PoolTrace` listens to those events and reads ``statistics()`` there, so its
step functions are what the engine itself showed at each of those moments; the
events are in the run's log too, so every change falls on a row of the run's
:class:`~pipeline.sim.running.recorder.StepSeries`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...events import EventKind
from ...statistics import Statistics

__all__ = ["PoolSeries", "PoolTrace"]

NO_DESIRED = -1
"""``desired`` before the first sync (``statistics().workers_desired`` is None then)."""


@dataclass(frozen=True)
class PoolSeries:
    """Right-continuous steps: ``workers[i]`` and ``desired[i]`` hold from ``time_s[i]``.

    The first row is the start (``time_s[0] == 0.0``): ``concurrency`` workers and no
    desired count yet (:data:`NO_DESIRED`).
    """

    time_s: np.ndarray
    workers: np.ndarray
    desired: np.ndarray

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(workers, desired)`` held at each of ``times`` (seconds, after every change
        at that instant)."""
        rows = np.maximum(np.searchsorted(self.time_s, times, side="right") - 1, 0)
        return self.workers.take(rows), self.desired.take(rows)


class PoolTrace:
    """Listens to one pipeline's pool events and records its size and desired count.

    Args:
        statistics: reads the pipeline's ``statistics()`` (at each pool event): its own
            method, or a chain stage's reading.
        concurrency: its starting pool.
    """

    KINDS = (EventKind.SYNCED, EventKind.WORKER_LEFT)
    """The events after which the size or the desired count may differ (SCALED is
    always followed by SYNCED at its instant)."""

    def __init__(self, statistics: Callable[[], Statistics], concurrency: int) -> None:
        self._statistics = statistics
        self._time_s = array("d", [0.0])
        self._workers = array("q", [concurrency])
        self._desired = array("q", [NO_DESIRED])

    def listeners(self) -> dict[EventKind, Any]:
        """The listener by event kind, for ``Pipeline.add_listener``."""
        return dict.fromkeys(self.KINDS, self._note)

    def _note(self, kind: EventKind, now_s: float, item: Any) -> None:
        stats = self._statistics()
        desired = stats.workers_desired
        self._time_s.append(now_s)
        self._workers.append(stats.workers)
        self._desired.append(NO_DESIRED if desired is None else desired)

    def series(self) -> PoolSeries:
        """The steps recorded, as numpy arrays."""
        return PoolSeries(
            time_s=np.array(self._time_s, dtype=np.float64),
            workers=np.array(self._workers, dtype=np.int64),
            desired=np.array(self._desired, dtype=np.int64),
        )
