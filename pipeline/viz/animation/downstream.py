"""The downstream of a simulated run at one instant: its queue, its servers, its orphans.

A run with a :class:`~pipeline.sim.Downstream` keeps each request's times
(:class:`~pipeline.sim.running.downstream.DownstreamLog`): when it was sent,
when a server took it, when its service ends and when its caller gave up on
it. A :class:`DownstreamTrack` reads a frame's :class:`DownstreamFrame` from
those times alone, with nothing run again: the requests waiting (first in,
first out, the head first), the ones on a server, which of them are orphans
(their caller's ``attempt_timeout_s`` cut the attempt, and the request is
served all the same, for nobody), and the run's goodput over the last
:data:`GOODPUT_WINDOW_S` seconds, as the recovery rule reads it.

This module uses numpy only, as :mod:`.frames` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GOODPUT_WINDOW_S", "DownstreamFrame", "DownstreamTrack"]

GOODPUT_WINDOW_S = 10.0
"""Seconds of completions a frame's goodput is over (the recovery rule's window)."""


@dataclass(frozen=True)
class DownstreamFrame:
    """The downstream at one frame, and what the run's clients got from it so far.

    Attributes:
        queue: one entry per waiting request, the head (next to be served) first:
            True for an orphan (its caller gave up), False while a caller waits.
        servers: one entry per server: -1 idle, 0 serving a caller who waits,
            1 serving an orphan.
        counts: exact counts: ``waiting``, ``in_service``, ``orphans`` (waiting or in
            service for nobody), ``sent``, ``served``, ``orphaned`` (served for
            nobody so far), ``retries`` (attempts the clients retried so far).
        goodput_per_s: items completed per second over the last
            :data:`GOODPUT_WINDOW_S` seconds (over ``[0, t]`` before that).
    """

    queue: np.ndarray
    servers: np.ndarray
    counts: dict[str, int]
    goodput_per_s: float

    @property
    def concurrency(self) -> int:
        """The downstream's servers."""
        return len(self.servers)


class DownstreamTrack:
    """A run's downstream, ready to give each frame's :class:`DownstreamFrame`.

    Args:
        result: a single-stage simulated run with a downstream (its
            ``downstream.log`` and ``columns``).
    """

    def __init__(self, result: Any) -> None:
        log = result.downstream.log
        self.concurrency = int(result.scenario.downstream.concurrency)
        self._sent = log.sent_s
        self._start = np.nan_to_num(log.start_s, nan=np.inf)
        self._end = np.nan_to_num(log.end_s, nan=np.inf)
        self._abandoned = np.nan_to_num(log.abandoned_s, nan=np.inf)
        columns = result.columns
        done = columns.outcome == list(columns.OUTCOMES).index("completed")
        self._completed = np.sort(columns.finish_s[done])
        self._retried = np.empty(0)
        attempts = columns.attempt_log
        if attempts is not None:
            retried = attempts.ending == list(attempts.ENDINGS).index("retried")
            self._retried = np.sort(attempts.end_s[retried])

    def event_times(self, start_s: float, end_s: float) -> np.ndarray:
        """The instants in ``[start_s, end_s]`` at which the downstream changes."""
        times = np.concatenate([self._sent, self._start, self._end, self._abandoned])
        return times[(times >= start_s) & (times <= end_s)]

    def frame(self, time_s: float) -> DownstreamFrame:
        """The downstream at ``time_s``, after every change at that instant."""
        t = time_s
        sent = self._sent <= t
        started = self._start <= t
        ended = self._end <= t
        orphan = self._abandoned <= t
        waiting = np.flatnonzero(sent & ~started)  # FIFO: the request number is the order
        serving = np.flatnonzero(started & ~ended)
        servers = np.full(self.concurrency, -1, dtype=np.int64)
        # The ones taken first on the first servers; a request has no server of its own
        # in the log, and any one is as good: the servers are identical.
        shown = serving[np.argsort(self._start[serving], kind="stable")][: self.concurrency]
        servers[: len(shown)] = orphan[shown]
        window = min(GOODPUT_WINDOW_S, t)
        done = np.searchsorted(self._completed, [t - window, t], side="right")
        goodput = (done[1] - done[0]) / window if window > 0 else 0.0
        counts = {
            "waiting": len(waiting),
            "in_service": len(serving),
            "orphans": int(np.count_nonzero(orphan & ~ended)),
            "sent": int(np.count_nonzero(sent)),
            "served": int(np.count_nonzero(ended)),
            "orphaned": int(np.count_nonzero(ended & orphan)),
            "retries": int(np.searchsorted(self._retried, t, side="right")),
        }
        return DownstreamFrame(
            queue=orphan[waiting], servers=servers, counts=counts, goodput_per_s=float(goodput)
        )
