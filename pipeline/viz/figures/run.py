"""Matplotlib figures of one simulation result: queue depth, lag, memory, retries.

Every function draws into the ``ax`` it is given, or builds a new figure, and
returns the :class:`~matplotlib.figure.Figure`. New figures are closed in
pyplot as soon as they are made: they leak no global state, never need
closing and never trigger the "More than 20 figures" warning, yet display
(once) as images when they end a Jupyter cell. Step functions are drawn with
``drawstyle="steps-post"`` (row *i* holds until row *i + 1*); a series longer
than ``max_points`` steps is drawn as equal spans of time, a band from each
span's least to its greatest value and a line at its time-weighted mean, and
its legend says so (:func:`draw_steps`).

``compare=`` takes a previous :class:`~pipeline.sim.SimulationResult` and
draws it faded behind the current one, so a what-if reads as a change.

Figures across many runs live in :mod:`~pipeline.viz.figures.sweep` (sweeps) and
:mod:`~pipeline.viz.figures.theory` (simulation against theory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .panels import DepthPanel, LagPanel, MemoryPanel, legend_below
from .series import (
    MAX_POINTS,
    band_vertices,
    layers,
    step_vertices,
    styled,
    thinned_label,
)
from .style import COLORS, axes_list, new_figure

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = [
    "MAX_POINTS",
    "draw_steps",
    "oldest_unfinished_age",
    "plot_depth",
    "plot_lag",
    "plot_memory",
    "plot_retries",
    "report_figure",
]


def step(
    ax: Axes,
    result: SimulationResult,
    values: np.ndarray,
    *,
    max_points: int = MAX_POINTS,
    band: bool = True,
    **kwargs: Any,
):
    """Draw one step series of ``result`` to its end time (:func:`draw_steps`); the Line2D."""
    s = result.series
    return draw_steps(ax, s.time_s, values, s.end_s, max_points=max_points, band=band, **kwargs)


def draw_steps(
    ax: Axes,
    t: np.ndarray,
    y: np.ndarray,
    end_s: float,
    *,
    max_points: int = MAX_POINTS,
    band: bool = True,
    **kwargs: Any,
):
    """Draw the step function ``y[i]`` from ``t[i]`` (the last to ``end_s``); returns the Line2D.

    A series longer than ``max_points`` steps is drawn as its time-weighted
    mean per bucket (:func:`~pipeline.viz.figures.series.bucket_steps`) with,
    when ``band``, a band from the bucket's least to its greatest value; its
    label says so.
    """
    vertices = band_vertices(t, y, end_s, max_points)
    if vertices is not None and kwargs.get("label") and not str(kwargs["label"]).startswith("_"):
        kwargs = {**kwargs, "label": thinned_label(kwargs["label"], vertices[3], band=band)}
    (line,) = ax.plot(*step_vertices(t, y, end_s, max_points), drawstyle="steps-post", **kwargs)
    if vertices is not None and band:
        x, low, high, _ = vertices
        ax.fill_between(
            x, low, high, step="post", color=line.get_color(), linewidth=0,
            alpha=0.25 * (line.get_alpha() or 1.0), zorder=line.get_zorder() - 0.1,
        )  # fmt: skip
    return line


def _finish_time_axes(ax: Axes, ylabel: str) -> None:
    """Label a time-series panel (x in seconds of virtual time), start both axes at 0, legend."""
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    legend_below(ax)


_Panel = Callable[[Axes, "SimulationResult", "SimulationResult | None", int], None]


def _draw_panels(
    name: str,
    table: dict[str, _Panel],
    panels: Sequence[str],
    ax: Axes | Sequence[Axes] | None,
    result: SimulationResult,
    compare: SimulationResult | None,
    max_points: int,
) -> tuple[Figure, list[Axes]]:
    """Draw each of ``panels`` (keys of ``table``) into its own axes; ``name`` words errors.

    Raises:
        ValueError: a panel is not in ``table``, or ``ax`` holds fewer axes than panels.
    """
    unknown = [p for p in panels if p not in table]
    if unknown:
        raise ValueError(f"panels must be among {sorted(table)}, got {unknown}")
    fig, axes = axes_list(ax, len(panels))
    if len(axes) < len(panels):
        raise ValueError(f"{name} needs {len(panels)} axes for panels {panels}, got {len(axes)}")
    for panel, axis in zip(panels, axes, strict=False):
        table[panel](axis, result, compare, max_points)
    return fig, axes


# -- depth ------------------------------------------------------------------------------


def plot_depth(
    result: SimulationResult,
    ax: Axes | None = None,
    *,
    compare: SimulationResult | None = None,
    upstream: bool = True,
    max_points: int = MAX_POINTS,
    title: str | None = "Queue depth",
) -> Figure:
    """Queue depth, items in flight and upstream backlog over virtual time.

    The axes fit this run's data (``compare``, a previous run drawn faded,
    never sets them). The queue bound (``queue_maxsize``) is a dashed line
    when the data come near it (half of it or more); further below, the legend
    names it and says it lies above the scale, so the line does not squash the
    data. An unbounded queue says so in the legend, which sits below the axes.

    Args:
        result: the run to draw.
        ax: axes to draw into (a new figure when None).
        compare: a previous run, drawn faded behind.
        upstream: also draw the backlog waiting upstream of the queue (items
            arrived but not yet admitted, under backpressure).
        max_points: longest series drawn as is; longer ones as a min-max band and the mean.
        title: axes title (None for none).

    Returns:
        The figure.
    """
    fig, (ax,) = axes_list(ax, 1)
    DepthPanel(ax, upstream=upstream, max_points=max_points).draw(result, compare)
    if title:
        ax.set_title(title)
    return fig


# -- lag --------------------------------------------------------------------------------


def _departures(result: SimulationResult) -> np.ndarray:
    """When each item stopped counting as lag: finished, shed (at arrival) or run end."""
    c = result.columns
    leave = c.finish_s.copy()
    unfinished = c.outcome == 3
    leave[unfinished] = result.series.end_s
    gone = (c.outcome == 2) | (c.outcome == 4)
    leave[gone] = c.arrival_s[gone]
    return np.where(np.isnan(leave), c.arrival_s, leave)


def oldest_unfinished_age(result: SimulationResult) -> tuple[np.ndarray, np.ndarray]:
    """Age of the oldest arrived-but-unfinished item over time, exactly.

    At time ``t`` the age is ``t - min(arrival)`` over items that have arrived
    and not yet finished (shed items leave at arrival; unfinished ones at the
    end of the run), or 0 when there are none. The function is piecewise
    linear (slope 1); when the oldest item finishes it drops to the age of the
    next oldest still inside, and to 0 only when nothing is inside.

    Returns:
        ``(time_s, age_s)``, vertices of the piecewise-linear curve; a drop is
        two vertices at the same time.
    """
    arrival = result.columns.arrival_s
    end = result.series.end_s
    if len(arrival) == 0:
        return np.array([0.0, end]), np.zeros(2)
    leave = np.maximum(_departures(result), arrival)
    # Arrivals are sorted, so the oldest unfinished item at t is the first index i with
    # leave[i] > t, which is also the first index where the running max of leave exceeds t.
    record = np.maximum.accumulate(leave)
    changes = np.flatnonzero(np.diff(record, prepend=-np.inf) > 0)
    seg_start = np.concatenate(([0.0], record[changes[:-1]]))  # when each item became oldest
    seg_end = record[changes]
    born = arrival[changes]
    # An item that arrived before its segment starts is already inside: the curve drops
    # straight to its age, not to 0. Only when it arrives later was the system empty, and
    # only then does the segment open with a stretch at age 0.
    empty_first = born > seg_start
    first_age = np.where(empty_first, 0.0, seg_start - born)
    t = np.column_stack([seg_start, np.maximum(seg_start, born), seg_end]).ravel()
    age = np.column_stack([first_age, np.zeros_like(born), seg_end - born]).ravel()
    keep = np.ones((len(born), 3), dtype=bool)
    keep[:, 1] = empty_first  # the arrival vertex is a corner only after an empty stretch
    t, age = t[keep.ravel()], age[keep.ravel()]
    # When the last item leaves, the system is empty (at the end of the run at the latest).
    tail = [t[-1], end] if end > t[-1] else [t[-1]]
    return np.append(t, tail), np.append(age, np.zeros(len(tail)))


def _thin_extremes(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most about ``max_points`` vertices of a curve: each bucket's highest and lowest.

    Keeping every k-th vertex of a sawtooth would miss its peaks; keeping each
    bucket's maximum and minimum (in their order, plus both ends) keeps every
    peak and trough that can show at this resolution, and the true maximum.
    """
    n = len(x)
    if n <= max_points:
        return x, y
    starts = np.unique(np.linspace(0, n, max(max_points // 2, 1), endpoint=False).astype(np.int64))
    bucket = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    # Sorted by bucket, then by value: each bucket's first entry is its min, last its max.
    order = np.lexsort((y, bucket))
    lowest = order[starts]
    highest = order[np.append(starts[1:], n) - 1]
    keep = np.unique(np.concatenate(([0, n - 1], lowest, highest)))
    return x[keep], y[keep]


def _draw_distribution(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    LagPanel(ax, max_points=max_points).draw(result, compare)


def _draw_age(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    top = 0.0
    for run, faded in layers(result, compare):
        t, age = oldest_unfinished_age(run)
        t, age = _thin_extremes(t, age, 4 * max_points)
        kwargs = {"color": COLORS["age"], "linewidth": 1.2, "label": "oldest unfinished item"}
        ax.plot(t, age, **styled(kwargs, faded))
        if not faded:
            top = float(age.max(initial=0))
    _finish_time_axes(ax, "age (s)")
    end = result.series.end_s
    ax.set_xlim(0, end if end > 0 else 1.0)
    ax.set_ylim(0, top * 1.06 if top > 0 else 1.0)


_LAG_PANELS = {"distribution": _draw_distribution, "age": _draw_age}


def plot_lag(
    result: SimulationResult,
    ax: Axes | Sequence[Axes] | None = None,
    *,
    compare: SimulationResult | None = None,
    panels: Sequence[str] | None = None,
    max_points: int = MAX_POINTS,
    title: str | None = "Lag",
) -> Figure:
    """Wait and latency distributions (ECDF, p50/p95/p99 marked) and the oldest item's age.

    Wait is first start minus arrival (over items that started); latency is
    finish minus arrival (over completed items). Arrival means arrival at the
    source, so waiting upstream under backpressure counts.

    Args:
        result: the run to draw.
        ax: one axes (draws the first panel), a sequence of axes (one per
            panel), or None for a new figure with both panels.
        compare: a previous run, drawn faded behind.
        panels: which of ``"distribution"`` and ``"age"`` to draw, in order.
        max_points: points kept per curve.
        title: title of the first panel (None for none).

    Returns:
        The figure.
    """
    if panels is None:
        count = 2 if ax is None else (1 if isinstance(ax, Axes) else len(ax))
        panels = ("distribution", "age")[:count]
    fig, axes = _draw_panels("plot_lag", _LAG_PANELS, panels, ax, result, compare, max_points)
    if title:
        axes[0].set_title(
            f"{title}: wait and latency"
            if panels[0] == "distribution"
            else f"{title}: oldest unfinished item"
        )
        for panel, axis in zip(panels[1:], axes[1:], strict=False):
            axis.set_title("Oldest unfinished item" if panel == "age" else "Wait and latency")
    return fig


# -- memory -----------------------------------------------------------------------------


def plot_memory(
    result: SimulationResult,
    ax: Axes | None = None,
    *,
    compare: SimulationResult | None = None,
    max_points: int = MAX_POINTS,
    title: str | None = "Memory (modelled)",
) -> Figure:
    """Modelled memory held by items over time, against the bound a bounded queue gives.

    Memory is (queued + running + retry-waiting + dead letters kept) times the
    scenario's item size. The line is the first three, which a bounded queue
    caps at ``(maxsize + concurrency) * item_size`` (dashed, where the data
    come near it); dead letters kept in memory are a band stacked on top, not
    bounded. The axes fit this run; ``compare`` is drawn faded. The axis uses
    binary units (KiB, MiB, ...).

    Returns:
        The figure.
    """
    fig, (ax,) = axes_list(ax, 1)
    MemoryPanel(ax, max_points=max_points, title=title).draw(result, compare)
    return fig


# -- retries ----------------------------------------------------------------------------


def _draw_attempts(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    k = result.scenario.config.max_attempts
    top = max(k, int(result.columns.attempts.max(initial=0)))
    bins = np.arange(0.5, top + 1.5)
    for run, faded in layers(result, compare):
        attempts = run.columns.attempts[run.columns.attempts > 0]
        kwargs = {"color": COLORS["retry"], "label": "items"}
        if faded:
            ax.hist(attempts, bins=bins, histtype="step", color="gray", alpha=0.6)
        else:
            ax.hist(attempts, bins=bins, rwidth=0.8, **kwargs)
    ax.axvline(
        k + 0.5, color=COLORS["dead"], linestyle="--", linewidth=1, label=f"max_attempts = {k}"
    )
    ax.set_xlabel("attempts per item")
    ax.set_ylabel("items")
    ax.set_xticks(range(1, top + 1))
    # The current run sets the axes; a taller faded histogram runs off the top.
    current = np.histogram(result.columns.attempts[result.columns.attempts > 0], bins=bins)[0]
    ax.set_ylim(0, max(float(current.max(initial=0)), 1.0) * 1.06)
    legend_below(ax, ncols=2)


def _draw_retry_timeline(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    for run, faded in layers(result, compare):
        s = run.series
        for values, label, color in (
            (s.dead_letters, "dead letters (cumulative)", COLORS["dead"]),
            (s.retry_waiting, "waiting for a retry", COLORS["retry"]),
        ):
            kwargs = {"color": color, "linewidth": 1.2, "label": label}
            step(ax, run, values, max_points=max_points, **styled(kwargs, faded))
    _finish_time_axes(ax, "items")
    s = result.series
    top = max(float(s.dead_letters.max(initial=0)), float(s.retry_waiting.max(initial=0)), 1.0)
    ax.set_xlim(0, s.end_s if s.end_s > 0 else 1.0)
    ax.set_ylim(0, top * 1.06)


_RETRY_PANELS = {"attempts": _draw_attempts, "timeline": _draw_retry_timeline}


def plot_retries(
    result: SimulationResult,
    ax: Axes | Sequence[Axes] | None = None,
    *,
    compare: SimulationResult | None = None,
    panels: Sequence[str] | None = None,
    max_points: int = MAX_POINTS,
    title: str | None = "Retries",
) -> Figure:
    """Attempts per item, and dead letters (cumulative) and retry-waiting items over time.

    Args:
        result: the run to draw.
        ax: one axes (draws the ``"timeline"`` panel), a sequence of axes (one
            per panel), or None for a new figure with both panels.
        compare: a previous run, drawn faded behind.
        panels: which of ``"attempts"`` and ``"timeline"`` to draw, in order.
        max_points: longest series drawn as is.
        title: title of the first panel (None for none).

    Returns:
        The figure.
    """
    if panels is None:
        panels = ("timeline",) if isinstance(ax, Axes) else ("attempts", "timeline")
    fig, axes = _draw_panels("plot_retries", _RETRY_PANELS, panels, ax, result, compare, max_points)
    s = result.summary
    if title:
        mean = s["attempts_total"] / max(s["items_admitted"], 1)
        axes[0].set_title(
            f"{title}: {s['retries_total']} retries, {s['items_dead_lettered']} dead letters, "
            f"{mean:.3g} attempts/item",
            fontsize="medium",
        )
    return fig


# -- dashboard --------------------------------------------------------------------------


def report_figure(
    result: SimulationResult,
    *,
    compare: SimulationResult | None = None,
    figsize: tuple[float, float] = (13.0, 8.5),
) -> Figure:
    """A 2x2 dashboard: queue depth, lag, memory, retries (the CLI's ``--out`` PNG).

    Example:
        >>> report_figure(result).savefig("report.png")
    """
    fig, axes = new_figure(2, 2, figsize=figsize)
    plot_depth(result, axes[0, 0], compare=compare)
    plot_lag(result, axes[0, 1], compare=compare)
    plot_memory(result, axes[1, 0], compare=compare)
    plot_retries(result, axes[1, 1], compare=compare)
    s = result.summary
    cfg = result.scenario.config
    maxsize = "∞" if cfg.queue_maxsize is None else cfg.queue_maxsize
    fig.suptitle(
        f"{s['items_offered']} items, concurrency {cfg.concurrency}, maxsize {maxsize}, "
        f"on_full={cfg.on_full}, max_attempts {cfg.max_attempts}: "
        f"wait mean {s['wait_mean_s']:.3g} s, p95 latency {s['latency_p95_s']:.3g} s, "
        f"utilisation {s['utilisation']:.0%}",
        fontsize="medium",
    )
    return fig
