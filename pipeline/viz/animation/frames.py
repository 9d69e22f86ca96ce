"""Frame states of a simulated run: which zone every item is in at each event time.

A :class:`Timeline` turns a result (one stage or a chain) into frames, one per
distinct event time of the recorded run (arrivals included), and computes
each frame's :class:`FrameState` on demand, from the per-item records alone:

- *not arrived* before its arrival at the stage;
- *upstream* from its arrival until admission (backpressure: the producer is
  blocked, or, after a chain's first stage, the finished item waits for room
  in this stage's queue);
- *queue* slot ``i`` while admitted and waiting; slot 0 is the next to start
  (the queue is ordered by when each item really starts, so FIFO, the retry
  lane's precedence and a priority order all come out right);
- *worker* ``j`` during an attempt (each attempt takes the lowest-numbered
  free worker);
- *retry* lane between a failed attempt and the instant the run readmitted
  its retry (the attempt log's ``readmitted_s``), the next due first; a
  readmitted retry then waits in the queue until its next attempt (or until
  it expires there);
- a *bin* per outcome once the item left: ``completed`` (``handed_on`` at a
  chain's stage before the last) and ``dead_lettered`` at the item's
  ``finish_s``, ``expired`` at its ``expired_s`` (the instant the run
  recorded), ``shed`` (at arrival), ``unfinished`` (at the run's end, where
  the drain handed it back), and any other outcome the records name under
  its own name (at the run's end when they give it no time). An item never
  offered stays upstream, as the run's ``upstream_backlog`` does.

Every time comes from the run's records, never from the configuration: a
deadline may be per item (``max_wait_s`` a function), a class's patience, or
cut short by a retry whose backoff would end past it, and only the run knows.

Every item is in exactly one zone at every frame, and the zones' counts agree
with the run's step series (queue depth, in flight, retry waiting, upstream
backlog) at that time.

What the run has besides its items is drawn too, from its own records: an
autoscaled stage's pool (``result.pool``: the workers at each instant, busy
or not, and the count the last sync asked for), and a run's downstream
(:mod:`.downstream`: its queue, its servers, the orphaned requests served for
clients who gave up, the retries, the goodput).

Long runs are thinned to a *window*: the frames are the event times in
``[start_s, end_s]``, at most ``max_frames`` of them, the first ones. A
window rather than a sample of frames: every frame is one step of the run,
so no item jumps over a zone between two frames. The one exception is a
window that runs to the run's end: its last frame is the run's end itself,
where every item has reached its outcome, so that a movie of the run ends
on its result. Only the items that are
inside the stage at some time in the window are kept (arrays of that size);
the ones that left before it or arrive after it are counts. A frame's state
is computed when asked for, never all of them at once, so memory is bounded
by the window, not by the run times the number of frames.

A storm or a burst lasts minutes, and a minute of a busy run is thousands of
events: ``every_s`` samples the window at a fixed step instead (the frames
``start_s``, ``start_s + every_s``, ...). Each frame is still the exact state
at its instant; an item may move through several zones between two frames.

This module uses numpy only (no matplotlib): the drawing is
:mod:`pipeline.viz.animation.artist`.
"""

from __future__ import annotations

import dataclasses
import heapq
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from .downstream import DownstreamFrame, DownstreamTrack
from .window import Window

__all__ = [
    "BIN_ORDER",
    "DEFAULT_MAX_FRAMES",
    "ZONES",
    "FrameState",
    "StageFrame",
    "Timeline",
]

ZONES = ("not_arrived", "upstream", "queue", "running", "retry")
"""The zones an item can be in before it leaves (``counts`` keys besides the bins)."""

BIN_ORDER = ("completed", "handed_on", "dead_lettered", "shed", "expired", "unfinished")
"""Bins in drawing order; any other outcome comes after them, by name."""

DEFAULT_MAX_FRAMES = 400
"""Frames of a window unless asked otherwise (at 10 frames a second, 40 s of animation)."""

# Zone codes of the per-frame classification.
_NOT_ARRIVED, _UPSTREAM, _QUEUE, _RUNNING, _BETWEEN, _LEFT = range(6)
_RETRIED = 1  # AttemptLog.ENDINGS.index("retried")
_NEVER_OFFERED = "not_offered"


@dataclass(frozen=True)
class StageFrame:
    """Where the items of one stage are at one frame.

    Item ids are the stage's own (arrival order at the stage, from 0).

    Attributes:
        name: the stage's name (``"pipeline"`` for a single-stage run).
        upstream: ids waiting upstream, the longest-waiting first.
        queue: ids in the queue, slot 0 (the next to start) first.
        workers: one entry per worker slot, the id it runs or -1 when idle.
        retry: ids in the retry lane (waiting out a backoff), the next due first.
        bins: outcome -> ids that reached that bin inside the window, in the order
            they arrived there (the ones before the window are only counted).
        counts: exact counts by zone (:data:`ZONES`) and by bin; they add up to
            the stage's items.
        capacity: the queue's ``maxsize`` (None: unbounded).
        last: whether this is the last stage (its ``completed`` bin is the run's).
        blocked: idle-looking workers that are in fact blocked after service: in a
            chain, each parent of an item waiting in the next stage's hand-off holds
            its worker until the last of its children is admitted (0 at the last stage).
        pool: with an autoscaler, the workers in the pool at this frame (busy, idle or
            cold-starting; ``result.pool``), else None: then every slot is a worker.
        desired: with an autoscaler, the count its last sync asked for (None before
            the first sync, and without an autoscaler).
    """

    name: str
    upstream: np.ndarray
    queue: np.ndarray
    workers: np.ndarray
    retry: np.ndarray
    bins: dict[str, np.ndarray]
    counts: dict[str, int]
    capacity: int | None
    last: bool
    blocked: int = 0
    pool: int | None = None
    desired: int | None = None

    @property
    def concurrency(self) -> int:
        """Worker slots drawn (the configured concurrency)."""
        return len(self.workers)

    def zone_of(self, item_id: int) -> str:
        """The zone (or bin) holding ``item_id`` in this frame, or ``"elsewhere"`` when it
        is only counted (not arrived yet, or left before the window)."""
        for zone in ("upstream", "queue", "retry"):
            if np.any(getattr(self, zone) == item_id):
                return zone
        if np.any(self.workers == item_id):
            return "running"
        for name, ids in self.bins.items():
            if np.any(ids == item_id):
                return name
        return "elsewhere"


@dataclass(frozen=True)
class FrameState:
    """One frame: its number, its virtual time, every stage's :class:`StageFrame`, and
    the run's downstream (a :class:`~.downstream.DownstreamFrame`; None without one)."""

    index: int
    time_s: float
    stages: tuple[StageFrame, ...]
    downstream: DownstreamFrame | None = None


def _outcome_names(columns: Any) -> list[str]:
    """Outcome code -> name, for every code present (unknown codes get a name of their own)."""
    known = list(getattr(columns, "OUTCOMES", ()))
    top = int(columns.outcome.max()) + 1 if len(columns.outcome) else 0
    return known + [f"outcome {code}" for code in range(len(known), top)]


def _stages_of(result: Any) -> list[tuple[str, Any]]:
    """(name, single-stage result) pairs: a chain's stages in order, or the run itself."""
    stages = getattr(result, "stages", None)
    if isinstance(stages, dict):
        if not stages:
            raise ValueError("result must have at least one stage, got a chain with none")
        return list(stages.items())
    if not (hasattr(result, "columns") and hasattr(result, "series")):
        raise TypeError(
            f"result must be a simulated run (simulate()'s result), got {type(result).__name__}"
        )
    return [("pipeline", result)]


def _seconds(value: float) -> str:
    """Seconds for a note: "3,600", "60", "2.5"."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


class _StageTrack:
    """One stage's items inside a window, with everything a frame needs precomputed."""

    def __init__(self, name: str, result: Any, window: tuple[float, float], last: bool) -> None:
        columns, series = result.columns, result.series
        config = result.scenario.config
        self.name, self.last = name, last
        self._columns = columns  # the run's own, read again only for the run's end
        self.capacity = config.queue_maxsize
        self.sheds = config.on_full == "reject"  # a shed bin is drawn even while empty
        end_s = float(series.end_s)
        self._end_s = end_s
        w0, w1 = window
        n = len(columns.arrival_s)
        self.n = n
        names = _outcome_names(columns)
        if not last:
            names = ["handed_on" if name == "completed" else name for name in names]
        self.names = names
        code = columns.outcome.astype(np.intp)
        arrival = np.where(np.isnan(columns.arrival_s), np.inf, columns.arrival_s)
        leaves = _leave_times(columns, names, arrival, end_s)
        arrived_by_end = arrival <= w1
        inside = arrived_by_end & (leaves >= w0)
        counted = np.bincount(code[arrived_by_end & ~inside], minlength=len(names))
        self.before = {names[i]: int(counted[i]) for i in range(len(names)) if counted[i]}
        self.not_arrived_after = int(n - arrived_by_end.sum())
        del arrived_by_end, counted
        ids = np.flatnonzero(inside)
        self.ids = ids
        self.arrival = arrival[ids]
        self.admitted = np.nan_to_num(columns.admitted_s[ids], nan=np.inf)
        self.first_start = np.nan_to_num(columns.start_s[ids], nan=np.inf)
        self.leaves = leaves[ids]
        self.code = code[ids]
        del arrival, leaves, code
        self._attempts(columns, inside, ids, end_s)
        self.pool = getattr(result, "pool", None)
        slots = int(config.concurrency)
        if self.pool is not None and len(self.pool.workers):
            slots = max(slots, int(self.pool.workers.max()))
        self.concurrency = self._assign_workers(slots, w0, w1)

    def pool_at(self, time_s: float) -> dict[str, int | None]:
        """The frame's ``pool`` and ``desired`` (:class:`StageFrame`) at ``time_s``."""
        if self.pool is None:
            return {}
        workers, desired = self.pool.at(np.array([time_s]))
        return {"pool": int(workers[0]), "desired": int(desired[0]) if desired[0] >= 0 else None}

    def _attempts(self, columns: Any, inside: np.ndarray, ids: np.ndarray, end_s: float) -> None:
        """The kept items' attempts: owner (index into ``ids``), start, end, ending, when
        the retry it scheduled was readmitted (inf: never), next start."""
        log = columns.attempt_log
        counts = columns.attempts.astype(np.intp)
        local = np.full(len(inside), -1, dtype=np.intp)
        local[ids] = np.arange(len(ids))
        if log is not None and len(log.start_s) == int(counts.sum()):
            owner = np.repeat(np.arange(len(inside)), counts)
            keep = inside[owner]
            start, end = log.start_s[keep], log.end_s[keep]
            ending = log.ending[keep].astype(np.intp)
            readmitted = np.full(len(start), np.inf)
            if log.readmitted_s is not None:
                readmitted = np.nan_to_num(log.readmitted_s[keep], nan=np.inf)
            owner = local[owner[keep]]
        else:  # one attempt per started item, from its start to its finish (the FCFS kernel)
            started = np.flatnonzero(np.isfinite(columns.start_s[ids]))
            owner = started
            start = columns.start_s[ids][started]
            end = columns.finish_s[ids][started]
            ending = np.zeros(len(started), dtype=np.intp)
            readmitted = np.full(len(started), np.inf)
        end = np.where(np.isnan(end), end_s, end)  # cut short by the drain's end
        same = np.append(owner[1:] == owner[:-1], False)
        following = np.append(start[1:], np.inf)
        self.a_owner, self.a_start, self.a_end, self.a_ending = owner, start, end, ending
        self.a_next = np.where(same, following, np.inf)
        self.a_readmitted = readmitted
        self.a_slot = np.full(len(owner), -1, dtype=np.intp)

    def _assign_workers(self, concurrency: int, w0: float, w1: float) -> int:
        """Give each attempt overlapping the window the lowest free worker slot.

        Returns:
            The worker slots to draw: the concurrency, or more if the records ever
            show more attempts at once (they do not in a consistent run).
        """
        start, end = self.a_start, self.a_end
        relevant = np.flatnonzero((start <= w1) & (end > w0))
        order = relevant[np.lexsort((end[relevant], start[relevant]))]
        free = list(range(concurrency))
        busy: list[tuple[float, int]] = []
        slots = concurrency
        slot_of = self.a_slot
        for index, began, ended in zip(
            order.tolist(), start[order].tolist(), end[order].tolist(), strict=True
        ):
            while busy and busy[0][0] <= began:
                heapq.heappush(free, heapq.heappop(busy)[1])
            if free:
                slot = heapq.heappop(free)
            else:
                slot, slots = slots, slots + 1
            slot_of[index] = slot
            heapq.heappush(busy, (ended, slot))
        return slots

    def frame(self, time_s: float) -> StageFrame:
        t = time_s
        m = len(self.ids)
        ids = self.ids
        running = (self.a_start <= t) & (t < self.a_end)
        between = (self.a_ending == _RETRIED) & (self.a_end <= t) & (t < self.a_next)
        item_running = np.zeros(m, dtype=bool)
        item_running[self.a_owner[running]] = True
        item_between = np.zeros(m, dtype=bool)
        item_between[self.a_owner[between]] = True
        # An item between attempts next starts, or, with no next attempt, leaves (a
        # readmitted retry that expires in the queue; the drain's end).
        next_start = np.full(m, np.inf)
        owner = self.a_owner[between]
        next_start[owner] = np.minimum(self.a_next[between], self.leaves[owner])
        readmitted_at = np.full(m, np.inf)
        readmitted_at[owner] = self.a_readmitted[between]
        zone = np.select(
            [
                self.arrival > t,
                self.leaves <= t,
                item_running,
                item_between,
                (self.admitted <= t) & (t < self.first_start),
            ],
            [_NOT_ARRIVED, _LEFT, _RUNNING, _BETWEEN, _QUEUE],
            default=_UPSTREAM,
        )
        # Items between attempts wait out their backoff in the retry lane until the run
        # readmitted them, then in the queue.
        back = (zone == _BETWEEN) & (readmitted_at <= t)
        waiting = np.flatnonzero((zone == _BETWEEN) & ~back)
        waiting = waiting[np.lexsort((ids[waiting], readmitted_at[waiting]))]
        queued = np.concatenate([np.flatnonzero(zone == _QUEUE), np.flatnonzero(back)])
        key = np.where(zone[queued] == _QUEUE, self.first_start[queued], next_start[queued])
        queued = queued[np.lexsort((ids[queued], self.admitted[queued], key))]
        upstream = np.flatnonzero(zone == _UPSTREAM)
        upstream = upstream[np.lexsort((ids[upstream], self.arrival[upstream]))]
        workers = np.full(self.concurrency, -1, dtype=np.int64)
        workers[self.a_slot[running]] = ids[self.a_owner[running]]
        left = np.flatnonzero(zone == _LEFT)
        left = left[np.lexsort((ids[left], self.leaves[left]))]
        counts = {
            "not_arrived": self.not_arrived_after + int((zone == _NOT_ARRIVED).sum()),
            "upstream": len(upstream),
            "queue": len(queued),
            "running": int(running.sum()),
            "retry": len(waiting),
        }
        bins = self._binned(left, counts)
        # An item never offered stays where the run's upstream backlog keeps it.
        return StageFrame(
            name=self.name,
            upstream=ids[upstream],
            queue=ids[queued],
            workers=workers,
            retry=ids[waiting],
            bins=bins,
            counts=counts,
            capacity=self.capacity,
            last=self.last,
            **self.pool_at(t),
        )

    def _binned(
        self, left: np.ndarray, counts: dict[str, int], totals: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """The bins of a frame: each outcome's kept items that have left (``left``: indices
        into the kept items, in the order they left), the bins drawn even while empty
        included; their counts go into ``counts``: those before the window and these, or
        ``totals`` by outcome code when given (the run's end)."""
        bins: dict[str, np.ndarray] = {}
        left_code = self.code[left]
        for name, number in sorted(
            ((name, number) for number, name in enumerate(self.names) if name != _NEVER_OFFERED),
            key=lambda pair: _bin_rank(pair[0]),
        ):
            mine = self.ids[left[left_code == number]]
            total = self.before.get(name, 0) + len(mine) if totals is None else int(totals[number])
            if total or name in ("completed", "dead_lettered") or (name == "shed" and self.sheds):
                bins[name] = mine
                counts[name] = total
        return bins

    def end_frame(self) -> StageFrame:
        """The state at the run's end, for a window that stops before it: every item has
        left by its outcome, but one never offered, which stays upstream once it arrived
        (and one that never reached this stage of a chain has not arrived).

        Counted from the run's columns (scratch of their length); the bins' ids are the
        window's own items, as in any frame.
        """
        code = self._columns.outcome.astype(np.intp)
        totals = np.bincount(code, minlength=len(self.names))
        never = np.zeros(len(code), dtype=bool)
        if _NEVER_OFFERED in self.names:
            never = code == self.names.index(_NEVER_OFFERED)
        arrived = self._columns.arrival_s <= self._end_s  # NaN: never reached this stage
        upstream = np.flatnonzero(never & arrived)
        counts = {
            "not_arrived": int((never & ~arrived).sum()),
            "upstream": len(upstream),
            "queue": 0,
            "running": 0,
            "retry": 0,
        }
        left = np.flatnonzero(np.isfinite(self.leaves))
        left = left[np.lexsort((self.ids[left], self.leaves[left]))]
        bins = self._binned(left, counts, totals)
        return StageFrame(
            name=self.name,
            upstream=upstream,
            queue=np.empty(0, dtype=np.int64),
            workers=np.full(self.concurrency, -1, dtype=np.int64),
            retry=np.empty(0, dtype=np.int64),
            bins=bins,
            counts=counts,
            capacity=self.capacity,
            last=self.last,
            **self.pool_at(self._end_s),
        )


def _leave_times(columns: Any, names: list[str], arrival: np.ndarray, end_s: float) -> np.ndarray:
    """When each item left the stage, seconds, from its records alone.

    The item's ``finish_s`` (completed, dead-lettered), else its ``expired_s``
    (the instant it expired: at its deadline in the queue, or at the failure
    whose retry would have come too late), else by outcome: a shed item at its
    arrival, an unfinished one at the run's end, one never offered never
    (``inf``). Anything else the records give no time for leaves at the run's
    end. Nothing here re-derives when an engine would have let the item go:
    the config cannot say (a per-item ``max_wait_s``, a class's patience, a
    retry whose backoff ran past the deadline, a deadline counted from arrival).
    """
    leaves = np.where(np.isfinite(columns.finish_s), columns.finish_s, np.nan)
    expired_s = getattr(columns, "expired_s", None)
    if expired_s is not None:
        leaves = np.where(np.isnan(leaves) & np.isfinite(expired_s), expired_s, leaves)
    code = columns.outcome
    for number, outcome in enumerate(names):
        if outcome == "shed":
            leaves[code == number] = arrival[code == number]
        elif outcome == _NEVER_OFFERED:
            leaves[code == number] = np.inf
    return np.where(np.isnan(leaves), end_s, leaves)


def _bin_rank(name: str) -> tuple[int, str]:
    return (BIN_ORDER.index(name), "") if name in BIN_ORDER else (len(BIN_ORDER), name)


class Timeline:
    """The frames of a simulated run: one per event time inside a window.

    Args:
        result: a :func:`~pipeline.simulate` result, single-stage or a chain.
        start_s: the window's start, seconds of virtual time (default 0).
        end_s: the window's end, seconds (default: the run's end).
        max_frames: at most this many frames, the window's first ones; a window
            with more events ends at the last frame shown, or, when it runs to the
            run's end, shows its first ``max_frames - 1`` events and then the run's
            end (see :attr:`note`, :attr:`ends_at_run_end`).
        every_s: None (one frame per event), or a step in seconds: the frames are
            then ``start_s``, ``start_s + every_s``, ... (at most ``max_frames``).

    Attributes:
        times_s: each frame's virtual time, seconds (increasing).
        run_end_s: the run's end, seconds.
        events_in_window: event times in ``[start_s, end_s]`` before ``max_frames``.
        thinned: whether the frames show less than the whole run (or sample it).
        every_s: the step between frames, seconds (None: a frame per event).
        ends_at_run_end: whether the last frame is the run's end after a cut window.

    Raises:
        TypeError: ``result`` is not a simulated run, or ``max_frames`` is not an int.
        ValueError: a window bound is not a finite number >= 0, ``end_s`` is not
            after ``start_s``, ``start_s`` is after the run's end, ``max_frames`` < 1,
            or ``every_s`` is not a finite number of seconds > 0.
    """

    def __init__(
        self,
        result: Any,
        *,
        start_s: float = 0.0,
        end_s: float | None = None,
        max_frames: int = DEFAULT_MAX_FRAMES,
        every_s: float | None = None,
    ) -> None:
        stages = _stages_of(result)
        downstream = _downstream_of(result)
        run_end = max(float(stage.series.end_s) for _, stage in stages)
        window = Window(start_s, end_s, max_frames, every_s, run_end)
        start, end, step = window.start_s, window.end_s, window.every_s
        if step is None:
            events = [stage.series.time_s for _, stage in stages]
            pools = [getattr(stage, "pool", None) for _, stage in stages]
            events += [pool.time_s for pool in pools if pool is not None]
            if downstream is not None:
                events.append(downstream.event_times(start, end))
            inside = window.events(np.concatenate(events))
        else:
            inside = window.steps()
        max_frames = window.max_frames
        self.events_in_window = len(inside)
        cut = len(inside) > max_frames
        # A window to the run's end with more events than frames shows its first events,
        # then the run's end: a movie of the whole run ends on the run's outcome.
        self.ends_at_run_end = cut and end >= run_end and max_frames >= 2
        if self.ends_at_run_end:
            self.times_s = np.append(inside[: int(max_frames) - 1], run_end)
        else:
            self.times_s = inside[: int(max_frames)]
        self.run_end_s = run_end
        self.every_s = step
        self.start_s, self.end_s = float(self.times_s[0]), float(self.times_s[-1])
        self.thinned = cut or start > 0 or end < run_end or step is not None
        stepped = self.times_s[:-1] if self.ends_at_run_end else self.times_s
        kept = (self.start_s, float(stepped[-1]))
        self.stage_names = [name for name, _ in stages]
        specs = getattr(result.scenario, "stages", None) or ()
        self._fan_out = [int(getattr(spec, "fan_out", 1)) for spec in specs]
        self._tracks = []
        for number, (name, stage) in enumerate(stages):
            self._tracks.append(_StageTrack(name, stage, kept, number == len(stages) - 1))
        self._downstream = downstream

    def __len__(self) -> int:
        return len(self.times_s)

    def __repr__(self) -> str:
        return f"<Timeline frames={len(self)} stages={self.stage_names} {self.note}>"

    @property
    def note(self) -> str:
        """What the frames show, e.g. ``"showing 0-60 s of 3,600 s (400 of 9,812 events)"``."""
        if not self.thinned:
            return f"all {len(self):,} events, {_seconds(self.start_s)}-{_seconds(self.end_s)} s"
        stepped = len(self) - 1 if self.ends_at_run_end else len(self)
        span = f"{_seconds(self.start_s)}-{_seconds(float(self.times_s[stepped - 1]))} s"
        if self.every_s is not None:
            return (
                f"every {_seconds(self.every_s)} s, {span} of {_seconds(self.run_end_s)} s "
                f"({len(self):,} frames)"
            )
        note = (
            f"showing {span} of {_seconds(self.run_end_s)} s "
            f"({stepped:,} of {self.events_in_window:,} events in the window)"
        )
        return note + (", then the run's end" if self.ends_at_run_end else "")

    @property
    def items_in_window(self) -> int:
        """Items kept as arrays (inside some stage during the window), all stages together."""
        return sum(len(track.ids) for track in self._tracks)

    def frame(self, index: int) -> FrameState:
        """The state at frame ``index`` (0 to ``len(self) - 1``), computed now.

        Raises:
            TypeError: ``index`` is not an int (a float, NaN, a bool).
            IndexError: ``index`` is negative or past the last frame.
        """
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"frame index must be an int, got {index!r}")
        if not 0 <= index < len(self.times_s):
            raise IndexError(f"frame index must be in 0..{len(self.times_s) - 1}, got {index}")
        time_s = float(self.times_s[int(index)])
        downstream = None if self._downstream is None else self._downstream.frame(time_s)
        if self.ends_at_run_end and index == len(self.times_s) - 1:
            ended = tuple(track.end_frame() for track in self._tracks)
            return FrameState(index=int(index), time_s=time_s, stages=ended, downstream=downstream)
        stages = [track.frame(time_s) for track in self._tracks]
        for number in range(len(stages) - 1):
            stage, after = stages[number], stages[number + 1]
            if len(after.upstream):
                fan_out = self._fan_out[number] if number < len(self._fan_out) else 1
                parents = len(np.unique(after.upstream // max(fan_out, 1)))
                idle = stage.concurrency - stage.counts["running"]
                stages[number] = dataclasses.replace(stage, blocked=min(parents, idle))
        return FrameState(
            index=int(index), time_s=time_s, stages=tuple(stages), downstream=downstream
        )


def _downstream_of(result: Any) -> DownstreamTrack | None:
    """The run's downstream, when it has one and kept its requests' log."""
    stats = getattr(result, "downstream", None)
    if stats is None or getattr(stats, "log", None) is None:
        return None
    return DownstreamTrack(result)
