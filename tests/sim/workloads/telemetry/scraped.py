"""The tests' known truth as Prometheus answers it, and the golden input made from it.

:func:`~pipeline.sim.running.scrape.query_range_answer` turns a simulated run
into a ``query_range`` answer; :func:`save` writes one to a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.sim.running.scrape import query_range_answer


def save(answer: Any, path: Path) -> Path:
    path.write_text(json.dumps(answer))
    return path


# The saved answer the command line's golden test and the twin guide calibrate from: 20 minutes
# of a known truth (Poisson 5/s, log-normal service of mean 0.2 s and cv 1, 5% of attempts
# failing, 4 workers), as Prometheus answers query_range for it every 15 s.
GOLDEN_INPUT = Path(__file__).resolve().parents[4] / "data" / "orders_range.json"


STEP_S = 15.0
"""The saved answer's query step, seconds."""


def golden_scenario():
    """The known truth :data:`GOLDEN_INPUT` is scraped from (the twin guide describes it)."""
    from pipeline import PipelineConfig
    from pipeline.sim import IndependentFailures, LogNormal, Poisson, Scenario

    return Scenario(
        arrivals=Poisson(rate=5.0), service=LogNormal(mean=0.2, cv=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=1000),
        failures=IndependentFailures(0.05), duration_s=1200.0, seed=20261201,
    )  # fmt: skip


def write_golden_input(path: Path = GOLDEN_INPUT) -> Path:
    """Regenerate :data:`GOLDEN_INPUT` (deterministic).

    Run: ``python -m tests.sim.workloads.telemetry.scraped``.
    """
    from pipeline.sim import simulate

    result = simulate(golden_scenario(), engine="kernel")
    answer = query_range_answer(
        result, start_s=1_764_583_200.0, step_s=STEP_S, pipeline="orders", until_s=1200.0
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(answer, separators=(",", ":")) + "\n")
    return path


if __name__ == "__main__":
    print(f"wrote {write_golden_input()}")
