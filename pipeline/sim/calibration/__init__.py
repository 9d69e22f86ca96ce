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
"""
