"""``explore_stages``: a concurrency and a queue-size slider for each stage of a chain.

Every change re-simulates the chain and redraws :func:`~pipeline.viz.plot_stages`
with the previous run faded behind, above one line per stage and the
bottleneck finding in words. The figure is drawn inline into an ``Output``
widget (``clear_output(wait=True)`` then ``display``), which works in
JupyterLab, in nbval and in a script alike.

Example:
    >>> from pipeline.viz import explore_stages
    >>> explore_stages(chain_scenario)      # in a notebook cell: the panel appears
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from pipeline.sim import Scenario, diagnose, simulate

from ..figures.stages import plot_stages
from .shown import ShowsWidget

__all__ = ["StageExplorer", "explore_stages"]

_STYLE = {"description_width": "initial"}
_CONCURRENCY_MAX = 64
_MAXSIZE_MAX = 1000


class StageExplorer(ShowsWidget):
    """Sliders for each stage's ``concurrency`` and ``queue_maxsize``; redraws on change.

    Attributes:
        scenario: the chain as the sliders set it now.
        result: the latest run; ``previous`` the one before (drawn faded).
        controls: by stage name, its ``concurrency`` and ``queue_maxsize`` sliders.
        figure: the ``Output`` widget holding the figure.
        summary: an ``HTML`` widget: the run's end-to-end numbers and its bottleneck.
    """

    def __init__(self, scenario: Scenario) -> None:
        if not isinstance(scenario, Scenario) or scenario.stages is None:
            raise TypeError(f"scenario must be a chain (Scenario(stages=[...])), got {scenario!r}")
        self.scenario = scenario
        self.result: Any = None
        self.previous: Any = None
        self.controls: dict[str, dict[str, widgets.IntSlider]] = {}
        # An unbounded queue shows as the slider's top value and stays unbounded there.
        self._unbounded = {
            stage.name for stage in scenario.stages if stage.config.queue_maxsize is None
        }
        rows = []
        for stage in scenario.stages:
            config = stage.config
            maxsize = config.queue_maxsize
            sliders = {
                "concurrency": widgets.IntSlider(
                    value=config.concurrency,
                    min=1,
                    max=max(_CONCURRENCY_MAX, config.concurrency),
                    description=f"{stage.name}: concurrency",
                    style=_STYLE,
                    continuous_update=False,
                ),
                "queue_maxsize": widgets.IntSlider(
                    value=maxsize if maxsize is not None else _MAXSIZE_MAX,
                    min=1,
                    max=max(_MAXSIZE_MAX, maxsize or 0),
                    description=f"{stage.name}: queue_maxsize",
                    style=_STYLE,
                    continuous_update=False,
                ),
            }
            for slider in sliders.values():
                slider.observe(self._on_change, names="value")
            self.controls[stage.name] = sliders
            rows.append(widgets.HBox(list(sliders.values())))
        self.figure = widgets.Output()
        self.summary = widgets.HTML()
        self.panel = widgets.VBox([*rows, self.summary, self.figure])
        # The focused widgets' DOM classes: the browser test finds and drives it as one of them.
        self.panel.add_class("pipeline-widget")
        self.summary.add_class("pipeline-widget-summary")
        self.figure.add_class("pipeline-widget-figure")
        self.update()

    def _on_change(self, change: dict[str, Any]) -> None:
        self.update()

    def settings(self) -> dict[str, int | None]:
        """The sliders' values as ``Scenario.replace`` keywords (``"write.concurrency"``).

        A queue that started unbounded stays unbounded (None) while its slider is at the top.
        """
        values: dict[str, int | None] = {}
        for name, sliders in self.controls.items():
            for field, slider in sliders.items():
                top = field == "queue_maxsize" and slider.value == slider.max
                values[f"{name}.{field}"] = (
                    None if top and name in self._unbounded else slider.value
                )
        return values

    def update(self) -> None:
        """Re-simulate with the sliders' values and redraw (the last run faded behind)."""
        from IPython.display import display

        self.scenario = self.scenario.replace(**self.settings())
        self.previous, self.result = self.result, simulate(self.scenario)
        self.summary.value = self._summary_html()
        fig = plot_stages(self.result, compare=self.previous, figsize=(11, 6))
        with self.figure:
            self.figure.clear_output(wait=True)
            display(fig)

    def _summary_html(self) -> str:
        s = self.result.summary
        finding = next((f for f in diagnose(self.result) if f.code == "BOTTLENECK"), None)
        escape = lambda text: html.escape(text, quote=False)  # noqa: E731
        words = f"<b>{escape(finding.title)}.</b> {escape(finding.fix)}" if finding else ""
        return (
            f"<p>{s['items_completed']:,} completed in {s['sim_time_s']:.1f} s of virtual "
            f"time; end-to-end p95 latency {s['latency_p95_s']:.2f} s; at most "
            f"{s['items_held_max']:,} items held in memory.</p><p>{words}</p>"
        )

    @property
    def widget(self) -> widgets.VBox:
        """The root widget (``panel``), as every explorer names it."""
        return self.panel


def explore_stages(scenario: Scenario) -> StageExplorer:
    """A :class:`StageExplorer` for ``scenario`` (a chain); display it in a notebook cell."""
    return StageExplorer(scenario)
