"""Measure a real run as it happens, in memory that does not grow with the run.

A :class:`WriteMeter` is an ``on_event`` listener for the write stage that
keeps, while the run goes, exactly what :func:`~pipeline.examples.ingest.record.measure`
computes afterwards from a full trace: records written, the p95 of their
end-to-end latency and the peak of the records waiting for the database.
What it holds is bounded whatever the record count:

- the count and the peak are exact, from a few counters, the start times of
  the attempts in flight (at most the stage's workers) and the arrivals not
  yet settled (those after the oldest attempt in flight began: at most about
  the queue's bound plus the workers);
- the latencies go into a :class:`QuantileSketch`: exact (numpy's percentile)
  up to ``exact_up_to`` values (65,536 by default, 512 KiB), then a
  log-bucketed histogram whose quantiles are within a relative
  ``relative_accuracy`` (0.5% by default) of the true sample quantile; it
  has at most a few thousand buckets for any latency from a microsecond to
  days.

Nothing per record is kept, so a 400,000-record run measures in the same
memory as a 4,000-record one.
"""

from __future__ import annotations

import collections
import heapq
import math
from array import array
from typing import Any

import numpy as np

from ...events import EventKind
from ...items import WorkItem

__all__ = ["QuantileSketch", "WriteMeter"]

K = EventKind
_ARRIVE = (K.ADMITTED, K.READMITTED)
_ENDS = (K.COMPLETED, K.RETRY_SCHEDULED, K.DEAD_LETTERED)


class QuantileSketch:
    """Quantiles of a stream of values >= 0 in bounded memory.

    Exact up to ``exact_up_to`` values (the same numbers as ``np.percentile``);
    past that, every value goes into a logarithmic histogram (as DDSketch
    does): a quantile is then the value of rank ``floor(q * (n - 1))`` to
    within a relative ``relative_accuracy``. Values <= 0 count as 0.

    Args:
        exact_up_to: values kept exactly before switching to the histogram (>= 0).
        relative_accuracy: the histogram's relative error, in (0, 0.5).
    """

    def __init__(self, *, exact_up_to: int = 1 << 16, relative_accuracy: float = 0.005) -> None:
        if isinstance(exact_up_to, bool) or not isinstance(exact_up_to, int) or exact_up_to < 0:
            raise ValueError(f"exact_up_to must be an integer >= 0, got {exact_up_to!r}")
        if not (isinstance(relative_accuracy, int | float) and 0 < relative_accuracy < 0.5):
            raise ValueError(f"relative_accuracy must be in (0, 0.5), got {relative_accuracy!r}")
        self.exact_up_to = exact_up_to
        self.relative_accuracy = float(relative_accuracy)
        self._gamma = (1 + relative_accuracy) / (1 - relative_accuracy)
        self._log_gamma = math.log(self._gamma)
        self._exact: array | None = array("d")
        self._buckets: dict[int, int] = {}
        self._zeros = 0
        self.count = 0

    def __repr__(self) -> str:
        mode = "exact" if self._exact is not None else f"{len(self._buckets)} buckets"
        return f"<QuantileSketch count={self.count} {mode}>"

    def add(self, value: float) -> None:
        """Count one value."""
        self.count += 1
        if self._exact is not None:
            self._exact.append(value)
            if len(self._exact) > self.exact_up_to:
                exact, self._exact = self._exact, None
                for each in exact:
                    self._bucket(each)
            return
        self._bucket(value)

    def _bucket(self, value: float) -> None:
        if value <= 0.0:
            self._zeros += 1
        else:
            index = math.ceil(math.log(value) / self._log_gamma)
            self._buckets[index] = self._buckets.get(index, 0) + 1

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0 <= q <= 1), NaN when nothing was added."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be in [0, 1], got {q!r}")
        if self.count == 0:
            return math.nan
        if self._exact is not None:
            return float(np.percentile(np.frombuffer(self._exact), 100 * q))
        rank = math.floor(q * (self.count - 1))
        seen = self._zeros
        if rank < seen:
            return 0.0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if rank < seen:
                return 2.0 * self._gamma**index / (self._gamma + 1.0)
        raise AssertionError("the ranks add up to count")  # pragma: no cover


class WriteMeter:
    """The write stage's numbers, kept up to date from its events (bounded memory).

    Args:
        capacity: writes the database serves at once (the sink's ``writers``).
        concurrency: the stage's workers.

    Use :attr:`listener` as the stage's ``on_event``; call :meth:`start` with
    the origin's loop time before the run and :meth:`stop` with the end's
    after it, then read :meth:`measured`.
    """

    def __init__(self, *, capacity: int, concurrency: int) -> None:
        self.capacity = min(capacity, concurrency)
        self.rebuilt = self.capacity < concurrency
        self.origin_s = 0.0
        self.end_s: float | None = None
        self.latency = QuantileSketch()
        self.written = 0
        self._depth = 0
        self.depth_max = 0
        # Only when workers outnumber the database's writers: service starts are
        # rebuilt from the ends (as StageTrace.waiting_depth does), so an arrival is
        # settled once no attempt that began before it is still running.
        self._starts: dict[int, float] = {}
        self._oldest: list[tuple[float, int]] = []  # heap of (start, seq), lazily pruned
        self._freed: collections.deque[float] = collections.deque(maxlen=self.capacity)
        self._served: list[float] = []  # heap of rebuilt service starts not yet applied
        self._arrivals: collections.deque[float] = collections.deque()
        self.listener = self._on_event

    def start(self, origin_s: float) -> None:
        self.origin_s = origin_s

    def stop(self, end_s: float) -> None:
        self.end_s = end_s
        self._settle(math.inf)

    def _on_event(self, kind: EventKind, now_s: float, item: Any) -> None:
        # Quick and never raising: it runs inside the engine's bookkeeping.
        if kind is K.COMPLETED:
            self.written += 1
            self.latency.add(now_s - self.origin_s)
        if not self.rebuilt:
            if kind in _ARRIVE:
                self._depth += 1
                if self._depth > self.depth_max:
                    self.depth_max = self._depth
            elif kind is K.STARTED:
                self._depth -= 1
            return
        if item.__class__ is not WorkItem:
            return
        now = now_s - self.origin_s
        if kind in _ARRIVE:
            self._arrivals.append(now)
        elif kind is K.STARTED:
            self._starts[item.seq] = now
            heapq.heappush(self._oldest, (now, item.seq))
        elif kind in _ENDS:
            started = self._starts.pop(item.seq, None)
            if started is not None:
                freed = self._freed[0] if len(self._freed) == self.capacity else -math.inf
                heapq.heappush(self._served, max(started, freed))
            self._freed.append(now)
            oldest = self._oldest
            while oldest and self._starts.get(oldest[0][1]) != oldest[0][0]:
                heapq.heappop(oldest)
            self._settle(oldest[0][0] if oldest else now)

    def _settle(self, safe_s: float) -> None:
        """Apply the arrivals at or before ``safe_s``: every service start before them is known."""
        arrivals, served = self._arrivals, self._served
        while arrivals and arrivals[0] <= safe_s:
            at = arrivals.popleft()
            while served and served[0] < at:  # at equal times, the arrival counts first
                heapq.heappop(served)
                self._depth -= 1
            self._depth += 1
            if self._depth > self.depth_max:
                self.depth_max = self._depth

    def measured(self) -> dict[str, float]:
        """What :func:`~pipeline.examples.ingest.record.measure` gives for the run's trace."""
        span = (self.end_s - self.origin_s) if self.end_s is not None else math.nan
        return {
            "throughput_per_s": float(self.written / span) if span > 0 else math.nan,
            "latency_p95_s": self.latency.quantile(0.95),
            "queue_depth_max": float(self.depth_max),
            "records_written": int(self.written),
            "duration_s": float(span),
        }
