"""A simulated run as Prometheus would answer ``query_range`` for it: the same queries, a what-if.

:func:`query_range_answer` writes the run with
:func:`~pipeline.sim.running.openmetrics.write_openmetrics` (the exact step
functions, under the metrics contract's names), then evaluates every series
at ``start_s + k * step_s`` as a range query does: the last sample at or
before each time, within Prometheus's 5-minute look-back
(:data:`LOOKBACK_S`). The answer has the shape of ``/api/v1/query_range``'s
JSON, so whatever reads a saved answer (``python -m pipeline calibrate
--format prometheus``, a dashboard drawn from one) reads a simulated run the
same way.

Example:
    >>> from pipeline.sim import Poisson, Exponential, Scenario, simulate
    >>> run = simulate(Scenario(arrivals=Poisson(rate=1.0), service=Exponential(mean=0.5),
    ...                         n_items=50, seed=1), engine="kernel")
    >>> answer = query_range_answer(run, start_s=1.7e9, step_s=5.0)
    >>> answer["data"]["resultType"]
    'matrix'
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LOOKBACK_S", "openmetrics_series", "query_range_answer"]

LOOKBACK_S = 300.0
"""How far back a range query looks for a series' last sample, seconds (Prometheus's default)."""

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPED = {"\\": "\\", '"': '"', "n": "\n"}  # OpenMetrics's three escapes in label values


def _label_value(text: str) -> str:
    """A label value as written in the file (``\\\\``, ``\\"``, ``\\n``) -> the value itself."""
    return _ESCAPED.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), text)


def openmetrics_series(path: str | Path) -> dict[tuple, list[tuple[float, float]]]:
    """Each series of an OpenMetrics file written here: ``(name, sorted labels)`` -> (time, value)s.

    Reads the files :func:`~pipeline.sim.running.openmetrics.write_openmetrics`
    writes (every sample labelled and timestamped), not OpenMetrics in general.
    """
    series: dict[tuple, list[tuple[float, float]]] = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"{path}: line {number}: expected 'name{{labels}} value time'")
        name, labels, value, stamp = match.groups()
        pairs = ((label, _label_value(text)) for label, text in _LABEL.findall(labels))
        key = (name, tuple(sorted(pairs)))
        series.setdefault(key, []).append((float(stamp), float(value)))
    return series


def query_range_answer(
    result: Any,
    *,
    start_s: float,
    step_s: float,
    pipeline: str = "sim",
    metric: str = r"pipeline_.+",
    until_s: float | None = None,
) -> dict[str, Any]:
    """The ``query_range`` answer for ``{__name__=~metric}`` every ``step_s`` over the run.

    Args:
        result: a simulated run (``simulate(...)``'s result, a chain's too).
        start_s: UNIX time of the run's virtual second 0.
        step_s: the query's step, seconds (also the OpenMetrics sampling step).
        pipeline: the ``pipeline`` label.
        metric: a regular expression the series' names must match in full.
        until_s: the window's end, virtual seconds (default: the whole run).

    Returns:
        A JSON-ready dict shaped as Prometheus's answer (values as text).
    """
    with tempfile.TemporaryDirectory(prefix="scrape-") as folder:
        path = Path(folder) / "run.om"
        result.to_openmetrics(path, start_s=start_s, step_s=step_s, pipeline=pipeline)
        found = openmetrics_series(path)
    end = start_s + (result.summary["sim_time_s"] if until_s is None else until_s)
    grid = start_s + step_s * np.arange(math.ceil((end - start_s) / step_s) + 1)
    out = []
    for (name, labels), points in found.items():
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
