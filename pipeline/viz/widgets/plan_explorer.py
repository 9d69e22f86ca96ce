"""``PlanExplorer``: sliders for SLO limits that re-run the planner and redraw its frontier.

``explore_plan(base, search, slos)`` builds a small ipywidgets panel: one
slider per SLO limit, the plan's frontier figure
(:meth:`~pipeline.sim.analysis.planning.result.Plan.figure`) and its answer in
words. Moving a slider runs :func:`~pipeline.sim.plan` again with the new
limits. The runs go through a :class:`~pipeline.sim.executors.RunCache`, so only the
runs the new limits need for the first time are simulated (a looser limit
often needs none); the answer is exactly the one a fresh ``plan()`` call
gives. The previous answer stays visible: a hollow star and a faded limit on
the figure (:meth:`~pipeline.sim.Plan.figure` with ``previous=``), and a
line of its own in the summary.

Like :class:`~pipeline.viz.widgets.explorer.Explorer`, the figure is rendered to PNG
once per change and shown in an ``Output`` widget; no pyplot figure stays open.

Example:
    >>> explore_plan(base, {"concurrency": range(1, 9), "queue_maxsize": [10, 25, 50]},
    ...              ["latency_p95_s<=30", "shed_fraction<=0.01"])
"""

from __future__ import annotations

import base64
import html
import io
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from ..._units import METRIC_LABELS, slo_text, value_text
from ...sim import Scenario, plan
from ...sim.analysis.planning.plan import DEFAULT_REPLICATIONS
from ...sim.analysis.planning.slo import SLO, parse_slos
from ...sim.executors.run_cache import RunCache
from .shown import ShowsWidget

__all__ = ["PlanExplorer", "explore_plan"]

#: DOM classes the browser tests rely on.
ROOT_CLASS = "pipeline-plan-explorer"
FIGURE_CLASS = "pipeline-plan-explorer-figure"
SUMMARY_CLASS = "pipeline-plan-explorer-summary"

_STYLE = {"description_width": "initial"}
_DPI = 100
_STEPS = 200  # positions of each slider between its two ends
#: Browser-side readouts (d3-format) by unit: 4.19M bytes, 1% shed, 30 s.
_READOUT = {"bytes": ".3s", "fraction": ".2%"}


def _default_range(slo: SLO) -> tuple[float, float]:
    if slo.limit <= 0:
        raise ValueError(
            f"give ranges[{slo.metric!r}] = (low, high) for {slo}: a slider's default "
            "range is a factor of 4 either side of a limit > 0"
        )
    return slo.limit / 4, slo.limit * 4


def _slider(slo: SLO, low: float, high: float) -> widgets.Widget:
    words, unit = METRIC_LABELS.get(slo.metric, (slo.metric, ""))
    # The readout shows the number; the description says its unit (a fraction reads as %).
    shown = f" ({unit})" if unit and unit not in ("fraction", "attempts", "items") else ""
    common = {
        "description": f"{words}{shown} {'≤' if slo.upper else '≥'}",
        "readout_format": _READOUT.get(unit, ".3g"),
        "continuous_update": False,
        "style": _STYLE,
        "layout": widgets.Layout(width="420px"),
    }
    if low > 0:
        return widgets.FloatLogSlider(
            value=slo.limit,
            base=10,
            min=math.log10(low),
            max=math.log10(high),
            step=(math.log10(high) - math.log10(low)) / _STEPS,
            **common,
        )
    return widgets.FloatSlider(
        value=slo.limit, min=low, max=high, step=(high - low) / _STEPS, **common
    )


def _limit(slider: widgets.Widget, typed: float) -> float:
    # A slider's position is a float such as 29.9842: read it to 3 significant digits,
    # except where it still stands at the limit as given (4 MiB must stay 4 * 2**20).
    value = float(slider.value)
    return typed if math.isclose(value, typed, rel_tol=1e-9) else float(f"{value:.3g}")


class PlanExplorer(ShowsWidget):
    """A panel of SLO-limit sliders over :func:`~pipeline.sim.plan`.

    Attributes:
        widget: the root ``VBox`` (DOM class ``pipeline-plan-explorer``).
        controls: metric (``metric_le``/``metric_ge`` when one metric is bounded
            both ways) -> its slider.
        figure: the ``Output`` widget holding the PNG (class ``pipeline-plan-explorer-figure``).
        summary: the ``HTML`` widget with the answer (class ``pipeline-plan-explorer-summary``).
        plan, previous: the latest :class:`~pipeline.sim.Plan` and the one before it.
        cache: the :class:`~pipeline.sim.executors.RunCache` every plan's runs go through.
        last_png: the latest figure's PNG bytes.
        new_runs: runs simulated for each update (the first entry is the initial draw).
        timings_s: seconds from each change to its new figure.
        error: the message of the last failed update, or None.
    """

    def __init__(
        self,
        base: Scenario,
        search: Mapping[str, Sequence[Any]],
        slos: Sequence[str | SLO] | str,
        *,
        ranges: Mapping[str, tuple[float, float]] | None = None,
        confidence: float = 0.95,
        replications: int | tuple[int, int] = DEFAULT_REPLICATIONS,
        cache: RunCache | None = None,
        engine: str = "auto",
    ) -> None:
        self.slos = parse_slos(slos)
        self.base, self.search = base, search
        self.confidence, self.replications, self.engine = confidence, replications, engine
        self.cache = cache if cache is not None else RunCache()
        if not isinstance(self.cache, RunCache):
            raise TypeError(f"cache must be a RunCache or None, got {cache!r:.60}")
        self.controls = self._build_controls(dict(ranges or {}))
        self.plan = self.previous = None
        self.last_png: bytes | None = None
        self.new_runs: list[int] = []
        self.timings_s: list[float] = []
        self.error: str | None = None
        self.figure = widgets.Output()
        self.figure.add_class(FIGURE_CLASS)
        self.summary = widgets.HTML()
        self.summary.add_class(SUMMARY_CLASS)
        sliders = widgets.VBox([widgets.HTML("<b>SLO limits</b>"), *self.controls.values()])
        self.widget = widgets.VBox([sliders, self.summary, self.figure])
        self.widget.add_class(ROOT_CLASS)
        for control in self.controls.values():
            control.observe(lambda _change: self.update(), names="value")
        self._draw(time.perf_counter())  # bad arguments raise here, not in the panel

    def _build_controls(self, ranges: dict[str, tuple[float, float]]) -> dict[str, Any]:
        metrics = [slo.metric for slo in self.slos]
        controls = {}
        for slo in self.slos:
            both = metrics.count(slo.metric) > 1
            key = slo.metric + ("_le" if slo.upper else "_ge") * both
            span = ranges.pop(key, None) or ranges.pop(slo.metric, None) or _default_range(slo)
            wrong = f"ranges[{key!r}] must be two finite numbers, low < high, got {span!r}"
            try:
                low, high = (float(v) for v in span)
            except (TypeError, ValueError):
                raise ValueError(wrong) from None
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(wrong)
            if not low <= slo.limit <= high:
                raise ValueError(f"ranges[{key!r}] = {span!r} must contain the limit of {slo}")
            controls[key] = _slider(slo, low, high)
        if ranges:
            raise ValueError(f"ranges names no SLO of this plan: {sorted(ranges)}; SLOs: {metrics}")
        return controls

    def current_slos(self) -> tuple[SLO, ...]:
        """The SLOs with the sliders' limits (to 3 significant digits once moved)."""
        return tuple(
            SLO(slo.metric, slo.op, _limit(control, slo.limit))
            for slo, control in zip(self.slos, self.controls.values(), strict=True)
        )

    # -- redraw ---------------------------------------------------------------------

    def update(self) -> float:
        """Plan again with the sliders' limits and redraw; returns the seconds it took."""
        began = time.perf_counter()
        try:
            return self._draw(began)
        except Exception as exc:  # a slider move must not break the panel
            self.error = f"{type(exc).__name__}: {exc}"
            message = html.escape(self.error)
            self.summary.value = f"<div style='color:#b00'><b>Cannot plan:</b> {message}</div>"
            return time.perf_counter() - began

    def _draw(self, began: float) -> float:
        misses = self.cache.misses
        answer = plan(
            self.base, self.search, self.current_slos(), confidence=self.confidence,
            replications=self.replications, executor=self.cache, engine=self.engine,
            progress=False,
        )  # fmt: skip
        png = self._render(answer, self.plan)
        self.error = None
        self.previous, self.plan, self.last_png = self.plan, answer, png
        self.new_runs.append(self.cache.misses - misses)
        self.figure.outputs = (
            {
                "output_type": "display_data",
                "data": {
                    "image/png": base64.b64encode(png).decode("ascii"),
                    "text/plain": f"<plan frontier: {answer!r}>",
                },
                "metadata": {},
            },
        )
        elapsed = time.perf_counter() - began
        self.timings_s.append(elapsed)
        self.summary.value = self._summary_html(elapsed)
        return elapsed

    def _render(self, answer: Any, before: Any) -> bytes:
        fig = answer.figure(previous=before)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=_DPI)
        return buffer.getvalue()

    def _summary_html(self, elapsed: float) -> str:
        now = _answer_html(self.plan)
        before = (
            f"<div style='color:#666'>before: {_answer_html(self.previous, short=True)}</div>"
            if self.previous is not None
            else ""
        )
        runs = self.new_runs[-1]
        cost = (
            f"<div style='color:#555'>{runs} new run{'s' * (runs != 1)}, "
            f"{self.plan.runs_total - runs} re-used; {elapsed:.2f} s</div>"
        )
        return f"<div>{now}{before}{cost}</div>"

    # -- display ----------------------------------------------------------------------

    def __repr__(self) -> str:
        limits = ", ".join(str(s) for s in self.current_slos())
        return f"<PlanExplorer {limits} plan={self.plan!r} updates={len(self.timings_s)}>"


def _point_text(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={'unbounded' if v is None else v}" for k, v in point.items())


def _answer_html(answer: Any, *, short: bool = False) -> str:
    """A plan's outcome in words: the choice and what binds, or why there is none."""
    limits = "; ".join(slo_text(s) for s in answer.slos)
    if answer.status == "chosen":
        searched = {k: answer.chosen[k] for k in answer.search}
        binding = answer.binding
        slo = binding.slo
        bound = value_text(slo.metric, binding.bound)
        text = (
            f"<b>{html.escape(_point_text(searched))}</b> for {html.escape(limits)}; "
            f"binding: {html.escape(slo_text(slo))} (bound {html.escape(bound)})"
        )
        if short:
            return text
        steps = [
            f"{_point_text(step.change)}: {step.verdict}"
            + (f" ({', '.join(slo_text(f) for f in step.failed)})" if step.failed else "")
            for step in binding.cheaper
        ]
        cheaper = f"<br>one step cheaper: {html.escape('; '.join(steps))}" if steps else ""
        return f"<div>chosen: {text}{cheaper}</div>"
    if answer.status == "undecided":
        q = answer.undecided[0]
        where = _point_text(q.candidate)
        text = (
            f"<b>undecided</b> for {html.escape(limits)}: {html.escape(where)}, "
            f"{html.escape(slo_text(q.slo))} after {q.replications} replications"
        )
        if short:
            return text
        fallback = (
            f"<br>known to meet every SLO: {html.escape(_point_text(answer.fallback))}"
            if answer.fallback
            else ""
        )
        return f"<div>{text}<br>advice: {html.escape(q.advice)}{fallback}</div>"
    text = f"<b>infeasible</b> for {html.escape(limits)}: nothing in the search meets every SLO"
    return text if short else f"<div>{text}</div>"


def explore_plan(
    base: Scenario,
    search: Mapping[str, Sequence[Any]],
    slos: Sequence[str | SLO] | str,
    **options: Any,
) -> PlanExplorer:
    """Build a :class:`PlanExplorer`: a slider per SLO limit over :func:`~pipeline.sim.plan`.

    Args:
        base, search, slos: as for :func:`~pipeline.sim.plan`; each SLO's limit
            is its slider's starting value.
        ranges: metric -> ``(low, high)`` of its slider (default: a factor of 4
            either side of the limit, on a log scale; a range starting at or
            below 0 gives a linear slider).
        confidence, replications, engine: as for :func:`~pipeline.sim.plan`.
        cache: a :class:`~pipeline.sim.executors.RunCache` to share with other plans (for
            example the one a notebook ran before), so that even the first
            draw re-uses their runs.

    Returns:
        The explorer; ending a cell with it displays the panel.

    Raises:
        ValueError: a range that is not two finite numbers ``low < high``
            around the limit, names no SLO, or is missing for a limit <= 0;
            and whatever :func:`~pipeline.sim.plan` raises for bad arguments.
    """
    return PlanExplorer(base, search, slos, **options)
