"""The kernel's FCFS path: the Kiefer-Wolfowitz recursion, the rest vectorised.

When no attempt can fail and the queue blocks (or is unbounded), with ``m = maxsize``::

    admitted[i] = max(arrival[i], start[i - m])   # its slot is free once item i - m started
    start[i]    = max(admitted[i], earliest worker-free time)   # a heap of c times
    finish[i]   = start[i] + service[i]

``start`` does not depend on ``m`` (it is non-decreasing, so the admission term never
binds: DESIGN.md's "waits do not depend on maxsize"). Only that recursion is a loop. A
run with events at one instant goes back (``None``) to the replay, which orders them as
the engine does, but for an initial backlog at 0.0: only its queue peak needs the
engine's rule (:func:`_burst_peak`).
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.events import EventKind as K
from pipeline.records import RunReport, ShedLog

from ..recorder import ARRIVAL, ItemColumns, StepSeries, stream_series
from .driver import take_compiled
from .report import COUNTS, make_report

__all__ = ["run_fcfs"]

_CHUNK = 1 << 18  # items converted to Python floats at a time by _starts (bounds its memory)
PLAIN_ITEMS_PER_REPLAYED = 30
"""Items the recursion's Python loop runs in about the CPU the plain replay spends on one (a
heapreplace against a replayed item's steps): ``auto`` counts them so towards loading numba,
and only those run, not a widget's announced runs (its memory should not pay about 115 MiB
for numba when the loop would have cost little)."""


def _starts(arrival: np.ndarray, service: np.ndarray, c: int) -> np.ndarray:
    """First-attempt start times of FCFS over ``c`` workers (Kiefer-Wolfowitz).

    Compiled (:func:`_heap_starts`) where the kernel's path is (:mod:`.paths`); else the
    loop runs over Python floats (a chunk at a time), which is faster than numpy
    scalars; ``free`` is a heap of the times the workers next fall idle.
    """
    n = len(arrival)
    start = np.empty(n)
    if take_compiled(n // PLAIN_ITEMS_PER_REPLAYED, announced=False):
        _compiled_starts()(arrival, service, np.zeros(c), start)
        return start
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


def _heap_starts(
    arrival: np.ndarray, service: np.ndarray, free: np.ndarray, start: np.ndarray
) -> None:
    """:func:`_starts`' loop over arrays, compiled: ``free`` (c zeros) kept a min-heap.

    heapq's heapreplace arranges the heap otherwise, but holds the same times, and a start
    reads only the least: the very same floats.
    """
    c = len(free)
    for i in range(len(arrival)):
        t = max(arrival[i], free[0])
        start[i], done, j = t, t + service[i], 0
        while 2 * j + 1 < c:  # sift the new time down from the root
            child = 2 * j + 1
            if child + 1 < c and free[child + 1] < free[child]:
                child += 1
            if free[child] >= done:
                break
            free[j], j = free[child], child
        free[j] = done


@functools.cache
def _compiled_starts() -> Callable:
    """:func:`_heap_starts` compiled by numba (cached on disk, as the replay is)."""
    import numba

    return numba.njit(cache=True, nogil=True)(_heap_starts)


def _burst_peak(burst: int, c: int, m: int | None) -> int:
    """The engine's peak queue length while it admits ``burst`` items arriving at 0.0.

    A bounded queue fills before any worker runs: ``min(m, burst)``. In an unbounded
    one an idle worker takes each item before the next is put, until the workers are
    busy: ``burst - c``, at least 1 (the series, the state after the instant, shows neither).
    """
    if burst < 2:
        return 0
    return min(m, burst) if m is not None else max(burst - c, 1)


def _admissions(arrival: np.ndarray, start: np.ndarray, m: int | None) -> tuple:
    """(admitted, blocked at, unblocked at, intake closed): the producer's reservations.

    It reserves a slot before it reads the next item: before item *i* (``m .. n``, *n*
    the source's end) it waits from ``admitted[i - 1]`` until ``start[i - m]``, if later.
    """
    n = len(arrival)
    if m is None or n < m:
        return arrival, np.empty(0), np.empty(0), float(arrival[-1]) if n else 0.0
    admitted = arrival  # the same array unless some slot was not free when its item arrived
    if np.any(start[: n - m] > arrival[m:]):
        admitted = arrival.copy()
        np.maximum(admitted[m:], start[: n - m], out=admitted[m:])
    since, until = admitted[m - 1 :], start[: n - m + 1]
    waits = until > since
    return admitted, since[waits], until[waits], max(float(admitted[-1]), float(start[n - m]))


def run_fcfs(
    arrival: np.ndarray, service: np.ndarray, config: PipelineConfig
) -> tuple[RunReport, np.ndarray, ItemColumns, StepSeries] | None:
    """Run a failure-free, blocking (or unbounded) scenario; None when a tie needs the replay.

    Returns:
        (report, arrival times, item columns, step series), as the engine's run gives.
    """
    n, c, m = len(arrival), config.concurrency, config.queue_maxsize
    # Every arrival after an initial backlog's (see _burst_peak) must stand alone.
    burst = int(np.searchsorted(arrival, 0.0, side="right")) if n else 0
    later = arrival[max(burst - 1, 0) :]
    if len(later) > 1 and not np.all(later[1:] > later[:-1]):
        return None
    start = _starts(arrival, service, c)
    finish = start + service
    by_finish = np.sort(finish)
    near = np.minimum(np.searchsorted(arrival, by_finish), max(n - 1, 0))  # an arrival not before
    if n and (np.any(by_finish[1:] == by_finish[:-1]) or np.any(arrival[near] == by_finish)):
        return None  # two workers free at one instant, or one just as an item arrives
    admitted, blocked_at, unblocked_at, closed_s = _admissions(arrival, start, m)
    blocked_s = float(np.cumsum(unblocked_at - blocked_at)[-1]) if len(blocked_at) else 0.0
    # The drain starts when intake stops and ends when the last item finishes, or times out.
    timeout, last_s = config.drain_timeout_s, float(by_finish[-1]) if n else 0.0
    deadline = math.inf if timeout is None or last_s < closed_s else closed_s + timeout
    if deadline <= closed_s:
        return None  # the timeout fires at once: the replay orders it
    timed_out = last_s >= deadline
    if timed_out and (deadline in by_finish or deadline in start):
        return None  # something happens at the very deadline
    finished_s = deadline if timed_out else max(closed_s, last_s)
    # every item started: a read-only view, no n-long array
    started = start < deadline if timed_out else np.broadcast_to(np.True_, (n,))
    completed = finish < deadline if timed_out else None
    unfinished = np.flatnonzero(~completed).tolist() if timed_out else []
    finished_at = by_finish[by_finish < deadline] if timed_out else by_finish
    del by_finish
    columns = ItemColumns(
        arrival_s=arrival,
        admitted_s=admitted,
        start_s=np.where(started, start, np.nan) if timed_out else start,
        finish_s=np.where(completed, finish, np.nan) if timed_out else finish,
        # read-only ones when every item started: no n-long array of them
        attempts=started.astype(np.int64) if timed_out else np.broadcast_to(np.int64(1), (n,)),
        outcome=np.where(completed, 0, 3).astype(np.int8) if timed_out else np.zeros(n, np.int8),
    )
    # Events at one instant form one stream of their combined kind (fewer to sort), each a
    # mask of a sorted column that stream_series applies a window at a time.
    a, once = admitted == arrival, start == admitted
    if timed_out:
        once &= started
    at = np.full(len(unfinished) + 1, deadline)  # the drain's timeout, each item unfinished
    ends = [(K.DRAIN_TIMEOUT, at[:1]), (K.UNFINISHED, at[1:])]
    series = stream_series(
        [
            ((ARRIVAL, K.ADMITTED, K.STARTED), arrival, lambda lo, hi: a[lo:hi] & once[lo:hi]),
            ((ARRIVAL, K.ADMITTED), arrival, lambda lo, hi: a[lo:hi] & ~once[lo:hi]),
            (ARRIVAL, arrival, lambda lo, hi: ~a[lo:hi]),
            ((K.ADMITTED, K.STARTED), admitted, lambda lo, hi: once[lo:hi] & ~a[lo:hi]),
            (K.ADMITTED, admitted, lambda lo, hi: ~(a[lo:hi] | once[lo:hi])),
            (K.STARTED, start, lambda lo, hi: started[lo:hi] & ~once[lo:hi]),
            (K.COMPLETED, finished_at),
            (K.PRODUCER_BLOCKED, blocked_at),
            (K.PRODUCER_UNBLOCKED, unblocked_at),
            (K.INTAKE_CLOSED, np.array([closed_s])),
            *(ends if timed_out else []),
        ],
        finished_s,
    )
    # The queue is longest right after an admission. With no two events at one instant,
    # the series shows that length, except when an idle worker takes the item in the
    # same instant (the series then shows the queue after it left): a length of 1.
    peak = max(int(series.queue_depth.max()), 1, _burst_peak(burst, c, m)) if n else 0
    tried = int(np.count_nonzero(started)) if timed_out else n
    counts = dict(zip(COUNTS, (n, n, len(finished_at), tried, 0, peak, blocked_s), strict=True))
    counts.update(dead_letters=[], shed=ShedLog(config.keep_shed))
    report = make_report(config, counts, unfinished, timed_out, finished_s)
    return report, arrival, columns, series
