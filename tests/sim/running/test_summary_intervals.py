"""The summary's batch-means half-widths hold their 95% on M/M/10 (Erlang C exact).

``wait_mean_ci95_s`` and ``latency_mean_ci95_s`` are 95% half-widths: over
many independent runs, ``mean +- half`` must contain the true mean in at least
95% of them. Batch means of queueing runs are skewed to the right, and the
plain t half-width covered 84% at 5,000 items and 91% at 20,000 here.

Tolerance, from the level alone: with m misses in N runs, the test fails only
when the 99.9% Wilson interval of m / N lies wholly above 5%. An interval
that holds its level fails this about once in a thousand seeds or less.
"""

from __future__ import annotations

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.stats.intervals import proportion_ci

ARRIVAL_RATE, WORKERS = 8.0, 10
WARMUP_S = 125.0  # about 1,000 items at 8/s, dropped: runs are then close to steady state
TRUTH = mmc(ARRIVAL_RATE, 1.0, WORKERS)


def _misses(items: int, runs: int, key: str, truth: float) -> tuple[int, object]:
    scenario = Scenario(
        arrivals=Poisson(rate=ARRIVAL_RATE),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=WORKERS, queue_maxsize=None, drain_timeout_s=None),
        n_items=items + 1000,
        seed=items,
        warmup_s=WARMUP_S,
    )
    results = simulate(scenario, replications=runs, engine="kernel", processes=1, progress=False)
    means, halves = results.values(f"{key}_mean_s"), results.values(f"{key}_mean_ci95_s")
    missed = int((abs(means - truth) > halves).sum())
    return missed, proportion_ci(missed, runs, level=0.999)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("items", "runs", "key", "truth"),
    [
        (5_000, 400, "wait", TRUTH.wait_mean_s),
        (20_000, 300, "wait", TRUTH.wait_mean_s),
        (20_000, 300, "latency", TRUTH.latency_mean_s),
    ],
)
def test_batch_means_half_widths_cover_the_true_means(items, runs, key, truth):
    missed, band = _misses(items, runs, key, truth)
    assert band.low <= 0.05, f"{key}, {items:,} items: missed {missed}/{runs} ({band})"


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="known gap: on 5,000-item runs the latency's batch means (250 items each) are "
    "correlated and the widening on log scale barely moves them (about 90% coverage)",
)
def test_latency_half_width_on_5000_item_runs():
    missed, band = _misses(5_000, 400, "latency", TRUTH.latency_mean_s)
    assert band.low <= 0.05, f"latency, 5,000 items: missed {missed}/400 ({band})"
