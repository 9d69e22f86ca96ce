"""A simulated run as Prometheus would answer ``query_range`` for it: the tests' known truth.

:func:`query_range_answer` writes the run with
:func:`~pipeline.sim.running.openmetrics.write_openmetrics` (the exact step
functions, under the metrics contract's names), then evaluates every series
at ``start + k * step`` as a range query does: the last sample at or before
each time, within Prometheus's 5-minute look-back.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
LOOKBACK_S = 300.0


def openmetrics_series(path: Path) -> dict[tuple, list[tuple[float, float]]]:
    """Each series of an OpenMetrics file, ``(name, sorted labels)`` -> its (time, value) points."""
    series: dict[tuple, list[tuple[float, float]]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        name, labels, value, stamp = _LINE.match(line).groups()
        key = (name, tuple(sorted(_LABEL.findall(labels))))
        series.setdefault(key, []).append((float(stamp), float(value)))
    return series


def query_range_answer(
    result: Any,
    tmp: Path,
    *,
    start_s: float,
    step_s: float,
    pipeline: str = "sim",
    metric: str = r"pipeline_.+",
    until_s: float | None = None,
) -> dict[str, Any]:
    """The ``query_range`` answer for ``{__name__=~metric}`` every ``step_s``.

    The window is the whole run, or its first ``until_s`` seconds (virtual time).
    """
    path = tmp / "run.om"
    result.to_openmetrics(path, start_s=start_s, step_s=step_s, pipeline=pipeline)
    end = start_s + (result.summary["sim_time_s"] if until_s is None else until_s)
    grid = start_s + step_s * np.arange(math.ceil((end - start_s) / step_s) + 1)
    out = []
    for (name, labels), points in openmetrics_series(path).items():
        if not re.fullmatch(metric, name):
            continue
        times = np.array([t for t, _ in points])
        values = np.array([v for _, v in points])
        at = np.searchsorted(times, grid + 1e-9, side="right") - 1
        keep = (at >= 0) & (grid - times[np.maximum(at, 0)] <= LOOKBACK_S)
        out.append({
            "metric": {"__name__": name, **dict(labels)},
            "values": [[round(float(t), 3), _text(v)] for t, v in
                       zip(grid[keep], values[at[keep]], strict=True)],
        })  # fmt: skip
    return {"status": "success", "data": {"resultType": "matrix", "result": out}}


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def save(answer: Any, path: Path) -> Path:
    path.write_text(json.dumps(answer))
    return path
