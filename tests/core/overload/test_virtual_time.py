"""The same controls in a simulation: ``simulate(engine="asyncio")`` runs the real engine.

Counts are compared with hand computations; the kernel refuses these scenarios in one
line (``engine="auto"`` runs the asyncio engine).
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline import AIMD, Backoff, CircuitBreaker, PipelineConfig, RetryBudget
from pipeline.sim import Constant, IndependentFailures, Scenario, Trace, simulate


def scenario(n, config, *, failure=1.0):
    """``n`` items arriving at t=0, 1 s calls, each failing with probability ``failure``."""
    return Scenario(
        arrivals=Trace([0.0] * n),
        service=Constant(1.0),
        config=config,
        failures=IndependentFailures(failure),
        n_items=n,
        seed=1,
    )


def test_budget_counts_equal_the_hand_computation():
    # 10 items start at 0 on 10 workers and fail at 1. The budget (ratio 0.2, no floor,
    # a 100 s window) allows 0.2 x 10 = 2 retries: 2 go (back at 1.5, failing at 2.5),
    # 8 are denied at 1; at 2.5 a third retry would make 3 > 2: both are denied.
    # attempts 12, retries 2, denied 10, all 10 dead-lettered with reason retry_budget.
    config = PipelineConfig(
        concurrency=10,
        max_attempts=3,
        backoff=Backoff(kind="constant", base_s=0.5, jitter=False),
        drain_timeout_s=None,
        retry_budget=RetryBudget(ratio=0.2, min_retries_per_s=0, window_s=100),
    )
    result = simulate(scenario(10, config), engine="asyncio")
    s = result.summary
    assert (s["attempts_total"], s["retries_total"], s["retries_denied"]) == (12, 2, 10)
    assert (s["items_dead_lettered"], s["sim_time_s"], s["breaker_open_s"]) == (10, 2.5, 0.0)
    assert s["engine"] == "asyncio"
    assert list(result.items["attempts"]) == [2, 2] + [1] * 8


def test_breaker_counts_equal_the_hand_computation():
    # One worker, 1 s calls, all failing, max_attempts 1; window 4 -> open at 4 for 10 s.
    # Items 5..20 are each held once (16 refusals) and probe at 14, 25, ..., 179 (every
    # 11 s), each failing and reopening the breaker. Open: [4, 14) then 15 spells of 10 s
    # after the probes of items 5..19, and the last probe reopens it at 180 when the run
    # ends: 10 + 150 = 160 s.
    breaker = CircuitBreaker(window=4, min_calls=4, open_s=10, half_open_calls=1)
    config = PipelineConfig(concurrency=1, max_attempts=1, drain_timeout_s=None, breaker=breaker)
    result = simulate(scenario(20, config), engine="asyncio")
    s = result.summary
    assert (s["attempts_total"], s["items_dead_lettered"], s["sim_time_s"]) == (20, 20, 180.0)
    assert (s["breaker_open_s"], s["retries_denied"]) == (160.0, 0)
    starts = result.items["start_s"].to_numpy()
    assert np.array_equal(starts, [0, 1, 2, 3, *(14 + 11 * k for k in range(16))])


def test_auto_runs_the_kernel_for_a_budget_and_a_breaker_and_the_engine_for_a_limit():
    # The exact kernel replays the budget and the breaker (tests/sim/running/kernel/
    # test_kernel_guard_equality.py holds it item by item); an adaptive limit stays with
    # the engine, and the kernel refuses it in one line.
    config = PipelineConfig(concurrency=2, drain_timeout_s=None, breaker=CircuitBreaker(),
                            retry_budget=RetryBudget())  # fmt: skip
    sc = scenario(5, config, failure=0.0)
    kernel, engine = simulate(sc), simulate(sc, engine="asyncio")
    assert (kernel.summary["engine"], engine.summary["engine"]) == ("kernel", "asyncio")
    for key in ("attempts_total", "items_completed", "breaker_open_s", "retries_denied"):
        assert kernel.summary[key] == engine.summary[key], key
    limited = scenario(5, PipelineConfig(concurrency_limit=AIMD()), failure=0.0)
    assert simulate(limited).summary["engine"] == "asyncio"
    with pytest.raises(ValueError, match=r"adaptive concurrency limits") as raised:
        simulate(limited, engine="kernel")
    assert "\n" not in str(raised.value)


def test_summaries_without_the_controls_keep_their_keys():
    summary = simulate(scenario(5, PipelineConfig(), failure=0.0)).summary
    assert "retries_denied" not in summary and "breaker_open_s" not in summary


def test_a_simulation_with_the_controls_is_repeatable():
    config = PipelineConfig(
        concurrency=3,
        max_attempts=4,
        backoff=Backoff(base_s=0.2, jitter=True),
        drain_timeout_s=None,
        retry_budget=RetryBudget(ratio=0.1, min_retries_per_s=0.5, window_s=5),
        breaker=CircuitBreaker(window=10, min_calls=5, open_s=2, half_open_calls=2),
    )
    sc = Scenario(
        arrivals=Trace(list(np.linspace(0, 60, 200))),
        service=Constant(0.3),
        config=config,
        failures=IndependentFailures(0.6),
        n_items=200,
        seed=7,
    )
    first, second = simulate(sc), simulate(sc)
    assert first.summary["retries_denied"] > 0 and first.summary["breaker_open_s"] > 0
    for key in ("retries_denied", "breaker_open_s", "attempts_total", "items_completed"):
        assert first.summary[key] == second.summary[key]
    assert first.items.equals(second.items)
