"""Panels of one run -- queue depth, lag, memory -- built once and redrawn in place.

A panel owns its artists on one :class:`~matplotlib.axes.Axes`. :meth:`draw`
sets their data for a run (and a previous run, faded, for comparison), so the
same panel serves a one-shot plot (:func:`~pipeline.viz.figures.run.plot_depth`
builds one and draws once) and a widget that redraws on every change (the
explorer keeps three and draws again), with identical pixels.

Three rules make the figures read truthfully at a glance:

- **The current run sets the axes.** Limits come from its data only; a
  previous run is drawn faded behind it and may run off the axes.
- **A limit is a line only where it informs.** ``maxsize`` (or the memory
  bound) is drawn when the data come within :data:`INFORMATIVE_SHARE` of it;
  far above the data, a line would flatten them, so the legend names the
  limit and says it lies above the scale.
- **Legends sit outside the data**, below the axes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.transforms import offset_copy

from ..._units import human_bytes, scale_bytes
from .series import (
    FADED,
    MARKS,
    MAX_POINTS,
    ecdf,
    memory_bound_bytes,
    percentile_note,
    step_band,
    step_data,
    thin,
    thinned_label,
    waits_and_latencies,
)
from .style import COLORS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from pipeline.sim.running.result import SimulationResult

__all__ = [
    "INFORMATIVE_SHARE",
    "LEGEND_FONT_PT",
    "DepthPanel",
    "LagPanel",
    "MemoryPanel",
    "legend_below",
    "limit_is_informative",
    "pin_title_and_xlabel",
]

#: A limit is drawn as a line when the current run's peak reaches this share of it.
INFORMATIVE_SHARE = 0.5
#: Legend and annotation text size, points (readable at 100 dpi and in a projector's room).
LEGEND_FONT_PT = 9
#: Headroom above the highest value shown, as a share of it.
_HEADROOM = 0.06
#: How far below the axes' bottom edge the legend starts, points: below the x label.
_LEGEND_DROP_PT = 34
_EMPTY = np.empty(0)
_STEPS = {"drawstyle": "steps-post"}
_LIMIT = {"linestyle": "--", "linewidth": 1}


#: Where the x label's top sits below the axes, points: under the tick labels.
_XLABEL_DROP_PT = 19


def pin_title_and_xlabel(ax: Axes) -> None:
    """Fix where ``ax``'s title and x label go, so that drawing need not measure tick labels.

    matplotlib otherwise measures every tick label on every draw to place them:
    a fifth of a widget's redraw. The title sits just above the axes, the x
    label just below the tick labels (10-point ticks).
    """
    ax.set_title(ax.get_title() or " ", y=1.0)
    below = offset_copy(
        ax.transAxes, fig=ax.get_figure(root=True), y=-_XLABEL_DROP_PT, units="points"
    )
    ax.xaxis.set_label_coords(0.5, 0.0, transform=below)


def limit_is_informative(peak: float, level: float | None) -> bool:
    """Whether a limit at ``level`` belongs on axes scaled to ``peak`` (both >= 0).

    True when the data reach :data:`INFORMATIVE_SHARE` of the limit; False for
    no limit (None) or one so far above the data that drawing it would squash them.
    """
    if level is None or not np.isfinite(level):
        return False
    return peak >= INFORMATIVE_SHARE * level


_DIFFERENCES_NAMED = 2
"""At most this many differing settings name a faded run; more read as "previous run"."""


def faded_name(result: SimulationResult, compare: SimulationResult) -> str:
    """What a legend calls ``compare`` drawn faded behind ``result``: the settings in which it
    differs (``"queue_maxsize=None"``), or ``"previous run"`` when none or too many do."""
    mine, theirs = result.scenario, compare.scenario
    pairs = [
        (f.name, getattr(mine.config, f.name), getattr(theirs.config, f.name))
        for f in dataclasses.fields(theirs.config)
    ]
    pairs += [
        (name, getattr(mine, name), getattr(theirs, name))
        for name in ("n_items", "duration_s", "item_size_bytes", "arrivals", "service", "failures")
    ]
    named = [f"{name}={value!r}" for name, own, value in pairs if own != value]
    if not named or len(named) > _DIFFERENCES_NAMED:
        return "previous run"
    return ", ".join(named)


def _proxy(**kwargs: Any) -> Line2D:
    """A legend handle that is not drawn on the axes."""
    return Line2D([], [], **kwargs)


class _Panel:
    """Shared plumbing: hidden lines, limits from the current run, a legend below the axes."""

    def __init__(self, ax: Axes, *, max_points: int) -> None:
        self.ax = ax
        self.max_points = max_points
        self._legend_key: tuple[Any, ...] | None = None
        self._note_proxy = _proxy(linestyle="none")

    def _line(self, faded: bool, **kwargs: Any) -> Line2D:
        if faded:
            kwargs = {**kwargs, **FADED, "label": "_previous run"}
        (line,) = self.ax.plot(_EMPTY, _EMPTY, visible=False, **kwargs)
        return line

    @staticmethod
    def _show(line: Line2D, x: Any, y: Any) -> None:
        line.set_data(x, y)
        line.set_visible(True)

    def _band(self, faded: bool, color: str) -> Any:
        """A hidden min-max band for a thinned series (steps-post), behind its line."""
        alpha = 0.25 * (FADED["alpha"] if faded else 1.0)
        return self.ax.fill_between(
            [0.0, 1.0], [0.0, 0.0], [0.0, 0.0], step="post", color=color, alpha=alpha,
            linewidth=0, visible=False,
        )  # fmt: skip

    def _show_steps(
        self, line: Line2D, band: Any, run: SimulationResult, values: np.ndarray
    ) -> float | None:
        """Draw a step series: exact, or its bucket means with their min-max band.

        Returns the bucket width in seconds when thinned (the legend says so), else None.
        """
        self._show(line, *step_data(run, values, self.max_points))
        found = step_band(run, values, self.max_points)
        if found is None:
            self._hide(band)
            return None
        x, low, high, width_s = found
        band.set_data(x, low, high)
        band.set_visible(True)
        return width_s

    @staticmethod
    def _hide(*artists: Any) -> None:
        for artist in artists:
            artist.set_visible(False)

    def _set_limits(self, right: float, top: float) -> None:
        """x from 0 to ``right``, y from 0 to ``top`` plus headroom (never an empty range)."""
        self.ax.set_xlim(0, right if right > 0 else 1.0)
        self.ax.set_ylim(0, top * (1 + _HEADROOM) if top > 0 else 1.0)

    def _thinned_note(self, *widths_s: float | None) -> list[tuple[Any, str]]:
        """One legend entry saying how thinned series are drawn (none when every one is
        exact): said once for the panel, so that each series keeps a short label."""
        drawn = [w for w in widths_s if w is not None]
        if not drawn:
            return []
        return [(self._note_proxy, thinned_label("thinned", max(drawn)))]

    def _set_legend(self, entries: list[tuple[Any, str]], ncols: int = 1) -> None:
        """The legend for ``entries``, below the axes; rebuilt only when handles change."""
        key = (*(id(handle) for handle, _ in entries), ncols)
        legend = self.ax.get_legend()
        if legend is not None and key == self._legend_key:
            for text, (_, label) in zip(legend.get_texts(), entries, strict=True):
                text.set_text(label)
            return
        self._legend_key = key
        legend_below(self.ax, entries, ncols=ncols)


def legend_below(ax: Axes, entries: list[tuple[Any, str]] | None = None, *, ncols: int = 1) -> Any:
    """Put ``ax``'s legend below its x label, outside the data; returns it (None if empty).

    ``entries`` are ``(handle, label)`` pairs; by default, the axes' labelled artists.
    A previous legend is replaced.
    """
    if entries is None:
        entries = list(zip(*ax.get_legend_handles_labels(), strict=True))
    legend = ax.get_legend()
    if legend is not None:
        legend.remove()
    if not entries:
        return None
    handles, labels = zip(*entries, strict=True)
    below = offset_copy(
        ax.transAxes, fig=ax.get_figure(root=True), y=-_LEGEND_DROP_PT, units="points"
    )
    return ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=below,
        ncols=ncols,
        fontsize=LEGEND_FONT_PT,
        frameon=False,
        borderaxespad=0.0,
    )


class DepthPanel(_Panel):
    """Queued items, items in flight and the upstream backlog over virtual time, with maxsize.

    Args:
        ax: the axes to own.
        upstream: draw the backlog waiting upstream of a full queue (when there is one).
        max_points: longest series drawn as is; longer ones as a min-max band and the mean.
    """

    SERIES = (
        ("queue_depth", "queued", COLORS["queue"]),
        ("in_flight", "in flight", COLORS["in_flight"]),
        ("upstream_backlog", "upstream backlog", COLORS["upstream"]),
    )

    def __init__(self, ax: Axes, *, upstream: bool = True, max_points: int = MAX_POINTS) -> None:
        super().__init__(ax, max_points=max_points)
        self.series = self.SERIES if upstream else self.SERIES[:2]
        self._lines = {
            faded: [
                self._line(faded, color=color, linewidth=1.2, label=label, **_STEPS)
                for _, label, color in self.series
            ]
            for faded in (True, False)
        }
        self._bands = {
            faded: [self._band(faded, color) for _, _, color in self.series]
            for faded in (True, False)
        }
        self._limit = ax.axhline(0, color=COLORS["queue"], visible=False, **_LIMIT)
        self._limit_proxy = _proxy(color=COLORS["queue"], **_LIMIT)
        ax.set_xlabel("virtual time (s)")
        ax.set_ylabel("items")

    def draw(self, result: SimulationResult, compare: SimulationResult | None = None) -> None:
        """Show ``result``, and ``compare`` faded behind it."""
        peak = 0.0
        widths: dict[str, float | None] = {}
        for faded, run in ((True, compare), (False, result)):
            drawn = zip(self._lines[faded], self._bands[faded], self.series, strict=True)
            for line, band, (name, _, _) in drawn:
                values = None if run is None else getattr(run.series, name)
                if values is None or (name == "upstream_backlog" and not values.any()):
                    self._hide(line, band)
                    continue
                width_s = self._show_steps(line, band, run, values)
                if not faded:
                    widths[name] = width_s
                    peak = max(peak, float(values.max(initial=0)))
        entries = [
            (line, label)
            for line, (name, label, _) in zip(self._lines[False], self.series, strict=True)
            if line.get_visible()
        ]
        note = self._thinned_note(*widths.values())
        maxsize = result.scenario.config.queue_maxsize
        top = peak
        if maxsize is None:
            self._hide(self._limit)
            entries.append((self._limit_proxy, "maxsize = ∞ (unbounded)"))
        elif limit_is_informative(peak, maxsize):
            self._limit.set_ydata([maxsize, maxsize])
            self._limit.set_label(f"maxsize = {maxsize}")
            self._limit.set_visible(True)
            entries.append((self._limit, f"maxsize = {maxsize}"))
            top = max(peak, maxsize)
        else:
            self._hide(self._limit)
            self._limit.set_label(f"_maxsize = {maxsize}")
            entries.append((self._limit_proxy, f"maxsize = {maxsize} (above this scale)"))
        self._set_limits(result.series.end_s, top)
        # Two short columns; one when the thinning note's long line would widen the legend
        # past the axes.
        self._set_legend(entries + note, ncols=1 if note else 2)


class LagPanel(_Panel):
    """Distributions (ECDF) of wait and latency, with p50/p95/p99 marked and named in the legend.

    Wait is first start minus arrival (items that started); latency is finish
    minus arrival (completed items). The x axis runs to the current run's
    longest latency.
    """

    def __init__(self, ax: Axes, *, max_points: int = MAX_POINTS) -> None:
        super().__init__(ax, max_points=max_points)
        colors = (COLORS["wait"], COLORS["latency"])
        self._faded = [self._line(True, color=c, linewidth=1.4, **_STEPS) for c in colors]
        self._curves = [
            self._line(False, color=c, linewidth=1.4, label=name, **_STEPS)
            for c, name in zip(colors, ("wait", "latency"), strict=True)
        ]
        self._marks = [
            self._line(False, color=c, linestyle="none", marker="o", markersize=4) for c in colors
        ]
        ax.set_xlabel("seconds since arrival")
        ax.set_ylabel("share of items ≤ x")

    def draw(self, result: SimulationResult, compare: SimulationResult | None = None) -> None:
        """Show ``result``'s distributions, and ``compare``'s faded behind them."""
        self._hide(*self._faded)
        if compare is not None:
            previous = waits_and_latencies(compare)
            for line, (_, values, _) in zip(self._faded, previous, strict=True):
                x, y = thin(*ecdf(values), self.max_points)
                if len(x):
                    self._show(line, x, y)
        entries, right = [], 0.0
        for curve, marks, (name, values, _) in zip(
            self._curves, self._marks, waits_and_latencies(result), strict=True
        ):
            x, y = thin(*ecdf(values), self.max_points)
            if not len(x):
                self._hide(curve, marks)
                continue
            self._show(curve, x, y)
            q = np.percentile(values, MARKS)
            self._show(marks, q, np.array(MARKS) / 100)
            entries.append((curve, percentile_note(name, q)))
            right = max(right, float(x[-1]))
        self.ax.set_xlim(0, right if right > 0 else 1.0)
        self.ax.set_ylim(0, 1.02)
        self._set_legend(entries)


class MemoryPanel(_Panel):
    """Modelled memory over time: the bounded part and, apart, the dead letters kept.

    The green line is what a bounded queue bounds -- items queued, running and
    waiting for a retry, times the item size -- against the bound
    ``(maxsize + concurrency) × item size`` (dashed). Dead letters kept in
    memory are not in the queue: they are the red band stacked on top, so the
    top of the band is the total memory and only the band can pass the bound.
    The axis uses binary units (KiB, MiB, ...).
    """

    def __init__(
        self, ax: Axes, *, max_points: int = MAX_POINTS, title: str | None = "Memory (modelled)"
    ) -> None:
        super().__init__(ax, max_points=max_points)
        self.title = title
        color = COLORS["memory"]
        self._faded = self._line(True, color=color, linewidth=1.4, **_STEPS)
        self._held = self._line(
            False, color=color, linewidth=1.4, label="queued + running + retrying", **_STEPS
        )
        self._faded_band, self._held_band = self._band(True, color), self._band(False, color)
        self._dead = ax.fill_between(
            [0.0, 1.0],
            [0.0, 0.0],
            [0.0, 0.0],
            step="post",
            color=COLORS["dead"],
            alpha=0.35,
            linewidth=0,
            visible=False,
            label="dead letters kept",
        )
        self._limit = ax.axhline(0, color=color, visible=False, **_LIMIT)
        self._limit_proxy = _proxy(color=color, **_LIMIT)
        ax.set_xlabel("virtual time (s)")

    @property
    def dead_letter_band(self) -> Any:
        """The artist showing the dead letters kept in memory (hidden when there are none)."""
        return self._dead

    def draw(self, result: SimulationResult, compare: SimulationResult | None = None) -> None:
        """Show ``result``'s memory, and ``compare``'s total faded behind it."""
        size = result.scenario.item_size_bytes
        s = result.series
        held = s.in_system.astype(np.float64) * size
        total = held + s.dead_letters * float(size)
        peak = float(total.max(initial=0))
        bound = memory_bound_bytes(result)
        informative = limit_is_informative(peak, bound)
        divisor, unit = scale_bytes(max(peak, float(bound) if informative else 0.0))
        if compare is not None:
            c = compare.series
            previous = (c.in_system + c.dead_letters) * (compare.scenario.item_size_bytes / divisor)
            self._show_steps(self._faded, self._faded_band, compare, previous)
        else:
            self._hide(self._faded, self._faded_band)
        t, low = step_data(result, held / divisor, self.max_points)
        width_s = self._show_steps(self._held, self._held_band, result, held / divisor)
        entries: list[tuple[Any, str]] = [(self._held, "queued + running + retrying")]
        entries += self._thinned_note(width_s)
        if s.dead_letters.any():
            _, high = step_data(result, total / divisor, self.max_points)
            self._dead.set_data(t, low, np.maximum(high, low))
            self._dead.set_visible(True)
            kept = human_bytes(float(s.dead_letters[-1]) * size)
            entries.append((self._dead, f"dead letters kept, not bounded: {kept}"))
        else:
            self._hide(self._dead)
        if compare is not None:
            # The previous run may run off this scale: say how high it went.
            previous_peak = human_bytes(compare.summary["memory_peak_bytes"])
            name = faded_name(result, compare)
            entries.append((self._faded, f"{name}, in all (faded): peak {previous_peak}"))
        formula = "(maxsize + concurrency) × item size"
        if bound is None:
            self._hide(self._limit)
            entries.append((self._limit_proxy, "no bound: unbounded queue"))
        elif informative:
            self._limit.set_ydata([bound / divisor] * 2)
            self._limit.set_label(f"bound {human_bytes(bound)}")
            self._limit.set_visible(True)
            entries.append((self._limit, f"{formula}\n= {human_bytes(bound)}: bounds the line"))
        else:
            self._hide(self._limit)
            above = f"{formula}\n= {human_bytes(bound)}, above this scale"
            entries.append((self._limit_proxy, above))
        self.ax.set_ylabel(f"memory ({unit})")
        if self.title:
            peak_text = human_bytes(result.summary["memory_peak_bytes"])
            self.ax.set_title(f"{self.title}, peak {peak_text}")
        self._set_limits(s.end_s, max(peak, float(bound) if informative else 0.0) / divisor)
        self._set_legend(entries)
