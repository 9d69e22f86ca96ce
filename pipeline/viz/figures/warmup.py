"""``plot_warmup``: how MSER-5 chose a run's warm-up, drawn.

Two panels over virtual time: the per-item series (each item at its arrival)
with its batch means and the cut; and the MSER statistic for every candidate
cut, its minimum marked. A cut at the right of the searched half means the
run is too short to show the end of its transient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .style import COLORS, axes_list, legend

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = ["plot_warmup"]

#: Items drawn at most (evenly thinned); the batch means and the statistic are drawn whole.
MAX_ITEMS = 5000


def plot_warmup(
    result: SimulationResult,
    ax: Sequence[Axes] | None = None,
    *,
    column: str = "wait_s",
    batch_size: int = 5,
    title: str | None = "Warm-up (MSER-5)",
) -> Figure:
    """Draw a run's item series, its batch means, the MSER statistic and the chosen cut.

    Args:
        result: a :class:`~pipeline.sim.SimulationResult`.
        ax: two axes to draw into (series, statistic), or None for a new figure.
        column: ``"wait_s"`` or ``"latency_s"``, as for
            :func:`~pipeline.sim.detect_warmup`.
        batch_size: values per batch (5: MSER-5).
        title: title of the first panel (None for none).

    Returns:
        The figure. The cut is drawn even when
        :func:`~pipeline.sim.detect_warmup` would refuse it (at the search
        limit); the legend then says so.

    Raises:
        ValueError: as :func:`~pipeline.sim.analysis.warmup.mser5` (too few items,
            an unknown column), or ``ax`` that is not two axes.
    """
    from pipeline.sim.analysis.warmup import mser5, warmup_series

    times, values = warmup_series(result, column)
    cut = mser5(values, batch_size)
    if ax is not None and (isinstance(ax, Axes) or len(ax) != 2):
        raise ValueError("ax must be two axes (the series, the statistic), or None")
    fig, (series_ax, stat_ax) = axes_list(ax, 2, figsize=(12.8, 3.8))

    color = COLORS["wait" if column == "wait_s" else "latency"]
    step = max(1, len(values) // MAX_ITEMS)
    series_ax.plot(
        times[::step],
        values[::step],
        ".",
        ms=2,
        alpha=0.35,
        color=color,
        label=f"{column} per item",
    )
    m = len(cut.batch_means)
    batch_times = times[: m * batch_size].reshape(m, batch_size).mean(axis=1)
    series_ax.plot(batch_times, cut.batch_means, color="black", lw=0.8, label="batch means of 5")
    cut_s = float(times[cut.index]) if cut.index else 0.0
    limit = " (at the search limit: run longer)" if cut.at_limit else ""
    for axis in (series_ax, stat_ax):
        axis.axvline(cut_s, color="C3", ls="--", lw=1.2, label=f"cut at {cut_s:.4g} s{limit}")
    series_ax.set(xlabel="arrival (virtual s)", ylabel=f"{column} (s)")
    if title:
        series_ax.set_title(title)
    legend(series_ax, loc="upper right")

    candidates = len(cut.statistic)
    stat_times = times[np.arange(candidates) * batch_size]
    stat_ax.plot(stat_times, cut.statistic, color="C4", lw=1.0, label="MSER(d)")
    stat_ax.plot([cut_s], [cut.statistic[cut.index // batch_size]], "o", color="C3")
    stat_ax.set(
        xlabel="cut: first arrival kept (virtual s)",
        ylabel="squared standard error",
        title="MSER statistic over the searched half",
    )
    legend(stat_ax, loc="upper right")
    return fig
