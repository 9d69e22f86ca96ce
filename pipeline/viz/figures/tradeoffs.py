"""Figures of a choice across runs: a drain timeout, and workers for a quota-bound batch.

:func:`plot_drain_tradeoff` sets shutdown time against the items a drain hands
back, one point per ``drain_timeout_s`` (``None``, no timeout, included).
:func:`plot_batch_completion` shows what more workers buy a batch behind a
provider's limits: the time to complete *every* item, which a run that
dead-letters items never achieves however soon it stops, beside the attempts
each item needed. Completions per second of such a run flatter it: giving up
on items shortens the run.

Like :mod:`~pipeline.viz.figures.run`, each draws into the ``ax`` it is given (or a
new figure) and returns the :class:`~matplotlib.figure.Figure`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .panels import LEGEND_FONT_PT, legend_below
from .style import COLORS, axes_list

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["drain_tradeoff_table", "plot_batch_completion", "plot_drain_tradeoff"]


def _timeout_key(timeout: float | None) -> float:
    return math.inf if timeout is None else float(timeout)


def drain_tradeoff_table(runs: Mapping[float | None, Any]) -> list[dict[str, Any]]:
    """One row per drain timeout: ``timeout_s``, ``shutdown_s``, ``unfinished``, sorted by timeout.

    ``shutdown_s`` runs from the moment intake stopped (the source's last
    arrival) to the end of the run; ``None`` (no timeout) sorts last.

    Raises:
        ValueError: no runs.
    """
    if not runs:
        raise ValueError("runs must hold at least one drain timeout's run, got none")
    rows = []
    for timeout, result in sorted(runs.items(), key=lambda pair: _timeout_key(pair[0])):
        arrivals = result.columns.arrival_s
        stop = float(arrivals.max()) if len(arrivals) else 0.0
        rows.append(
            {
                "timeout_s": timeout,
                "shutdown_s": float(result.summary["sim_time_s"]) - stop,
                "unfinished": int(result.summary["items_unfinished"]),
            }
        )
    return rows


def plot_drain_tradeoff(
    runs: Mapping[float | None, Any],
    *,
    ax: Axes | None = None,
    highlight: float | str | None = "none",
    title: str | None = "Drain timeout: shutdown time against work handed back",
) -> Figure:
    """Items handed back unfinished against shutdown time, one point per ``drain_timeout_s``.

    Bounded timeouts are joined by a line and labelled ("30 s"); ``None``, the
    drain that waits for everything, is a separate point at zero unfinished.

    Args:
        runs: drain timeout (seconds, or None) -> the run with that timeout.
        ax: axes to draw into (a new figure when None).
        highlight: a timeout (or None) to ring, e.g. a widget's current one;
            the default ``"none"`` rings nothing.
        title: axes title (None for none).
    """
    rows = drain_tradeoff_table(runs)
    fig, (ax,) = axes_list(ax, 1, figsize=(8, 3.8))
    bounded = [row for row in rows if row["timeout_s"] is not None]
    if bounded:
        ax.plot(
            [row["shutdown_s"] for row in bounded],
            [row["unfinished"] for row in bounded],
            marker="o",
            color="C0",
            label="drain_timeout_s (labelled)",
        )
    # Timeouts longer than the full drain end at the same point: one label names them all.
    labels: dict[tuple[float, int], list[str]] = {}
    for row in rows:
        label = "None" if row["timeout_s"] is None else f"{row['timeout_s']:g} s"
        labels.setdefault((round(row["shutdown_s"], 6), row["unfinished"]), []).append(label)
    for (shutdown, unfinished), names in labels.items():
        ax.annotate(
            ", ".join(names),
            (shutdown, unfinished),
            textcoords="offset points",
            xytext=(6, 5),
            fontsize=LEGEND_FONT_PT,
        )
    for row in rows:
        if row["timeout_s"] is None:
            ax.plot(
                [row["shutdown_s"]],
                [row["unfinished"]],
                marker="*",
                markersize=12,
                linestyle="none",
                color="C2",
                label="None: waits for every item",
            )
    if highlight != "none":
        for row in rows:
            if row["timeout_s"] == highlight:
                ax.plot(
                    [row["shutdown_s"]],
                    [row["unfinished"]],
                    marker="o",
                    markersize=14,
                    markerfacecolor="none",
                    markeredgecolor="black",
                    linestyle="none",
                    label="this setting",
                )
    # Room on every side, so that no label is clipped: the first point sits on the y axis.
    shutdowns = [row["shutdown_s"] for row in rows]
    counts = [row["unfinished"] for row in rows]
    span = max(max(shutdowns) - min(shutdowns), 1.0)
    ax.set_xlim(min(shutdowns) - 0.06 * span, max(shutdowns) + 0.22 * span)
    ax.set_ylim(-0.05 * max(max(counts), 1), max(max(counts), 1) * 1.18)
    ax.set_xlabel("shutdown time after intake stops (s)")
    ax.set_ylabel("items handed back unfinished")
    if title:
        ax.set_title(title)
    legend_below(ax, ncols=2)
    return fig


def plot_batch_completion(
    frame: pd.DataFrame,
    *,
    batch_size: int,
    ax: Axes | Sequence[Axes] | None = None,
    knee: float | None = None,
    limit: float | None = None,
    x: str = "concurrency",
) -> Figure:
    """Time to complete every item of a batch, and attempts per item, against ``x``.

    A run that dead-letters items does not complete the batch however soon it
    ends: it is marked at the top of the left panel ("not finished") with the
    number of items it gave up on, rather than plotted at a short time it only
    reached by giving up.

    Args:
        frame: one row per run, with ``x`` as a column or the index, and
            ``items_completed``, ``items_dead_lettered``, ``attempts_total``,
            ``items_admitted`` and ``sim_time_s``.
        batch_size: items in the batch.
        ax: two axes, or None for a new figure.
        knee, limit: x values to mark (dotted: where a quota binds, by Little's
            law; dashed: the provider's in-flight limit), or None.
        x: the swept column.

    Raises:
        KeyError: a column is missing.
        ValueError: ``ax`` holds fewer than two axes.
    """
    data = frame.reset_index() if x not in frame.columns else frame
    needed = [x, "items_completed", "items_dead_lettered", "attempts_total", "items_admitted"]
    missing = [c for c in [*needed, "sim_time_s"] if c not in data.columns]
    if missing:
        raise KeyError(f"columns {missing} not in the frame; it has {list(data.columns)}")
    data = data.sort_values(x)
    fig, axes = axes_list(ax, 2, figsize=(11.5, 4.0))
    if len(axes) < 2:
        raise ValueError(f"plot_batch_completion needs 2 axes, got {len(axes)}")
    left, right = axes[:2]
    xs = data[x].to_numpy(dtype=float)
    done = (data.items_completed == batch_size).to_numpy()
    times = data.sim_time_s.to_numpy(dtype=float)
    left.plot(xs[done], times[done], "o-", color="C0", label="every item completed")
    top = float(times[done].max()) if done.any() else 1.0
    for value, dead in zip(xs[~done], data.items_dead_lettered.to_numpy()[~done], strict=True):
        left.plot([value], [top * 1.08], marker="x", markersize=9, color=COLORS["dead"], ls="none")
        left.annotate(
            f"{dead:,}\nlost",
            (value, top * 1.08),
            textcoords="offset points",
            xytext=(0, -8),
            ha="center",
            va="top",
            fontsize=LEGEND_FONT_PT,
            color=COLORS["dead"],
        )
    if (~done).any():
        left.plot(
            [],
            [],
            marker="x",
            color=COLORS["dead"],
            ls="none",
            label="not finished: items dead-lettered (count)",
        )
    left.set_ylim(0, top * 1.15)
    left.set(
        xlabel=f"{x} (workers)",
        ylabel="seconds to complete the batch",
        title=f"Time to complete all {batch_size:,} items",
    )
    attempts = (data.attempts_total / data.items_admitted).to_numpy(dtype=float)
    right.plot(xs, attempts, "o-", color=COLORS["dead"], label="attempts per item")
    right.set_ylim(0, max(float(np.nanmax(attempts)), 1.0) * 1.1)
    right.set(
        xlabel=f"{x} (workers)",
        ylabel="attempts per item",
        title="What the extra workers add: refused calls",
    )
    for axis in (left, right):
        if knee is not None:
            axis.axvline(
                knee, color="gray", linestyle=":", linewidth=1, label="quota binds (Little)"
            )
        if limit is not None:
            axis.axvline(limit, color="gray", linestyle="--", linewidth=1, label="in-flight limit")
        axis.set_xticks(xs)
        legend_below(axis, ncols=2)
    return fig
