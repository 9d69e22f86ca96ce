"""``FocusedWidget``: a few controls, one re-simulation, one figure -- the notebooks' small widgets.

The explorer (:mod:`~pipeline.viz.widgets.explorer`) puts every knob on one panel; a
lesson needs only the knobs its question has. A :class:`FocusedWidget` owns
what every such widget needs, so a notebook's widget is a few lines:

- the controls (any ipywidgets with a ``value``), laid out in a row;
- the update: on a change, ``run(settings)`` re-simulates, and
  ``draw(axes, result, previous)`` draws the new result with the previous one
  faded (the widget keeps it), into one kept figure whose axes are cleared;
- the figure as a PNG in an ``Output`` (sharp on retina screens, at the width
  of a cell), and a summary of ``summarise(result)`` beside the previous
  run's values;
- a debounce: in a running kernel, a burst of changes (keys held down)
  triggers one update, after ``debounce_s`` of quiet;
- errors shown in the summary, never raised into the kernel.

Example (a notebook cell)::

    controls = {"concurrency": IntSlider(4, min=1, max=16, description="concurrency")}
    FocusedWidget(controls, run=lambda s: simulate(base.replace(**s)),
                  draw=lambda axes, r, prev: plot_depth(r, axes[0], compare=prev),
                  summarise=lambda r: [("p95 latency", f"{r.summary['latency_p95_s']:.3g} s")])
"""

from __future__ import annotations

import asyncio
import html
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from ...sim.running.kernel.driver import LOAD_AFTER_ITEMS, anticipate
from ..figures.panels import pin_title_and_xlabel
from ..figures.png import RETINA_SCALE, displayed_size, figure_png, png_display_data
from ..figures.textcache import TextCachingCanvas
from .shown import ShowsWidget, error_html

__all__ = ["FIGURE_CLASS", "ROOT_CLASS", "SUMMARY_CLASS", "FocusedWidget", "slider"]

#: DOM classes the browser test and notebooks' CSS rely on.
ROOT_CLASS = "pipeline-widget"
FIGURE_CLASS = "pipeline-widget-figure"
SUMMARY_CLASS = "pipeline-widget-summary"

_STYLE = {"description_width": "initial"}
#: Room for titles above and legends below the panels (figure fractions at 3.8 inches).
_MARGINS = {"left": 0.07, "right": 0.98, "bottom": 0.34, "top": 0.86, "wspace": 0.28}

Draw = Callable[[Sequence[Any], Any, Any], None]
Summarise = Callable[[Any], Sequence[tuple[str, str]]]


def slider(description: str, value: float, low: float, high: float, step: float = 1, **kw: Any):
    """A slider that updates on release, with a readable label (an int slider for int steps).

    Args:
        description: the label, usually the parameter's name and unit.
        value, low, high, step: as ipywidgets' sliders take them.
        **kw: more slider keywords (``readout_format`` ...).
    """
    common = {"continuous_update": False, "style": _STYLE, "description": description, **kw}
    if all(float(v).is_integer() for v in (value, low, high, step)):
        return widgets.IntSlider(
            value=int(value), min=int(low), max=int(high), step=int(step), **common
        )
    return widgets.FloatSlider(value=value, min=low, max=high, step=step, **common)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class FocusedWidget(ShowsWidget):
    """A small what-if widget: controls -> ``run`` -> ``draw``, previous run faded.

    Args:
        controls: name -> ipywidget (anything with a ``value``); the names are
            the keys of the ``settings`` dict that ``run`` receives.
        run: ``settings -> result``; re-simulates (use modest item counts and the
            exact kernel so that a change redraws within about 150 ms).
        draw: ``(axes, result, previous)`` draws ``result`` into the list of
            ``panels`` axes, with ``previous`` (None at first) faded. The axes are
            cleared before each call; the figure is kept.
        summarise: ``result -> [(label, text), ...]``, the numbers shown under
            the figure; each comes with the previous run's value when it differs.
        panels: number of axes, side by side.
        figsize: inches at ``dpi``; the default is about a JupyterLab cell's width.
        dpi: dots per inch as displayed (the PNG holds twice as many, for retina screens).
        debounce_s: in a running kernel, wait this long for more changes before
            updating (0 updates at every change).
        title: prefix of the figure's title (the settings follow).
        clear_axes: clear the axes before each ``draw`` (default). False keeps
            them: ``draw`` then updates the artists it made on its first call
            (a panel redrawn in place), which spares rebuilding every tick.
        keep_runs: how many runs to keep by their settings (the most recently
            used), so that going back to a setting redraws without re-running;
            0 (default) re-runs every time. Only for a deterministic ``run``
            (a seeded simulation): a kept run then is the run.

    Attributes:
        widget: the root ``VBox`` (DOM class ``pipeline-widget``).
        figure: the ``Output`` holding the PNG (class ``pipeline-widget-figure``).
        summary: the ``HTML`` summary (class ``pipeline-widget-summary``).
        last_result, previous_result: the latest run and the one before it.
        timings_s: seconds from each update's start to its new figure.
        last_breakdown: the last update's seconds: ``run_s`` and ``render_s``
            (clearing, drawing, the PNG and the summary).
        error: the message of the last failed update, or None.

    Raises:
        TypeError: a control has no ``value``, or ``run``/``draw`` is not callable.
        ValueError: no controls, ``panels`` < 1, ``keep_runs`` < 0, or a negative or
            non-finite ``debounce_s``.
    """

    def __init__(
        self,
        controls: Mapping[str, widgets.Widget],
        run: Callable[[dict[str, Any]], Any],
        draw: Draw,
        *,
        summarise: Summarise | None = None,
        panels: int = 2,
        figsize: tuple[float, float] = (11.5, 3.8),
        dpi: int = 100,
        debounce_s: float = 0.1,
        title: str = "",
        clear_axes: bool = True,
        keep_runs: int = 0,
    ) -> None:
        if not controls:
            raise ValueError("controls must name at least one widget, got none")
        for name, control in controls.items():
            if not hasattr(control, "value"):
                raise TypeError(f"control {name!r} must have a value, got {control!r}")
        for name, function in (("run", run), ("draw", draw)):
            if not callable(function):
                raise TypeError(f"{name} must be callable, got {function!r}")
        if isinstance(panels, bool) or not isinstance(panels, int) or panels < 1:
            raise ValueError(f"panels must be an int >= 1, got {panels!r}")
        if not (
            isinstance(debounce_s, int | float) and math.isfinite(debounce_s) and debounce_s >= 0
        ):
            raise ValueError(f"debounce_s must be a number of seconds >= 0, got {debounce_s!r}")
        if isinstance(keep_runs, bool) or not isinstance(keep_runs, int) or keep_runs < 0:
            raise ValueError(f"keep_runs must be an int >= 0 (runs kept), got {keep_runs!r}")
        self.controls = dict(controls)
        self._run, self._draw, self._summarise = run, draw, summarise
        self.debounce_s = float(debounce_s)
        self.title = title
        self.clear_axes = bool(clear_axes)
        self.keep_runs = keep_runs
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()
        self.last_result: Any = None
        self.previous_result: Any = None
        self.timings_s: list[float] = []
        self.error: str | None = None
        self.last_breakdown: dict[str, float] = {}
        self._pending: asyncio.TimerHandle | None = None
        self._figure = Figure(figsize=figsize, dpi=dpi)
        TextCachingCanvas(self._figure)  # redraws reuse the text rasterised before
        self.axes = list(self._figure.subplots(1, panels, squeeze=False).ravel())
        self._figure.subplots_adjust(**_MARGINS)
        self.figure = widgets.Output()
        self.figure.add_class(FIGURE_CLASS)
        self.summary = widgets.HTML()
        self.summary.add_class(SUMMARY_CLASS)
        row = widgets.HBox(list(self.controls.values()), layout={"flex_flow": "row wrap"})
        self.widget = widgets.VBox([row, self.figure, self.summary])
        self.widget.add_class(ROOT_CLASS)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        # Every change re-runs: if ``run`` simulates on the kernel's event path, a session
        # of changes is the many runs its compiled form (numba, when installed) waits for.
        anticipate(LOAD_AFTER_ITEMS)
        self.update()

    @property
    def settings(self) -> dict[str, Any]:
        """The controls' current values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    @property
    def summary_html(self) -> str:
        """The summary widget's HTML."""
        return self.summary.value

    def _on_change(self, change: dict[str, Any]) -> None:
        loop = _running_loop()
        if loop is None or self.debounce_s == 0:
            self.update()
            return
        # Coalesce a burst of changes (a key held down) into one update after it.
        if self._pending is not None:
            self._pending.cancel()
        self._pending = loop.call_later(self.debounce_s, self._update_pending)

    def _update_pending(self) -> None:
        self._pending = None
        self.update()

    def update(self) -> float:
        """Re-run with the current settings and redraw; returns the seconds it took."""
        began = time.perf_counter()
        settings = self.settings
        try:
            result = self._result(settings)
            ran = time.perf_counter()
            for ax in self.axes:
                if self.clear_axes:
                    ax.clear()
                pin_title_and_xlabel(ax)
            self._draw(self.axes, result, self.last_result)
            self._figure.suptitle(self._title_text(settings), fontsize="medium")
            png = figure_png(self._figure, RETINA_SCALE)
        except Exception as exc:  # a bad combination must not break the widget
            self.error = f"{type(exc).__name__}: {exc}"
            self.summary.value = self._error_html(settings, self.error)
            return time.perf_counter() - began
        self.error = None
        self.previous_result, self.last_result = self.last_result, result
        text = f"<figure: {self._settings_text(settings)}>"
        self.figure.outputs = (png_display_data(png, displayed_size(self._figure), text),)
        self.summary.value = self._summary_html(settings)
        elapsed = time.perf_counter() - began
        self.timings_s.append(elapsed)
        self.last_breakdown = {"run_s": ran - began, "render_s": elapsed - (ran - began)}
        return elapsed

    def _result(self, settings: dict[str, Any]) -> Any:
        """``run(settings)``, or the kept run for these settings (see ``keep_runs``)."""
        if not self.keep_runs:
            return self._run(settings)
        key = tuple(settings.items())
        try:
            result = self._kept.pop(key)
        except KeyError:
            result = self._run(settings)
        except TypeError:  # a control's value cannot be a key: nothing to keep
            return self._run(settings)
        self._kept[key] = result  # the most recently used last
        while len(self._kept) > self.keep_runs:
            self._kept.popitem(last=False)
        return result

    # -- text -------------------------------------------------------------------------

    @staticmethod
    def _settings_text(settings: Mapping[str, Any]) -> str:
        def show(value: Any) -> str:
            if isinstance(value, float):
                return f"{value:.3g}"
            return "None" if value is None else str(value)

        return ", ".join(f"{name}={show(value)}" for name, value in settings.items())

    def _title_text(self, settings: Mapping[str, Any]) -> str:
        faded = "   (faded: previous run)" if self.last_result is not None else ""
        prefix = f"{self.title}: " if self.title else ""
        return f"{prefix}{self._settings_text(settings)}{faded}"

    def _rows(self, result: Any) -> list[tuple[str, str]]:
        if self._summarise is None or result is None:
            return []
        try:
            return [(str(label), str(text)) for label, text in self._summarise(result)]
        except Exception as exc:  # a summary problem must not hide the figure
            return [("summary failed", f"{type(exc).__name__}: {exc}")]

    def _summary_html(self, settings: Mapping[str, Any]) -> str:
        before = dict(self._rows(self.previous_result))
        cells = []
        for label, text in self._rows(self.last_result):
            was = before.get(label)
            note = (
                f"<br><span style='color:#777'>was {html.escape(was)}</span>"
                if was is not None and was != text
                else ""
            )
            cells.append(
                f"<td style='padding:0 14px 0 0;vertical-align:top'>{html.escape(label)}<br>"
                f"<b>{html.escape(text)}</b>{note}</td>"
            )
        return (
            f"<div><div style='color:#555'>{html.escape(self._settings_text(settings))}</div>"
            f"<table><tr>{''.join(cells)}</tr></table></div>"
        )

    def _error_html(self, settings: Mapping[str, Any], message: str) -> str:
        return error_html(self._settings_text(settings), "run", message)

    # -- display ----------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<FocusedWidget {self._settings_text(self.settings)} updates={len(self.timings_s)}>"
