"""The explorer's figure: depth, lag and memory, kept and updated in place.

:class:`ExplorerFigure` holds one figure with three
:mod:`~pipeline.viz.figures.panels` -- the same panels :func:`~pipeline.viz.figures.run.plot_depth`,
:func:`~pipeline.viz.figures.run.plot_lag` (its distribution) and
:func:`~pipeline.viz.figures.run.plot_memory` draw once -- and redraws them for each
run, so a change costs little more than rasterising the figure.

The PNG is rendered at ``scale`` times the figure's dpi and displayed at its
nominal size (JupyterLab honours an image's ``width`` metadata), which keeps it
sharp on high-density ("retina") screens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..figures.panels import DepthPanel, LagPanel, MemoryPanel, pin_title_and_xlabel
from ..figures.png import displayed_size, figure_png
from ..figures.textcache import TextCachingCanvas

if TYPE_CHECKING:
    from pipeline.sim.running.result import SimulationResult

__all__ = ["ExplorerFigure", "layout_explorer_axes"]

#: Margins (figure fractions) that leave room for the title above and the legends below.
_MARGINS = {"left": 0.055, "right": 0.985, "bottom": 0.33, "top": 0.86, "wspace": 0.25}


def layout_explorer_axes(figure: Figure):
    """Three axes side by side, laid out as the explorer lays them out; returns them."""
    axes = figure.subplots(1, 3)
    figure.subplots_adjust(**_MARGINS)
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.yaxis.set_major_locator(MaxNLocator(5))
        pin_title_and_xlabel(ax)
    return axes


class ExplorerFigure:
    """One figure, three panels, redrawn by updating their artists.

    Args:
        figsize: inches.
        dpi: dots per inch of the figure as displayed (CSS pixels per inch).
        max_points: steps per line drawn as is (longer series: a min-max band and the mean).
        scale: the PNG holds ``scale`` device pixels per displayed pixel (2 for
            retina screens; 1 for a plain PNG).
    """

    def __init__(
        self, figsize: tuple[float, float], dpi: int, max_points: int, scale: float = 1.0
    ) -> None:
        self.dpi = dpi
        self.scale = scale
        self.max_points = max_points
        self.figure = Figure(figsize=figsize, dpi=dpi)
        TextCachingCanvas(self.figure)  # redraws reuse the text rasterised before
        self.axes = layout_explorer_axes(self.figure)
        depth, lag, memory = self.axes
        self.depth = DepthPanel(depth, max_points=max_points)
        self.lag = LagPanel(lag, max_points=max_points)
        self.memory = MemoryPanel(memory, max_points=max_points)
        depth.set_title("Queue depth")
        lag.set_title("Lag: wait and latency")

    @property
    def size_px(self) -> tuple[int, int]:
        """(width, height) of the figure as displayed, CSS pixels."""
        return displayed_size(self.figure)

    def render_png(
        self, result: SimulationResult, compare: SimulationResult | None, title: str
    ) -> bytes:
        """Show ``result`` (and ``compare``, faded) under ``title``; return the PNG bytes."""
        self.depth.draw(result, compare)
        self.lag.draw(result, compare)
        self.memory.draw(result, compare)
        self.figure.suptitle(title, fontsize="medium")
        return figure_png(self.figure, self.scale)
