"""``Recorder``: every engine event of a run, stored columnar, turned into exact tables.

During a run the recorder appends three numbers per event (kind, loop time,
item id) to compact arrays: no per-event objects are kept, so a million items
fit in a few hundred megabytes. Afterwards numpy turns the log into per-item
records and exact step functions.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...events import EventKind
from ...items import WorkItem
from ..stats.stepstats import step_durations, time_weighted_mean

__all__ = [
    "ARRIVAL",
    "DELTAS",
    "SERIES",
    "AttemptLog",
    "ItemColumns",
    "LoggedAttempts",
    "Recorder",
    "StepSeries",
    "attempt_log",
    "finish_series",
    "readmissions",
    "step_series",
    "stream_series",
]

K = EventKind


class Recorder:
    """An event listener for :class:`~pipeline.Pipeline` that logs every event.

    Payloads must be integer item ids (the simulator's items are).
    """

    def __init__(self) -> None:
        # Event kinds are small integers (EventKind): a bytearray holds them as int8 does,
        # and its append is about twice as fast as array("b")'s (which parses its argument
        # twice).
        self.kinds = bytearray()
        self.times = array("d")
        self.ids = array("q")
        # What the scenario's downstream counted (a DownstreamStats), when it has one.
        self.downstream: Any = None
        # The pool's size and desired count over time (a PoolSeries), when it autoscales.
        self.pool: Any = None
        kinds, times, ids = self.kinds.append, self.times.append, self.ids.append
        work_item = WorkItem

        def listener(kind: EventKind, now_s: float, item: Any) -> None:
            kinds(kind)
            times(now_s)
            if item.__class__ is work_item:
                ids(item.payload)
            elif item is None:
                ids(-1)
            else:  # SHED passes the bare payload
                ids(item)

        self.listener = listener

        def per_item(kind: EventKind, now_s: float, item: Any) -> None:
            kinds(kind)
            times(now_s)
            ids(item.payload)

        # ADMITTED, STARTED and COMPLETED, three times an item, always carry a WorkItem.
        self._per_item = per_item

    def listeners(self) -> dict[EventKind, Any]:
        """:attr:`listener` by event kind (for ``Pipeline.add_listener``), the same log.

        The three kinds every item has, which always carry a ``WorkItem``, get a listener
        that does not test what it was given.
        """
        hot = (K.ADMITTED, K.STARTED, K.COMPLETED)
        return {kind: self._per_item if kind in hot else self.listener for kind in EventKind}

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(kinds, times, ids) as numpy arrays (views, no copy).

        The columns are ``array.array`` as the listener appends, or numpy arrays
        of those types (the kernel's compiled event path hands its log over so).
        """
        return (
            np.frombuffer(self.kinds, dtype=np.int8) if len(self.kinds) else np.empty(0, np.int8),
            np.frombuffer(self.times, dtype=np.float64) if len(self.times) else np.empty(0),
            np.frombuffer(self.ids, dtype=np.int64) if len(self.ids) else np.empty(0, np.int64),
        )


@dataclass(frozen=True)
class AttemptLog:
    """Every attempt of a run, one entry per handler call (in item order, then time).

    ``start_s`` and ``end_s`` are virtual seconds; ``ending`` says how the
    attempt ended (codes, see :data:`ENDINGS`): it succeeded, failed and a
    retry was scheduled, failed and the item was dead-lettered, or was cut
    short by the drain's end (``end_s`` is then the drain's end, NaN if the
    log holds no such moment). ``readmitted_s`` is when the retry an attempt
    scheduled re-entered the queue, seconds (NaN: it never did, or the attempt
    scheduled none); None when no retry of the run was ever readmitted.
    """

    start_s: np.ndarray
    end_s: np.ndarray
    ending: np.ndarray  # codes, see ENDINGS
    readmitted_s: np.ndarray | None = None

    ENDINGS = ("completed", "retried", "dead_lettered", "cut")


class LoggedAttempts(AttemptLog):
    """The :func:`attempt_log` of an event log, paired when a column is first read.

    For a run whose caller may read only its summary (the kernel's event path):
    the pairing sorts every event, about a sixth of such a run's CPU. Holds the
    log's three columns until then (picklable, unlike a :class:`Recorder`).
    """

    def __init__(self, kinds: np.ndarray, times: np.ndarray, ids: np.ndarray) -> None:
        object.__setattr__(self, "_events", (kinds, times, ids))

    def events(self) -> Recorder:
        """The event log as a :class:`Recorder` (read it before a column: pairing lets it go)."""
        log = Recorder()
        log.kinds, log.times, log.ids = self._events
        return log

    @cached_property
    def _paired(self) -> AttemptLog:
        paired = attempt_log(self.events())
        del self.__dict__["_events"]  # the log is let go once paired
        return paired

    start_s = property(lambda self: self._paired.start_s)
    end_s = property(lambda self: self._paired.end_s)
    ending = property(lambda self: self._paired.ending)
    readmitted_s = property(lambda self: self._paired.readmitted_s)


@dataclass(frozen=True)
class ItemColumns:
    """Per-item records, one entry per item in arrival order (NaN where not applicable).

    ``attempt_log`` holds every attempt when the run had an event log; None
    when every item made at most one attempt, from ``start_s`` to ``finish_s``
    (the kernel's FCFS path, where nothing can fail). ``expired_s`` is when each
    expired item expired (NaN for the others), when the run had an event log.
    """

    arrival_s: np.ndarray
    admitted_s: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    attempts: np.ndarray
    outcome: np.ndarray  # codes, see OUTCOMES
    attempt_log: AttemptLog | None = None
    expired_s: np.ndarray | None = None  # when each expired item expired (NaN for the rest)

    OUTCOMES = ("completed", "dead_lettered", "shed", "unfinished", "not_offered", "expired")

    def expired_times(self) -> np.ndarray:
        """``expired_s``, or all NaN where the run gave none (a path where nothing expires)."""
        if self.expired_s is not None:
            return self.expired_s
        return np.full(len(self.arrival_s), np.nan)


# How an attempt's closing event maps to its AttemptLog ending code (-1: not a closing event).
_ENDING_OF = np.full(len(EventKind), -1, dtype=np.int8)
_ENDING_OF[K.COMPLETED] = 0
_ENDING_OF[K.RETRY_SCHEDULED] = 1
_ENDING_OF[K.DEAD_LETTERED] = 2
_ENDING_OF[K.UNFINISHED] = 3
_PAIRED = _ENDING_OF >= 0  # the events attempt_log pairs: a start and what closed it
_PAIRED[K.STARTED] = True


def attempt_log(recorder: Recorder) -> AttemptLog:
    """Pair each STARTED event with the event that closed that attempt of that item.

    An item's attempts never overlap, so after a stable sort by item id (the
    log is in time order) each STARTED is followed by its own closing event,
    or by nothing when the run ended inside the attempt.
    """
    kinds, times, ids = recorder.arrays()
    # One gather per column: the paired events' positions, in item order (then time).
    kept = np.flatnonzero(_PAIRED.take(kinds))
    order = kept.take(np.argsort(ids.take(kept), kind="stable"))
    kinds, times, ids = kinds.take(order), times.take(order), ids.take(order)
    del order, kept
    starts = np.flatnonzero(kinds == K.STARTED)
    after = starts + 1
    closed = after < len(kinds)
    closed[closed] = ids.take(after[closed]) == ids.take(starts[closed])
    ending = np.full(len(starts), 3, dtype=np.int8)
    end = np.full(len(starts), np.nan)
    closing = np.where(closed, after, 0)
    code = np.where(closed, _ENDING_OF.take(kinds.take(closing)), -1)
    closed &= code >= 0
    ending[closed] = code[closed]
    end[closed] = times.take(closing)[closed]
    start = times.take(starts)
    attempts = np.bincount(ids.take(starts))
    readmitted = readmissions(*recorder.arrays(), ending, attempts)
    return AttemptLog(start_s=start, end_s=end, ending=ending, readmitted_s=readmitted)


def readmissions(
    kinds: np.ndarray, times: np.ndarray, ids: np.ndarray, ending: np.ndarray, attempts: np.ndarray
) -> np.ndarray | None:
    """When each attempt's retry re-entered the queue, from a run's event log.

    Args:
        kinds, times, ids: the event log, in time order.
        ending: each attempt's :attr:`AttemptLog.ENDINGS` code, in item order, then time.
        attempts: attempts per item (item ``i``'s are the next ``attempts[i]`` entries).

    Returns:
        Seconds per attempt (NaN where no retry of it was readmitted), or None when
        the log holds no readmission. An item waits out one retry at a time, so its
        k-th READMITTED event ends the retry its k-th retried attempt scheduled; a
        retry the drain handed back was never readmitted.
    """
    readmit = kinds == K.READMITTED
    if not readmit.any():
        return None
    item, at = ids[readmit], times[readmit]
    order = np.argsort(item, kind="stable")  # item order, then time
    item, at = item.take(order), at.take(order)
    per_item = np.bincount(item, minlength=len(attempts))
    first = np.cumsum(per_item) - per_item
    retried = np.flatnonzero(ending == AttemptLog.ENDINGS.index("retried"))
    owner = np.repeat(np.arange(len(attempts)), attempts).take(retried)
    rank = np.arange(len(owner)) - np.searchsorted(owner, owner, side="left")
    matched = rank < per_item.take(owner)
    out = np.full(len(ending), np.nan)
    out[retried[matched]] = at.take(first.take(owner[matched]) + rank[matched])
    return out


def item_columns(arrival_s: np.ndarray, recorder: Recorder) -> ItemColumns:
    """Build per-item columns from the event log."""
    kinds, times, ids = recorder.arrays()
    n = len(arrival_s)
    # The log grouped by kind, in log order within each (a stable sort of small integers is
    # a radix sort): each kind's events are then one slice, not a mask over the whole log.
    order = np.argsort(kinds, kind="stable")
    ends = np.cumsum(np.bincount(kinds, minlength=len(EventKind))).tolist()
    ids, times = ids.take(order), times.take(order)
    del order

    def of(kind: EventKind) -> tuple[np.ndarray, np.ndarray]:
        """The ids and times of ``kind``'s events, in log order."""
        low = ends[kind - 1] if kind else 0
        return ids[low : ends[kind]], times[low : ends[kind]]

    def time_of(kind: EventKind) -> np.ndarray:
        out = np.full(n, np.nan)
        which, when = of(kind)
        out[which] = when
        return out

    admitted = time_of(K.ADMITTED)
    started, started_s = of(K.STARTED)
    attempts = np.bincount(started, minlength=n)[:n].astype(np.int64)
    if len(started) and attempts.max() > 1:
        # The earliest of each item's starts (ufunc.at: no sort, unlike np.unique).
        start = np.full(n, np.inf)
        np.minimum.at(start, started, started_s)
        start[start == np.inf] = np.nan
    else:  # at most one start an item: it is the earliest
        start = time_of(K.STARTED)
    completed = time_of(K.COMPLETED)
    dead = time_of(K.DEAD_LETTERED)
    finish = np.where(np.isnan(completed), dead, completed)
    outcome = np.full(n, 4, dtype=np.int8)  # not_offered unless an event says otherwise
    outcome[of(K.UNFINISHED)[0]] = 3
    outcome[of(K.EXPIRED)[0]] = 5  # its deadline came first (max_wait_s)
    outcome[of(K.SHED)[0]] = 2
    outcome[of(K.QUEUE_SHED)[0]] = 2  # CoDel shed it from the queue
    outcome[~np.isnan(dead)] = 1
    outcome[~np.isnan(completed)] = 0
    expired = time_of(K.EXPIRED)
    attempts_log = LoggedAttempts(*recorder.arrays())  # paired if a caller reads it
    return ItemColumns(arrival_s, admitted, start, finish, attempts, outcome, attempts_log, expired)


# How each event moves each series. The extra last row is an item's arrival at
# the source, which only the upstream backlog sees.
SERIES = (
    "queue_depth",
    "in_flight",
    "retry_waiting",
    "dead_letters",
    "completed",
    "producers_blocked",
    "upstream_backlog",
)
"""The step series' columns in :data:`DELTAS`' order."""
_ARRIVAL = len(EventKind)
ARRIVAL = _ARRIVAL
"""The code of an item's arrival at the source, for :func:`stream_series`."""
DELTAS = np.zeros((len(EventKind) + 1, len(SERIES)), dtype=np.int8)
DELTAS[K.ADMITTED] = (1, 0, 0, 0, 0, 0, -1)
DELTAS[K.SHED] = (0, 0, 0, 0, 0, 0, -1)
DELTAS[K.STARTED] = (-1, 1, 0, 0, 0, 0, 0)
DELTAS[K.COMPLETED] = (0, -1, 0, 0, 1, 0, 0)
DELTAS[K.RETRY_SCHEDULED] = (0, -1, 1, 0, 0, 0, 0)
DELTAS[K.READMITTED] = (1, 0, -1, 0, 0, 0, 0)
DELTAS[K.DEAD_LETTERED] = (0, -1, 0, 1, 0, 0, 0)
DELTAS[K.EXPIRED] = (-1, 0, 0, 0, 0, 0, 0)
DELTAS[K.QUEUE_SHED] = (-1, 0, 0, 0, 0, 0, 0)
DELTAS[K.PRODUCER_BLOCKED] = (0, 0, 0, 0, 0, 1, 0)
DELTAS[K.PRODUCER_UNBLOCKED] = (0, 0, 0, 0, 0, -1, 0)
DELTAS[_ARRIVAL] = (0, 0, 0, 0, 0, 0, 1)
"""``DELTAS[kind]``: how one event of ``kind`` (or an :data:`ARRIVAL`) moves the :data:`SERIES`."""
_COLUMN_DELTAS = [np.ascontiguousarray(DELTAS[:, index]) for index in range(len(SERIES))]


@dataclass(frozen=True)
class StepSeries:
    """Right-continuous step functions: column ``x[i]`` holds on ``[time_s[i], time_s[i+1])``.

    The last row's values hold until ``end_s``.
    """

    time_s: np.ndarray
    queue_depth: np.ndarray
    in_flight: np.ndarray
    retry_waiting: np.ndarray
    dead_letters: np.ndarray
    completed: np.ndarray
    producers_blocked: np.ndarray
    upstream_backlog: np.ndarray
    end_s: float

    COLUMNS = (
        "queue_depth",
        "in_flight",
        "retry_waiting",
        "upstream_backlog",
        "dead_letters",
        "completed",
        "producers_blocked",
    )

    @property
    def in_system(self) -> np.ndarray:
        """Admitted items not yet finished: queued + running + waiting for a retry."""
        return self.queue_depth + self.in_flight + self.retry_waiting

    @property
    def lag_items(self) -> np.ndarray:
        """Arrived items not yet finished, wherever they wait (upstream included)."""
        return self.in_system + self.upstream_backlog

    def memory_bytes(self, item_size_bytes: int) -> np.ndarray:
        """Modelled bytes held in the process: in-system items plus kept dead letters."""
        held = self.in_system.astype(np.int64) + self.dead_letters
        return held * item_size_bytes

    def durations(self) -> np.ndarray:
        """How long each row's values hold, seconds."""
        return np.diff(np.append(self.time_s, self.end_s))

    def window(self, start_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Each row's duration clipped to ``[start_s, end_s]``, and the time each row ends."""
        ends = np.append(self.time_s[1:], self.end_s)
        return step_durations(self.time_s, self.end_s, start_s), ends

    def time_mean(self, values: np.ndarray, start_s: float = 0.0) -> float:
        """Time-weighted mean of ``values`` over ``[start_s, end_s]`` (NaN if that is empty).

        See :func:`pipeline.sim.stats.stepstats.time_weighted_mean`; a ``start_s`` before
        the first row counts from the first row.
        """
        start = max(float(start_s), float(self.time_s[0]))
        if not self.end_s > start:
            return float("nan")
        return time_weighted_mean(self.time_s, values, self.end_s, t_start=start)

    def time_max(self, values: np.ndarray, start_s: float = 0.0) -> float:
        """Largest value held during ``[start_s, end_s]`` (for any positive time or at its end)."""
        _, ends = self.window(start_s)
        live = ends >= start_s
        return float(values[live].max()) if live.any() else 0.0


def step_series(arrival_s: np.ndarray, recorder: Recorder, end_s: float) -> StepSeries:
    """Turn the event log (plus arrival times) into exact step functions.

    Works one column at a time in small integer types, so a million items
    need a few hundred megabytes, not gigabytes.
    """
    kinds, times, _ = recorder.arrays()
    all_times = np.concatenate([arrival_s, times])
    order = np.argsort(all_times, kind="stable")
    event_times = all_times.take(order)
    del all_times
    codes = np.concatenate([np.full(len(arrival_s), _ARRIVAL, np.int8), kinds]).take(order)
    del order
    # Several events at one instant: keep the state after the last of them.
    if len(event_times):
        last = np.flatnonzero(np.append(event_times[1:] != event_times[:-1], True))
    else:
        last = np.empty(0, np.intp)
    time_s = np.concatenate([[0.0], event_times.take(last)])
    del event_times
    present = np.bincount(codes, minlength=len(DELTAS)) > 0
    columns = {}
    for index, name in enumerate(SERIES):
        deltas = _COLUMN_DELTAS[index]
        if deltas[present].any():
            steps = np.cumsum(deltas.take(codes), dtype=np.int32).take(last)
            columns[name] = np.concatenate([np.zeros(1, np.int32), steps])
        else:  # no event of this run moves this column
            columns[name] = np.zeros(len(last) + 1, np.int32)
    return finish_series(time_s, columns, end_s)


def finish_series(time_s: np.ndarray, columns: dict[str, np.ndarray], end_s: float) -> StepSeries:
    """The series from rows that start with the state at 0.0 s, closed at ``end_s``."""
    if len(time_s) > 1 and time_s[1] == 0.0:  # events at 0.0 replace the initial row
        time_s = time_s[1:]
        columns = {name: values[1:] for name, values in columns.items()}
    # Whatever the drain handed back as unfinished leaves at the very end.
    inside = ("queue_depth", "in_flight", "retry_waiting")
    if any(columns[name][-1] for name in inside):
        if time_s[-1] < end_s:
            time_s = np.append(time_s, end_s)
            columns = {name: np.append(values, values[-1]) for name, values in columns.items()}
        for name in inside:
            columns[name][-1] = 0
    return StepSeries(time_s=time_s, end_s=end_s, **columns)


_WINDOW = 1 << 18
"""Events per stream that :func:`stream_series` sorts at a time (bounds its scratch memory)."""


def _selected(times: np.ndarray, select) -> int:
    """How many of ``times`` a stream's ``select`` keeps (all of them if None)."""
    if select is None:
        return len(times)
    return sum(
        int(np.count_nonzero(select(low, min(low + _WINDOW, len(times)))))
        for low in range(0, len(times), _WINDOW)
    )


def stream_series(streams: list[tuple], end_s: float) -> StepSeries:
    """:func:`step_series` for an event log given as sorted streams.

    ``streams`` holds ``(kinds, times)`` pairs, each ``times`` non-decreasing:
    at each of those times one event of each of ``kinds`` happens (an
    :class:`~pipeline.events.EventKind`, :data:`ARRIVAL` for an item's arrival
    at the source, or a tuple of them). An entry may be ``(kinds, times,
    select)`` instead: only the times where ``select(low, high)`` (a boolean
    array for ``times[low:high]``) is True are events, so a stream can be a
    subset of a larger sorted column without a copy of it. Together they are
    the run's events and arrivals (item ids are not needed). The result equals
    ``step_series`` of that log. It is built a time window at a time, so its
    scratch memory stays small however long the run: the series itself (one
    row per distinct event time) is the only large allocation.
    """
    rows_of = [kinds if isinstance(kinds, tuple) else (kinds,) for kinds, *_ in streams]
    table = np.array([DELTAS[list(kinds)].sum(axis=0) for kinds in rows_of], dtype=np.int8)
    table = table.reshape(len(streams), len(SERIES))
    column_deltas = [np.ascontiguousarray(table[:, index]) for index in range(len(SERIES))]
    parts = [
        (code, np.asarray(times, dtype=np.float64), select[0] if select else None)
        for code, (_, times, *select) in enumerate(streams)
    ]
    total = sum(_selected(times, select) for _, times, select in parts)
    # Window boundaries are times, so that all events at one instant fall in one window.
    cuts = np.sort(np.concatenate([times[_WINDOW::_WINDOW] for _, times, _ in parts]))
    if len(cuts):  # distinct (np.unique would import numpy.ma, 6 ms)
        cuts = cuts[np.append(True, cuts[1:] != cuts[:-1])]
    bounds = [[0, *np.searchsorted(times, cuts, side="left").tolist(), len(times)]
              for _, times, _ in parts]  # fmt: skip
    time_s = np.empty(total + 1)
    # Zeroed by the allocator (calloc: pages the kernel maps on first write), and only
    # the rows a column's events move are written: a column no event moves for a while
    # (no retries, no dead letters, no blocking in most runs) costs no memory there.
    columns = {name: np.zeros(total + 1, np.int32) for name in SERIES}
    time_s[0] = 0.0
    carry = dict.fromkeys(SERIES, 0)
    rows = 1
    for window in range(len(cuts) + 1):
        pieces = []
        for (kind, times, select), bound in zip(parts, bounds, strict=True):
            low, high = bound[window], bound[window + 1]
            piece = times[low:high]
            if select is not None and high > low:
                piece = piece[select(low, high)]
            pieces.append((kind, piece))
        times = np.concatenate([piece for _, piece in pieces])
        if not len(times):
            continue
        codes = np.concatenate([np.full(len(piece), kind, np.int8) for kind, piece in pieces])
        order = np.argsort(times, kind="stable")
        times = times.take(order)
        codes = codes.take(order)
        del order
        last = np.flatnonzero(np.append(times[1:] != times[:-1], True))
        end = rows + len(last)
        time_s[rows:end] = times.take(last)
        present = np.bincount(codes, minlength=len(parts)) > 0
        for index, name in enumerate(SERIES):
            deltas = column_deltas[index]
            if deltas[present].any():
                steps = np.cumsum(deltas.take(codes), dtype=np.int32)
                if carry[name]:
                    steps += carry[name]
                columns[name][rows:end] = steps.take(last)
                carry[name] = int(steps[-1])
            elif carry[name]:
                columns[name][rows:end] = carry[name]
        rows = end
    time_s.resize(rows, refcheck=False)
    for values in columns.values():
        values.resize(rows, refcheck=False)
    return finish_series(time_s, columns, end_s)
