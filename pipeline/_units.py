"""Words for metrics: ``latency_p95_s`` becomes "p95 latency (s)" on a figure people read.

Summary keys carry their units in their names (``_s``, ``_bytes``) so that code
and JSON stay unambiguous; a figure's title, axis or colour bar should read as
prose instead. :func:`metric_label` names a metric with its unit,
:func:`limit_text` writes a limit in that unit (``4 MiB``, ``1%``, ``30 s``),
:func:`value_text` a measured value (``1.75 MiB``, ``18.1 s``) and
:func:`slo_text` a whole SLO (``p95 latency ≤ 30 s``). A name this
module does not know (a column a notebook added) is shown as it is.

Example:
    >>> metric_label("memory_peak_bytes")
    'peak memory (bytes)'
    >>> slo_text(SLO.parse("shed_fraction<=0.01"))
    'shed fraction ≤ 1%'
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sim.analysis.planning.slo import SLO

__all__ = ["METRIC_LABELS", "limit_text", "metric_label", "slo_text", "value_text"]

METRIC_LABELS: dict[str, tuple[str, str]] = {
    "items_offered": ("items offered", "items"),
    "items_admitted": ("items admitted", "items"),
    "items_completed": ("items completed", "items"),
    "items_dead_lettered": ("items dead-lettered", "items"),
    "items_shed": ("items shed", "items"),
    "items_unfinished": ("items unfinished", "items"),
    "attempts_total": ("attempts", "attempts"),
    "retries_total": ("retries", "attempts"),
    "wait_mean_s": ("mean wait", "s"),
    "wait_p95_s": ("p95 wait", "s"),
    "latency_mean_s": ("mean latency", "s"),
    "latency_p50_s": ("median latency", "s"),
    "latency_p95_s": ("p95 latency", "s"),
    "latency_p99_s": ("p99 latency", "s"),
    "throughput_per_s": ("throughput", "items/s"),
    "utilisation": ("utilisation", "fraction"),
    "queue_depth_mean": ("mean queue depth", "items"),
    "queue_depth_max": ("peak queue depth", "items"),
    "in_system_mean": ("mean items in the system", "items"),
    "upstream_backlog_max": ("peak upstream backlog", "items"),
    "producer_blocked_s": ("time the producer was blocked", "s"),
    "memory_peak_bytes": ("peak memory", "bytes"),
    "items_held_max": ("peak items held by the chain", "items"),
    "sim_time_s": ("simulated time", "s"),
    "wall_time_s": ("wall-clock time", "s"),
    "wait_mean_ci95_s": ("95% half-width of the mean wait", "s"),
    "latency_mean_ci95_s": ("95% half-width of the mean latency", "s"),
    "shed_fraction": ("shed fraction", "fraction"),
    "completed_fraction": ("completed fraction", "fraction"),
    "dead_letter_fraction": ("dead-letter fraction", "fraction"),
    "unfinished_fraction": ("unfinished fraction", "fraction"),
    "attempts_per_item": ("attempts per item", "attempts"),
}
"""metric -> (words, unit); a unit of ``"fraction"`` is shown as a percentage."""

_BINARY = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
_DECIMAL = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def metric_label(metric: str) -> str:
    """``"p95 latency (s)"`` for ``"latency_p95_s"``; an unknown name is returned as it is."""
    words, unit = METRIC_LABELS.get(metric, (metric, ""))
    if unit == "fraction":
        return f"{words} (0 to 1)"
    return f"{words} ({unit})" if unit else words


def _bytes_text(value: float) -> str:
    # A limit typed as 4 * 2**20 (or 1.5 * 2**10) reads as 4 MiB, one typed as 200e6 as 200 MB.
    scale, unit = next(((s, u) for s, u in _BINARY if abs(value) >= s), (1, "B"))
    if scale > 1 and (value / scale * 100).is_integer():
        return f"{value / scale:g} {unit}"
    for scale, unit in _DECIMAL:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:g} B"


def limit_text(metric: str, value: float) -> str:
    """``value`` in ``metric``'s unit: ``"30 s"``, ``"4 MiB"``, ``"200 MB"``, ``"1%"``.

    NaN and infinities are written as Python writes them (``nan``, ``inf``).
    """
    value = float(value)
    unit = METRIC_LABELS.get(metric, ("", ""))[1]
    if not math.isfinite(value):
        return f"{value:g}"
    if unit == "bytes":
        return _bytes_text(value)
    if unit == "fraction":
        return f"{100 * value:.3g}%"
    if unit in ("", "attempts"):
        return f"{value:g}"
    return f"{value:g} {unit}"


def value_text(metric: str, value: float) -> str:
    """A measured ``value`` in its unit, 3 significant digits: ``"1.75 MiB"``, ``"18.1 s"``.

    Unlike a limit, a measured size has no typed form to echo: it is always in
    binary units, as memory is counted.
    """
    value = float(value)
    unit = METRIC_LABELS.get(metric, ("", ""))[1]
    if unit == "bytes" and math.isfinite(value):
        scale, name = next(((s, u) for s, u in _BINARY if abs(value) >= s), (1, "B"))
        return f"{value / scale:.3g} {name}"
    return limit_text(metric, float(f"{value:.3g}") if math.isfinite(value) else value)


def slo_text(slo: SLO) -> str:
    """An SLO in words: ``"p95 latency ≤ 30 s"``, ``"throughput ≥ 49 items/s"``."""
    words = METRIC_LABELS.get(slo.metric, (slo.metric, ""))[0]
    sign = "≤" if slo.op == "<=" else "≥"
    return f"{words} {sign} {limit_text(slo.metric, slo.limit)}"
