"""The soak benchmark's two scenarios, briefly: sustained overload with shedding, retries and
a slow consumer, on the real clock. Counts must be exact, item by item, and memory must not
grow with the run (tracemalloc's peak for a run five times longer is about the same).

The long version, for minutes, is ``bench/bench_soak.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tracemalloc
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "bench_soak.py"
_SPEC = importlib.util.spec_from_file_location("bench_soak", _PATH)
bench_soak = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench_soak)


def soak(scenario: str, items: int):
    run = bench_soak.Soak(items=items)
    tracemalloc.start()
    try:
        asyncio.run(getattr(run, f"run_{scenario}")())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return run, peak


@pytest.mark.parametrize("scenario", ["pipeline", "chain"])
def test_overload_with_shedding_retries_and_a_slow_consumer_keeps_exact_counts(scenario):
    run, _ = soak(scenario, 3_000)
    assert run.problems() == []
    report = run.report
    shed = report.shed if hasattr(report, "stages") else len(report.shed)
    assert shed > 0, "the bursts overload the stage: some items are shed"
    assert run.calls > run.consumed > 0, "some attempts were refused and retried"


@pytest.mark.parametrize(
    "scenario",
    ["pipeline", pytest.param("chain", marks=pytest.mark.slow)],  # the chain: 2 s of a core
)
def test_a_five_times_longer_overload_holds_the_same_memory(scenario):
    small_run, small = soak(scenario, 2_000)
    large_run, large = soak(scenario, 10_000)
    assert small_run.problems() == [] and large_run.problems() == []
    # Everything a run keeps is bounded (queues, 100 shed payloads, the results buffer);
    # growing with the items would cost about 8,000 x (a payload, 100+ bytes) here.
    assert large - small < 128 * 1024, (small, large)
