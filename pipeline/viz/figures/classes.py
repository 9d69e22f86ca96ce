"""Figures of a run with item classes (``Scenario(classes=...)``): who waits, and how long.

:func:`plot_class_depth` draws, for each class, how many of its items wait
for their first start over virtual time (admitted, not yet taken by a worker
nor expired): the queue split by class, exact step functions.
:func:`plot_class_waits` draws each class's distribution of waits (arrival to
first start, over the items that started) as an empirical CDF, with the
share of the class that expired in the legend, and optionally each class's
mean wait from theory (Cobham's formula, Erlang A) as a dashed line.

Both read ``result.items`` only, draw into the ``ax`` given or a new figure,
and return the :class:`~matplotlib.figure.Figure`, as :mod:`~.run` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .panels import legend_below
from .run import draw_steps
from .series import MAX_POINTS
from .style import axes_list

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = ["class_waiting", "plot_class_depth", "plot_class_waits"]


def _names(result: SimulationResult) -> list[str]:
    classes = getattr(result.scenario, "classes", None)
    if classes is None or getattr(result, "item_class", None) is None:
        raise ValueError(
            "this run has no item classes; give Scenario(classes=[ItemClass(...), ...]) "
            "(plot_depth draws the queue of a run without them)"
        )
    return [item_class.name for item_class in classes]


def class_waiting(result: SimulationResult, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Items of class ``name`` waiting for their first start over time: ``(time_s, count)``.

    An item counts from its admission until its first attempt starts, it
    expires, or the run ends (items left unstarted by a drain); shed items
    never count. Each row holds until the next (a step function from 0).

    Raises:
        ValueError: the run has no classes, or none named ``name``.
    """
    names = _names(result)
    if name not in names:
        raise ValueError(f"no class named {name!r}; classes: {', '.join(names)}")
    c = result.columns
    mine = (result.item_class == names.index(name)) & ~np.isnan(c.admitted_s)
    end = result.series.end_s
    leave = c.start_s[mine].copy()
    if c.expired_s is not None:
        leave = np.where(np.isnan(leave), c.expired_s[mine], leave)
    leave = np.where(np.isnan(leave), end, leave)
    times = np.concatenate([c.admitted_s[mine], leave])
    steps = np.concatenate([np.ones(mine.sum(), np.int64), -np.ones(mine.sum(), np.int64)])
    order = np.argsort(times, kind="stable")
    times, count = times[order], np.cumsum(steps[order])
    # Several events at one instant (an item admitted and started at once): the count after
    # all of them is the value held from then on.
    last = np.ones(len(times), dtype=bool)
    last[:-1] = times[1:] != times[:-1]
    return np.concatenate([[0.0], times[last], [end]]), np.concatenate([[0], count[last], [0]])


def plot_class_depth(
    result: SimulationResult,
    ax: Axes | None = None,
    *,
    max_points: int = MAX_POINTS,
    title: str | None = "Waiting to start, by class",
) -> Figure:
    """Each class's items waiting for their first start, over virtual time (steps).

    Args:
        result: a run with item classes.
        ax: axes to draw into (a new figure when None).
        max_points: longest series drawn as is; longer ones as a min-max band
            and the time-weighted mean per span of time (the legend says so).
        title: axes title (None for none).

    Raises:
        ValueError: the run has no item classes.
    """
    names = _names(result)
    fig, (ax,) = axes_list(ax, 1)
    for name in names:
        time_s, count = class_waiting(result, name)
        end_s = max(result.series.end_s, float(time_s[-1]) if len(time_s) else 0.0)
        draw_steps(ax, time_s, count, end_s, max_points=max_points, label=name)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("items waiting")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    legend_below(ax, ncols=min(len(names), 4))
    if title:
        ax.set_title(title)
    return fig


def plot_class_waits(
    result: SimulationResult,
    ax: Axes | None = None,
    *,
    theory: Mapping[str, float] | None = None,
    title: str | None = "Wait by class",
) -> Figure:
    """Each class's waits (arrival to first start) as an empirical CDF.

    Items arriving before the scenario's ``warmup_s`` are left out, as in the
    summary. The legend gives each class's mean wait and the share of its
    items that expired (abandoned unstarted: their waits are not in the curve,
    which is of the items served).

    Args:
        result: a run with item classes.
        ax: axes to draw into (a new figure when None).
        theory: class name -> a mean wait from theory, seconds (e.g.
            ``theory.mmc_priority(...).wait_mean_s``), drawn as a dashed
            vertical line in the class's colour.
        title: axes title (None for none).

    Raises:
        ValueError: the run has no item classes, or ``theory`` names a class it has not.
    """
    names = _names(result)
    unknown = sorted(set(theory or {}) - set(names))
    if unknown:
        raise ValueError(f"theory names no class of this run: {unknown}; classes: {names}")
    fig, (ax,) = axes_list(ax, 1)
    c = result.columns
    counted = c.arrival_s >= result.scenario.warmup_s
    wait = c.start_s - c.arrival_s
    own = result.summary["classes"]
    for k, name in enumerate(names):
        values = np.sort(wait[(result.item_class == k) & counted & ~np.isnan(c.start_s)])
        mean, expired = own[name]["wait_mean_s"], own[name]["expired_fraction"]
        label = f"{name}: mean {mean:.3g} s"
        if expired > 0:
            label += f", {expired:.1%} expired"
        if len(values):
            y = np.arange(1, len(values) + 1) / len(values)
            (line,) = ax.plot(values, y, drawstyle="steps-post", label=label)
        else:
            (line,) = ax.plot([], [], label=f"{name}: no item started")
        if theory and name in theory:
            ax.axvline(theory[name], color=line.get_color(), linestyle="--", linewidth=1)
    if theory:
        ax.plot([], [], color="black", linestyle="--", linewidth=1, label="theory: mean wait")
    ax.set_xlabel("wait from arrival to first start (s)")
    ax.set_ylabel("share of items started")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    legend_below(ax, ncols=min(len(names) + bool(theory), 3))
    if title:
        ax.set_title(title)
    return fig
