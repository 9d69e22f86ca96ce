"""``Explorer``: sliders for a simulated pipeline, redrawn on every change.

``explore()`` builds an ipywidgets panel: the pipeline's knobs (``maxsize``,
``concurrency``, ``max_attempts``, ``on_full``) and the workload's (arrival
rate, service time and its variability, failure rate, backoff). Every change
re-simulates a few thousand items on the virtual clock and redraws queue
depth, lag and memory in one figure, with the previous run faded behind it,
plus a summary of the key numbers and the diagnostics in words.

The figure is rendered to PNG once per change and placed in an ``Output``
widget as ``image/png`` display data, which the browser shows as an ``<img>``
with a ``data:`` URL; no pyplot figure stays open. One figure is kept and its
artists are updated in place (:mod:`~pipeline.viz.widgets.explorer_figure`), so a
change costs a simulation and one rasterisation.

Example:
    >>> from pipeline.viz import explore
    >>> explore()          # in a notebook cell: the panel appears
"""

from __future__ import annotations

import html
import math
import time
import warnings
from typing import Any

import ipywidgets as widgets

from pipeline.config import PipelineConfig
from pipeline.retry import Backoff
from pipeline.sim import (
    Constant,
    DrainTimeoutWarning,
    Exponential,
    Gamma,
    IndependentFailures,
    LogNormal,
    NoFailures,
    Poisson,
    Scenario,
    diagnose,
    simulate,
)

from ..._units import METRIC_LABELS, human_bytes
from ...sim.running.kernel.driver import LOAD_AFTER_ITEMS, anticipate
from ..figures.png import RETINA_SCALE, png_display_data
from .explorer_figure import ExplorerFigure
from .shown import ShowsWidget, error_html

__all__ = ["Explorer", "explore"]

#: DOM classes the browser tests and notebooks' CSS rely on.
ROOT_CLASS = "pipeline-explorer"
FIGURE_CLASS = "pipeline-explorer-figure"
SUMMARY_CLASS = "pipeline-explorer-summary"

_STYLE = {"description_width": "initial"}
# Every slider the same width, whatever its label: with a label of its own width and no
# width of its own, a long label squashed its track to a few pixels. A column is one
# slider wide, and the columns wrap below each other when the notebook is narrow.
# (Layouts are widgets: each control gets its own, never one shared by every explorer.)
_SLIDER = {"width": "320px"}
_COLUMN = {"margin": "0 18px 0 0"}
_ROWS = {"flex_flow": "row wrap", "align_items": "flex-start"}
_MAXSIZE_RANGE = (10, 5000)
#: Inches at _DPI: 1150 x 440 CSS pixels, about the width of a JupyterLab cell.
_FIGSIZE = (11.5, 4.4)
_DPI = 100
#: Points per step line in the explorer: enough for a 1000-pixel-wide axes.
_MAX_POINTS = 800


def _default_scenario() -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=100, max_attempts=3),
        n_items=5000,
        seed=1,
    )


_SERVICE_FAMILIES = (Exponential, LogNormal, Gamma, Constant)


def _service(mean: float, cv: float, family: type = LogNormal):
    """Constant if cv == 0, exponential if cv == 1, else ``family`` (log-normal) with that cv."""
    if cv <= 0:
        return Constant(mean)
    if math.isclose(cv, 1.0):
        return Exponential(mean)
    if family is Gamma:
        return Gamma(mean=mean, cv=cv)
    return LogNormal(mean=mean, cv=cv)


class Explorer(ShowsWidget):
    """An interactive what-if panel over one scenario.

    Attributes:
        widget: the root ``VBox`` (DOM class ``pipeline-explorer``).
        controls: name -> widget, for every control (``maxsize``, ``unbounded``,
            ``concurrency``, ``max_attempts``, ``drain_timeout_s``, ``on_full``, ``arrival_rate``,
            ``service_mean_s``, ``service_cv``, ``failure_rate``, ``backoff_base_s``).
        figure: the ``Output`` widget holding the PNG (class ``pipeline-explorer-figure``).
        summary: the ``HTML`` widget with numbers and diagnostics
            (class ``pipeline-explorer-summary``).
        last_result, previous_result: the latest run and the one before it
            (drawn faded), or None.
        last_png: the latest figure's PNG bytes.
        timings_s: seconds from each change to its new figure (the first entry is
            the initial draw).
        last_breakdown: the last update's seconds: ``simulate_s``, ``render_s``
            (figure, PNG and summary), ``total_s``.
        error: the message of the last failed update, or None.
    """

    def __init__(
        self, scenario: Scenario | None = None, *, n_items: int = 5000, seed: int = 1
    ) -> None:
        base = scenario if scenario is not None else _default_scenario()
        self.base = base.replace(n_items=n_items, duration_s=None, seed=seed)
        self.last_result = None
        self.previous_result = None
        self.last_png: bytes | None = None
        self.timings_s: list[float] = []
        self.last_breakdown: dict[str, float] = {}
        self.error: str | None = None
        self._figure: ExplorerFigure | None = None
        self.controls = self._build_controls(self.base)
        self.figure = widgets.Output()
        self.figure.add_class(FIGURE_CLASS)
        self.summary = widgets.HTML()
        self.summary.add_class(SUMMARY_CLASS)
        c = self.controls
        rows = widgets.HBox(
            [
                widgets.VBox(
                    [
                        widgets.HTML("<b>pipeline</b>"),
                        c["maxsize"],
                        c["unbounded"],
                        c["concurrency"],
                        c["max_attempts"],
                        c["drain_timeout_s"],
                        c["on_full"],
                    ],
                    layout=widgets.Layout(**_COLUMN),
                ),
                widgets.VBox(
                    [
                        widgets.HTML("<b>workload</b>"),
                        c["arrival_rate"],
                        c["service_mean_s"],
                        c["service_cv"],
                    ],
                    layout=widgets.Layout(**_COLUMN),
                ),
                widgets.VBox(
                    [widgets.HTML("<b>failures</b>"), c["failure_rate"], c["backoff_base_s"]],
                    layout=widgets.Layout(**_COLUMN),
                ),
            ],
            layout=widgets.Layout(**_ROWS),
        )
        self.widget = widgets.VBox([rows, self.figure, self.summary])
        self.widget.add_class(ROOT_CLASS)
        for control in c.values():
            control.observe(self._on_change, names="value")
        self._sync_disabled()
        # Every change re-simulates: a session of changes is the many runs the compiled
        # event path (numba, when installed) waits for; it loads at the first run that
        # takes the event path (failures, drains), not after twenty (about 40 ms a change).
        anticipate(LOAD_AFTER_ITEMS)
        self.update()

    # -- controls -------------------------------------------------------------------

    def _build_controls(self, sc: Scenario) -> dict[str, widgets.Widget]:
        cfg = sc.config
        lo, hi = _MAXSIZE_RANGE
        maxsize = cfg.queue_maxsize if cfg.queue_maxsize is not None else 100

        def slider() -> dict[str, Any]:
            return {
                "continuous_update": False,
                "style": _STYLE,
                "layout": widgets.Layout(**_SLIDER),
            }

        service = sc.service
        mean = getattr(service, "mean", 1.0)
        cv = getattr(service, "cv", 1.0)
        rate = getattr(sc.arrivals, "rate", 3.2)
        p = sc.failures.p if isinstance(sc.failures, IndependentFailures) else 0.0
        return {
            "maxsize": widgets.FloatLogSlider(
                value=min(max(maxsize, lo), hi),
                base=10,
                min=math.log10(lo),
                max=math.log10(hi),
                step=0.05,
                readout_format=".0f",
                description="maxsize",
                **slider(),
            ),
            "unbounded": widgets.ToggleButton(
                value=cfg.queue_maxsize is None,
                description="unbounded",
                tooltip="queue_maxsize=None: no bound on the queue (and on memory)",
                layout=widgets.Layout(width="110px", margin="0 0 4px 8px"),
            ),
            "concurrency": widgets.IntSlider(
                value=min(max(cfg.concurrency, 1), 32),
                min=1,
                max=32,
                description="concurrency",
                **slider(),
            ),
            "max_attempts": widgets.IntSlider(
                value=min(max(cfg.max_attempts, 1), 10),
                min=1,
                max=10,
                description="max_attempts",
                **slider(),
            ),
            "drain_timeout_s": widgets.IntSlider(
                value=round(min(max(cfg.drain_timeout_s or 300, 5), 300)),
                min=5,
                max=300,
                description="drain_timeout_s",
                **slider(),
            ),
            "on_full": widgets.ToggleButtons(
                options=["block", "reject"], value=cfg.on_full, description="on_full", style=_STYLE
            ),
            "arrival_rate": widgets.FloatLogSlider(
                value=rate,
                base=10,
                min=-1,
                max=2,
                step=0.02,
                readout_format=".3g",
                description="arrivals per s",
                tooltip="Poisson arrivals: the mean rate, items per second",
                disabled=not isinstance(sc.arrivals, Poisson),
                **slider(),
            ),
            "service_mean_s": widgets.FloatLogSlider(
                value=mean,
                base=10,
                min=-2,
                max=1,
                step=0.02,
                readout_format=".3g",
                description="service mean (s)",
                disabled=not isinstance(service, _SERVICE_FAMILIES),
                **slider(),
            ),
            "service_cv": widgets.FloatSlider(
                value=min(cv, 4.0),
                min=0.0,
                max=4.0,
                step=0.1,
                readout_format=".1f",
                description="service cv",
                tooltip="coefficient of variation of service times: 1 = exponential, 0 = constant",
                disabled=not isinstance(service, _SERVICE_FAMILIES),
                **slider(),
            ),
            "failure_rate": widgets.FloatSlider(
                value=min(p, 0.9),
                min=0.0,
                max=0.9,
                step=0.05,
                readout_format=".2f",
                description="failure rate p",
                disabled=not isinstance(sc.failures, NoFailures | IndependentFailures),
                **slider(),
            ),
            "backoff_base_s": widgets.FloatLogSlider(
                value=min(max(cfg.backoff.base_s, 0.01), 30.0),
                base=10,
                min=-2,
                max=math.log10(30),
                step=0.05,
                readout_format=".3g",
                description="backoff base (s)",
                **slider(),
            ),
        }

    def _sync_disabled(self) -> None:
        self.controls["maxsize"].disabled = bool(self.controls["unbounded"].value)

    def _on_change(self, change: dict[str, Any]) -> None:
        if change.get("owner") is self.controls["unbounded"]:
            self._sync_disabled()
        self.update()

    @property
    def settings(self) -> dict[str, Any]:
        """The controls' current values (maxsize rounded; None when unbounded)."""
        c = self.controls
        return {
            "maxsize": None if c["unbounded"].value else round(c["maxsize"].value),
            "concurrency": int(c["concurrency"].value),
            "max_attempts": int(c["max_attempts"].value),
            "drain_timeout_s": int(c["drain_timeout_s"].value),
            "on_full": c["on_full"].value,
            "arrival_rate": float(c["arrival_rate"].value),
            "service_mean_s": float(c["service_mean_s"].value),
            "service_cv": round(float(c["service_cv"].value), 2),
            "failure_rate": round(float(c["failure_rate"].value), 3),
            "backoff_base_s": float(c["backoff_base_s"].value),
        }

    def scenario(self) -> Scenario:
        """The scenario the controls describe."""
        s = self.settings
        c = self.controls
        backoff = self.base.config.backoff
        changes: dict[str, Any] = {
            "queue_maxsize": s["maxsize"],
            "concurrency": s["concurrency"],
            "max_attempts": s["max_attempts"],
            "drain_timeout_s": float(s["drain_timeout_s"]),
            "on_full": s["on_full"],
            "backoff": Backoff(
                kind=backoff.kind,
                base_s=s["backoff_base_s"],
                factor=backoff.factor,
                cap_s=max(backoff.cap_s, s["backoff_base_s"]),
                jitter=backoff.jitter,
            ),
        }
        if not c["service_mean_s"].disabled:
            changes["service"] = _service(
                s["service_mean_s"], s["service_cv"], type(self.base.service)
            )
        if not c["arrival_rate"].disabled:
            changes["arrivals"] = Poisson(rate=s["arrival_rate"])
        if not c["failure_rate"].disabled:
            p = s["failure_rate"]
            changes["failures"] = IndependentFailures(p) if p > 0 else NoFailures()
        return self.base.replace(**changes)

    # -- redraw ---------------------------------------------------------------------

    @property
    def summary_html(self) -> str:
        """The summary widget's HTML."""
        return self.summary.value

    def update(self) -> float:
        """Re-simulate with the current settings and redraw; returns the seconds it took."""
        began = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # The panel shows unfinished items and the DRAIN_TIMEOUT finding itself.
                warnings.simplefilter("ignore", DrainTimeoutWarning)
                result = simulate(self.scenario())
        except Exception as exc:  # a bad combination must not break the panel
            self.error = f"{type(exc).__name__}: {exc}"
            self.summary.value = self._error_html(self.error)
            return time.perf_counter() - began
        self.error = None
        simulated = time.perf_counter()
        try:
            png = self.render_png(result, self.last_result)
        except Exception as exc:  # a drawing problem must not break the panel either
            self.error = f"drawing failed: {type(exc).__name__}: {exc}"
            self.summary.value = self._error_html(self.error)
            return time.perf_counter() - began
        self.previous_result, self.last_result = self.last_result, result
        self.last_png = png
        self.figure.outputs = (
            png_display_data(
                png, self._figure.size_px, f"<explorer figure: {self._settings_text()}>"
            ),
        )
        self.summary.value = self._summary_html(result)
        elapsed = time.perf_counter() - began
        self.timings_s.append(elapsed)
        self.last_breakdown = {
            "simulate_s": simulated - began,
            "render_s": elapsed - (simulated - began),
            "total_s": elapsed,
        }
        return elapsed

    def render_png(self, result, compare=None) -> bytes:
        """Depth, lag and memory side by side (previous run faded), as PNG bytes.

        One figure is kept and its artists updated on each call (the same
        panels :func:`~pipeline.viz.plot_depth`, :func:`~pipeline.viz.plot_lag`
        and :func:`~pipeline.viz.figures.run.plot_memory` draw); nothing is registered
        with pyplot, so nothing accumulates. The PNG has twice the displayed
        pixels (sharp on retina screens); the output's metadata sets its size.
        """
        if self._figure is None:
            self._figure = ExplorerFigure(_FIGSIZE, _DPI, _MAX_POINTS, RETINA_SCALE)
        title = self._settings_text() + ("   (faded: previous run)" if compare else "")
        return self._figure.render_png(result, compare, title)

    def _settings_text(self) -> str:
        s = self.settings
        maxsize = "∞" if s["maxsize"] is None else s["maxsize"]
        return (
            f"maxsize={maxsize}, concurrency={s['concurrency']}, "
            f"max_attempts={s['max_attempts']}, drain={s['drain_timeout_s']}s, "
            f"on_full={s['on_full']}, "
            f"rate={s['arrival_rate']:.3g}/s, service={s['service_mean_s']:.3g}s "
            f"(cv {s['service_cv']:.2g}), p={s['failure_rate']:.2g}, "
            f"backoff={s['backoff_base_s']:.3g}s"
        )

    def _diagnostics(self, result) -> list[tuple[str, str, str]]:
        try:
            # The explorer's runs are short on purpose (a redraw must be quick): no RUN_TOO_SHORT.
            findings = diagnose(result, precision=None)
        except ImportError:
            return []
        except Exception as exc:  # diagnostics must never break the panel
            return [("error", f"diagnostics failed: {type(exc).__name__}: {exc}", "")]
        return [
            (
                str(getattr(f, "severity", "")),
                str(getattr(f, "title", f)),
                str(getattr(f, "fix", "")),
            )
            for f in findings
        ]

    def _summary_html(self, result) -> str:
        s = result.summary
        offered = max(s["items_offered"], 1)
        words = {key: METRIC_LABELS[key][0] for key in METRIC_LABELS}
        rows = [
            (words["wait_mean_s"], f"{s['wait_mean_s']:.3g} s"),
            (words["latency_p95_s"], f"{s['latency_p95_s']:.3g} s"),
            (words["utilisation"], f"{s['utilisation']:.0%}"),
            (words["memory_peak_bytes"], human_bytes(s["memory_peak_bytes"])),
            ("shed", f"{s['items_shed']} ({s['items_shed'] / offered:.1%})"),
            (
                "dead letters",
                f"{s['items_dead_lettered']} ({s['items_dead_lettered'] / offered:.1%})",
            ),
            ("unfinished", str(s["items_unfinished"])),
            (words["queue_depth_max"], str(s["queue_depth_max"])),
        ]
        cells = "".join(
            f"<td style='padding:0 12px 0 0'>{html.escape(k)}<br><b>{html.escape(v)}</b></td>"
            for k, v in rows
        )
        findings = self._diagnostics(result)
        if findings:
            items = "".join(
                f"<li><b>{html.escape(title)}</b>"
                + (f" ({html.escape(severity)})" if severity else "")
                + (f" &mdash; fix: {html.escape(fix)}" if fix else "")
                + "</li>"
                for severity, title, fix in findings
            )
            diagnosis = f"<ul style='margin:4px 0'>{items}</ul>"
        else:
            diagnosis = "<div>No problems found.</div>"
        return (
            f"<div><div style='color:#555'>{html.escape(self._settings_text())}; "
            f"{s['items_offered']} items, seed {self.base.seed}, simulated in "
            f"{s['wall_time_s'] * 1000:.0f} ms</div>"
            f"<table><tr>{cells}</tr></table>{diagnosis}</div>"
        )

    def _error_html(self, message: str) -> str:
        return error_html(self._settings_text(), "simulate", message)

    # -- display ----------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<Explorer {self._settings_text()} updates={len(self.timings_s)}>"


def explore(scenario: Scenario | None = None, *, n_items: int = 5000, seed: int = 1) -> Explorer:
    """Build an :class:`Explorer` over ``scenario`` (a Poisson/exponential M/M/4 by default).

    Args:
        scenario: the starting point; its pipeline config and workload set the
            controls' initial values. Poisson arrivals, exponential, log-normal,
            gamma or constant service and independent failures are controllable;
            anything else (bursty arrivals, a trace, other failure models) is
            kept as it is and its sliders are disabled.
        n_items: items simulated per change.
        seed: the seed of every run (common random numbers across changes).

    Returns:
        The explorer; ending a cell with it displays the panel.
    """
    return Explorer(scenario, n_items=n_items, seed=seed)
