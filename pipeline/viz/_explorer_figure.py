"""The explorer's figure: depth, lag and memory, kept and updated in place.

:class:`ExplorerFigure` draws what :func:`~pipeline.viz.plots.plot_depth`,
:func:`~pipeline.viz.plots.plot_lag` (the distribution panel) and
:func:`~pipeline.viz.plots.plot_memory` draw with ``compare=`` -- the same
lines, limits, labels and legends, pixel for pixel -- but builds its artists
once. Each update sets their data, shows or hides them, rescales the axes and
rebuilds a legend only when its entries change, so a redraw costs little more
than rasterising the figure.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._style import _COLORS
from .plots import (
    _FADED,
    _MARKS,
    _ecdf,
    _memory_bound_label,
    _memory_scale,
    _percentile_note,
    _step_data,
    _thin,
    _waits_and_latencies,
    human_bytes,
    memory_bound_bytes,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

    from pipeline.sim import SimulationResult

__all__ = ["ExplorerFigure"]

_DEPTH = (
    ("queue_depth", "queued", _COLORS["queue"]),
    ("in_flight", "in flight", _COLORS["in_flight"]),
    ("upstream_backlog", "upstream backlog", _COLORS["upstream"]),
)
_LIMIT = {"linestyle": "--", "linewidth": 1}
_STEPS = {"drawstyle": "steps-post"}
_EMPTY = np.empty(0)


def _line(ax: Axes, faded: bool, **kwargs: Any) -> Line2D:
    """A hidden line, styled as plots.py styles the current run (or, faded, the previous one)."""
    if faded:
        kwargs = {**kwargs, **_FADED}
    (line,) = ax.plot(_EMPTY, _EMPTY, visible=False, **kwargs)
    return line


def _show(line: Line2D, x: Any, y: Any) -> None:
    line.set_data(x, y)
    line.set_visible(True)


def _hide(*lines: Any) -> None:
    for line in lines:
        line.set_visible(False)


class ExplorerFigure:
    """One figure, three panels, redrawn by updating its artists.

    Args:
        figsize: inches.
        dpi: dots per inch of the PNG.
        max_points: points per step line (longer series keep per-bucket maxima).
    """

    def __init__(self, figsize: tuple[float, float], dpi: int, max_points: int) -> None:
        self.dpi = dpi
        self.max_points = max_points
        self.figure = Figure(figsize=figsize, dpi=dpi)
        FigureCanvasAgg(self.figure)
        depth, lag, memory = self.axes = self.figure.subplots(1, 3)
        self.figure.subplots_adjust(left=0.045, right=0.99, bottom=0.14, top=0.83, wspace=0.22)
        for ax in self.axes:
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.yaxis.set_major_locator(MaxNLocator(5))
        # Created in the order plots.py adds them, which is the order they are drawn in.
        self._depth = {
            faded: [
                _line(depth, faded, color=color, linewidth=1.2, **_STEPS) for *_, color in _DEPTH
            ]
            for faded in (True, False)
        }
        self._depth_limit = depth.axhline(0, color=_COLORS["queue"], **_LIMIT)
        self._depth_unbounded = depth.plot([], [], color=_COLORS["queue"], linestyle="--")[0]
        self._ecdf_faded = [
            _line(lag, True, color=color, linewidth=1.4, **_STEPS)
            for color in (_COLORS["wait"], _COLORS["latency"])
        ]
        self._ecdf: list[tuple[Line2D, Line2D]] = []
        for color in (_COLORS["wait"], _COLORS["latency"]):
            self._ecdf.append(
                (
                    _line(lag, False, color=color, linewidth=1.4, **_STEPS),
                    _line(lag, False, color=color, linestyle="none", marker="o", markersize=4),
                )
            )
        self._notes = lag.text(
            0.98, 0.3, "", transform=lag.transAxes, ha="right", va="bottom", fontsize="x-small"
        )
        self._memory_faded = _line(memory, True, color=_COLORS["memory"], linewidth=1.4, **_STEPS)
        self._memory = _line(memory, False, color=_COLORS["memory"], linewidth=1.4, **_STEPS)
        self._dead_kept = _line(
            memory, False, color=_COLORS["dead"], linewidth=1.0, linestyle=":", **_STEPS
        )
        self._memory_limit = memory.axhline(0, color=_COLORS["memory"], **_LIMIT)
        self._memory_unbounded = memory.plot([], [], color=_COLORS["memory"], linestyle="--")[0]
        depth.set_xlabel("virtual time (s)")
        depth.set_ylabel("items")
        lag.set_xlabel("seconds since arrival")
        lag.set_ylabel("share of items ≤ x")
        memory.set_xlabel("virtual time (s)")
        depth.set_title("Queue depth")
        lag.set_title("Lag: wait and latency")
        self._legends: dict[int, tuple[Any, ...]] = {}

    def render_png(
        self, result: SimulationResult, compare: SimulationResult | None, title: str
    ) -> bytes:
        """Show ``result`` (and ``compare``, faded) under ``title``; return the PNG bytes."""
        self._update_depth(result, compare)
        self._update_lag(result, compare)
        self._update_memory(result, compare)
        self.figure.suptitle(title, fontsize="medium")
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=self.dpi, pil_kwargs={"compress_level": 1})
        return buffer.getvalue()

    # -- panels ------------------------------------------------------------------------

    def _update_depth(self, result: SimulationResult, compare: SimulationResult | None) -> None:
        ax = self.axes[0]
        for faded, run in ((True, compare), (False, result)):
            for line, (name, _, _) in zip(self._depth[faded], _DEPTH, strict=True):
                values = None if run is None else getattr(run.series, name)
                if values is None or (name == "upstream_backlog" and not values.any()):
                    _hide(line)
                else:
                    _show(line, *_step_data(run, values, self.max_points))
        maxsize = result.scenario.config.queue_maxsize
        if maxsize is not None:
            self._depth_limit.set_ydata([maxsize, maxsize])
            self._depth_limit.set_visible(True)
            self._depth_unbounded.set_visible(False)
            limit, label = self._depth_limit, f"maxsize = {maxsize}"
        else:
            _hide(self._depth_limit)
            self._depth_unbounded.set_visible(True)
            limit, label = self._depth_unbounded, "maxsize = ∞ (unbounded)"
        entries = [
            (line, name)
            for line, (_, name, _) in zip(self._depth[False], _DEPTH, strict=True)
            if line.get_visible()
        ]
        self._rescale(ax, top=None, limit=self._depth_limit)
        self._legend(ax, [*entries, (limit, label)], loc="upper left")

    def _update_lag(self, result: SimulationResult, compare: SimulationResult | None) -> None:
        ax = self.axes[1]
        _hide(*self._ecdf_faded)
        if compare is not None:
            for line, (_, values, _) in zip(
                self._ecdf_faded, _waits_and_latencies(compare), strict=True
            ):
                x, y = _thin(*_ecdf(values), self.max_points)
                if len(x):
                    _show(line, x, y)
        notes, entries = [], []
        for (line, marks), (name, values, _) in zip(
            self._ecdf, _waits_and_latencies(result), strict=True
        ):
            x, y = _thin(*_ecdf(values), self.max_points)
            if not len(x):
                _hide(line, marks)
                continue
            _show(line, x, y)
            q = np.percentile(values, _MARKS)
            _show(marks, q, np.array(_MARKS) / 100)
            notes.append(_percentile_note(name, q))
            entries.append((line, name))
        self._notes.set_text("\n".join(notes))
        self._notes.set_visible(bool(notes))
        self._rescale(ax, top=1.02)
        self._legend(ax, entries, loc="lower right")

    def _update_memory(self, result: SimulationResult, compare: SimulationResult | None) -> None:
        ax = self.axes[2]
        divisor, unit = _memory_scale(result, compare)
        for line, run in ((self._memory_faded, compare), (self._memory, result)):
            if run is None:
                _hide(line)
                continue
            s = run.series
            memory = (s.in_system + s.dead_letters) * run.scenario.item_size_bytes / divisor
            _show(line, *_step_data(run, memory, self.max_points))
        s = result.series
        entries = [(self._memory, "items in memory")]
        if s.dead_letters.any():
            kept = s.dead_letters * result.scenario.item_size_bytes / divisor
            _show(self._dead_kept, *_step_data(result, kept, self.max_points))
            entries.append((self._dead_kept, "of which dead letters kept (not bounded)"))
        else:
            _hide(self._dead_kept)
        bound = memory_bound_bytes(result)
        if bound is not None:
            level = bound / divisor
            self._memory_limit.set_ydata([level, level])
            self._memory_limit.set_visible(True)
            self._memory_unbounded.set_visible(False)
            label = _memory_bound_label(result.scenario.item_size_bytes, bound)
            entries.append((self._memory_limit, label))
        else:
            _hide(self._memory_limit)
            self._memory_unbounded.set_visible(True)
            entries.append((self._memory_unbounded, "no bound (unbounded queue)"))
        ax.set_title(f"Memory (modelled), peak {human_bytes(result.summary['memory_peak_bytes'])}")
        ax.set_ylabel(f"memory ({unit})")
        self._rescale(ax, top=None, limit=self._memory_limit)
        self._legend(ax, entries, loc="upper left")

    # -- axes --------------------------------------------------------------------------

    @staticmethod
    def _rescale(ax: Axes, top: float | None, limit: Line2D | None = None) -> None:
        """Autoscale to the visible lines, then start both axes at 0, as plots.py does.

        A limit line counts only when it lies outside the range the other lines
        give, as ``axhline`` does when added last.
        """
        ax.set_autoscale_on(True)
        shown = limit is not None and limit.get_visible()
        if shown:
            limit.set_visible(False)
        ax.relim(visible_only=True)
        ax.autoscale_view()
        if shown:
            limit.set_visible(True)
            level = limit.get_ydata()[0]
            low, high = ax.get_ybound()
            if level < low or level > high:
                ax.relim(visible_only=True)
                ax.autoscale_view(scalex=False)
        if top is None:
            ax.set_ylim(bottom=0)
        else:
            ax.set_ylim(0, top)
        ax.set_xlim(left=0)

    def _legend(self, ax: Axes, entries: list[tuple[Any, str]], loc: str) -> None:
        """The axes' legend for ``entries``, rebuilt only when they change."""
        key = tuple((id(handle), label) for handle, label in entries)
        index = list(self.axes).index(ax)
        if self._legends.get(index) == key:
            return
        self._legends.pop(index, None)
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
        if entries:
            handles, labels = zip(*entries, strict=True)
            ax.legend(handles, labels, loc=loc, fontsize="small")
        self._legends[index] = key
