"""Warm-up detection: where a run that started empty stops being atypical (MSER-5).

A simulated pipeline starts empty and idle, so its first items wait less (or,
after an initial burst, far more) than in steady state; averaging them in
biases every statistic. MSER-5 (White 1997; Franklin and White 2008) picks
the truncation point that minimises the squared standard error of what is
left: cut the series into batches of 5 and average each, then for every
candidate number ``d`` of batches to drop compute

    MSER(d) = sum_{j > d} (z_j - mean(z_{d+1..m}))**2 / (m - d)**2

and keep the ``d`` that minimises it. Dropping a transient lowers the spread
faster than it shortens the series; dropping steady-state data does not. As
usual, only the first half of the run is searched: a minimum at that limit
means the transient may be longer than the run can show.

- :func:`mser5` works on any series in time order (plain numbers);
- :func:`detect_warmup` applies it to a run's per-item waits (or latencies)
  and returns the warm-up in seconds, ready for ``Scenario(warmup_s=...)``.

Example:
    >>> pilot = simulate(scenario)
    >>> steady = simulate(scenario.replace(warmup_s=detect_warmup(pilot)))

:func:`pipeline.viz.plot_warmup` draws the series, the batch means, the
statistic and the cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..._validate import integer

if TYPE_CHECKING:
    from ..running.result import SimulationResult

__all__ = ["WarmupCut", "detect_warmup", "mser5", "warmup_series"]

COLUMNS = ("wait_s", "latency_s")
"""Per-item columns :func:`detect_warmup` can judge."""


class WarmupCut(NamedTuple):
    """What :func:`mser5` found.

    Attributes:
        index: values to drop from the start (a multiple of ``batch_size``).
        batch_means: the means of consecutive batches (the incomplete last
            batch is left out).
        statistic: ``MSER(d)`` for ``d = 0 .. len(statistic) - 1`` batches dropped.
        batch_size: values per batch (5 for MSER-5).
        at_limit: the minimum is at the end of the searched half: the transient
            may be longer than half the series, and the run too short to tell.
    """

    index: int
    batch_means: np.ndarray
    statistic: np.ndarray
    batch_size: int
    at_limit: bool


def mser5(values: Sequence[float] | np.ndarray, batch_size: int = 5) -> WarmupCut:
    """The MSER truncation point of a series in time order (MSER-5 by default).

    Args:
        values: observations in time order (e.g. each item's wait, in arrival
            order); at least 4 batches' worth, all finite.
        batch_size: values per batch, >= 1 (1 is plain MSER).

    Returns:
        A :class:`WarmupCut`; ``values[cut.index:]`` is the steady part.

    Raises:
        ValueError: not 1-D, fewer than ``4 * batch_size`` values, a non-finite
            value, or ``batch_size`` < 1.

    Example:
        >>> ramp = np.r_[np.linspace(100, 1, 100), np.tile([0.0, 1.0], 450)]
        >>> mser5(ramp).index
        100
    """
    size = integer("batch_size", batch_size, "values per batch", at_least=1)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {x.shape}")
    if x.size < 4 * size:
        raise ValueError(
            f"values must hold at least {4 * size} observations (4 batches of {size}), got {x.size}"
        )
    if not np.isfinite(x).all():
        i = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"values must be finite, got values[{i}]={float(x[i])!r}")
    m = x.size // size
    z = x[: m * size].reshape(m, size).mean(axis=1)
    # Centre and scale first: sums of squares of large, close numbers lose their digits, and
    # of huge ones overflow. A constant factor does not move the minimum.
    centred = z - z.mean()
    scale = float(np.abs(centred).max())
    if scale > 0 and math.isfinite(scale):
        centred /= scale
    kept = np.arange(m, 0, -1, dtype=np.float64)  # batches left after dropping d = 0 .. m-1
    s1 = np.cumsum(centred[::-1])[::-1]
    s2 = np.cumsum((centred * centred)[::-1])[::-1]
    spread = np.clip(s2 - s1 * s1 / kept, 0.0, None)
    candidates = m // 2 + 1  # d = 0 .. m // 2: at least half the batches stay
    statistic = spread[:candidates] / kept[:candidates] ** 2
    best = int(np.argmin(statistic))
    return WarmupCut(best * size, z, statistic, size, best == candidates - 1 and best > 0)


def warmup_series(
    result: SimulationResult, column: str = "wait_s"
) -> tuple[np.ndarray, np.ndarray]:
    """(arrival times, values) of a run's items in arrival order, for warm-up detection.

    ``wait_s`` takes every item that started, ``latency_s`` every item that
    completed; both from time 0, whatever the scenario's ``warmup_s``.

    Raises:
        ValueError: an unknown ``column``.
    """
    if column not in COLUMNS:
        raise ValueError(f"column must be one of {list(COLUMNS)}, got {column!r}")
    c = result.columns
    if column == "wait_s":
        keep = ~np.isnan(c.start_s)
        values = c.start_s[keep] - c.arrival_s[keep]
    else:
        keep = c.outcome == 0
        values = c.finish_s[keep] - c.arrival_s[keep]
    return c.arrival_s[keep], values


def detect_warmup(result: SimulationResult, column: str = "wait_s", batch_size: int = 5) -> float:
    """The warm-up of a run, in seconds of virtual time, by MSER-5 on its items.

    The items are taken in arrival order (see :func:`warmup_series`); the
    warm-up is the arrival time of the first item MSER keeps (0.0 when it
    drops nothing). Pass it on as ``scenario.replace(warmup_s=...)`` so that
    the summary leaves those items and seconds out. Judge it on a run at least
    as long as the ones it will be used for, and on the metric you will report.

    With an initial backlog (``Scenario(initial_backlog=N)``) the run starts
    with its drain, a transient: the warm-up returned never keeps the
    backlog's items (at least the arrival time of the first item after them).

    Args:
        result: a :class:`~pipeline.sim.SimulationResult`.
        column: ``"wait_s"`` (default) or ``"latency_s"``.
        batch_size: values per batch (5: MSER-5).

    Raises:
        ValueError: an unknown ``column``, fewer than ``4 * batch_size`` items
            with a value, or a cut at the search limit (the transient may last
            longer than half the run: simulate more items).

    Example:
        >>> detect_warmup(simulate(scenario))   # 212.4 (seconds)
    """
    times, values = warmup_series(result, column)
    if values.size < 4 * batch_size:
        raise ValueError(
            f"cannot detect a warm-up from {values.size} item(s) with a {column}; "
            f"MSER needs at least {4 * batch_size}: simulate more items"
        )
    cut = mser5(values, batch_size)
    # The backlog's items among the values: those that started (or completed) of the first N.
    c, first = result.columns, result.scenario.initial_backlog
    head = ~np.isnan(c.start_s[:first]) if column == "wait_s" else c.outcome[:first] == 0
    backlog = int(np.count_nonzero(head))
    if backlog and cut.index < backlog:
        # The backlog's items all arrive at 0: a cut among them would return 0.0 and
        # keep the drain, the transient itself, as if it were steady state. An arrival
        # at 0 too waits behind the backlog: the warm-up is the first arrival after 0.
        later = times[backlog:][times[backlog:] > 0]
        if not len(later):
            raise ValueError(
                f"cannot detect a warm-up: every item with a {column} is one of the "
                f"initial backlog's {first:,} or arrived with it at 0 (the transient); "
                "simulate arrivals after it"
            )
        return float(later[0])
    if cut.at_limit:
        raise ValueError(
            f"the warm-up of {column} may last longer than half the run ({values.size:,} items, "
            f"{float(times[-1]):.4g} s of arrivals): MSER-5's minimum is at its search limit; "
            "simulate more items (or a longer duration) and detect again"
        )
    return float(times[cut.index]) if cut.index else 0.0
