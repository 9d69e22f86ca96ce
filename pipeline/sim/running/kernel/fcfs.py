"""The kernel's FCFS path: the Kiefer-Wolfowitz recursion, the rest vectorised.

When no attempt can fail and the queue blocks (or is unbounded), an item's
life is fixed by three numbers: it is admitted when it has arrived and its
slot is free, starts when a worker is free too, and finishes its service
later. With ``m = maxsize`` the producer reserves item *i*'s slot once item
``i - m`` has started (FCFS: items start in order), so::

    admitted[i] = max(arrival[i], start[i - m])
    start[i]    = max(admitted[i], earliest worker-free time)   # a heap of c times
    finish[i]   = start[i] + service[i]

and ``start`` does not depend on ``m``: the Kiefer-Wolfowitz recursion
``start[i] = max(arrival[i], earliest free time)`` is non-decreasing, so
``start[i] >= start[i - m]`` and the admission term never binds (by induction
over *i*, the heap of free times is the same with or without it). That is
the "waits do not depend on maxsize" of DESIGN.md, exactly.

Only the start-time recursion is a loop (over a heap of worker-free times);
admissions, blocked intervals, the drain, the event log for the step series
and the report are numpy.

The engine orders events that fall on the same instant by its own rules
(timer order, one loop turn per wake-up). This path does not model that
order, so it checks that no two such events coincide -- arrivals strictly
increasing, no worker freed at an arrival instant or at the same instant as
another worker, nothing at the drain deadline -- and hands the run back
(``None``) to the event path, which replays the engine's order, when they do.
One tie it orders itself: items arriving together at 0.0, an initial backlog
(``Scenario(initial_backlog=N)``). Their admissions and starts follow the
formulas above; only the queue's peak within that instant needs the
engine's rule (:func:`_burst_peak`), so a backlog of millions takes this
path, not the event path's per-event loop.
"""

from __future__ import annotations

import heapq

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.events import EventKind
from pipeline.records import RunReport, ShedLog

from ..recorder import ARRIVAL, ItemColumns, StepSeries, stream_series
from .report import make_report

__all__ = ["run_fcfs"]

K = EventKind


_CHUNK = 1 << 18
"""Items converted to Python floats at a time by :func:`_starts` (bounds its memory)."""


def _starts(arrival: np.ndarray, service: np.ndarray, c: int) -> np.ndarray:
    """First-attempt start times of FCFS over ``c`` workers (Kiefer-Wolfowitz).

    The loop runs over Python floats (a chunk at a time), which is faster than
    numpy scalars; ``free`` is a heap of the times the workers next fall idle.
    """
    n = len(arrival)
    start = np.empty(n)
    free = [0.0] * c
    replace = heapq.heapreplace
    for low in range(0, n, _CHUNK):
        high = min(n, low + _CHUNK)
        out: list[float] = []
        keep = out.append
        for t, x in zip(arrival[low:high].tolist(), service[low:high].tolist(), strict=True):
            idle = free[0]
            if idle > t:
                t = idle
            keep(t)
            replace(free, t + x)
        start[low:high] = out
    return start


def _item_streams(
    arrival: np.ndarray, admitted: np.ndarray, start: np.ndarray, started: np.ndarray | None
) -> list[tuple]:
    """Each item's arrival, admission and first start, as streams for the step series.

    Events that fall on one instant go into one stream of their combined kind
    (an item admitted as it arrives, and started then too, is one entry, not
    three), so the series sorts fewer times. Each stream is a mask of one of
    the three sorted columns, applied a window at a time by
    :func:`stream_series` (two masks of one byte per item, not six copies of
    eight). ``started``: which items started (None: all).
    """
    at_arrival = admitted == arrival
    at_once = start == admitted
    if started is not None:
        at_once &= started
    a, once = at_arrival, at_once

    def waited(low: int, high: int) -> np.ndarray:
        if started is None:
            return ~once[low:high]
        return started[low:high] & ~once[low:high]

    return [
        ((ARRIVAL, K.ADMITTED, K.STARTED), arrival, lambda lo, hi: a[lo:hi] & once[lo:hi]),
        ((ARRIVAL, K.ADMITTED), arrival, lambda lo, hi: a[lo:hi] & ~once[lo:hi]),
        (ARRIVAL, arrival, lambda lo, hi: ~a[lo:hi]),
        ((K.ADMITTED, K.STARTED), admitted, lambda lo, hi: once[lo:hi] & ~a[lo:hi]),
        (K.ADMITTED, admitted, lambda lo, hi: ~(a[lo:hi] | once[lo:hi])),
        (K.STARTED, start, waited),
    ]


def _burst_peak(burst: int, c: int, m: int | None) -> int:
    """The engine's peak queue length while it admits ``burst`` items arriving at 0.0.

    Into a bounded queue the producer puts items until it is full before any
    worker runs: ``min(m, burst)``. Into an unbounded one each item is taken by an
    idle worker before the next is put, until the workers are busy: ``burst - c``
    (at least 1 when an item was put at all). The series, which shows the state
    after the instant, cannot tell either; the equality tests check both rules.
    """
    if burst < 2:
        return 0
    return min(m, burst) if m is not None else max(burst - c, 1)


def _any_equal(sorted_values: np.ndarray, probes: np.ndarray) -> bool:
    """True when some value of ``probes`` occurs in ``sorted_values``."""
    if not len(sorted_values) or not len(probes):
        return False
    index = np.searchsorted(sorted_values, probes)
    np.minimum(index, len(sorted_values) - 1, out=index)
    return bool(np.any(sorted_values[index] == probes))


def run_fcfs(
    arrival: np.ndarray, service: np.ndarray, config: PipelineConfig
) -> tuple[RunReport, np.ndarray, ItemColumns, StepSeries] | None:
    """Run a failure-free, blocking (or unbounded) scenario; None when a tie needs the event path.

    Returns:
        (report, arrival times, item columns, step series), as the engine's run gives.
    """
    n = len(arrival)
    c = config.concurrency
    m = config.queue_maxsize
    # Items arriving together at 0.0 (an initial backlog) are the one tie of arrivals
    # this path orders itself: see _burst_peak. Every later arrival must stand alone.
    burst = int(np.searchsorted(arrival, 0.0, side="right")) if n else 0
    later = arrival[max(burst - 1, 0) :]
    if len(later) > 1 and not np.all(later[1:] > later[:-1]):
        return None
    start = _starts(arrival, service, c)
    finish = start + service
    by_finish = np.sort(finish)
    if n > 1 and np.any(by_finish[1:] == by_finish[:-1]):
        return None  # two workers free at one instant
    if _any_equal(arrival, by_finish):
        return None  # a worker freed just as an item arrived

    # Admission and the producer's waits for a slot (reserved before it reads the next item).
    if m is None or n < m:
        admitted = arrival
        blocked_at = unblocked_at = np.empty(0)
        closed_s = float(arrival[-1]) if n else 0.0
    else:
        # A copy only if some slot was not free when its item arrived: otherwise every
        # item was admitted as it arrived (the same array, as when nothing can block).
        if np.any(start[: n - m] > arrival[m:]):
            admitted = arrival.copy()
            np.maximum(admitted[m:], start[: n - m], out=admitted[m:])
        else:
            admitted = arrival
        # Before reading item i (i = m .. n; n is the end of the source) the producer
        # waits from admitted[i - 1] until start[i - m] when that is later.
        since = admitted[m - 1 :]
        until = start[: n - m + 1]
        waits = until > since
        blocked_at, unblocked_at = since[waits], until[waits]
        closed_s = max(float(admitted[-1]), float(start[n - m]))
    blocked_s = float(np.cumsum(unblocked_at - blocked_at)[-1]) if len(blocked_at) else 0.0

    # The drain: it starts when intake stops and ends when the last item finishes.
    timeout = config.drain_timeout_s
    last_s = float(by_finish[-1]) if n else 0.0
    timed_out = False
    if timeout is not None and last_s >= closed_s:
        deadline = closed_s + timeout
        if deadline <= closed_s:
            return None  # the timeout fires at once: the event path orders it
        if last_s >= deadline:
            at = np.array([deadline])
            if _any_equal(by_finish, at) or _any_equal(start, at):
                return None  # something happens at the very deadline
            timed_out = True
    if timed_out:
        # Left at the deadline: what had not finished (no event falls on it, checked above).
        finished_s = deadline
        started = start < deadline
        completed = finish < deadline
        unfinished = np.flatnonzero(~completed).tolist()
        columns = ItemColumns(
            arrival_s=arrival,
            admitted_s=admitted,
            start_s=np.where(started, start, np.nan),
            finish_s=np.where(completed, finish, np.nan),
            attempts=started.astype(np.int64),
            outcome=np.where(completed, 0, 3).astype(np.int8),
        )
        n_started, finished_at = int(np.count_nonzero(started)), by_finish[by_finish < deadline]
        ends = [
            (K.DRAIN_TIMEOUT, np.array([deadline])),
            (K.UNFINISHED, np.full(len(unfinished), deadline)),
        ]
    else:
        finished_s = max(closed_s, last_s)
        unfinished = []
        columns = ItemColumns(
            arrival_s=arrival,
            admitted_s=admitted,
            start_s=start,
            finish_s=finish,
            attempts=np.broadcast_to(np.int64(1), (n,)),  # read-only: no n-long array of ones
            outcome=np.zeros(n, np.int8),
        )
        n_started, finished_at = n, by_finish
        ends = []
    del by_finish
    series = stream_series(
        [
            *_item_streams(arrival, admitted, start, started if timed_out else None),
            (K.COMPLETED, finished_at),
            (K.PRODUCER_BLOCKED, blocked_at),
            (K.PRODUCER_UNBLOCKED, unblocked_at),
            (K.INTAKE_CLOSED, np.array([closed_s])),
            *ends,
        ],
        finished_s,
    )
    # The queue is longest right after an admission. With no two events at one instant,
    # the series shows that length, except when an idle worker takes the item in the
    # same instant (the series then shows the queue after it left): a length of 1.
    peak = max(int(series.queue_depth.max()), 1, _burst_peak(burst, c, m)) if n else 0
    report = make_report(
        config=config,
        offered=n,
        admitted=n,
        completed=len(finished_at),
        attempts=n_started,
        retried=0,
        dead_letters=[],
        shed=ShedLog(config.keep_shed),
        unfinished=unfinished,
        drain_timed_out=timed_out,
        finished_s=finished_s,
        queue_peak=peak,
        producer_blocked_s=blocked_s,
    )
    return report, arrival, columns, series
