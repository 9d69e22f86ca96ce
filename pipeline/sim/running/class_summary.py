"""Per-class summaries of a run with item classes (``Scenario(classes=...)``).

:func:`class_summaries` reads the run's exact per-item columns and each
item's class, and returns ``summary["classes"]``: for each class, by name,
how many of its items arrived, completed, expired (abandoned: their patience
ran out before a worker took them), were shed or dead-lettered, the expired
fraction, and the mean and percentiles of wait (arrival to first start, over
the items that started: for an impatient class, the wait of those served)
and latency (arrival to finish, over completed items). Counts are over the
whole run, as the summary's own ``items_*`` counts; waits and latencies over
the items that arrived after ``warmup_s``, as the summary's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..stats.intervals import batch_means_ci
from ..stats.quantiles import percentiles
from ..workloads.classes import ItemClass
from .recorder import ItemColumns

__all__ = ["CLASS_METRICS", "class_summaries", "flatten_classes"]

CLASS_METRICS: tuple[str, ...] = (
    "items",
    "completed",
    "expired",
    "shed",
    "dead_lettered",
    "expired_fraction",
    "wait_mean_s",
    "wait_mean_ci95_s",
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
)
"""The keys of each class's summary, each a number an SLO may bound
(``classes.NAME.latency_p95_s<=0.5``)."""

_BATCHES, _MIN_ITEMS = 10, 10_000  # as the run's own half-widths (summary.BATCHES, ...)
_EXPIRED = ItemColumns.OUTCOMES.index("expired")


def class_summaries(
    classes: Sequence[ItemClass], code: np.ndarray, columns: ItemColumns, warmup_s: float
) -> dict[str, dict[str, Any]]:
    """``{name: {key: value}}`` for every class (a class with no items: counts 0, NaN times)."""
    outcome = columns.outcome
    counted = columns.arrival_s >= warmup_s
    waits = columns.start_s - columns.arrival_s
    latencies = columns.finish_s - columns.arrival_s
    out: dict[str, dict[str, Any]] = {}
    for k, item_class in enumerate(classes):
        mine = code == k
        items = int(mine.sum())
        completed = int((mine & (outcome == 0)).sum())
        expired = int((mine & (outcome == _EXPIRED)).sum())
        wait = waits[mine & counted & ~np.isnan(columns.start_s)]
        latency = latencies[mine & counted & (outcome == 0)]
        wait_p = percentiles(wait, (50, 95, 99))
        latency_p = percentiles(latency, (50, 95, 99))
        out[item_class.name] = {
            "items": items,
            "completed": completed,
            "expired": expired,
            "shed": int((mine & (outcome == 2)).sum()),
            "dead_lettered": int((mine & (outcome == 1)).sum()),
            "expired_fraction": expired / items if items else math.nan,
            "wait_mean_s": float(wait.mean()) if len(wait) else math.nan,
            "wait_mean_ci95_s": _half_width(wait),
            "wait_p50_s": wait_p[0],
            "wait_p95_s": wait_p[1],
            "wait_p99_s": wait_p[2],
            "latency_mean_s": float(latency.mean()) if len(latency) else math.nan,
            "latency_p50_s": latency_p[0],
            "latency_p95_s": latency_p[1],
            "latency_p99_s": latency_p[2],
        }
    return out


def _half_width(values: np.ndarray) -> float:
    if len(values) < _MIN_ITEMS:
        return math.nan
    return batch_means_ci(values, n_batches=_BATCHES).half_width


def flatten_classes(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with ``classes`` spread into ``classes.NAME.KEY`` keys (one flat row).

    A sweep's tidy frame has one column per number; the same names are the
    SLO metrics of one class (``classes.high.latency_p95_s``).
    """
    if "classes" not in summary:
        return summary
    flat = {key: value for key, value in summary.items() if key != "classes"}
    for name, own in summary["classes"].items():
        for key, value in own.items():
            flat[f"classes.{name}.{key}"] = value
    return flat
