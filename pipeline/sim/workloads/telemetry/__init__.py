"""Telemetry a team already has, read into one shape for calibration.

Each reader (Prometheus ``query_range`` JSON, an OTLP/JSON span export,
Locust's ``--csv`` history, k6's ``--out json``) turns its file into an
:class:`~pipeline.sim.workloads.telemetry.observed.Observed`; fitting a
scenario from that is :mod:`pipeline.sim.calibration`'s business, the
same for every format.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["FORMATS", "reader"]

FORMATS: dict[str, str] = {
    "prometheus": "pipeline.sim.workloads.telemetry.prometheus",
    "otlp": "pipeline.sim.workloads.telemetry.otlp",
    "locust": "pipeline.sim.workloads.telemetry.locust",
    "k6": "pipeline.sim.workloads.telemetry.k6",
}
"""Each telemetry format -> the module whose ``read(path, **options) -> Observed`` reads it."""


def reader(format: str) -> ModuleType:
    """The reader module of ``format`` (imported on first use).

    Raises:
        ValueError: an unknown format (the message lists the known ones).
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    return importlib.import_module(FORMATS[format])
