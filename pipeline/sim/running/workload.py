"""``Workload``: one replication's random inputs, shared by the engine and the kernel
(and ``StageWorkload``, one stage's, for a chain).

Both engines must see the very same numbers: arrival times, first service
times and failure draws come from the scenario's seeded streams up front;
retry service times come from their own stream, in the order attempts start.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..workloads.classes import ClassDraws, draw_classes
from ..workloads.failures import AttemptFailures
from ..workloads.faults import LoadSpike
from ..workloads.scenario import Scenario, Streams
from ..workloads.spikes import spiked_times
from ..workloads.stages import StageSpec
from ..workloads.traces.service import ServiceTrace

__all__ = ["StageWorkload", "Workload", "shared_draws", "source_arrivals"]

_RETRY_BLOCK = 4096  # retry service times drawn at a time
RECENT_DRAWS_BYTES = 64 << 20
"""The most the draws :func:`shared_draws` keeps for reuse hold, bytes."""


class _RecentDraws:
    """The arrival times and first service times of the last few replications drawn.

    Kept read-only, by the identity of the scenario's arrival process and
    service (both are held, so an identity is never reused while its entry
    lives) and the numbers that decide the draws; a workload gets its own
    copies. At most ``most_bytes`` are held, the oldest going first; a
    replication larger than a quarter of that is not kept. Safe to use from
    several threads.
    """

    def __init__(self, most_bytes: int) -> None:
        self._most = most_bytes
        self._held = 0
        self._entries: OrderedDict[tuple[Any, ...], tuple[Any, Any, np.ndarray, np.ndarray]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    @staticmethod
    def _key(scenario: Scenario, replication: int) -> tuple[Any, ...]:
        return (
            id(scenario.arrivals),
            id(scenario.service),
            scenario.seed,
            replication,
            scenario.n_items,
            scenario.duration_s,
            scenario.initial_backlog,
            scenario.faults,  # a load spike changes the arrivals
        )

    def get(self, scenario: Scenario, replication: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Copies of the two arrays drawn for ``(scenario, replication)``, or None."""
        key = self._key(scenario, replication)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        return entry[2].copy(), entry[3].copy()

    def put(
        self, scenario: Scenario, replication: int, arrivals: np.ndarray, first: np.ndarray
    ) -> None:
        """Keep copies of ``arrivals`` and ``first`` for ``(scenario, replication)``."""
        size = arrivals.nbytes + first.nbytes
        if 4 * size > self._most:
            return
        kept_arrivals, kept_first = arrivals.copy(), first.copy()
        kept_arrivals.setflags(write=False)
        kept_first.setflags(write=False)
        key = self._key(scenario, replication)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held -= old[2].nbytes + old[3].nbytes
            self._entries[key] = (scenario.arrivals, scenario.service, kept_arrivals, kept_first)
            self._held += size
            while self._held > self._most:
                _, dropped = self._entries.popitem(last=False)
                self._held -= dropped[2].nbytes + dropped[3].nbytes


_shared: ContextVar[_RecentDraws | None] = ContextVar("pipeline_shared_draws", default=None)


@contextlib.contextmanager
def shared_draws(most_bytes: int | None = None) -> Iterator[None]:
    """Within the block, workloads of one arrival process and service share their draws.

    A plan runs many configurations of one workload on the same streams
    (common random numbers): every configuration's replication *r* draws the
    very same arrival times and first service times from the streams of
    ``(seed, r)``, about 5 ms for 100,000 items. Inside this block (in this
    thread or task) the last few are kept and reused, at most ``most_bytes``
    (default :data:`RECENT_DRAWS_BYTES`); they are dropped when it ends. Only
    for a block in which nothing changes what an arrival process or a service
    draws: a rate function that reads a variable the caller changes between
    runs would get the draws of before, which is why nothing is shared
    outside such a block.
    """
    most = RECENT_DRAWS_BYTES if most_bytes is None else most_bytes
    token = _shared.set(_RecentDraws(most))
    try:
        yield
    finally:
        _shared.reset(token)


def source_arrivals(scenario: Scenario, rng: np.random.Generator) -> np.ndarray:
    """Arrival times at the source, seconds: the initial backlog's zeros, then the process's
    (under the scenario's :class:`~pipeline.sim.LoadSpike` faults, if any).

    The ``scenario.initial_backlog`` items waiting at time 0 come first, item ids
    ``0 .. N - 1``, ahead of every arrival of the arrival process (FIFO, even an
    arrival at 0), which draws from ``rng`` exactly as without a backlog.
    """
    spikes = [fault for fault in scenario.faults if isinstance(fault, LoadSpike)]
    if spikes:
        arrivals = spiked_times(
            scenario.arrivals, spikes, rng, n=scenario.n_items, duration_s=scenario.duration_s
        )
    else:
        arrivals = scenario.arrivals.times(rng, n=scenario.n_items, duration_s=scenario.duration_s)
    backlog = scenario.initial_backlog
    if not backlog:
        return arrivals
    return np.concatenate([np.zeros(backlog), arrivals])


class Workload:
    """One replication's random inputs, drawn exactly as both engines use them.

    ``first_attempt_s[i]`` is item *i*'s first service time; :meth:`retry_time`
    gives the service time of a later attempt, drawn on demand from the retry
    stream (in the order attempts start), so the asyncio engine and the kernel
    see the same numbers when they start attempts in the same order.
    """

    __slots__ = (
        "_pool",
        "_service",
        "arrival_s",
        "classes",
        "failures",
        "first_attempt_s",
        "streams",
    )

    def __init__(self, scenario: Scenario, replication: int) -> None:
        streams = Streams.from_seed(scenario.seed, replication)
        service = scenario.service
        drawn = None
        recent = _shared.get()
        if recent is not None and service is not None and not isinstance(service, ServiceTrace):
            drawn = recent.get(scenario, replication)
        else:
            recent = None
        if drawn is not None:
            arrivals, first_attempt = drawn
            n = len(arrivals)
        else:
            arrivals = source_arrivals(scenario, streams.arrivals)
            n = len(arrivals)
            if isinstance(service, ServiceTrace):
                if len(service.times_s) < n:
                    raise ValueError(
                        f"the service trace has {len(service.times_s)} times but {n} items arrive"
                    )
                first_attempt = np.array(service.times_s[:n], dtype=np.float64)
            elif service is None:  # every class has its own service
                first_attempt = None
            else:
                first_attempt = service.sample(streams.service, n)
                if recent is not None:
                    recent.put(scenario, replication, arrivals, first_attempt)
        classes = draw_classes(scenario, replication, n)
        if classes is not None:
            first_attempt = classes.first_attempt_s(first_attempt)
        self.classes: ClassDraws | None = classes
        self.streams = streams
        self.arrival_s: np.ndarray = arrivals
        self.first_attempt_s: np.ndarray = first_attempt
        self.failures: AttemptFailures = scenario.failures.bind(streams.failures, n)
        self._service = service
        self._pool: list[float] = []

    @property
    def traced(self) -> bool:
        """Whether service times come from a :class:`ServiceTrace` (a retry repeats the item's)."""
        return isinstance(self._service, ServiceTrace)

    def retry_times(self, count: int) -> np.ndarray:
        """The next ``count`` retry service times, those ``count`` calls of :meth:`retry_time` give.

        Not for a :class:`ServiceTrace` (see :attr:`traced`).
        """
        return _take(self._pool, count, self._service, self.streams.retry_service)

    def retry_time(self, item_id: int) -> float:
        """Service time of a retry of ``item_id`` (the next draw of the retry stream).

        An item of a class with its own service draws from that class's retry stream.
        """
        classes = self.classes
        if classes is not None:
            own = classes.retry_time(item_id)
            if own is not None:
                return own
        service = self._service
        if isinstance(service, ServiceTrace):
            return service.times_s[item_id]
        pool = self._pool
        if not pool:
            pool.extend(service.sample(self.streams.retry_service, _RETRY_BLOCK).tolist()[::-1])
        return pool.pop()


class StageWorkload:
    """One stage's random inputs, for a chain: first service times up front, retries on demand.

    Shared by the chain on the engine (:mod:`.chained`) and the kernel's chain path.
    """

    def __init__(self, spec: StageSpec, n: int, seed: int, replication: int, number: int) -> None:
        service_seq, retry_seq, failure_seq, jitter_seq = np.random.SeedSequence(
            [seed, replication, 1 + number]
        ).spawn(4)
        service = spec.service
        if isinstance(service, ServiceTrace):
            if len(service.times_s) < n:
                raise ValueError(
                    f"stage {spec.name!r}: the service trace has {len(service.times_s)} times "
                    f"but {n} items may reach the stage"
                )
            first = np.array(service.times_s[:n], dtype=np.float64)
        else:
            first = service.sample(np.random.default_rng(service_seq), n)
        self.spec = spec
        self.n = n
        self.first_attempt_s = first.tolist()
        self.failures = spec.failures.bind(np.random.default_rng(failure_seq), n)
        self.jitter = random.Random(int(jitter_seq.generate_state(1)[0]))
        self._retry_rng = np.random.default_rng(retry_seq)
        self._pool: list[float] = []

    def retry_time(self, item_id: int) -> float:
        service = self.spec.service
        if isinstance(service, ServiceTrace):
            return service.times_s[item_id]
        if not self._pool:
            self._pool.extend(service.sample(self._retry_rng, _RETRY_BLOCK).tolist()[::-1])
        return self._pool.pop()

    def retry_times(self, count: int) -> np.ndarray:
        """The next ``count`` retry service times, those ``count`` calls of :meth:`retry_time` give.

        Not for a :class:`ServiceTrace` (a retry repeats the item's own time).
        """
        return _take(self._pool, count, self.spec.service, self._retry_rng)


def _take(pool: list[float], count: int, service: Any, rng: np.random.Generator) -> np.ndarray:
    """The next ``count`` values of a retry ``pool`` (``pop()`` order), refilled by ``service``.

    Fresh blocks come after what the pool holds, as ``pop()`` would reach them; what the
    last one leaves goes back into the pool (as arrays: a list per block cost ten times more).
    """
    need = count - len(pool)
    if need <= 0:
        taken = pool[len(pool) - count :]
        del pool[len(pool) - count :]
        return np.array(taken[::-1], dtype=np.float64)
    blocks = [service.sample(rng, _RETRY_BLOCK) for _ in range(-(-need // _RETRY_BLOCK))]
    fresh = np.concatenate([np.array(pool[::-1], dtype=np.float64), *blocks])
    pool[:] = fresh[count:][::-1].tolist()
    return fresh[:count]
