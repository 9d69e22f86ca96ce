"""Matplotlib figures of simulation results: depth, lag, memory, retries, sweeps, theory.

Every function draws into the ``ax`` it is given, or builds a new figure, and
returns the :class:`~matplotlib.figure.Figure`. New figures are closed in
pyplot as soon as they are made: they leak no global state, never need
closing and never trigger the "More than 20 figures" warning, yet display
(once) as images when they end a Jupyter cell. Step functions are drawn with
``drawstyle="steps-post"`` (row *i* holds until row *i + 1*); very long series
are reduced to their per-bucket maximum, which keeps peaks visible.

``compare=`` takes a previous :class:`~pipeline.sim.SimulationResult` and
draws it faded behind the current one, so a what-if reads as a change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..sim.stats import mean_ci

if TYPE_CHECKING:
    import pandas as pd

    from pipeline.sim import SimulationResult

__all__ = [
    "human_bytes",
    "memory_bound_bytes",
    "oldest_unfinished_age",
    "plot_dead_letters_vs_theory",
    "plot_depth",
    "plot_lag",
    "plot_memory",
    "plot_retries",
    "plot_shed_vs_theory",
    "plot_sweep_heatmap",
    "plot_wait_vs_theory",
    "report_figure",
    "theory_for",
]

#: Step series longer than this are reduced to per-bucket maxima before drawing.
MAX_POINTS = 2000

_COLORS = {
    "queue": "C0",
    "in_flight": "C1",
    "upstream": "C3",
    "wait": "C0",
    "latency": "C1",
    "age": "C4",
    "memory": "C2",
    "dead": "C3",
    "retry": "C1",
    "theory": "black",
}
_FADED = {"alpha": 0.3, "linewidth": 1.0}
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


# -- small helpers ----------------------------------------------------------------------


def human_bytes(n: float) -> str:
    """Format a byte count with binary units: ``human_bytes(1536) == '1.5 KiB'``."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    value, unit = _scale_bytes(abs(float(n)))
    sign = "-" if n < 0 else ""
    if unit == "B":
        return f"{sign}{int(abs(n))} B"
    return f"{sign}{abs(n) / value:.3g} {unit}"


def _scale_bytes(peak: float) -> tuple[float, str]:
    """(divisor, unit) so that ``peak / divisor`` is below 1024."""
    power = 0
    while peak >= 1024 and power < len(_UNITS) - 1:
        peak /= 1024
        power += 1
    return float(1024**power), _UNITS[power]


def _new_figure(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **kwargs: Any
) -> tuple[Figure, np.ndarray]:
    import matplotlib.pyplot as plt

    figsize = figsize or (6.4 * ncols if ncols > 1 else 7.0, 3.6 * nrows)
    # Made through pyplot so that Jupyter's inline backend is set up and shows the
    # returned figure as an image, then closed at once: pyplot keeps no reference,
    # the cell shows it once (as its value), and nothing accumulates.
    fig = plt.figure(figsize=figsize, layout="constrained", **kwargs)
    plt.close(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _axes_list(ax: Axes | Sequence[Axes] | None, default: int, figsize=None):
    """A figure and ``default`` axes, or the caller's axes (one or a sequence)."""
    if ax is None:
        fig, axes = _new_figure(1, default, figsize=figsize)
        return fig, list(axes.ravel())
    axes = [ax] if isinstance(ax, Axes) else list(ax)
    return axes[0].get_figure(root=True), axes


def _downsample_steps(t: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS):
    """Reduce a step function to at most ``max_points`` steps, keeping each bucket's max."""
    n = len(t)
    if n <= max_points:
        return t, y
    starts = np.linspace(0, n, max_points, endpoint=False).astype(np.int64)
    return t[starts], np.maximum.reduceat(y, starts)


def _step(
    ax: Axes,
    result: SimulationResult,
    values: np.ndarray,
    *,
    max_points: int = MAX_POINTS,
    **kwargs: Any,
):
    """Draw one step series of ``result`` to its end time; returns the Line2D."""
    s = result.series
    t, y = _downsample_steps(s.time_s, values, max_points)
    t = np.append(t, s.end_s)
    y = np.append(y, y[-1] if len(y) else 0)
    (line,) = ax.plot(t, y, drawstyle="steps-post", **kwargs)
    return line


def _bound(result: SimulationResult) -> int | None:
    return result.scenario.config.queue_maxsize


def _legend(ax: Axes, **kwargs: Any) -> None:
    """A legend, when anything is labelled (an empty run may have nothing to show)."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kwargs)


def _faded(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, **_FADED, "label": None}


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

    The queue bound (``queue_maxsize``) is a dashed line; an unbounded queue
    says so in the legend. ``compare`` draws a previous run faded.

    Args:
        result: the run to draw.
        ax: axes to draw into (a new figure when None).
        compare: a previous run, drawn faded behind.
        upstream: also draw the backlog waiting upstream of the queue (items
            arrived but not yet admitted, under backpressure).
        max_points: longest series drawn as is; longer ones keep per-bucket maxima.
        title: axes title (None for none).

    Returns:
        The figure.
    """
    fig, (ax,) = _axes_list(ax, 1)
    series = [
        ("queue_depth", "queued", _COLORS["queue"]),
        ("in_flight", "in flight", _COLORS["in_flight"]),
    ]
    if upstream:
        series.append(("upstream_backlog", "upstream backlog", _COLORS["upstream"]))
    for run, faded in ((compare, True), (result, False)):
        if run is None:
            continue
        s = run.series
        for name, label, color in series:
            values = getattr(s, name)
            if name == "upstream_backlog" and not values.any():
                continue
            kwargs = {"color": color, "linewidth": 1.2, "label": label}
            _step(ax, run, values, max_points=max_points, **(_faded(kwargs) if faded else kwargs))
    maxsize = _bound(result)
    if maxsize is not None:
        ax.axhline(
            maxsize,
            color=_COLORS["queue"],
            linestyle="--",
            linewidth=1,
            label=f"maxsize = {maxsize}",
        )
    else:
        ax.plot([], [], color=_COLORS["queue"], linestyle="--", label="maxsize = ∞ (unbounded)")
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("items")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    if title:
        ax.set_title(title)
    _legend(ax, loc="upper left", fontsize="small")
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
    linear (slope 1) and drops when the oldest item finishes.

    Returns:
        ``(time_s, age_s)``, vertices of the piecewise-linear curve.
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
    begin = np.maximum(seg_start, born)
    # Each segment: 0 until the oldest arrives, rising with slope 1, then a drop.
    t = np.column_stack([seg_start, begin, seg_end, seg_end]).ravel()
    age = np.column_stack(
        [np.zeros_like(begin), begin - born, seg_end - born, np.zeros_like(begin)]
    ).ravel()
    t = np.append(t, max(end, t[-1]))
    age = np.append(age, 0.0)
    return t, age


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(values[~np.isnan(values)])
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


def _thin(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= max_points:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, max_points).astype(np.int64))
    return x[keep], y[keep]


def _draw_distribution(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    marks = (50, 95, 99)
    notes: list[str] = []
    for run, faded in ((compare, True), (result, False)):
        if run is None:
            continue
        c = run.columns
        done = c.outcome == 0
        for name, values, color in (
            ("wait", (c.start_s - c.arrival_s)[~np.isnan(c.start_s)], _COLORS["wait"]),
            ("latency", (c.finish_s - c.arrival_s)[done], _COLORS["latency"]),
        ):
            x, y = _thin(*_ecdf(values), max_points)
            if not len(x):
                continue
            kwargs = {"color": color, "linewidth": 1.4, "label": name}
            ax.plot(x, y, drawstyle="steps-post", **(_faded(kwargs) if faded else kwargs))
            if faded:
                continue
            q = np.percentile(values, marks)
            ax.plot(
                q, np.array(marks) / 100, linestyle="none", marker="o", markersize=4, color=color
            )
            notes.append(
                f"{name} "
                + " · ".join(f"p{m} {v:.3g}" for m, v in zip(marks, q, strict=True))
                + " s"
            )
    if notes:
        ax.text(
            0.98,
            0.3,
            "\n".join(notes),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize="x-small",
        )
    ax.set_xlabel("seconds since arrival")
    ax.set_ylabel("share of items ≤ x")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    _legend(ax, loc="lower right", fontsize="small")


def _draw_age(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    for run, faded in ((compare, True), (result, False)):
        if run is None:
            continue
        t, age = oldest_unfinished_age(run)
        t, age = _thin(t, age, 4 * max_points)
        kwargs = {"color": _COLORS["age"], "linewidth": 1.2, "label": "oldest unfinished item"}
        ax.plot(t, age, **(_faded(kwargs) if faded else kwargs))
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("age (s)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    _legend(ax, loc="upper left", fontsize="small")


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
    unknown = [p for p in panels if p not in _LAG_PANELS]
    if unknown:
        raise ValueError(f"panels must be among {sorted(_LAG_PANELS)}, got {unknown}")
    fig, axes = _axes_list(ax, len(panels))
    if len(axes) < len(panels):
        raise ValueError(f"plot_lag needs {len(panels)} axes for panels {panels}, got {len(axes)}")
    for panel, axis in zip(panels, axes, strict=False):
        _LAG_PANELS[panel](axis, result, compare, max_points)
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


def memory_bound_bytes(result: SimulationResult) -> int | None:
    """``(maxsize + concurrency) * item_size``, the in-system ceiling; None if unbounded."""
    cfg = result.scenario.config
    if cfg.queue_maxsize is None:
        return None
    return (cfg.queue_maxsize + cfg.concurrency) * result.scenario.item_size_bytes


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
    scenario's item size. With a bounded queue the first three are at most
    ``(maxsize + concurrency) * item_size`` (dashed); dead letters kept in
    memory come on top. The axis uses binary units (KiB, MiB, ...).

    Returns:
        The figure.
    """
    fig, (ax,) = _axes_list(ax, 1)
    bound = memory_bound_bytes(result)
    size = result.scenario.item_size_bytes
    peaks = [float(result.summary["memory_peak_bytes"]), float(bound or 0)]
    if compare is not None:
        peaks.append(float(compare.summary["memory_peak_bytes"]))
    divisor, unit = _scale_bytes(max(peaks))
    for run, faded in ((compare, True), (result, False)):
        if run is None:
            continue
        s = run.series
        memory = (s.in_system + s.dead_letters) * run.scenario.item_size_bytes / divisor
        kwargs = {"color": _COLORS["memory"], "linewidth": 1.4, "label": "items in memory"}
        _step(ax, run, memory, max_points=max_points, **(_faded(kwargs) if faded else kwargs))
        if not faded and s.dead_letters.any():
            kept = s.dead_letters * run.scenario.item_size_bytes / divisor
            _step(
                ax,
                run,
                kept,
                max_points=max_points,
                color=_COLORS["dead"],
                linewidth=1.0,
                linestyle=":",
                label="of which dead letters kept (not bounded)",
            )
    if bound is not None:
        ax.axhline(
            bound / divisor,
            color=_COLORS["memory"],
            linestyle="--",
            linewidth=1,
            label=f"bound (maxsize + concurrency) × {human_bytes(size)} = {human_bytes(bound)}",
        )
    else:
        ax.plot([], [], color=_COLORS["memory"], linestyle="--", label="no bound (unbounded queue)")
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel(f"memory ({unit})")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    if title:
        ax.set_title(f"{title}, peak {human_bytes(result.summary['memory_peak_bytes'])}")
    _legend(ax, loc="upper left", fontsize="small")
    return fig


# -- retries ----------------------------------------------------------------------------


def _draw_attempts(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    k = result.scenario.config.max_attempts
    top = max(k, int(result.columns.attempts.max(initial=0)))
    bins = np.arange(0.5, top + 1.5)
    for run, faded in ((compare, True), (result, False)):
        if run is None:
            continue
        attempts = run.columns.attempts[run.columns.attempts > 0]
        kwargs = {"color": _COLORS["retry"], "label": "items"}
        if faded:
            ax.hist(attempts, bins=bins, histtype="step", color="gray", alpha=0.6)
        else:
            ax.hist(attempts, bins=bins, rwidth=0.8, **kwargs)
    ax.axvline(
        k + 0.5, color=_COLORS["dead"], linestyle="--", linewidth=1, label=f"max_attempts = {k}"
    )
    ax.set_xlabel("attempts per item")
    ax.set_ylabel("items")
    ax.set_xticks(range(1, top + 1))
    _legend(ax, loc="upper right", fontsize="small")


def _draw_retry_timeline(
    ax: Axes, result: SimulationResult, compare: SimulationResult | None, max_points: int
) -> None:
    for run, faded in ((compare, True), (result, False)):
        if run is None:
            continue
        s = run.series
        for values, label, color in (
            (s.dead_letters, "dead letters (cumulative)", _COLORS["dead"]),
            (s.retry_waiting, "waiting for a retry", _COLORS["retry"]),
        ):
            kwargs = {"color": color, "linewidth": 1.2, "label": label}
            _step(ax, run, values, max_points=max_points, **(_faded(kwargs) if faded else kwargs))
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("items")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    _legend(ax, loc="upper left", fontsize="small")


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
    unknown = [p for p in panels if p not in _RETRY_PANELS]
    if unknown:
        raise ValueError(f"panels must be among {sorted(_RETRY_PANELS)}, got {unknown}")
    fig, axes = _axes_list(ax, len(panels))
    if len(axes) < len(panels):
        raise ValueError(
            f"plot_retries needs {len(panels)} axes for panels {panels}, got {len(axes)}"
        )
    s = result.summary
    for panel, axis in zip(panels, axes, strict=False):
        _RETRY_PANELS[panel](axis, result, compare, max_points)
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
    fig, axes = _new_figure(2, 2, figsize=figsize)
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


# -- sweeps -----------------------------------------------------------------------------


def _axis_key(value: Any) -> float:
    if value is None:
        return math.inf
    try:
        v = float(value)
    except (TypeError, ValueError):
        return math.nan
    return math.inf if math.isnan(v) else v


def _axis_label(value: Any) -> str:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return "∞"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def plot_sweep_heatmap(
    frame: pd.DataFrame,
    x: str,
    y: str,
    value: str,
    *,
    ax: Axes | None = None,
    fmt: str = "{:.3g}",
    cmap: str = "viridis",
    log: bool = False,
    title: str | None = None,
    annotate: bool = True,
) -> Figure:
    """A heatmap of ``value`` (mean over replications and other columns) on an x-y grid.

    ``None`` or NaN grid values (an unbounded ``maxsize``) sort last and are
    labelled "∞". Cells are annotated with ``fmt``.

    Args:
        frame: tidy sweep results (grid columns, ``replication``, summary keys).
        x, y: grid columns for the horizontal and vertical axes.
        value: the column to show.
        ax: axes to draw into (a new figure when None).
        fmt: format of the cell annotations.
        cmap: matplotlib colormap name.
        log: colour on a log scale (values must be > 0).
        title: axes title (default: ``value``).
        annotate: write each cell's value.

    Raises:
        KeyError: a column is missing from ``frame``.
    """
    missing = [c for c in (x, y, value) if c not in frame.columns]
    if missing:
        raise KeyError(f"columns {missing} not in the sweep frame; it has {list(frame.columns)}")
    keys = frame[[x, y]].map(_axis_key)
    cells = (
        frame.assign(_x=keys[x], _y=keys[y])
        .groupby(["_y", "_x"], dropna=False)[value]
        .mean()
        .unstack("_x")
        .sort_index()
        .sort_index(axis=1)
    )
    data = cells.to_numpy(dtype=float)
    fig, (ax,) = _axes_list(ax, 1)
    norm = None
    if log:
        from matplotlib.colors import LogNorm

        positive = data[np.isfinite(data) & (data > 0)]
        if positive.size:
            norm = LogNorm(vmin=positive.min(), vmax=positive.max())
    image = ax.imshow(
        np.ma.masked_invalid(data), origin="lower", aspect="auto", cmap=cmap, norm=norm
    )
    ax.set_xticks(range(data.shape[1]), [_axis_label(v) for v in cells.columns])
    ax.set_yticks(range(data.shape[0]), [_axis_label(v) for v in cells.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title if title is not None else f"{value} (mean over replications)")
    fig.colorbar(image, ax=ax, label=value)
    if annotate:
        finite = data[np.isfinite(data)]
        middle = (np.nanmin(finite) + np.nanmax(finite)) / 2 if finite.size else 0.0
        for (row, col), cell in np.ndenumerate(data):
            text = "n/a" if not np.isfinite(cell) else fmt.format(cell)
            ax.text(
                col,
                row,
                text,
                ha="center",
                va="center",
                fontsize="small",
                color="white" if np.isfinite(cell) and cell < middle else "black",
            )
    return fig


# -- theory -----------------------------------------------------------------------------


def theory_for(result: SimulationResult) -> dict[str, float]:
    """The queueing formulas that apply to a run's scenario, as numbers.

    - ``wait_mean_s``: Erlang C (M/M/c) mean wait, when arrivals are Poisson,
      service exponential, ``on_full="block"`` (the wait does not depend on
      ``maxsize``), no failures, and the load is below capacity;
    - ``shed_fraction``: M/M/c/K blocking with ``K = maxsize + concurrency``,
      when Poisson/exponential, ``on_full="reject"``, bounded, no failures;
    - ``dead_letter_fraction``: ``p**k`` with independent failures of
      probability ``p`` and ``k = max_attempts``.

    Keys that do not apply are absent.
    """
    from pipeline.sim import Exponential, IndependentFailures, NoFailures, Poisson
    from pipeline.sim.theory import dead_letter_rate, mmc, mmck

    sc = result.scenario
    cfg = sc.config
    out: dict[str, float] = {}
    markovian = isinstance(sc.arrivals, Poisson) and isinstance(sc.service, Exponential)
    clean = isinstance(sc.failures, NoFailures)
    if markovian and clean:
        lam, mean, c = sc.arrivals.rate, sc.service.mean, cfg.concurrency
        if cfg.on_full == "block" and lam * mean < c:
            out["wait_mean_s"] = mmc(lam, mean, c).wait_mean_s
        if cfg.on_full == "reject" and cfg.queue_maxsize is not None:
            out["shed_fraction"] = mmck(lam, mean, c, cfg.queue_maxsize + c).blocking_probability
    if isinstance(sc.failures, IndependentFailures):
        out["dead_letter_fraction"] = dead_letter_rate(sc.failures.p, cfg.max_attempts)
    return out


def _runs(results_by_x: Mapping[Any, Any] | Sequence[tuple[Any, Any]]):
    """(x, [results]) pairs sorted by x; a value may be one result or Replications."""
    pairs = results_by_x.items() if isinstance(results_by_x, Mapping) else results_by_x
    out = []
    for x, runs in pairs:
        runs = getattr(runs, "results", runs)
        out.append((x, list(runs) if isinstance(runs, Sequence) else [runs]))
    return sorted(out, key=lambda pair: _axis_key(pair[0]))


def _plot_vs_theory(
    results_by_x,
    measured,
    key: str,
    *,
    ax,
    xlabel: str,
    ylabel: str,
    title: str,
    theory_label: str,
    log: bool = False,
) -> Figure:
    fig, (ax,) = _axes_list(ax, 1)
    runs = _runs(results_by_x)
    xs, means, halves, theory_x, theory_y = [], [], [], [], []
    for x, group in runs:
        values = np.array([measured(r) for r in group], dtype=float)
        xs.append(_axis_key(x))
        values = values[np.isfinite(values)]
        if len(values) > 1:
            mean, half = mean_ci(values, level=0.95)  # Student t: few replications
        else:
            mean, half = (values[0] if len(values) else math.nan), 0.0
        means.append(mean)
        halves.append(half)
        expected = theory_for(group[0]).get(key) if group else None
        if expected is not None:
            theory_x.append(_axis_key(x))
            theory_y.append(expected)
    ax.errorbar(
        xs,
        means,
        yerr=halves,
        marker="o",
        linestyle="none",
        capsize=3,
        color="C0",
        label="simulated (mean ± 95% CI)" if any(halves) else "simulated",
    )
    if theory_x:
        ax.plot(
            theory_x,
            theory_y,
            color=_COLORS["theory"],
            linewidth=1.2,
            marker="_",
            label=theory_label,
        )
    shown = np.array([*means, *theory_y], dtype=float)
    if log and (shown[np.isfinite(shown)] > 0).any():
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend(ax, fontsize="small")
    return fig


def plot_wait_vs_theory(
    results_by_x,
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    title: str = "Mean wait: simulation vs Erlang C",
) -> Figure:
    """Simulated mean wait against Erlang C's M/M/c mean wait, one point per x.

    Args:
        results_by_x: a mapping (or pairs) from an x value (say, arrival rate or
            concurrency) to a result, a list of results, or Replications.
        ax: axes to draw into.
        xlabel: label of the x axis (with units).
        title: axes title.

    The theory line is drawn where it applies (see :func:`theory_for`).
    """
    return _plot_vs_theory(
        results_by_x,
        lambda r: r.summary["wait_mean_s"],
        "wait_mean_s",
        ax=ax,
        xlabel=xlabel,
        ylabel="mean wait (s)",
        title=title,
        theory_label="Erlang C (M/M/c)",
    )


def plot_shed_vs_theory(
    results_by_x,
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    title: str = "Shed share: simulation vs M/M/c/K",
) -> Figure:
    """Simulated shed share (``on_full="reject"``) against M/M/c/K blocking probability."""

    def shed(r):
        return r.summary["items_shed"] / max(r.summary["items_offered"], 1)

    return _plot_vs_theory(
        results_by_x,
        shed,
        "shed_fraction",
        ax=ax,
        xlabel=xlabel,
        ylabel="share of items shed",
        title=title,
        theory_label="M/M/c/K blocking, K = maxsize + concurrency",
    )


def plot_dead_letters_vs_theory(
    results_by_x,
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    log: bool = True,
    title: str = "Dead-letter share: simulation vs p**k",
) -> Figure:
    """Simulated dead-lettered share against ``p**k`` (independent attempt failures)."""

    def dead(r):
        return r.summary["items_dead_lettered"] / max(r.summary["items_admitted"], 1)

    return _plot_vs_theory(
        results_by_x,
        dead,
        "dead_letter_fraction",
        ax=ax,
        xlabel=xlabel,
        ylabel="share of items dead-lettered",
        title=title,
        theory_label="p**k (k = max_attempts)",
        log=log,
    )
