"""Trace replay: a recorded workload (arrivals, service times, failures) from a CSV.

A trace CSV has a header and one row per item, in arrival order:

- ``arrival_s`` -- absolute arrival time, seconds (finite, >= 0, non-decreasing);
- ``service_s`` -- service time of *each* attempt of that item, seconds (>= 0);
- ``fails`` (optional) -- failing attempts before the item succeeds (integer >= 0).

Other columns are ignored. :func:`load_trace` reads it into a
:class:`TraceWorkload` whose parts plug into a :class:`~pipeline.sim.Scenario`;
:func:`exact_fcfs_waits` is the outside truth replay is checked against: fed
the same samples, an FCFS pipeline with an unbounded queue reproduces its
per-item waits exactly.

Example:
    >>> workload = load_trace("trace.csv")
    >>> result = simulate(workload.scenario(PipelineConfig(concurrency=4, queue_maxsize=None)))
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.config import PipelineConfig

from ...._validate import integer
from ..arrivals import Trace
from ..failures import ScriptedFailures
from ..scenario import Scenario
from .reader import read_trace_csv
from .service import ServiceTrace

__all__ = ["TraceWorkload", "exact_fcfs_waits", "load_trace"]

_REQUIRED = ("arrival_s", "service_s")


@dataclass(frozen=True)
class TraceWorkload:
    """A recorded workload, ready to replay.

    Attributes:
        arrivals: the arrival times (a :class:`~pipeline.sim.Trace`, seconds).
        service: the per-item service times (a :class:`~pipeline.sim.ServiceTrace`).
        failures: the scripted failures (:class:`ScriptedFailures`; all zeros
            when the file has no ``fails`` column).
        path: the file it was read from, or None.
    """

    arrivals: Trace
    service: ServiceTrace
    failures: ScriptedFailures
    path: str | None = None

    def __post_init__(self) -> None:
        n = len(self.arrivals)
        if len(self.service.times_s) != n:
            raise ValueError(
                f"service must hold one time per arrival ({n}), got {len(self.service.times_s)}"
            )
        if len(self.failures.fails) != n:
            raise ValueError(
                f"failures must hold one count per arrival ({n}), got {len(self.failures.fails)}"
            )

    def __len__(self) -> int:
        return len(self.arrivals)

    @property
    def n_items(self) -> int:
        """Items (rows) in the trace."""
        return len(self.arrivals)

    def scenario(self, config: PipelineConfig | None = None, **kw: Any) -> Scenario:
        """A :class:`~pipeline.sim.Scenario` replaying every row of the trace.

        Args:
            config: the pipeline configuration (default ``PipelineConfig()``).
            **kw: other Scenario fields (``seed``, ``warmup_s``, ``item_size_bytes``,
                ``n_items`` to replay only the first rows, or ``duration_s``).

        Raises:
            ValueError: an ``initial_backlog`` (the trace has no service times for it).
        """
        if kw.get("initial_backlog"):
            # The rows are arrivals with their own service times; a backlog's items have none.
            raise ValueError(
                f"initial_backlog={kw['initial_backlog']!r}: a trace gives service times and "
                "failures to its recorded arrivals only; replay it without a backlog, or build "
                "the Scenario from Trace arrivals and a service distribution"
            )
        kw.setdefault("failures", self.failures)
        if "duration_s" not in kw:
            kw.setdefault("n_items", self.n_items)
        return Scenario(
            arrivals=self.arrivals,
            service=self.service,
            config=config if config is not None else PipelineConfig(),
            **kw,
        )


def load_trace(path: str | os.PathLike[str]) -> TraceWorkload:
    """Read a trace CSV (see the module docstring for its columns).

    Rows are numbered from 1, the first data row after the header (blank lines
    are skipped and not counted).

    Returns:
        A :class:`TraceWorkload` with one item per row.

    Raises:
        ValueError: a missing column, no rows, or a bad value; the one-line
            message names the file, the row and the column, e.g.
            ``trace.csv row 7: arrival_s must be >= the previous row's (12.5), got 12.0``.
        OSError: the file cannot be read.
    """
    name, columns = read_trace_csv(path, _REQUIRED, ("fails",))
    arrivals = columns["arrival_s"]
    trace = Trace(arrivals, path=name)  # so its repr reads Trace.from_csv(path)
    fails = columns.get("fails", [0] * len(arrivals))
    return TraceWorkload(
        arrivals=trace,
        service=ServiceTrace(tuple(columns["service_s"])),
        failures=ScriptedFailures(tuple(fails)),
        path=name,
    )


def exact_fcfs_waits(
    arrival_s: Sequence[float] | np.ndarray, service_s: Sequence[float] | np.ndarray, c: int
) -> np.ndarray:
    """Per-item waits (first start - arrival, seconds) of an FCFS queue with ``c`` servers.

    The exact multi-server recursion with no event engine: a heap of the
    times at which each server next becomes free; item *i* starts at
    ``max(arrival_s[i], earliest free time)`` and frees its server
    ``service_s[i]`` later. Unbounded queue, no failures.

    Args:
        arrival_s: arrival times, seconds, non-decreasing.
        service_s: service times, seconds, one per arrival.
        c: servers (workers), >= 1.

    Returns:
        A float64 array of waits, one per item.

    Raises:
        ValueError: lengths differ, ``c < 1``, or arrivals decrease.
    """
    c = integer("c", c, "servers", at_least=1)
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    services = np.asarray(service_s, dtype=np.float64)
    if arrivals.ndim != 1 or arrivals.shape != services.shape:
        raise ValueError(
            f"arrival_s and service_s must be 1-D and of equal length, got shapes "
            f"{arrivals.shape} and {services.shape}"
        )
    if np.any(np.diff(arrivals) < 0):
        raise ValueError("arrival_s must be non-decreasing (FCFS in arrival order)")
    free = [0.0] * min(c, max(len(arrivals), 1))
    waits = []
    push = heapq.heapreplace
    for arrival, service in zip(arrivals.tolist(), services.tolist(), strict=True):
        start = max(arrival, free[0])
        push(free, start + service)
        waits.append(start - arrival)
    return np.array(waits, dtype=np.float64)
