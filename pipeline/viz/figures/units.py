"""One way to show a metric on an axis: every figure's sizes, times and shares alike.

The words and units come from :mod:`pipeline._units`, as the command line's
tables and the reports write them: sizes in binary units (KiB, MiB) on round
binary ticks, shares as percentages, times in seconds. A figure that puts a
metric on an axis (a plan's frontier, a sensitivity chart, a sweep's line or
heatmap colour bar) calls :func:`metric_axis` rather than formatting its own,
so one quantity reads the same in every figure and table (a sweep once wrote a
memory mean as ``3.5e+04`` beside a table's ``35,021 B`` and a frontier in MiB).
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    MultipleLocator,
    NullLocator,
    PercentFormatter,
)

from ..._units import METRIC_LABELS, human_bytes, metric_label, scale_bytes

__all__ = ["metric_axis", "metric_unit", "metric_words"]


def metric_unit(metric: str) -> str:
    """``"bytes"``, ``"fraction"``, ``"s"``... : the unit :mod:`pipeline._units` gives ``metric``
    (``""`` for a key it does not know)."""
    return METRIC_LABELS.get(str(metric), ("", ""))[1]


def metric_words(metric: str) -> str:
    """What an axis showing ``metric`` through :func:`metric_axis` is labelled: the words
    alone for sizes and shares (the ticks carry the unit), else
    :func:`~pipeline._units.metric_label` (``"p95 latency (s)"``)."""
    if metric_unit(metric) in ("bytes", "fraction"):
        return METRIC_LABELS[metric][0]
    return metric_label(metric)


def metric_axis(axis: Any, metric: str, top: float, *, log: bool = False) -> str:
    """Give one matplotlib :class:`~matplotlib.axis.Axis` (``ax.xaxis``, ``ax.yaxis``, a colour
    bar's) the ticks of ``metric``, whose values reach ``top``; return the label to write.

    Sizes tick at round binary steps labelled ``"1.5 MiB"`` (powers of two on a log
    scale) and shares as percentages, the label then the metric's words alone (the
    ticks carry the unit); anything else keeps its ticks (``10`` and ``100``, not
    ``10^1``, on a log scale) under :func:`~pipeline._units.metric_label`.
    """
    unit = metric_unit(metric)
    if unit == "bytes":
        _binary_ticks(axis, top, log)
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(v, digits=6)))
    elif unit == "fraction":
        axis.set_major_formatter(PercentFormatter(xmax=1.0))
    elif log:
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    return metric_words(metric)


def _binary_ticks(axis: Any, top: float, log: bool) -> None:
    """Ticks at round binary sizes: 1, 2, 4, 8 MiB on a log scale; 0.5 MiB steps or so on a line."""
    if log:
        axis.set_major_locator(LogLocator(base=2))
        axis.set_minor_locator(NullLocator())
        return
    top = top if math.isfinite(top) and top > 0 else 1.0
    scale, _ = scale_bytes(top)
    span = max(top / scale, 1e-12)
    step = next(
        (k * 10.0**e for e in range(-3, 7) for k in (1, 2, 5) if span / (k * 10.0**e) <= 8), 1.0
    )
    axis.set_major_locator(MultipleLocator(step * scale))
