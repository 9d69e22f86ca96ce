"""The plan's bounds hold their level on short, skewed runs (M/M/10, Erlang C exact).

Per-run mean waits of 2,000-item runs of M/M/10 at lambda = 8, mean service
1 s are skewed (skewness about 2); a Student t bound alone missed the true
mean 4-6% of the time at 99%. Runs here start close to steady state: the
first 1,000 items of each are simulated and dropped (the relaxation time at
rho = 0.8 is a few dozen service times).

Tolerances, from the level alone: a bound at level L must miss at most
``1 - L`` of the time. Over N independent experiments with m misses, the test
fails only when the 99.9% Wilson interval of m / N lies wholly above
``1 - L``: a bound that holds its level fails this about once in a thousand
seeds or less; the t bound this replaced (4-6% at 99%) fails it for sure.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.sim.analysis.planning.candidate import (
    Candidate,
    look_confidence,
    replication_schedule,
)
from pipeline.sim.analysis.planning.judgement import judge
from pipeline.sim.analysis.planning.slo import SLO
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.running.kernel.fcfs import _starts
from pipeline.sim.stats.intervals import lognormal_mean_bounds, proportion_ci

ARRIVAL_RATE, SERVICE_MEAN_S, WORKERS = 8.0, 1.0, 10
WARM_ITEMS = 1000
TRUE_WAIT_S = mmc(ARRIVAL_RATE, SERVICE_MEAN_S, WORKERS).wait_mean_s  # 0.2046 s


def _run_mean_waits(seed: int, runs: int, items: int) -> np.ndarray:
    """Mean wait of each of ``runs`` independent M/M/10 runs of ``items`` counted items."""
    rng = np.random.default_rng(seed)
    n = items + WARM_ITEMS
    out = np.empty(runs)
    for r in range(runs):
        arrival = np.cumsum(rng.exponential(1.0 / ARRIVAL_RATE, n))
        start = _starts(arrival, rng.exponential(SERVICE_MEAN_S, n), WORKERS)
        out[r] = (start - arrival)[WARM_ITEMS:].mean()
    return out


def _not_above(misses: int, trials: int, allowed: float) -> bool:
    return proportion_ci(misses, trials, level=0.999).low <= allowed


def test_judged_bounds_hold_their_level_on_lognormal_values():
    rng = np.random.default_rng(20261201)
    experiments, level, sigma = 2000, 0.95, 0.8
    true_mean = math.exp(sigma**2 / 2)
    upper, lower = SLO.parse(f"wait_mean_s<={true_mean}"), SLO.parse(f"wait_mean_s>={true_mean}")
    for n in (3, 12):
        rows = rng.lognormal(0.0, sigma, (experiments, n))
        high = sum(judge(upper, row, confidence=level).high < true_mean for row in rows)
        low = sum(judge(lower, row, confidence=level).low > true_mean for row in rows)
        for side, missed in (("upper", high), ("lower", low)):
            assert _not_above(missed, experiments, 1 - level), f"n={n} {side}: {missed}"


@pytest.mark.parametrize(
    "values",
    [[1.0], [1.0, 0.0], [1.0, -2.0], [1.0, math.nan], [1.0, math.inf]],
)
def test_lognormal_bounds_refuse_what_has_no_log(values):
    with pytest.raises(ValueError, match="samples"):
        lognormal_mean_bounds(values)


def test_lognormal_bounds_are_repeatable_and_bracket_the_mean():
    x = [0.21, 0.18, 0.35, 0.19]
    low, high = lognormal_mean_bounds(x, 0.99)
    assert (low, high) == lognormal_mean_bounds(np.array(x), 0.99)
    assert low < float(np.mean(x)) < high


def test_judge_falls_back_to_t_where_logs_are_not_defined():
    slo = SLO.parse("wait_mean_s<=1")
    j = judge(slo, [0.0, 0.2, 0.4], confidence=0.95)
    assert j.interval is None and j.high == pytest.approx(j.mean + j.half_width)


@pytest.mark.slow
@pytest.mark.parametrize("replications", [3, 6, 12])
def test_per_look_bound_holds_its_level_on_short_skewed_runs(replications):
    level, experiments = 0.99, 250
    values = _run_mean_waits(19_000 + replications, experiments * replications, 2000)
    upper = SLO.parse(f"wait_mean_s<={TRUE_WAIT_S}")
    lower = SLO.parse(f"wait_mean_s>={TRUE_WAIT_S}")
    missed_high = missed_low = 0
    for row in values.reshape(experiments, replications):
        missed_high += judge(upper, row, confidence=level).high < TRUE_WAIT_S
        missed_low += judge(lower, row, confidence=level).low > TRUE_WAIT_S
    for side, missed in (("upper", missed_high), ("lower", missed_low)):
        assert _not_above(missed, experiments, 1 - level), (
            f"k={replications}: the {side} 99% bound missed {missed}/{experiments}"
        )


@pytest.mark.slow
def test_wrong_choice_rate_near_a_boundary_on_short_runs():
    # wait_mean_s <= 0.195: c = 10 truly fails (0.2046 s, 4.9% over), so choosing it is
    # wrong; the plan's looks at 3, 6, 12, 24, 30 replications each at 99%.
    confidence, plans = 0.95, 200
    slo = SLO.parse("wait_mean_s<=0.195")
    schedule = replication_schedule(3, 30)
    per_look = look_confidence(confidence, len(schedule))
    values = _run_mean_waits(20_261_201, plans * schedule[-1], 2000).reshape(plans, -1)
    wrong = 0
    for row in values:
        candidate = Candidate(0, {"concurrency": WORKERS})
        for count in schedule:
            candidate.values = [(v,) for v in row[:count]]
            candidate.counts = [(None,)] * count
            candidate.timed_out = [False] * count
            candidate.judge([slo], per_look)
            if candidate.verdict != "undecided":
                break
        wrong += candidate.verdict == "meets"
    assert _not_above(wrong, plans, 1 - confidence), f"chose the failing c=10 in {wrong}/{plans}"


def test_lognormal_bounds_over_many_decades_are_infinite_not_a_warning():
    # Waits near instability spread over hundreds of decades: the upper bound is inf (the
    # verdict is then undecided or fails), never an overflow warning, which is an error here.
    low, high = lognormal_mean_bounds([1e-300, 1e300, 1.0], level=0.99)
    assert high == float("inf") and 0 <= low <= high
