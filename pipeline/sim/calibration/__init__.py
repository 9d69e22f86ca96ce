"""Calibration: a simulation scenario fitted to what a real system recorded.

Two entry points, one answer (a :class:`~.records.Calibration`: the fitted
:class:`~pipeline.sim.Scenario` and how each part was fitted):

- :func:`~pipeline.sim.calibrate` (:mod:`.recorded`) fits a recorded run of the
  real pipeline (a :class:`~pipeline.sim.TraceRecorder`'s trace), stage by stage;
- :func:`~.telemetry.calibrate_observed` (:mod:`.telemetry`) fits telemetry a
  team already has (Prometheus, OTLP spans, Locust, k6), read into one shape by
  :mod:`pipeline.sim.workloads.telemetry`.

The parts they are made of, one concept each: the arrival process
(:mod:`.arrivals`: times one by one or counts per interval), service times one
by one (:mod:`.service`, judged by the Kolmogorov-Smirnov test of :mod:`.ks`),
service times from histogram buckets (:mod:`.histogram`, over the families of
:mod:`.families` and the bucketed distribution of :mod:`.bucketed`), a service
time fitted through the twin to response times (:mod:`.response`), and a day
of traffic's rate (:mod:`.daily`). A log-normal from quoted percentiles is the
distribution's own constructor (:mod:`pipeline.sim.workloads.percentiles`).

Calibration sits beside :mod:`pipeline.sim.analysis`, over ``running`` (the
response-time fit runs the twin) and ``workloads``; nothing below imports it.

The names a study of recorded traffic reaches for are importable from here, each
loaded on first use: ``from pipeline.sim.calibration import calibrate_observed,
read_prometheus``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

# The names _LAZY loads on first use, written out for editors and type checkers.
if TYPE_CHECKING:
    from ..running.scrape import openmetrics_series, query_range_answer
    from ..workloads.telemetry.prometheus import read as read_prometheus
    from ..workloads.traces.window import trace_window
    from .daily import fit_daily_curve
    from .recorded import calibrate
    from .telemetry import calibrate_observed
del TYPE_CHECKING  # a switch for the block above, not a name of this package

__all__ = [
    "calibrate",
    "calibrate_observed",
    "fit_daily_curve",
    "openmetrics_series",
    "query_range_answer",
    "read_prometheus",
    "trace_window",
]

# Public names imported on first use: name -> (module, attribute).
_LAZY = {
    # A recorded run of the real pipeline, and telemetry a team already has (Prometheus's
    # query_range answer read by read_prometheus; the other formats through the command line).
    "calibrate": ("recorded", "calibrate"),
    "calibrate_observed": ("telemetry", "calibrate_observed"),
    "read_prometheus": ("..workloads.telemetry.prometheus", "read"),
    # A recorded day of traffic: its rate curve fitted, and its busy hours cut out.
    "fit_daily_curve": ("daily", "fit_daily_curve"),
    "trace_window": ("..workloads.traces.window", "trace_window"),
    # A simulated run turned back into what Prometheus would answer, to set beside the real
    # answer (notebook 10), and an OpenMetrics file read back as series.
    "query_range_answer": ("..running.scrape", "query_range_answer"),
    "openmetrics_series": ("..running.scrape", "openmetrics_series"),
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), __all__)
del lazy_names  # the package's own machinery, not a name of it
