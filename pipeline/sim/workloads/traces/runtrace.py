"""``RunTrace``: a recording of a real run, stage by stage, for calibrating its twin.

A :class:`TraceRecorder` hands each stage of a real :class:`~pipeline.Chain`
(or a single :class:`~pipeline.Pipeline`) an ``on_event`` listener that logs
every engine event with its loop time and the item's admission number at
that stage. :meth:`TraceRecorder.trace` freezes the log into a
:class:`RunTrace`: per stage, the arrival of each item (admission to the
stage's queue), each attempt's start and end and how it ended, and the
stage's configuration and real capacity (how many attempts the resource
behind it serves at once: a database with one writer has capacity 1 however
many workers wait on it). Times are seconds since the run's origin (the
moment work became available at the source).

:func:`~pipeline.sim.calibrate` fits a :class:`~pipeline.sim.Scenario` from it.

Example::

    recorder = TraceRecorder()
    stages = [Stage("fetch", fetch, cfg, fan_out=True, on_event=recorder.listener("fetch")),
              Stage("write", write, cfg2, on_event=recorder.listener("write", capacity=1))]
    recorder.start()                     # the origin: loop.time() now
    await Chain(stages).run(source)
    trace = recorder.trace(configs={"fetch": cfg, "write": cfg2})

The recorder keeps the first ``max_events`` events (262,144 by
default), so a long run's recording stays bounded; see :class:`TraceRecorder`.
"""

from __future__ import annotations

import asyncio
import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline._validate import show
from pipeline.chain.stage import Batch
from pipeline.config import PipelineConfig
from pipeline.events import EventKind
from pipeline.items import WorkItem

__all__ = ["RunTrace", "StageTrace", "TraceRecorder"]

K = EventKind
_ENDS = {K.COMPLETED: "completed", K.RETRY_SCHEDULED: "failed", K.DEAD_LETTERED: "dead_lettered"}


class _StageLog:
    __slots__ = ("batching", "capacity", "ids", "kinds", "listener", "name", "times")

    def __init__(self, name: str, capacity: int | None, budget: _Budget) -> None:
        self.name = name
        self.capacity = capacity
        self.batching = False  # its items are batches of payloads (Stage(batch_size > 1))
        self.kinds, self.times, self.ids = array("b"), array("d"), array("q")
        kinds, times, ids = self.kinds.append, self.times.append, self.ids.append

        def listener(kind: EventKind, now_s: float, item: Any) -> None:
            # Quick and never raising: it runs inside the engine's bookkeeping.
            # A batching stage is seen whether or not the budget still records events.
            if item.__class__ is WorkItem:
                if kind == K.ADMITTED and item.payload.__class__ is Batch:
                    self.batching = True
            elif item.__class__ is Batch:  # SHED passes the bare payload
                self.batching = True
            if budget.left:
                budget.left -= 1
                kinds(kind)
                times(now_s)
                ids(item.seq if item.__class__ is WorkItem else -1)
            else:
                if budget.cut_s is None:
                    budget.cut_s = now_s
                budget.dropped += 1

        self.listener = listener


class _Budget:
    """Events every stage's log may still take, shared: all stages stop at one instant."""

    __slots__ = ("cut_s", "dropped", "left")

    def __init__(self, events: float) -> None:
        self.left = events
        self.cut_s: float | None = None  # loop time of the first event not kept
        self.dropped = 0


class TraceRecorder:
    """Hands out one ``on_event`` listener per stage and freezes the log into a trace.

    Memory is bounded by default: the recorder keeps the first ``max_events``
    events of the run, all stages together (17 bytes each: 262,144 events,
    about 4.3 MiB, by default; freezing them into a trace takes about ten
    times that for a moment). From the first event past the bound, every stage stops
    recording at once, so the trace is the whole run up to that instant,
    :attr:`cut_s`: the trace's ``duration_s`` ends there, and items still in
    the stages then look unfinished. What is lost is the rest of the run;
    :attr:`events_dropped` counts it. A twin fitted on such a trace is fitted
    on the run's first part (service times, retries and fan-out as they were
    then); measure a long run's totals as it goes, not from its trace.

    Args:
        max_events: events kept, over all stages (>= 1), or None to keep every one.
    """

    def __init__(self, *, max_events: int | None = 1 << 18) -> None:
        if max_events is not None and (
            isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1
        ):
            raise ValueError(f"max_events must be an integer >= 1 or None, got {show(max_events)}")
        self.max_events = max_events
        self._budget = _Budget(math.inf if max_events is None else max_events)
        self._stages: dict[str, _StageLog] = {}
        self.origin_s: float | None = None
        self.end_s: float | None = None

    @property
    def events_dropped(self) -> int:
        """Events that came after the bound and were not kept."""
        return self._budget.dropped

    @property
    def cut_s(self) -> float | None:
        """Loop time of the first event not kept (None: nothing was dropped)."""
        return self._budget.cut_s

    def listener(self, stage: str, *, capacity: int | None = None) -> Any:
        """The ``on_event`` listener for ``stage`` (a new name each call).

        Args:
            stage: the stage's name.
            capacity: attempts the resource behind the stage serves at once,
                when fewer than the stage's workers (None: as many as workers).
        """
        if not isinstance(stage, str) or not stage:
            raise ValueError(f"stage must be a non-empty name, got {show(stage)}")
        if stage in self._stages:
            raise ValueError(f"stage {stage!r} already has a listener")
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1
        ):
            raise ValueError(f"capacity must be an integer >= 1 or None, got {show(capacity)}")
        log = self._stages[stage] = _StageLog(stage, capacity, self._budget)
        return log.listener

    def start(self, origin_s: float | None = None) -> None:
        """Mark the origin (default: the running loop's time now)."""
        self.origin_s = asyncio.get_running_loop().time() if origin_s is None else origin_s

    def stop(self, end_s: float | None = None) -> None:
        """Mark the end of the run (default: the running loop's time now)."""
        self.end_s = asyncio.get_running_loop().time() if end_s is None else end_s

    def trace(
        self,
        *,
        configs: Mapping[str, PipelineConfig],
        source_arrivals_s: Sequence[float] | None = None,
    ) -> RunTrace:
        """The recording so far as a :class:`RunTrace`.

        Args:
            configs: each stage's :class:`~pipeline.PipelineConfig`, by name.
            source_arrivals_s: when each source item became available, seconds
                since the origin; default: the first stage's admissions.
        """
        if self.origin_s is None:
            raise ValueError("the recorder was never started: call start() when the run begins")
        missing = [name for name in self._stages if name not in configs]
        if missing:
            raise ValueError(f"configs lacks the stage(s) {', '.join(map(repr, missing))}")
        stages = []
        for name, log in self._stages.items():
            stages.append(
                StageTrace.from_events(
                    name,
                    np.frombuffer(log.kinds, np.int8) if log.kinds else np.empty(0, np.int8),
                    np.frombuffer(log.times, np.float64) - self.origin_s
                    if log.times
                    else np.empty(0),
                    np.frombuffer(log.ids, np.int64) if log.ids else np.empty(0, np.int64),
                    configs[name],
                    log.capacity,
                    batching=log.batching,
                )
            )
        end = (self.end_s - self.origin_s) if self.end_s is not None else None
        if self.cut_s is not None:  # the trace covers the run up to the cut
            end = self.cut_s - self.origin_s
        return RunTrace.of(stages, source_arrivals_s=source_arrivals_s, duration_s=end)


@dataclass(frozen=True, eq=False)
class StageTrace:
    """One stage's recording.

    Attributes:
        name: the stage.
        config: its configuration during the run.
        capacity: attempts its resource serves at once (<= ``config.concurrency``).
        arrival_s: per item (admission order at the stage), when it entered the queue.
        attempt_item, attempt_start_s, attempt_end_s, attempt_outcome: one entry
            per attempt that ended, in start order: the item, its start and end,
            and ``"completed"``, ``"failed"`` (retried) or ``"dead_lettered"``.
        finish_s: per item, when it completed (NaN if it did not).
        attempts: per item, attempts started.
        outcome: per item, ``"completed"``, ``"dead_lettered"`` or ``"unfinished"``.
        shed: items the stage refused at admission (``on_full="reject"``); they
            have no row, since they never had an admission number.
        batching: the stage's items were batches of payloads (a
            ``Stage(batch_size > 1)``), so each row is one batch.
        kinds, times_s: the raw events (for step functions).
    """

    name: str
    config: PipelineConfig
    capacity: int
    arrival_s: np.ndarray
    attempt_item: np.ndarray
    attempt_start_s: np.ndarray
    attempt_end_s: np.ndarray
    attempt_outcome: np.ndarray
    finish_s: np.ndarray
    attempts: np.ndarray
    outcome: np.ndarray
    kinds: np.ndarray = field(repr=False)
    times_s: np.ndarray = field(repr=False)
    shed: int = 0
    batching: bool = False

    @classmethod
    def from_events(
        cls,
        name: str,
        kinds: np.ndarray,
        times: np.ndarray,
        ids: np.ndarray,
        config: PipelineConfig,
        capacity: int | None = None,
        *,
        batching: bool = False,
    ) -> StageTrace:
        """Pair each attempt's start with its end; one row per item for the rest."""
        if not isinstance(config, PipelineConfig):
            raise TypeError(f"stage {name!r}: config must be a PipelineConfig, got {show(config)}")
        admitted = ids[kinds == K.ADMITTED]
        n = int(admitted.max()) + 1 if admitted.size else 0
        arrival = np.full(n, math.nan)
        arrival[admitted] = times[kinds == K.ADMITTED]
        finish = np.full(n, math.nan)
        outcome = np.full(n, "unfinished", dtype=object)
        attempts = np.zeros(n, dtype=np.int64)
        open_start: dict[int, float] = {}
        rows: list[tuple[int, float, float, str]] = []
        for kind, now, item in zip(kinds.tolist(), times.tolist(), ids.tolist(), strict=True):
            if kind == K.STARTED:
                open_start[item] = now
                attempts[item] += 1
            elif kind in _ENDS:
                started = open_start.pop(item, math.nan)
                rows.append((item, started, now, _ENDS[kind]))
                if kind == K.COMPLETED:
                    finish[item] = now
                    outcome[item] = "completed"
                elif kind == K.DEAD_LETTERED:
                    outcome[item] = "dead_lettered"
        rows.sort(key=lambda row: row[1])
        columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
        capacity = config.concurrency if capacity is None else min(capacity, config.concurrency)
        return cls(
            name=name,
            config=config,
            capacity=capacity,
            arrival_s=arrival,
            attempt_item=np.array(columns[0], dtype=np.int64),
            attempt_start_s=np.array(columns[1], dtype=np.float64),
            attempt_end_s=np.array(columns[2], dtype=np.float64),
            attempt_outcome=np.array(columns[3], dtype=object),
            finish_s=finish,
            attempts=attempts,
            outcome=outcome,
            kinds=kinds.copy(),
            times_s=times.copy(),
            shed=int(np.count_nonzero(kinds == K.SHED)),
            batching=bool(batching),
        )

    def __len__(self) -> int:
        return len(self.arrival_s)

    def service_s(self) -> np.ndarray:
        """Each ended attempt's service time, seconds, in end order.

        With capacity equal to the workers, an attempt's duration. With fewer
        (workers queueing on a resource), the time the resource spent on it,
        rebuilt from departures as a FCFS resource with ``capacity`` servers
        would have them: ``end - max(start, the capacity-th previous end)``;
        exact for a single server, a close estimate for several.
        """
        order = np.argsort(self.attempt_end_s, kind="stable")
        start, end = self.attempt_start_s[order], self.attempt_end_s[order]
        if self.capacity >= self.config.concurrency:
            return end - start
        freed = np.concatenate([np.full(self.capacity, -math.inf), end[: -self.capacity]])
        return end - np.maximum(start, freed)

    def waiting_depth(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, depth): items waiting for the stage's resource, an exact step function.

        Waiting means admitted (or back from a retry) and not yet served: in
        the queue, or, when the resource serves fewer at once than there are
        workers, held by a worker that waits for it (service starts are
        rebuilt as in :meth:`service_s`). With capacity equal to the workers
        this is :meth:`queue_depth`. A simulated stage with ``capacity``
        servers counts its queue the same way.
        """
        if self.capacity >= self.config.concurrency:
            return self.queue_depth()
        order = np.argsort(self.attempt_end_s, kind="stable")
        start, end = self.attempt_start_s[order], self.attempt_end_s[order]
        freed = np.concatenate([np.full(self.capacity, -math.inf), end[: -self.capacity]])
        served = np.maximum(start, freed)
        arrive = (self.kinds == K.ADMITTED) | (self.kinds == K.READMITTED)
        times = np.concatenate([self.times_s[arrive], served])
        delta = np.concatenate(
            [np.ones(int(arrive.sum()), np.int64), -np.ones(served.size, np.int64)]
        )
        # At equal times, arrivals first: an item that is served at once was waiting for an instant.
        order = np.lexsort((-delta, times))
        return times[order], np.cumsum(delta[order])

    def queue_depth(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, depth): items waiting in the stage's queue, an exact step function.

        Admissions and retries coming back add one; starts take one away (as
        the simulator counts).
        """
        delta = np.zeros(len(self.kinds), dtype=np.int64)
        delta[(self.kinds == K.ADMITTED) | (self.kinds == K.READMITTED)] = 1
        delta[self.kinds == K.STARTED] = -1
        keep = delta != 0
        return self.times_s[keep], np.cumsum(delta[keep])


@dataclass(frozen=True, eq=False)
class RunTrace:
    """A real run, stage by stage.

    Attributes:
        stages: by name, in order, each a :class:`StageTrace`.
        source_arrivals_s: when each source item became available (seconds
            since the origin).
        duration_s: the run's length, from the origin to its end.
    """

    stages: dict[str, StageTrace]
    source_arrivals_s: np.ndarray
    duration_s: float

    @classmethod
    def of(
        cls,
        stages: Sequence[StageTrace],
        *,
        source_arrivals_s: Sequence[float] | None = None,
        duration_s: float | None = None,
    ) -> RunTrace:
        """A trace of ``stages`` (in order); see :class:`RunTrace` for the rest."""
        if not stages:
            raise ValueError("a trace needs at least one stage, got none")
        by_name = {stage.name: stage for stage in stages}
        if len(by_name) != len(stages):
            raise ValueError("stage names in a trace must be unique")
        head = stages[0]
        if source_arrivals_s is None:
            arrivals = head.arrival_s.copy()
        else:
            arrivals = np.asarray(source_arrivals_s, dtype=np.float64)
            if arrivals.ndim != 1 or not np.isfinite(arrivals).all():
                raise ValueError("source_arrivals_s must be finite times, one per source item")
            if np.any(np.diff(arrivals) < 0):
                raise ValueError("source_arrivals_s must be non-decreasing")
        if duration_s is None:
            ends = [s.times_s.max() for s in stages if len(s.times_s)]
            duration_s = float(max(ends)) if ends else 0.0
        return cls(stages=by_name, source_arrivals_s=arrivals, duration_s=float(duration_s))

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}: {len(stage)} items" for name, stage in self.stages.items())
        return f"<RunTrace {self.duration_s:.3f} s; {parts}>"

    def children_per_item(self, stage: str) -> float:
        """Mean outputs per item ``stage`` completed (1 at the last stage).

        Outputs are counted where the next stage received them: admitted *or
        shed* there, since a child the next stage refused was still produced.
        Outputs a drain cut short before they reached the next stage
        (``stranded``) are not seen, so a run that drained in full counts
        exactly.
        """
        names = list(self.stages)
        index = names.index(stage)
        completed = int(np.sum(self.stages[stage].outcome == "completed"))
        if index + 1 == len(names) or completed == 0:
            return 1.0
        downstream = self.stages[names[index + 1]]
        return (len(downstream) + downstream.shed) / completed
