"""The plan's bounds hold their level on short, skewed runs (M/M/10, Erlang C exact).

Per-run mean waits of 2,000-item runs of M/M/10 at lambda = 8, mean service
1 s are skewed (skewness about 1.8, 0.2 even on log scale); a Student t bound
alone missed the true mean 2.7-4.0% of the time at 99%, t widened to a
lognormal bound 0.9-1.75% (1.75% at 30 replications). The bound now is the
widest of t, Hall's skewness-corrected t and the lognormal bound
(:func:`pipeline.sim.stats.intervals.mean_bounds`). Runs here start close
to steady state: the first 1,000 items of each are simulated and dropped
(the relaxation time at rho = 0.8 is a few dozen service times).

Tolerances, from the level alone: a bound at level L must miss at most
``1 - L`` of the time. Over N independent experiments with m misses, the
test fails only when the exact one-sided 99.9% (Clopper-Pearson) lower bound
on the miss rate lies above ``1 - L``: a bound that holds its level fails a
given check with probability at most 0.1%, whatever the seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.sim.analysis.planning import judgement
from pipeline.sim.analysis.planning.candidate import (
    Candidate,
    look_confidence,
    replication_schedule,
)
from pipeline.sim.analysis.planning.judgement import judge
from pipeline.sim.analysis.planning.slo import SLO
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.running.kernel.fcfs import _starts
from pipeline.sim.stats.intervals import (
    lognormal_mean_bounds,
    mean_bounds,
    proportion_bound,
    skew_corrected_bounds,
    t_quantile,
)
from tests.docs.figures import quoted
from tests.docs.snippets import shows

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
    """Whether ``misses`` in ``trials`` is consistent with a miss rate of at most ``allowed``."""
    return proportion_bound(misses, trials, 0.999, upper=False) <= allowed


@pytest.mark.slow  # a miss rate over many trials
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


def test_judge_keeps_t_on_symmetric_values_with_no_log():
    # A zero has no log and three symmetric values no skew: the bound is Student t's.
    slo = SLO.parse("wait_mean_s<=1")
    j = judge(slo, [0.0, 0.2, 0.4], confidence=0.95)
    t_high = 0.2 + t_quantile(0.95, 2) * 0.2 / math.sqrt(3)
    assert j.high == pytest.approx(t_high) and j.low == pytest.approx(0.4 - t_high)


def test_mean_bounds_widen_on_the_skewed_side_only_and_mirror_negative_values():
    x = np.array([0.11, 0.12, 0.13, 0.15, 0.18, 0.25, 0.4, 0.9])
    n, mean = x.size, float(x.mean())
    t_half = t_quantile(0.99, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    low, high = mean_bounds(x, 0.99)
    assert high > mean + t_half  # right skew: the upper side is wider
    hall_low, hall_high = skew_corrected_bounds(x, 0.99)
    assert hall_low < mean < hall_high and hall_high > mean + t_half
    assert hall_low > mean - t_half  # Hall's correction narrows the light side: t keeps it
    assert low == pytest.approx(min(mean - t_half, lognormal_mean_bounds(x, 0.99)[0]))
    m_low, m_high = mean_bounds(-x, 0.99)
    assert (m_low, m_high) == pytest.approx((-high, -low))
    assert mean_bounds([2.0, 2.0, 2.0]) == (2.0, 2.0)


@pytest.mark.parametrize("values", [[1.0], [1.0, math.nan], [1.0, math.inf]])
def test_mean_bounds_refuse_too_few_or_non_finite_values(values):
    with pytest.raises(ValueError, match="samples"):
        mean_bounds(values)
    with pytest.raises(ValueError, match="samples"):
        skew_corrected_bounds(values)


LOOKS = (3, 6, 12, 30)


def _per_look_misses(values: np.ndarray, level: float) -> dict:
    """Misses of the judged bounds, per replication count, over independent looks.

    Per ``k``: ``(looks, upper misses, lower misses, t alone's upper misses, t or
    lognormal's upper misses)``, the last two the rules the bound replaced.
    """
    runs = values.size
    slo = SLO.parse(f"wait_mean_s<={TRUE_WAIT_S}")
    out = {}
    for k in LOOKS:
        rows = values[: runs // k * k].reshape(-1, k)
        high = low = t_high = t_or_lognormal_high = 0
        for row in rows:
            j = judge(slo, row, confidence=level)
            high += j.high < TRUE_WAIT_S
            low += j.low > TRUE_WAIT_S
            t_bound = row.mean() + t_quantile(level, k - 1) * row.std(ddof=1) / math.sqrt(k)
            t_high += t_bound < TRUE_WAIT_S
            lognormal = lognormal_mean_bounds(row, level)[1]
            t_or_lognormal_high += max(t_bound, lognormal) < TRUE_WAIT_S
        out[k] = (rows.shape[0], high, low, t_high, t_or_lognormal_high)
    return out


def _skewness(values: np.ndarray) -> float:
    deviations = values - values.mean()
    return float((deviations**3).mean() / (deviations**2).mean() ** 1.5)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("items", "runs", "seed"), [(2_000, 9_000, 19_002), (10_000, 3_000, 19_010)]
)
def test_per_look_bound_holds_its_level_on_short_skewed_runs(items, runs, seed):
    """Each look's 99% bounds, at 3, 6, 12 and 30 replications, on 2,000- and 10,000-item runs.

    ``runs`` independent runs (seed ``seed``) are cut into independent looks of
    k replications (3,000 / 1,500 / 750 / 300 looks at 2,000 items; 1,000 /
    500 / 250 / 100 at 10,000); each look's upper and lower bound is checked
    against Erlang C with the 99.9% rule of the module docstring. The statistics
    guide quotes these very looks: its table, from the 2,000-item runs, the
    misses of the rules this bound replaced too. About 35 s (2,000 items) and
    20 s of CPU.
    """
    level = 0.99
    values = _run_mean_waits(seed, runs, items)
    misses = _per_look_misses(values, level)
    for k, (looks, high, low, _, _) in misses.items():
        for side, missed in (("upper", high), ("lower", low)):
            assert _not_above(missed, looks, 1 - level), (
                f"{items:,} items, k={k}: the {side} 99% bound missed {missed}/{looks}"
            )
    guide = "docs/guide/statistics.md"
    if items == 10_000:
        said = quoted(
            guide,
            r"on 3,000 runs of 10,000 items the rule now missed ([\d,/]+), ([\d,/]+),"
            r" ([\d,/]+) and ([\d,/]+)\)",
        )
        for offset, (looks, high, *_) in enumerate(misses.values()):
            assert said[1 + offset] == f"{high}/{looks:,}", (items, said[1 + offset])
        return
    says_runs = quoted(guide, r"Measured against Erlang C on (\S+) runs of (\S+) items")
    assert (says_runs[1], says_runs[2]) == (f"{runs:,}", f"{items:,}")
    for k, (looks, high, _, t_high, t_or_lognormal_high) in misses.items():
        row = quoted(guide, rf"\| {k} \| ([\d,]+) \| (.+?) \| (.+?) \| (.+?) \|")
        assert row[1] == f"{looks:,}", row[0]
        for cell, count in zip(row.groups()[1:], (t_high, t_or_lognormal_high, high), strict=True):
            assert shows(cell, f"{count} ({100 * count / looks}%)"), (row[0], cell, count, looks)
    # the skew that makes t miss, on these runs and on their logarithms
    said = quoted(
        guide,
        r"skewness about ([\d.]+) for 2,000-item M/M/10 runs at 80%, and still ([\d.]+) on"
        r" their logarithms",
    )
    assert shows(said[1], f"{_skewness(values)}"), (said[1], _skewness(values))
    assert shows(said[2], f"{_skewness(np.log(values))}"), (said[2], _skewness(np.log(values)))
    # two replications: Student t, whose 97.5% upper bound misses these runs' mean too often
    pairs = values.reshape(-1, 2)
    t_high = pairs.mean(axis=1) + t_quantile(0.975, 1) * pairs.std(axis=1, ddof=1) / math.sqrt(2)
    missed = int((t_high < TRUE_WAIT_S).sum())
    said = quoted(guide, r"missed (\d+) of ([\d,]+) pairs of these runs \(([\d.]+)%\)")
    assert (int(said[1]), said[2]) == (missed, f"{len(pairs):,}"), said[0]
    assert shows(said[3], f"{100 * missed / len(pairs)}"), said[0]


def student_t_bounds(samples, level: float = 0.95) -> tuple[float, float]:
    """Student t's one-sided bounds alone: the rule the skew-robust bounds replaced."""
    x = np.asarray(samples, dtype=float)
    half = t_quantile(level, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return float(x.mean()) - half, float(x.mean()) + half


def _wrong_choices(values: np.ndarray, slo: SLO, confidence: float) -> int:
    """How many of the plans (a row of ``values`` each) chose the failing c = 10."""
    schedule = replication_schedule(3, 30)
    per_look = look_confidence(confidence, len(schedule))
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
    return wrong


@pytest.mark.slow
def test_wrong_choice_rate_near_a_boundary_on_short_runs(monkeypatch):
    """The plan's wrong-choice rate at most 1 - confidence on a near-boundary case.

    400 independent plans (seed 20,261,201) on 2,000-item runs, each looking
    at 3, 6, 12, 24, 30 replications; the 99.9% rule of the module docstring
    on the count that chose the failing c = 10. The same plans judged by
    Student t alone, the rule before, give the statistics guide's contrast.
    About 25 s of CPU.
    """
    # wait_mean_s <= 0.195: c = 10 truly fails (0.2046 s, 4.9% over), so choosing it is
    # wrong; the plan's looks at 3, 6, 12, 24, 30 replications each at 99%.
    confidence, plans = 0.95, 400
    slo = SLO.parse("wait_mean_s<=0.195")
    values = _run_mean_waits(20_261_201, plans * replication_schedule(3, 30)[-1], 2000)
    values = values.reshape(plans, -1)
    wrong = _wrong_choices(values, slo, confidence)
    assert _not_above(wrong, plans, 1 - confidence), f"chose the failing c=10 in {wrong}/{plans}"
    monkeypatch.setattr(judgement, "mean_bounds", student_t_bounds)
    wrong_t = _wrong_choices(values, slo, confidence)
    said = quoted(
        "docs/guide/statistics.md",
        r"chose the failing c = 10 in (\d+) of (\d+) plans \(([\d.]+)%; promised at most 5%;"
        r" (\d+) \(([\d.]+)%\) with t alone\)",
    )
    assert (int(said[1]), int(said[2]), int(said[4])) == (wrong, plans, wrong_t), said[0]
    assert shows(said[3], f"{100 * wrong / plans}"), said[0]
    assert shows(said[5], f"{100 * wrong_t / plans}"), said[0]


def test_lognormal_bounds_over_many_decades_are_infinite_not_a_warning():
    # Waits near instability spread over hundreds of decades: the upper bound is inf (the
    # verdict is then undecided or fails), never an overflow warning, which is an error here.
    low, high = lognormal_mean_bounds([1e-300, 1e300, 1.0], level=0.99)
    assert high == float("inf") and 0 <= low <= high
