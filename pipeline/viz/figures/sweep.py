"""One summary metric of a sweep, with its 95% intervals, over one, two or more grid axes.

:func:`plot_sweep` picks the figure from the number of grid axes:

- **one axis**: the metric's mean over replications against the axis, with
  95% error bars (Student t half-widths across replications);
- **two axes**: a heatmap of the mean, each cell annotated ``mean ± half-width``
  (up to :data:`MAX_ANNOTATED` columns and rows);
- **three or more**: one heatmap panel per combination of the other axes'
  values, all on one colour scale so that panels compare; ``x`` and ``y``
  choose the heatmap's two axes (default: the grid's first two).

Grid values may be numbers, None (an unbounded ``maxsize``, drawn as "∞" and
sorted last) or anything else (a service spec), which keeps the order in
which the sweep ran it. Half-widths follow
:func:`pipeline.sim.stats.intervals.summarise_values`: none with one replication.
Titles and colour bars name the metric in words ("p95 latency (s)", see
:func:`~pipeline._units.metric_label`), or as ``label`` says.

A wait or latency at a grid point where some run's drain timed out leaves
out the items left unfinished, the slowest tail, and looks better than the
configuration is (:func:`~pipeline.sim.running.drain_warning.drain_cut`, the
rule a plan fails such an SLO by): its heatmap cell is hatched and
annotated "drain cut", its line-plot point crossed out, and the figure says
why.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..._units import value_text
from ...sim.analysis.sweep import grid_columns
from ...sim.running.drain_warning import DRAIN_CUT_TEXT, drain_cut
from ...sim.stats.intervals import summarise_values
from .style import axes_list, new_figure
from .units import metric_axis, metric_words

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAX_PANELS", "plot_sweep"]

MAX_PANELS = 16
"""Most heatmap panels one figure holds (a sweep of three or more axes)."""

MAX_ANNOTATED = (24, 40)
"""Most columns and rows of a heatmap whose cells are annotated (more would not be legible)."""

MAX_PANEL_INCHES = 24.0
"""Largest width or height of one heatmap panel, inches."""


def axis_key(value: Any) -> float:
    """A sortable number for a grid value: None (unbounded) and NaN sort last as inf."""
    if value is None:
        return math.inf
    try:
        v = float(value)
    except (TypeError, ValueError):
        return math.nan
    return math.inf if math.isnan(v) else v


def axis_label(value: Any) -> str:
    """A tick label for a grid value: "∞" for None/NaN/inf, ``5`` rather than ``5.0``."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return "∞"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _key(value: Any) -> Any:
    """A dict key for a grid value: None and NaN are one value (the unbounded queue)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _levels(values: Sequence[Any]) -> list[Any]:
    """The distinct grid values of one axis, in drawing order.

    Numbers (and None, last) sort; anything else keeps the sweep's order.
    """
    distinct = list(dict.fromkeys(_key(v) for v in values))
    if all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in distinct):
        return sorted(distinct, key=axis_key)
    return distinct


def _cell_text(metric: str, mean: float, half: float) -> str:
    """A heatmap cell's mean and 95% half-width in the metric's unit, as the tables write it."""
    if not math.isfinite(mean):
        return "n/a"
    text = value_text(metric, mean)
    return text if not math.isfinite(half) else f"{text}\n± {value_text(metric, half)}"


def _numeric(levels: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in levels)


def _choose_axes(
    grid: list[str], levels: dict[str, list[Any]], x: str | None, y: str | None
) -> tuple[str, str | None]:
    """The plot's x and y (None: a line plot); by default the first axes that vary."""
    for name, label in ((x, "x"), (y, "y")):
        if name is not None and name not in grid:
            raise ValueError(f"{label}={name!r} is not a grid axis of this sweep; axes: {grid}")
    if not grid:
        raise ValueError("the sweep has no grid axis to plot against (an empty grid)")
    if x is not None and x == y:
        raise ValueError(f"x and y must be two different grid axes, got {x!r} for both")
    # An axis holding one value (a slice of a bigger sweep) is a constant, not an axis.
    varying = [axis for axis in grid if len(levels[axis]) > 1] or grid
    if x is None:
        x = next((axis for axis in varying if axis != y), None)
        if x is None:
            raise ValueError(f"y={y!r} leaves no other grid axis for x; axes: {grid}")
    if y is None:
        y = next((axis for axis in varying if axis != x), None)
    return x, y


def plot_sweep(
    frame: pd.DataFrame,
    metric: str,
    *,
    x: str | None = None,
    y: str | None = None,
    ax: Axes | None = None,
    log: bool | None = None,
    cmap: str = "viridis",
    label: str | None = None,
) -> Figure:
    """The mean of ``metric`` over replications, with 95% half-widths, per grid point.

    Args:
        frame: a :func:`~pipeline.sim.sweep` frame (grid columns, ``replication``,
            summary keys), or one with the same layout.
        metric: the summary column to show, e.g. ``"latency_p95_s"``.
        x, y: grid axes for the horizontal and vertical axes (default: the
            grid's first two; ``y`` only with two or more axes).
        ax: axes to draw into, one- and two-axis sweeps only (a new figure when None).
        log: colour (heatmaps) or y (line plot) on a log scale; None (default)
            chooses it when the positive means span more than a factor of 100.
        cmap: matplotlib colormap name of the heatmaps.
        label: the metric's name on the figure (default: words for a summary
            key, ``"p95 latency (s)"`` for ``"latency_p95_s"``, ``"peak memory"``
            for sizes and shares, whose ticks and cells carry the unit, KiB/MiB or
            %, as the tables write them; a column of your own is shown by its name).

    Returns:
        The figure.

    Raises:
        ValueError: ``metric`` is not a numeric column, ``x`` or ``y`` is not a
            grid axis, an empty grid, more than :data:`MAX_PANELS` panels, or
            ``ax`` given for a sweep that needs panels.
    """
    # A grid column dropped since (a slice at one value of it) is no longer an axis.
    grid = [axis for axis in grid_columns(frame) if axis in frame.columns]
    stats = _point_statistics(frame, grid, metric)
    cut = _drain_cut_points(frame, grid, metric)
    means = np.array([s.mean for s in stats.values()])
    positive = means[np.isfinite(means) & (means > 0)]
    if log is None:
        log = bool(positive.size) and positive.max() > 100 * positive.min()
    if label is None:
        label = metric_words(metric)
    levels = {axis: _levels(frame[axis].tolist()) for axis in grid}
    x, y = _choose_axes(grid, levels, x, y)
    extra = [axis for axis in grid if axis not in (x, y)]
    if y is None:
        # Every other axis holds one value here: one line.
        fixed = {axis: levels[axis][0] for axis in extra}
        return _line(stats, grid, x, levels[x], fixed, (metric, label), ax, log, cut)
    panels = _panels(levels, extra, len(grid), ax)
    norm = _norm(positive if log else means[np.isfinite(means)], log)
    fig, axes = _panel_axes(ax, len(panels), len(levels[x]), len(levels[y]))
    image = None
    for axes_here, panel in zip(axes, panels, strict=False):
        fixed = dict(zip(extra, panel, strict=True))
        image = _heatmap(axes_here, stats, grid, x, y, levels, fixed, norm, cmap, cut, metric)
        title = ", ".join(f"{a}={axis_label(v)}" for a, v in fixed.items())
        axes_here.set_title(title or f"{label}: mean ± 95% half-width")
    for spare in axes[len(panels) :]:
        spare.set_visible(False)
    bar = fig.colorbar(image, ax=axes[: len(panels)], label=f"{label}, mean over replications")
    metric_axis(bar.ax.yaxis, metric, float(norm.vmax or 1.0), log=log)
    if extra:
        fig.suptitle(f"{label}: mean ± 95% half-width over replications")
    if cut:
        _note_drain_cut(fig, "hatched")
    return fig


def _point_statistics(
    frame: pd.DataFrame, grid: list[str], metric: str
) -> dict[tuple[Any, ...], Any]:
    """Mean and 95% half-width of ``metric`` over the replications of each grid point."""
    allowed = [c for c in frame.columns if c not in {*grid, "replication"}]
    if metric not in allowed:
        raise ValueError(f"metric {metric!r} is not a column of the sweep; columns: {allowed}")
    try:
        values = frame[metric].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"metric {metric!r} is not numeric") from None
    points: dict[tuple[Any, ...], list[float]] = {}
    for row, value in zip(frame[grid].itertuples(index=False, name=None), values, strict=True):
        points.setdefault(tuple(_key(v) for v in row), []).append(float(value))
    return {point: summarise_values(v) for point, v in points.items()}


def _panels(
    levels: dict[str, list[Any]], extra: list[str], axes: int, ax: Axes | None
) -> list[tuple[Any, ...]]:
    """One panel per combination of the ``extra`` axes' values (at most :data:`MAX_PANELS`)."""
    panels = list(itertools.product(*(levels[a] for a in extra)))
    if len(panels) > MAX_PANELS:
        raise ValueError(
            f"{len(panels)} panels (one per value of {', '.join(extra)}) are more than "
            f"{MAX_PANELS}; sweep fewer values, or choose the two axes to plot with x= and y="
        )
    if len(panels) > 1 and ax is not None:
        raise ValueError(f"a sweep of {axes} axes draws {len(panels)} panels; leave ax=None")
    return panels


def _panel_axes(ax: Axes | None, panels: int, xs: int, ys: int) -> tuple[Figure, list[Axes]]:
    """The figure and its axes: ``ax``'s, or new panels sized for ``xs`` by ``ys`` cells."""
    if ax is not None:
        return axes_list(ax, 1)
    columns = min(panels, 3)
    rows = math.ceil(panels / columns)
    # Room for each cell's two lines of text: the panel grows with the grid (inches).
    width = min(max(5.6, 0.95 * xs + 2.4), MAX_PANEL_INCHES)
    height = min(max(4.4, 0.6 * ys + 1.8), MAX_PANEL_INCHES)
    fig, grid_axes = new_figure(rows, columns, figsize=(width * columns, height * rows))
    return fig, list(grid_axes.ravel())


def _drain_cut_points(frame: pd.DataFrame, grid: list[str], metric: str) -> set[tuple[Any, ...]]:
    """The grid points where ``metric`` leaves out a timed-out drain's unfinished items."""
    if not drain_cut(metric) or "drain_timed_out" not in frame.columns:
        return set()
    flags = frame["drain_timed_out"].astype(bool).tolist()
    rows = frame[grid].itertuples(index=False, name=None)
    return {tuple(_key(v) for v in row) for row, flag in zip(rows, flags, strict=True) if flag}


def _note_drain_cut(fig: Figure, mark: str) -> None:
    """A note at the figure's foot (inside its layout): what a marked (drain-cut) value means."""
    # About 13 characters of small text an inch: wrapped to the figure's width.
    width = max(40, int(13 * fig.get_figwidth()))
    fig.supxlabel(textwrap.fill(f"{mark.capitalize()}: {DRAIN_CUT_TEXT}.", width), fontsize="small")


def _norm(values: np.ndarray, log: bool) -> Any:
    from matplotlib.colors import LogNorm, Normalize

    if not values.size:
        return Normalize()
    low, high = float(values.min()), float(values.max())
    return LogNorm(vmin=low, vmax=high) if log else Normalize(vmin=low, vmax=high)


def _heatmap(
    ax: Axes,
    stats: dict[tuple[Any, ...], Any],
    grid: list[str],
    x: str,
    y: str,
    levels: dict[str, list[Any]],
    fixed: dict[str, Any],
    norm: Any,
    cmap: str,
    cut: set[tuple[Any, ...]],
    metric: str,
) -> Any:
    """One panel: rows are ``y`` levels, columns ``x`` levels, at the ``fixed`` extra values.

    Cells in ``cut`` (drain-cut points) are hatched and say so."""
    xs, ys = levels[x], levels[y]
    mean = np.full((len(ys), len(xs)), np.nan)
    half = np.full((len(ys), len(xs)), np.nan)
    hatched = np.zeros((len(ys), len(xs)), dtype=bool)
    for (row, y_value), (col, x_value) in itertools.product(enumerate(ys), enumerate(xs)):
        where = {**fixed, x: x_value, y: y_value}
        point = tuple(where[axis] for axis in grid)
        found = stats.get(point)
        if found is not None:
            mean[row, col], half[row, col] = found.mean, found.half_width
            hatched[row, col] = point in cut
    from matplotlib.colors import LogNorm

    shown = mean
    if isinstance(norm, LogNorm) and norm.vmin is not None:
        # A log scale has no place for 0 (no request shed): colour it as the scale's
        # bottom, not blank like a missing value. Its annotation still says 0.
        shown = np.where(mean <= 0, norm.vmin, mean)
    image = ax.imshow(
        np.ma.masked_invalid(shown), origin="lower", aspect="auto", cmap=cmap, norm=norm
    )
    ax.set_xticks(range(len(xs)), [axis_label(v) for v in xs])
    ax.set_yticks(range(len(ys)), [axis_label(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for row, col in zip(*np.nonzero(hatched), strict=True):
        ax.add_patch(
            Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, hatch="///", edgecolor="red", lw=0)
        )
    if len(xs) > MAX_ANNOTATED[0] or len(ys) > MAX_ANNOTATED[1]:
        return image  # cells too small for text; the colour scale still reads
    for (row, col), cell in np.ndenumerate(mean):
        # White on the dark lower half of the colour scale; black on cells left blank.
        shade = np.ma.filled(image.norm(np.ma.masked_invalid([shown[row, col]])), np.nan)[0]
        ax.text(
            col,
            row,
            _cell_text(metric, cell, half[row, col]) + ("\ndrain cut" if hatched[row, col] else ""),
            ha="center",
            va="center",
            fontsize="small",
            color="white" if shade < 0.5 else "black",
        )
    return image


def _line(
    stats: dict[tuple[Any, ...], Any],
    grid: list[str],
    x: str,
    levels: list[Any],
    fixed: dict[str, Any],
    shown: tuple[str, str],
    ax: Axes | None,
    log: bool,
    cut: set[tuple[Any, ...]],
) -> Figure:
    """A one-axis sweep: means with 95% error bars against the axis; ``cut`` points crossed.

    ``shown`` is the metric and its label."""
    metric, label = shown
    fig, (ax,) = axes_list(ax, 1)
    keys = [tuple({**fixed, x: v}[axis] for axis in grid) for v in levels]
    found = [stats[key] for key in keys]
    mean = np.array([s.mean for s in found])
    half = np.array([s.half_width for s in found])
    numeric = _numeric(levels)
    where = np.array(levels, dtype=float) if numeric else np.arange(len(levels))
    # A missing half-width (one replication) draws no bar rather than hiding the point.
    ax.errorbar(where, mean, yerr=np.where(np.isfinite(half), half, 0.0), marker="o", capsize=3)
    crossed = np.array([key in cut for key in keys], dtype=bool)
    if crossed.any():
        ax.plot(
            where[crossed], mean[crossed], marker="x", markersize=12, color="red",
            linestyle="none", label="drain cut: the slowest tail left out",
        )  # fmt: skip
        ax.legend(loc="best", fontsize="small")
        _note_drain_cut(fig, "crossed out")
    if not numeric:
        ax.set_xticks(where, [axis_label(v) for v in levels])
    elif all(isinstance(v, int) for v in levels):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log:
        ax.set_yscale("log")
    top = float(np.nanmax(mean + np.where(np.isfinite(half), half, 0.0), initial=1.0))
    metric_axis(ax.yaxis, metric, top, log=log)
    ax.set_xlabel(x)
    ax.set_ylabel(label)
    ax.set_title(f"{label}: mean ± 95% half-width over replications")
    ax.grid(alpha=0.3)
    return fig
