"""Readable axis and colorbar labels for summary keys: ``latency_p95_s`` -> "p95 latency (s)".

Summary keys are made for code (``result.summary[...]``, the CLI's JSON, a
sweep's columns); a figure should name the quantity and its unit in words.
:func:`metric_label` looks a key up in a small table and, for keys it does not
know, reads the house naming rules: a ``_s`` suffix is seconds, ``_bytes``
bytes, ``_per_s`` a rate, ``_pNN`` a percentile, ``items_`` a count.
"""

from __future__ import annotations

import re

__all__ = ["METRIC_LABELS", "metric_label"]

#: Keys whose best wording the rules below would not find.
METRIC_LABELS: dict[str, str] = {
    "wait_mean_s": "mean wait (s)",
    "latency_mean_s": "mean latency (s)",
    "throughput_per_s": "throughput (items/s)",
    "utilisation": "utilisation (share of worker time)",
    "queue_depth_mean": "mean queue depth (items)",
    "queue_depth_max": "peak queue depth (items)",
    "in_system_mean": "mean items in the pipeline",
    "upstream_backlog_max": "peak upstream backlog (items)",
    "producer_blocked_s": "producer blocked (s)",
    "memory_peak_bytes": "peak memory (bytes)",
    "attempts_total": "attempts",
    "retries_total": "retries",
    "sim_time_s": "run length (s of virtual time)",
    "wall_time_s": "wall time (s)",
    "queue_maxsize": "maxsize (items)",
    "concurrency": "concurrency (workers)",
    "max_attempts": "max_attempts",
    "drain_timeout_s": "drain timeout (s)",
}

_PERCENTILE = re.compile(r"^(?P<name>[a-z_]+?)_p(?P<q>\d+(?:\.\d+)?)_s$")
_UNITS = (("_per_s", "/s"), ("_bytes", "bytes"), ("_s", "s"))


def _words(name: str) -> str:
    return name.replace("_", " ").strip()


def metric_label(key: str) -> str:
    """A label for the summary key (or sweep column) ``key``, with its unit in brackets.

    Unknown keys that follow no naming rule come back with spaces for underscores,
    so a label never fails to exist.

    Example:
        >>> metric_label("latency_p95_s")
        'p95 latency (s)'
    """
    key = str(key)
    if key in METRIC_LABELS:
        return METRIC_LABELS[key]
    match = _PERCENTILE.match(key)
    if match:
        return f"p{match['q']} {_words(match['name'])} (s)"
    if key.startswith("items_"):
        return f"items {_words(key[len('items_') :])}"
    for suffix, unit in _UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            return f"{_words(key[: -len(suffix)])} ({unit})"
    return _words(key) or key
