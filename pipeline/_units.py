"""Words and units for metrics: ``latency_p95_s`` becomes "p95 latency (s)" on a figure people read.

Summary keys carry their units in their names (``_s``, ``_bytes``) so that code
and JSON stay unambiguous; a figure's title, axis or colour bar, a table and a
report should read as prose instead, and with one wording everywhere. This is
the one table (:data:`METRIC_LABELS`) and the one set of formatters:

- :func:`metric_label` names a metric with its unit; a key the table does not
  know but that follows the house naming (``_s`` seconds, ``_bytes``, ``_per_s``
  a rate, ``_pNN_s`` a percentile, ``items_`` a count) is read by those rules,
  and any other name (a column a notebook added) is shown as it is;
- :func:`human_bytes` writes a byte count in binary units (``1.75 MiB``), the one
  byte formatter, with :func:`scale_bytes` for an axis's divisor and unit;
- :func:`limit_text` writes a limit in its unit (``4 MiB``, ``1%``, ``30 s``),
  :func:`value_text` a measured value (``1.75 MiB``, ``18.1 s``),
  :func:`percent_text` a share (``0.265%``) and :func:`slo_text` a whole SLO
  (``p95 latency ≤ 30 s``);
- :func:`metric_range` says which values a metric can take (``[0, 1]`` for a
  fraction, ``[0, inf)`` for an amount), so no printed interval reaches past it.

Example:
    >>> metric_label("memory_peak_bytes")
    'peak memory (bytes)'
    >>> slo_text(SLO.parse("shed_fraction<=0.01"))
    'shed fraction ≤ 1%'
    >>> human_bytes(1536)
    '1.5 KiB'
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sim.analysis.planning.slo import SLO

__all__ = [
    "METRIC_LABELS",
    "human_bytes",
    "limit_text",
    "metric_label",
    "metric_range",
    "percent_text",
    "scale_bytes",
    "slo_text",
    "value_text",
]

METRIC_LABELS: dict[str, tuple[str, str]] = {
    "items_offered": ("items offered", "items"),
    "items_admitted": ("items admitted", "items"),
    "items_completed": ("items completed", "items"),
    "items_dead_lettered": ("items dead-lettered", "items"),
    "items_shed": ("items shed", "items"),
    "items_unfinished": ("items unfinished", "items"),
    "items_expired": ("items expired", "items"),
    "codel_shed": ("items shed by CoDel", "items"),
    "concurrency_limit": ("concurrency limit at the end", "attempts"),
    "attempts_total": ("attempts", "attempts"),
    "retries_total": ("retries", "retries"),
    "wait_mean_s": ("mean wait", "s"),
    "wait_p95_s": ("p95 wait", "s"),
    "latency_mean_s": ("mean latency", "s"),
    "latency_p50_s": ("median latency", "s"),
    "latency_p95_s": ("p95 latency", "s"),
    "latency_p99_s": ("p99 latency", "s"),
    "throughput_per_s": ("throughput", "items/s"),
    "goodput_per_s": ("goodput (completed)", "items/s"),
    "utilisation": ("utilisation", "fraction"),
    "queue_depth_mean": ("mean queue depth", "items"),
    "queue_depth_max": ("peak queue depth", "items"),
    "in_system_mean": ("mean items in the system", "items"),
    "upstream_backlog_max": ("peak upstream backlog", "items"),
    "producer_blocked_s": ("time producers waited for a slot", "s"),
    "memory_peak_bytes": ("peak memory", "bytes"),
    "items_held_max": ("peak items held by the chain", "items"),
    "items_backlog": ("items waiting at the start", "items"),
    "backlog_cleared_s": ("time until the backlog's last item left", "s"),
    "backlog_drained_s": ("time until the queue drained", "s"),
    "sim_time_s": ("simulated time", "s"),
    "wall_time_s": ("wall-clock time", "s"),
    "wait_mean_ci95_s": ("95% half-width of the mean wait", "s"),
    "latency_mean_ci95_s": ("95% half-width of the mean latency", "s"),
    "shed_fraction": ("shed fraction", "fraction"),
    "completed_fraction": ("completed fraction", "fraction"),
    "dead_letter_fraction": ("dead-letter fraction", "fraction"),
    "unfinished_fraction": ("unfinished fraction", "fraction"),
    "expired_fraction": ("expired fraction", "fraction"),
    "attempts_per_item": ("attempts per item", "attempts"),
    # The configuration fields a sweep's grid or a plan's search varies.
    "concurrency": ("concurrency", "workers"),
    "queue_maxsize": ("maxsize", "items"),
    "max_attempts": ("max_attempts", ""),
    "drain_timeout_s": ("drain timeout", "s"),
    "initial_backlog": ("initial backlog", "items"),
}
"""metric -> (words, unit); a unit of ``"fraction"`` is shown as a percentage."""

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DECIMAL = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
_PERCENTILE = re.compile(r"^(?P<name>[a-z_]+?)_p(?P<q>\d+(?:\.\d+)?)_s$")
_SUFFIXES = (("_per_s", "/s"), ("_bytes", "bytes"), ("_s", "s"))


def metric_label(metric: str) -> str:
    """``"p95 latency (s)"`` for ``"latency_p95_s"`` (see the module docstring for unknown keys).

    The unit is left out when the words already say it (``"items shed"``).

    Example:
        >>> metric_label("wait_p99_s"), metric_label("backlog_bytes"), metric_label("mine")
        ('p99 wait (s)', 'backlog (bytes)', 'mine')
    """
    metric = str(metric)
    if metric in METRIC_LABELS:
        words, unit = METRIC_LABELS[metric]
        if unit == "fraction":
            return f"{words} (0 to 1)"
        return words if unit in words.split() else f"{words} ({unit})"
    match = _PERCENTILE.match(metric)
    if match:
        return f"p{match['q']} {_words(match['name'])} (s)"
    if metric.startswith("items_") and len(metric) > len("items_"):
        return f"items {_words(metric[len('items_') :])}"
    for suffix, unit in _SUFFIXES:
        if metric.endswith(suffix) and len(metric) > len(suffix):
            return f"{_words(metric[: -len(suffix)])} ({unit})"
    return metric


def metric_range(metric: str) -> tuple[float, float]:
    """The values ``metric`` can take: ``(0, 1)`` for a fraction, ``(0, inf)`` for any amount.

    An interval reaching outside it says nothing more than one cut to it and
    covers no less (the quantity is inside it), so printed intervals are cut
    to it: a queue depth is never below 0, a shed fraction never above 1.
    Counts, depths, times, rates, bytes and attempts are amounts; a key the
    table does not know is read by the house naming (``_fraction``; ``_s``,
    ``_bytes``, ``_per_s``, ``_max``, ``_mean`` and ``items_`` are amounts),
    and any other name (a column a notebook added) may take any value.

    Example:
        >>> metric_range("queue_depth_max"), metric_range("shed_fraction"), metric_range("mine")
        ((0.0, inf), (0.0, 1.0), (-inf, inf))
    """
    metric = str(metric).rsplit(".", 1)[-1]  # a class's key (classes.NAME.KEY) or a stage's
    unit = METRIC_LABELS.get(metric, ("", None))[1]
    if unit == "fraction" or metric.endswith("_fraction"):
        return 0.0, 1.0
    amount = metric.startswith("items_") or metric.endswith(
        ("_s", "_bytes", "_per_s", "_max", "_mean", "_total")
    )
    if unit or amount:
        return 0.0, math.inf
    return -math.inf, math.inf


def _words(name: str) -> str:
    return name.replace("_", " ").strip()


def scale_bytes(peak: float) -> tuple[float, str]:
    """``(divisor, unit)`` for sizes up to ``peak`` bytes: ``peak / divisor`` is below 1024."""
    power = 0
    while peak >= 1024 and power < len(_BINARY_UNITS) - 1:
        peak /= 1024
        power += 1
    return float(1024**power), _BINARY_UNITS[power]


def human_bytes(n: float | None, *, digits: int = 3) -> str:
    """A byte count in binary units, ``digits`` significant: ``human_bytes(1536) == '1.5 KiB'``.

    Whole bytes below 1 KiB (``"512 B"``); None or NaN is ``"n/a"``.
    """
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    value = float(n)
    if not math.isfinite(value):
        return f"{value:g} B"
    divisor, unit = scale_bytes(abs(value))
    sign = "-" if value < 0 else ""
    if unit == "B":
        return f"{sign}{int(abs(value))} B"
    return f"{sign}{abs(value) / divisor:.{digits}g} {unit}"


def percent_text(share: float) -> str:
    """A share as a percentage, 3 significant digits: ``percent_text(0.0026531) == '0.265%'``.

    Never ``nan%``: an unknown share is ``unknown``, an infinite one ``unbounded``,
    and a positive share below 0.01% is ``<0.01%`` (not a misleading ``0%``).
    """
    if math.isnan(share):
        return "unknown"
    if math.isinf(share):
        return "unbounded"
    percent = 100 * share
    if 0 < abs(percent) < 0.01:
        return "<0.01%"
    return f"{percent:.3g}%"


def _bytes_text(value: float) -> str:
    # A limit typed as 4 * 2**20 (or 1.5 * 2**10) reads as 4 MiB, one typed as 200e6 as 200 MB.
    scale, unit = scale_bytes(abs(value))
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
        return percent_text(value)
    if unit in ("", "attempts", "retries"):
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
        return human_bytes(value)
    return limit_text(metric, float(f"{value:.3g}") if math.isfinite(value) else value)


def slo_text(slo: SLO) -> str:
    """An SLO in words: ``"p95 latency ≤ 30 s"``, ``"throughput ≥ 49 items/s"``."""
    words = METRIC_LABELS.get(slo.metric, (slo.metric, ""))[0]
    sign = "≤" if slo.op == "<=" else "≥"
    return f"{words} {sign} {limit_text(slo.metric, slo.limit)}"
