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


# The saved answer the command line's golden test and the README calibrate from: 20 minutes
# of a known truth (Poisson 5/s, log-normal service of mean 0.2 s and cv 1, 5% of attempts
# failing, 4 workers), as Prometheus answers query_range for it every 15 s.
GOLDEN_INPUT = Path(__file__).resolve().parents[3] / "cli/golden/inputs/orders_range.json"


def write_golden_input(path: Path = GOLDEN_INPUT) -> Path:
    """Regenerate :data:`GOLDEN_INPUT` (deterministic).

    Run: ``python -m tests.sim.workloads.telemetry.scraped``.
    """
    import tempfile

    from pipeline import PipelineConfig
    from pipeline.sim import IndependentFailures, LogNormal, Poisson, Scenario, simulate

    scenario = Scenario(
        arrivals=Poisson(rate=5.0), service=LogNormal(mean=0.2, cv=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=1000),
        failures=IndependentFailures(0.05), duration_s=1200.0, seed=20261201,
    )  # fmt: skip
    result = simulate(scenario, engine="kernel")
    with tempfile.TemporaryDirectory() as tmp:
        answer = query_range_answer(
            result, Path(tmp), start_s=1_764_583_200.0, step_s=15.0, pipeline="orders",
            until_s=1200.0,
        )  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(answer, separators=(",", ":")) + "\n")
    return path


if __name__ == "__main__":
    print(f"wrote {write_golden_input()}")
