"""How a run's initial backlog drained: the summary keys of ``Scenario(initial_backlog=N)``.

A scenario with an initial backlog starts with N items waiting at time 0, ahead
of every arrival (item ids ``0 .. N - 1``, see
:func:`~pipeline.sim.running.workload.source_arrivals`). Two moments answer
"how long until it drains?", and they differ:

- ``backlog_cleared_s``: when the last of the N items left (completed or
  dead-lettered). FIFO serves the backlog first, so this is about
  ``N / (c * mu)`` whatever the arrivals behind it do.
- ``backlog_drained_s``: the first time nothing waits to start -- the queue is
  empty and no arrived item waits upstream of it (items waiting out a retry's
  backoff are not counted): the queue is back to what the traffic alone
  gives. With Poisson arrivals at rate ``lambda`` below capacity ``c * mu``
  that is about ``N / (c * mu - lambda)``; above capacity it only happens
  once the arrivals stop.

Both are absolute seconds of virtual time, not affected by ``warmup_s``, and
NaN when the run cannot say (a drain that timed out first).
"""

from __future__ import annotations

import math

import numpy as np

from .recorder import ItemColumns, StepSeries

__all__ = ["backlog_cleared_s", "backlog_drained_s", "backlog_summary"]

_LEFT = (0, 1)  # outcome codes of an item that left: completed, dead-lettered
_SHED = 2


def backlog_cleared_s(columns: ItemColumns, backlog: int) -> float:
    """When the last of the first ``backlog`` items left, seconds (NaN if one never did).

    A shed item left at its arrival (0.0); one handed back unfinished or never
    offered makes it NaN. 0.0 for an empty backlog.
    """
    if not backlog:
        return 0.0
    outcome = columns.outcome[:backlog]
    if not np.isin(outcome, (*_LEFT, _SHED)).all():
        return math.nan
    left = columns.finish_s[:backlog][outcome != _SHED]
    return float(left.max()) if len(left) else 0.0


def backlog_drained_s(series: StepSeries, drain_timed_out: bool) -> float:
    """The first time no admitted or arrived item waits to start, seconds (NaN: not seen).

    Reads the step series after each instant's events: a backlog that the
    workers take at once (N <= concurrency) drains at 0.0. When the drain
    timed out with items still waiting, the queue only emptied because they
    were handed back: NaN.
    """
    waiting = series.queue_depth.astype(np.int64) + series.upstream_backlog
    empty = np.flatnonzero(waiting == 0)
    if not len(empty):
        return math.nan
    at = float(series.time_s[empty[0]])
    if drain_timed_out and at >= series.end_s:
        return math.nan
    return at


def backlog_summary(
    columns: ItemColumns, series: StepSeries, backlog: int, drain_timed_out: bool
) -> dict[str, int | float]:
    """The summary keys of a run with an initial backlog (see the module docstring)."""
    return {
        "items_backlog": backlog,
        "backlog_cleared_s": backlog_cleared_s(columns, backlog),
        "backlog_drained_s": backlog_drained_s(series, drain_timed_out),
    }
