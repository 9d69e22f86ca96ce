"""What every figure of one run draws from: step-series vertices, distributions, byte units.

These helpers turn a :class:`~pipeline.sim.SimulationResult` into the arrays
that lines are drawn from, thinned to what a screen can show, and format the
quantities their labels name. They draw nothing themselves, so both the
one-shot plots (:mod:`~pipeline.viz.figures.run`) and the panels that are redrawn in
place (:mod:`~pipeline.viz.figures.panels`) use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .style import COLORS

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = ["MAX_POINTS", "memory_bound_bytes"]

#: Step series longer than this are reduced to per-bucket maxima before drawing.
MAX_POINTS = 2000

#: How a previous run is drawn behind the current one.
FADED = {"alpha": 0.3, "linewidth": 1.0}
#: Percentiles marked on the wait and latency distributions.
MARKS = (50, 95, 99)


def memory_bound_bytes(result: SimulationResult) -> int | None:
    """``(maxsize + concurrency) * item_size``, the in-system ceiling; None if unbounded.

    It bounds the items queued, running and waiting for a retry; dead letters
    kept in memory are not in the queue and come on top.
    """
    cfg = result.scenario.config
    if cfg.queue_maxsize is None:
        return None
    return (cfg.queue_maxsize + cfg.concurrency) * result.scenario.item_size_bytes


def downsample_steps(t: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS):
    """Reduce a step function to at most ``max_points`` steps, keeping each bucket's max."""
    n = len(t)
    if n <= max_points:
        return t, y
    starts = np.linspace(0, n, max_points, endpoint=False).astype(np.int64)
    return t[starts], np.maximum.reduceat(y, starts)


def step_data(
    result: SimulationResult, values: np.ndarray, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of one step series of ``result``, held to its end time (steps-post)."""
    s = result.series
    t, y = downsample_steps(s.time_s, values, max_points)
    return np.append(t, s.end_s), np.append(y, y[-1] if len(y) else 0)


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(values[~np.isnan(values)])
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


def thin(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= max_points:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, max_points).astype(np.int64))
    return x[keep], y[keep]


def waits_and_latencies(run: SimulationResult) -> tuple[tuple[str, np.ndarray, str], ...]:
    """``(name, seconds, colour)`` of waits (items that started) and latencies (completed)."""
    c = run.columns
    return (
        ("wait", (c.start_s - c.arrival_s)[~np.isnan(c.start_s)], COLORS["wait"]),
        ("latency", (c.finish_s - c.arrival_s)[c.outcome == 0], COLORS["latency"]),
    )


def percentile_note(name: str, q: np.ndarray) -> str:
    return f"{name} " + " · ".join(f"p{m} {v:.3g}" for m, v in zip(MARKS, q, strict=True)) + " s"


def layers(
    result: SimulationResult, compare: SimulationResult | None
) -> Iterator[tuple[SimulationResult, bool]]:
    """``(run, faded)`` in drawing order: the previous run (if any) first, faded, behind."""
    if compare is not None:
        yield compare, True
    yield result, False


def styled(kwargs: dict[str, Any], faded: bool) -> dict[str, Any]:
    """Line keywords as given, or faded and unlabelled (the legend describes the current run)."""
    return {**kwargs, **FADED, "label": None} if faded else kwargs
