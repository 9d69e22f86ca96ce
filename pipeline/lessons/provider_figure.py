"""Notebook 06's widget figure: calls in flight against a provider, and the batch's progress.

:class:`ProviderPanels` draws two panels of one run of an LLM batch against a
provider (``Overload(limit) | TokenQuota(...)``), with a previous run faded:

- left, calls in flight over virtual time against the provider's in-flight
  limit (a refused call counts while it is being refused);
- right, completed and dead-lettered prompts over virtual time, out of the batch.

It makes its artists on the first :meth:`~ProviderPanels.draw` and afterwards
only sets their data and the axes' limits, so a widget that keeps its axes
(``FocusedWidget(clear_axes=False)``) does not rebuild ticks, titles and
legends on every change: most of what a redraw costs besides rasterising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.ticker import MaxNLocator

from ..viz.figures.panels import legend_below
from ..viz.figures.series import step_band, step_data, thinned_label
from ..viz.figures.style import COLORS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

    from pipeline.sim.running.result import SimulationResult

__all__ = ["ProviderPanels", "provider_limit"]

_FADED = {"alpha": 0.3}
#: Points per step line: enough for a 550-pixel-wide panel.
_POINTS = 600
_EMPTY = np.empty(0)


def provider_limit(result: SimulationResult) -> int | None:
    """The in-flight limit of the run's provider model (its first model's), or None."""
    models = getattr(result.scenario.failures, "models", ())
    return getattr(models[0], "limit", None) if models else None


class ProviderPanels:
    """Calls in flight against the limit (left) and the batch's progress (right), redrawn in place.

    Args:
        batch_size: prompts in the batch, the height of the right panel (items).
    """

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._axes: tuple[Axes, Axes] | None = None
        # (faded, current) lines: calls in flight, completed, dead-lettered; and for each
        # line the min-max band a thinned series draws behind its bucket means.
        self._lines: dict[str, tuple[Line2D, Line2D]] = {}
        self._bands: dict[Line2D, Any] = {}
        self._labels: dict[str, str] = {}
        self._limit_line: Line2D | None = None

    def _build(self, axes: Sequence[Axes]) -> None:
        left, right = axes[0], axes[1]
        for name, ax, color, label in (
            ("in_flight", left, COLORS["in_flight"], "calls in flight"),
            ("completed", right, "C0", "completed"),
            ("dead", right, COLORS["dead"], "dead-lettered"),
        ):
            (faded,) = ax.plot(_EMPTY, _EMPTY, drawstyle="steps-post", color=color, **_FADED)
            (current,) = ax.plot(_EMPTY, _EMPTY, drawstyle="steps-post", color=color, label=label)
            self._lines[name] = (faded, current)
            self._labels[name] = label
            for line in (faded, current):
                self._bands[line] = ax.fill_between(
                    [0.0, 1.0], [0.0, 0.0], [0.0, 0.0], step="post", color=color, linewidth=0,
                    alpha=0.25 * (line.get_alpha() or 1.0), visible=False,
                )  # fmt: skip
        self._limit_line = left.axhline(0, color="gray", ls="--", lw=1, label="provider's limit")
        left.set(
            xlabel="virtual time (s)",
            ylabel="calls",
            title="Calls in flight: a refused call counts too",
        )
        right.set(
            xlabel="virtual time (s)",
            ylabel="items (cumulative)",
            title=f"{self.batch_size} prompts: done or given up",
        )
        for ax in (left, right):
            # Five ticks at most: readable, and fewer labels to rasterise on each change.
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.yaxis.set_major_locator(MaxNLocator(5))
            legend_below(ax, ncols=3)
        self._axes = (left, right)

    def draw(
        self,
        axes: Sequence[Axes],
        result: SimulationResult,
        previous: SimulationResult | None = None,
    ) -> None:
        """Show ``result`` (and ``previous``, faded, which never sets the axes) on ``axes[:2]``."""
        if self._axes is None or self._axes[0] is not axes[0] or self._axes[1] is not axes[1]:
            self._lines.clear()
            self._bands.clear()
            self._build(axes)
        labels = []
        for name in self._lines:
            faded, current = self._lines[name]
            for line, run in ((faded, previous), (current, result)):
                band = self._bands[line]
                if run is None:
                    line.set_visible(False)
                    band.set_visible(False)
                    continue
                values = self._values(run, name)
                line.set_data(*step_data(run, values, _POINTS))
                line.set_visible(True)
                found = step_band(run, values, _POINTS)  # a long run: means, and min-max behind
                band.set_visible(found is not None)
                if found is not None:
                    band.set_data(*found[:3])
                if line is current:
                    label = self._labels[name]
                    labels.append(label if found is None else thinned_label(label, found[3]))
        for ax, names in ((axes[0], labels[:1]), (axes[1], labels[1:])):
            legend = ax.get_legend()
            if legend is not None:  # the legend's line entries come first, in build order
                for text, label in zip(legend.get_texts(), names, strict=False):
                    text.set_text(label)
        limit = provider_limit(result)
        limit_line = self._limit_line
        if limit_line is not None:
            limit_line.set_visible(limit is not None)
            limit_line.set_ydata([limit or 0, limit or 0])
        left, right = axes[0], axes[1]
        end = result.series.end_s if result.series.end_s > 0 else 1.0
        top = max(float(result.series.in_flight.max(initial=0)), limit or 0)
        left.set(xlim=(0, end), ylim=(0, top * 1.1 + 1))
        right.set(xlim=(0, end), ylim=(0, self.batch_size * 1.05))

    @staticmethod
    def _values(run: SimulationResult, name: str) -> Any:
        series = run.series
        return {
            "in_flight": series.in_flight,
            "completed": series.completed,
            "dead": series.dead_letters,
        }[name]
