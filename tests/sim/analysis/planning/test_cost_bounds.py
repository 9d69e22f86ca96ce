"""The cost bounds a plan prints hold their level (M/M/c, Erlang C exact).

``CostEstimate.low``/``high`` are one-sided bounds, each at the level given,
on the cost per hour ``C_s c + C_w lambda W_q``; ``difference_bounds`` the same
for the paired difference of two configurations' totals, which the plan
uses to tell a cheaper rival apart. The waiting cost of a run is its mean
wait scaled, so on 2,000-item runs of M/M/10 at lambda = 8 it is as skewed
as the wait (about 1.8), and the Student t bounds these had missed far more
often than the level allows (above, on the totals; 2.7-4.0% at 99% on the
waits). Runs start close to steady state: the first 1,000 items of each are
simulated and dropped.

Tolerance, from the level alone: over N independent experiments with m
misses, a check fails only when the exact one-sided 99.9% (Clopper-Pearson)
lower bound on the miss rate lies above ``1 - level``: a bound holding its
level fails a check with probability at most 0.1%.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.sim import Exponential, Poisson, Scenario
from pipeline.sim.analysis.planning import cost
from pipeline.sim.analysis.planning.cost import (
    Cost,
    Mix,
    difference_bounds,
    estimate,
)
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.running.kernel.fcfs import _starts
from pipeline.sim.stats.intervals import proportion_bound
from tests.docs.figures import quoted
from tests.docs.snippets import shows
from tests.sim.analysis.planning.test_skewed_bounds import student_t_bounds

RATE, WARM_ITEMS, ITEMS, LEVEL = 8.0, 1000, 2000, 0.99
COST = Cost(worker_hour=1.0, wait_hour=40.0)
BASE = Scenario(arrivals=Poisson(rate=RATE), service=Exponential(mean=1.0), n_items=ITEMS)
MIX = Mix.single(BASE)


def _rows(seed: int, runs: int, workers: tuple[int, ...]) -> list[list[tuple[float, ...]]]:
    """Per worker count, one run's cost metrics (``COST.metrics(BASE)``; a fixed pool has no
    ``workers_mean``) per run; the runs share their random numbers."""
    rng = np.random.default_rng(seed)
    n = ITEMS + WARM_ITEMS
    out: list[list[tuple[float, ...]]] = [[] for _ in workers]
    for _ in range(runs):
        arrival = np.cumsum(rng.exponential(1.0 / RATE, n))
        service = rng.exponential(1.0, n)
        for j, c in enumerate(workers):
            wait = float((_starts(arrival, service, c) - arrival)[WARM_ITEMS:].mean())
            row = {"items_offered": ITEMS, "items_admitted": ITEMS, "items_completed": ITEMS,
                   "wait_mean_s": wait}  # fmt: skip
            out[j].append(tuple(row.get(key, math.nan) for key in COST.metrics(BASE)))
    return out


def _exact(c: int) -> float:
    return COST.worker_hour * c + COST.wait_hour * RATE * mmc(RATE, 1.0, c).wait_mean_s


def _holds(misses: int, trials: int) -> bool:
    return proportion_bound(misses, trials, 0.999, upper=False) <= 1 - LEVEL


@pytest.mark.slow
def test_cost_bounds_and_paired_difference_bounds_hold_their_level(monkeypatch):
    """99% bounds at 3, 6 and 12 replications; 3,600 paired runs (seed 19_201), ~20 s of CPU.

    Experiments: 1,200 at 3 replications, 600 at 6, 300 at 12; each checks the
    upper and lower bound of c = 10's total and of the difference c = 11 - c = 10.
    Then the 1,200 looks at 3 again with Student t alone: the misses the statistics
    guide quotes.
    """
    rows_10, rows_11 = _rows(19_201, 3600, (10, 11))
    truth, truth_diff = _exact(10), _exact(11) - _exact(10)
    for k in (3, 6, 12):
        looks = len(rows_10) // k
        missed = {"high": 0, "low": 0, "diff high": 0, "diff low": 0}
        for i in range(looks):
            a, b = rows_10[i * k : (i + 1) * k], rows_11[i * k : (i + 1) * k]
            e = estimate(COST, MIX, {"concurrency": 10}, a, LEVEL)
            missed["high"] += e.high < truth
            missed["low"] += e.low > truth
            low, high = difference_bounds(
                COST, MIX, a, {"concurrency": 10}, b, {"concurrency": 11}, LEVEL
            )
            missed["diff high"] += high < truth_diff
            missed["diff low"] += low > truth_diff
        for side, m in missed.items():
            assert _holds(m, looks), f"k={k}: the {side} 99% bound missed {m}/{looks}"
    # Student t alone, the rule before, at 3 replications: the statistics guide's contrast
    monkeypatch.setattr(cost, "mean_bounds", student_t_bounds)
    looks, high, diff_low = len(rows_10) // 3, 0, 0
    for i in range(looks):
        a, b = rows_10[i * 3 : (i + 1) * 3], rows_11[i * 3 : (i + 1) * 3]
        high += estimate(COST, MIX, {"concurrency": 10}, a, LEVEL).high < truth
        low, _ = difference_bounds(COST, MIX, a, {"concurrency": 10}, b, {"concurrency": 11}, LEVEL)
        diff_low += low > truth_diff
    said = quoted(
        "docs/guide/statistics.md",
        r"t alone missed (\d+) of ([\d,]+) looks \(([\d.]+)%\) at 99% over 3 replications on"
        r" the cost, and (\d+) \(([\d.]+)%\) on the difference\)",
    )
    assert (int(said[1]), said[2], int(said[4])) == (high, f"{looks:,}", diff_low), said[0]
    assert shows(said[3], f"{100 * high / looks}") and shows(said[5], f"{100 * diff_low / looks}")
