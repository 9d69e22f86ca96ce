"""``LiveRunWidget``: start and stop a real-time run from a notebook, and watch it.

The focused widgets re-simulate; this one runs the pipeline for real, on the
kernel's own event loop: **Start** builds a pipeline and a paced source from
the controls and runs them under :func:`~pipeline.viz.live.monitor_run` (the
figure redraws while it runs, the previous run faded behind); **Stop** calls
``pipe.stop()``, so intake closes and the run drains. The summary shows the
run's headline numbers beside the previous run's. It uses the focused widgets'
DOM classes, so the same browser test drives it.

:func:`approval_widget` is notebook 07's: the approval workload at a rate
relative to what one core can score.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from ..figures.png import displayed_size, figure_png, png_display_data
from .focused import FIGURE_CLASS, ROOT_CLASS, SUMMARY_CLASS
from .shown import ShowsWidget

__all__ = ["LiveRunWidget"]

Start = Callable[[dict[str, Any]], tuple[Any, Any]]


class LiveRunWidget(ShowsWidget):
    """Start/Stop buttons around a live, monitored run.

    Args:
        controls: name -> ipywidget; their values are passed to ``start``.
        start: ``settings -> (pipeline, source)``: a fresh :class:`~pipeline.Pipeline`
            and what its ``run`` takes (a paced async iterable, say).
        every_s: seconds between samples and redraws.
        title: the figure's title.

    Attributes:
        widget: the root ``VBox`` (DOM class ``pipeline-widget``).
        start_button, stop_button: the buttons.
        figure, summary: the ``Output`` with the live figure and the ``HTML`` summary.
        last_report, last_samples: the latest finished run's report and samples.
        previous_samples: the run before it (drawn faded).
        task: the running task, or None.
        error: the last failed run's message, or None.

    Raises:
        TypeError: ``start`` is not callable, or a control has no ``value``.
    """

    def __init__(
        self,
        controls: Mapping[str, widgets.Widget],
        start: Start,
        *,
        every_s: float = 0.25,
        title: str = "Live run",
    ) -> None:
        if not callable(start):
            raise TypeError(f"start must be callable, got {start!r}")
        for name, control in controls.items():
            if not hasattr(control, "value"):
                raise TypeError(f"control {name!r} must have a value, got {control!r}")
        self.controls = dict(controls)
        self._start = start
        self.every_s = every_s
        self.title = title
        self.last_report: Any = None
        self.last_samples: Any = None
        self.previous_samples: Any = None
        self._previous_summary: dict[str, Any] = {}
        self.task: asyncio.Task[Any] | None = None
        self.error: str | None = None
        self._pipe: Any = None
        self.start_button = widgets.Button(description="Start", button_style="success", icon="play")
        self.stop_button = widgets.Button(description="Stop", icon="stop", disabled=True)
        self.start_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop())
        self.figure = widgets.Output()
        self.figure.add_class(FIGURE_CLASS)
        self.summary = widgets.HTML("<div>Press <b>Start</b> for a live run.</div>")
        self.summary.add_class(SUMMARY_CLASS)
        row = widgets.HBox(
            [*self.controls.values(), self.start_button, self.stop_button],
            layout={"flex_flow": "row wrap"},
        )
        self.widget = widgets.VBox([row, self.figure, self.summary])
        self.widget.add_class(ROOT_CLASS)
        self._show([])

    @property
    def settings(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.controls.items()}

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def _show(self, samples: Any) -> None:
        from ..live import live_figure

        figure = live_figure(samples, title=self.title, compare=self.previous_samples)
        png = figure_png(figure, scale=1)
        self.figure.outputs = (png_display_data(png, displayed_size(figure), "<live figure>"),)

    def start(self) -> asyncio.Task[Any] | None:
        """Start a run on the running loop (the kernel's); None if one is running already."""
        if self.running:
            return None
        try:
            loop = asyncio.get_running_loop()
            self._pipe, source = self._start(self.settings)
        except Exception as exc:  # a bad setting must not break the widget
            self.error = f"{type(exc).__name__}: {exc}"
            self.summary.value = f"<div style='color:#b00'>{html.escape(self.error)}</div>"
            return None
        self.error = None
        self.start_button.disabled, self.stop_button.disabled = True, False
        self.summary.value = "<div>Running... press <b>Stop</b> to stop intake and drain.</div>"
        self.task = loop.create_task(self._run(self._pipe, source))
        return self.task

    def stop(self) -> None:
        """Stop intake of the running pipeline (it drains); harmless when idle."""
        if self.running and self._pipe is not None:
            self._pipe.stop()

    async def _run(self, pipe: Any, source: Any) -> None:
        from ..live import live_summary, monitor_run

        try:
            report, samples = await monitor_run(
                pipe,
                source,
                every_s=self.every_s,
                output=self.figure,
                title=self.title,
                compare=self.previous_samples,
            )
        except Exception as exc:  # reported in the widget; the kernel carries on
            self.error = f"{type(exc).__name__}: {exc}"
            self.summary.value = f"<div style='color:#b00'>{html.escape(self.error)}</div>"
        else:
            self.previous_samples, self.last_samples = self.last_samples, samples
            self.last_report = report
            self.summary.value = self._summary_html(live_summary(report, samples))
        finally:
            self.start_button.disabled, self.stop_button.disabled = False, True

    def _summary_html(self, s: dict[str, Any]) -> str:
        rows = [
            ("offered", f"{s['items_offered']}"),
            ("completed", f"{s['items_completed']}"),
            ("dead-lettered", f"{s['items_dead_lettered']}"),
            ("unfinished", f"{s['items_unfinished']}"),
            ("peak queue", f"{s['queue_depth_max']}"),
            ("producer blocked", f"{s['producer_blocked_s']:.2f} s"),
            ("run took", f"{s['sim_time_s']:.2f} s"),
        ]
        before, self._previous_summary = self._previous_summary, dict(rows)
        cells = "".join(
            f"<td style='padding:0 14px 0 0;vertical-align:top'>{html.escape(k)}<br>"
            f"<b>{html.escape(v)}</b>"
            + (
                f"<br><span style='color:#777'>was {html.escape(before[k])}</span>"
                if k in before and before[k] != v
                else ""
            )
            + "</td>"
            for k, v in rows
        )
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        head = f"<div style='color:#555'>{html.escape(settings)}</div>"
        return f"<div>{head}<table><tr>{cells}</tr></table></div>"

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<LiveRunWidget {self.settings} {state}>"
