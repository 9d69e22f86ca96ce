"""Telemetry a team already has, read into one shape for calibration.

Each reader (Prometheus ``query_range`` JSON, an OTLP/JSON span export,
Locust's ``--csv`` history, k6's ``--out json``) turns its file into an
:class:`~pipeline.sim.workloads.telemetry.observed.Observed`; fitting a
scenario from that is :mod:`pipeline.sim.analysis.calibrate`'s business, the
same for every format.
"""
