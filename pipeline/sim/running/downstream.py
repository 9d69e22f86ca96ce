"""The downstream's run on the virtual loop: FIFO queue, servers, faults, orphaned work.

:class:`DownstreamRun` serves the requests the simulated handler sends
(:meth:`DownstreamRun.call`). A request that finds a server free starts at
once; otherwise it waits in the FIFO queue (or, if ``queue_maxsize`` requests
already wait, the call raises :class:`~pipeline.sim.workloads.downstream.DownstreamFull`).
Its service ends when the servers' speed profile
(:class:`~pipeline.sim.workloads.faults.SpeedProfile`, the product of the
scenario's :class:`CapacityDrop` factors) has done its work: the end is
computed once, at the start, from the whole profile, since the faults are
known in advance. The caller awaits a future; if the caller is cancelled (its
``attempt_timeout_s`` cut the attempt) the request stays where it is and is
served to its end, counted as orphaned.

Service times are drawn from their own stream, in the order requests arrive
downstream. :class:`DownstreamStats` is what the run counted, with each request's
:class:`DownstreamLog` (when it was sent, started, ended and given up on), from
which its queue and its orphaned work can be read at any instant.
"""

from __future__ import annotations

import asyncio
from array import array
from collections import deque
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..workloads.downstream import Downstream, DownstreamFull
from ..workloads.faults import SpeedProfile

__all__ = [
    "DownstreamLog",
    "DownstreamRun",
    "DownstreamStats",
    "downstream_rng",
    "full_message",
    "stats_over",
]

DRAW_BLOCK = 4096
"""Service times drawn at a time (the kernel draws the very same blocks)."""


def full_message(maxsize: int | None) -> str:
    """What :class:`DownstreamFull` says when ``maxsize`` requests wait for a server."""
    return f"the downstream's queue is full ({maxsize} requests waiting)"


def downstream_rng(seed: int, replication: int) -> np.random.Generator:
    """The downstream's service-time stream of ``(seed, replication)``.

    The sixth child of the seed sequence the scenario's five streams are the
    first children of: spawning more children leaves the first five as they
    were, so a downstream changes no other draw of the run.
    """
    return np.random.default_rng(np.random.SeedSequence([seed, replication]).spawn(6)[5])


@dataclass(frozen=True)
class DownstreamLog:
    """Every request the downstream took, in the order it took them (FIFO: the order
    they start service too), seconds of virtual time.

    Attributes:
        sent_s: when the request reached the downstream.
        start_s: when a server took it (NaN: still waiting at the run's end).
        end_s: when its service ends (NaN: not started; may lie past the run's end).
        abandoned_s: when its caller gave up on it (its ``attempt_timeout_s`` cut the
            attempt) before the service ended; NaN when the caller got its answer or
            was still waiting at the run's end. A request with a finite
            ``abandoned_s`` is orphaned: work done for nobody.
    """

    sent_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    abandoned_s: np.ndarray


@dataclass(frozen=True)
class DownstreamStats:
    """What a downstream served, over ``[0, end_s]``.

    Attributes:
        requests: calls that reached it (``served + rejected`` plus those unserved at the end).
        served: requests whose service ended.
        orphaned: of those, requests whose caller had given up (cut by its timeout)
            before the service ended: work done for nobody.
        rejected: calls that found the queue full (failed at once).
        queue_mean: time-weighted mean of requests waiting for a server.
        in_system_mean: time-weighted mean of requests waiting or in service.
        busy_mean: time-weighted mean of busy servers.
        end_s: the end of the window the means are over, seconds.
        log: each request's times (:class:`DownstreamLog`), or None when the run
            kept none.
    """

    requests: int
    served: int
    orphaned: int
    rejected: int
    queue_mean: float
    in_system_mean: float
    busy_mean: float
    end_s: float
    log: DownstreamLog | None = field(default=None, repr=False, compare=False)

    def summary_keys(self) -> dict[str, int | float]:
        """The run summary's downstream keys: ``downstream_`` + the field, without ``end_s``
        and ``busy_mean`` (the summary's ``sim_time_s`` is the end)."""
        return {
            f"downstream_{name}": getattr(self, name)
            for name in ("requests", "served", "orphaned", "rejected", "queue_mean")
        } | {"downstream_in_system_mean": self.in_system_mean}


class DownstreamRun:
    """One run's downstream, on ``loop`` (see the module docstring).

    Args:
        spec: the :class:`~pipeline.sim.Downstream`.
        profile: the servers' speed factor over time.
        rng: the service-time stream (:func:`downstream_rng`).
        loop: the virtual loop.
    """

    def __init__(
        self,
        spec: Downstream,
        profile: SpeedProfile,
        rng: np.random.Generator,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._spec = spec
        self._profile = profile
        self._constant = profile.constant
        self._rng = rng
        self._loop = loop
        self._future = partial(asyncio.Future, loop=loop)
        self._pool: list[float] = []
        self._waiting: deque[tuple[asyncio.Future[None], float]] = deque()
        self._free = spec.concurrency
        self._maxsize = spec.queue_maxsize
        self.requests = self.served = self.orphaned = self.rejected = 0
        # Each request's times (DownstreamLog), by its number (``requests`` before its call);
        # first in, first out: the k-th service to start is request k's. Packed doubles
        # (8 bytes a time, not a Python float's 32): a storm sends millions of requests.
        self._sent = array("d")
        self._start_s = array("d")
        self._end_s = array("d")
        self._abandoned: dict[int, float] = {}
        # Areas under the queue and busy-server step functions, for the time-weighted means.
        self._since = 0.0
        self._queue_area = 0.0
        self._busy_area = 0.0

    def _draw(self) -> float:
        pool = self._pool
        if not pool:
            pool.extend(self._spec.service.sample(self._rng, DRAW_BLOCK).tolist()[::-1])
        return pool.pop()

    def _account(self, now: float) -> None:
        span = now - self._since
        if span > 0:
            self._queue_area += span * len(self._waiting)
            self._busy_area += span * (self._spec.concurrency - self._free)
            self._since = now

    def call(self) -> asyncio.Future[None]:
        """Send one request; the future resolves when its service ends.

        Cancelling the future (the caller's attempt was cut) withdraws nothing:
        the request is served to its end all the same, and counted orphaned.

        Raises:
            DownstreamFull: ``queue_maxsize`` requests already wait for a server.
        """
        now = self._loop.time()
        if not self._free and self._maxsize is not None and len(self._waiting) >= self._maxsize:
            self.rejected += 1
            raise DownstreamFull(full_message(self._maxsize))
        self.requests += 1
        self._account(now)
        done = self._future()
        self._sent.append(now)
        work = self._draw()
        if self._free:
            self._free -= 1
            self._start(done, work, now)
        else:
            self._waiting.append((done, work))
        return done

    def abandoned(self, number: int, done: asyncio.Future[None]) -> None:
        """The caller of request ``number`` (``requests`` before its :meth:`call`, whose
        future is ``done``) gave up on it: note when, for the log. A request already
        served is not orphaned, whatever its caller does next."""
        if done.cancelled():
            self._abandoned[number] = self._loop.time()

    def _start(self, done: asyncio.Future[None], work: float, now: float) -> None:
        end = now + work if self._constant else self._profile.finish_s(now, work)
        self._start_s.append(now)
        self._end_s.append(end)
        self._loop.call_at(end, self._finish, done)

    def _finish(self, done: asyncio.Future[None]) -> None:
        now = self._loop.time()
        self._account(now)
        self.served += 1
        if done.done():  # cancelled: the caller gave up on it
            self.orphaned += 1
        else:
            done.set_result(None)
        if self._waiting:
            following, work = self._waiting.popleft()
            self._start(following, work, now)
        else:
            self._free += 1

    def stats(self, end_s: float) -> DownstreamStats:
        """What was counted, with the time-weighted means over ``[0, end_s]``."""
        self._account(end_s)
        abandoned = np.full(len(self._sent), np.nan)
        if self._abandoned:
            abandoned[list(self._abandoned)] = list(self._abandoned.values())
        unstarted = np.full(len(self._sent) - len(self._start_s), np.nan)  # still waiting
        log = DownstreamLog(
            sent_s=np.array(self._sent),
            start_s=np.concatenate([self._start_s, unstarted]),
            end_s=np.concatenate([self._end_s, unstarted]),
            abandoned_s=abandoned,
        )
        counts = (self.requests, self.served, self.orphaned, self.rejected)
        return stats_over(counts, self._queue_area, self._busy_area, end_s, log)


def stats_over(
    counts: tuple[int, int, int, int],
    queue_area: float,
    busy_area: float,
    end_s: float,
    log: DownstreamLog,
) -> DownstreamStats:
    """:class:`DownstreamStats` from its ``counts`` (requests, served, orphaned, rejected) and
    the areas under its queue and busy servers over ``[0, end_s]`` (request-seconds)."""
    span = end_s if end_s > 0 else float("nan")
    queue_mean, busy_mean = queue_area / span, busy_area / span
    return DownstreamStats(
        *counts,
        queue_mean=queue_mean,
        in_system_mean=queue_mean + busy_mean,
        busy_mean=busy_mean,
        end_s=end_s,
        log=log,
    )
