"""The intervals printed across replications hold their level (M/M/c, Erlang C exact).

``--replications R``'s ``ci95`` object, ``Replications.interval``,
``summarise_sweep``'s ``_ci95`` columns and ``compare``'s paired interval all
come from :func:`~pipeline.sim.stats.intervals.robust_mean_ci` (through
``summarise_values`` and ``paired_difference``). Their values are one per
run: on 2,000-item M/M/10 runs at lambda = 8, mean service 1 s (skewness of
the mean wait about 1.8) the plain 95% Student t interval missed 7-8% of the
time at 3 to 12 replications, almost all above. From 6 replications the
interval is widened for that skew; with 3 to 5 it is Student t's, which holds
its level once the runs are long enough for their means to be nearly
symmetric (20,000 items at rho = 0.7 here: skewness about 0.4), and must stay
informative:
a bound on a skew that three values cannot show was a median 10.7 times as wide.

Runs start close to steady state: the first 1,000 items of each are
simulated and dropped (the relaxation time at rho = 0.8 is a few dozen
service times), or ``warmup_s`` of 125 s (about 1,000 items) cuts them from
the summary. Paired runs share their arrivals and service times (common
random numbers), as ``compare`` runs replication *r* of two configurations.

Tolerance, from the level alone: with m misses in N independent
experiments, a check fails only when the exact one-sided 99.9%
(Clopper-Pearson) lower bound on the miss rate lies above 5%: an interval
that holds its level fails a check with probability at most 0.1%. The
public-path check is two-sided: the count covered must lie in the 99.9%
acceptance region of Binomial(N, 0.95), so an interval too wide to say
anything (covering nearly always) fails it too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.running.kernel.fcfs import _starts
from pipeline.sim.stats.intervals import (
    lognormal_mean_bounds,
    mean_ci,
    paired_difference,
    proportion_bound,
    robust_mean_ci,
    skew_corrected_bounds,
    summarise_values,
)
from tests.docs.figures import quoted
from tests.docs.snippets import shows

ARRIVAL_RATE, WARM_ITEMS, ITEMS = 8.0, 1000, 2000
LEVEL = 0.95
GUIDE = "docs/guide/statistics.md"


def _mean_waits(seed: int, runs: int, workers: tuple[int, ...]) -> np.ndarray:
    """Mean wait of each run (rows) for each worker count (columns), same random numbers."""
    rng = np.random.default_rng(seed)
    n = ITEMS + WARM_ITEMS
    out = np.empty((runs, len(workers)))
    for r in range(runs):
        arrival = np.cumsum(rng.exponential(1.0 / ARRIVAL_RATE, n))
        service = rng.exponential(1.0, n)
        for j, c in enumerate(workers):
            out[r, j] = (_starts(arrival, service, c) - arrival)[WARM_ITEMS:].mean()
    return out


def _quotes_misses(pattern: str, misses: list[tuple[int, int]]) -> None:
    """The statistics guide says ``pattern``, whose groups are, for each ``(missed, looks)``
    of ``misses`` in turn, that count, the looks and the share in percent."""
    said = quoted(GUIDE, pattern)
    for index, (missed, looks) in enumerate(misses):
        count, of, percent = said.groups()[3 * index : 3 * index + 3]
        assert (int(count), of) == (missed, f"{looks:,}"), said[0]
        assert shows(percent, f"{100 * missed / looks}"), said[0]


def _holds(misses: int, trials: int) -> bool:
    return proportion_bound(misses, trials, 0.999, upper=False) <= 1 - LEVEL


@pytest.mark.slow
def test_replication_interval_covers_the_true_mean_wait_on_short_skewed_runs():
    """95% intervals over 6 and 10 replications of 2,000-item runs, widened for skew.

    6,000 runs (seed 19_101), ~6 s of CPU. Experiments: 1,000 at 6 replications,
    600 at 10. Below 6 the interval is Student t's, which on runs this short
    misses 7.1% at 3 (next test: longer runs).
    """
    truth = mmc(ARRIVAL_RATE, 1.0, 10).wait_mean_s
    waits = _mean_waits(19_101, 6000, (10,))[:, 0]
    widened = []
    for k in (6, 10):
        rows = waits.reshape(-1, k)
        missed = sum(not summarise_values(row, LEVEL).contains(truth) for row in rows)
        assert _holds(missed, len(rows)), f"k={k}: missed {missed}/{len(rows)}"
        widened.append((missed, len(rows)))
    # the statistics guide quotes these looks: Student t's misses, then the widened ones'
    plain = [
        (sum(not mean_ci(row).contains(truth) for row in rows), len(rows))
        for rows in (waits.reshape(-1, k) for k in (3, 6, 12))
    ]
    _quotes_misses(
        r"they missed (\d+) of ([\d,]+) looks \(([\d.]+)%\) at 3 replications, (\d+) of"
        r" ([\d,]+) \(([\d.]+)%\) at 6 and (\d+) of ([\d,]+) \(([\d.]+)%\) at 12;",
        plain,
    )
    _quotes_misses(
        r"the widened interval missed (\d+) of ([\d,]+) \(([\d.]+)%\) and, at 10, (\d+) of"
        r" ([\d,]+) \(([\d.]+)%\)",
        widened,
    )
    # what a skew bound would make of 3 of these values, which is why they get t
    lognormal, hall = [], []
    for row in waits.reshape(-1, 3):
        mean, t_half = float(row.mean()), mean_ci(row).half_width
        low, high = lognormal_mean_bounds(row, (1 + LEVEL) / 2)
        lognormal.append(max(high - mean, mean - low, t_half) / t_half)
        low, high = skew_corrected_bounds(row, (1 + LEVEL) / 2)
        hall.append(max(high - mean, mean - low) / t_half)
    said = quoted(
        GUIDE,
        r"\(([\d,]+) looks\) the lognormal bound made the half-width a median ([\d.]+) times"
        r" and a 95th percentile ([\d,]+) times t's [\s\S]*? and Hall's alone still ([\d.]+) times",
    )
    assert said[1] == f"{len(lognormal):,}", said[0]
    for shown, actual in zip(
        said.groups()[1:],
        (np.median(lognormal), np.percentile(lognormal, 95), np.median(hall)),
        strict=True,
    ):
        assert shows(shown, f"{actual}"), (said[0], actual)


def _acceptance_region(n: int, p: float, level: float) -> tuple[int, int]:
    """Counts ``[lo, hi]`` holding Binomial(n, p) with probability >= ``level``, equal tails."""
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    cdf = np.cumsum(pmf)
    tail = (1 - level) / 2
    lo = int(np.searchsorted(cdf, tail, side="right"))  # P(B < lo) <= tail
    hi = int(np.searchsorted(cdf, 1 - tail, side="left"))  # P(B > hi) <= tail
    return lo, hi


# 20,000 counted items a run at rho = 0.7: the run means' skewness is about 0.4, and 95%
# Student t intervals over 3 replications hold their level (36 of 600 missed; on 2,000-item
# runs at rho = 0.8 they miss 7.1%: the first test).
MMC = Scenario(
    arrivals=Poisson(7.0),
    service=Exponential(1.0),
    config=PipelineConfig(concurrency=10, queue_maxsize=None),
    n_items=21_000,
    warmup_s=125.0,
)


@pytest.mark.slow
def test_three_replications_cover_the_true_mean_wait_and_stay_informative():
    """``simulate(..., replications=3).interval("wait_mean_s")`` on 600 seeds (~18 s of CPU).

    M/M/10 at rho = 0.7, 20,000 counted items a run after 125 s of warm-up: long
    enough for the run means to be nearly symmetric, where Student t is honest.
    Short runs under-cover, as batch means do (see the module docstring). The
    count covered must lie in the two-sided 99.9% acceptance region of
    Binomial(600, 0.95), [551, 586]: an interval too wide to say anything,
    covering nearly always, fails it too.
    """
    truth = mmc(7.0, 1.0, 10).wait_mean_s
    experiments = 600
    covered = 0
    means = []
    for seed in range(experiments):
        runs = simulate(MMC.replace(seed=seed), replications=3, engine="kernel", progress=False)
        ci = runs.interval("wait_mean_s")
        assert ci == mean_ci(runs.values("wait_mean_s"))  # the very t interval
        covered += ci.contains(truth)
        means.extend(runs.values("wait_mean_s"))
    lo, hi = _acceptance_region(experiments, 0.95, 0.999)
    assert (lo, hi) == (551, 586)
    assert lo <= covered <= hi, f"covered {covered}/{experiments}, accepted [{lo}, {hi}]"
    said = quoted(
        GUIDE,
        r"on 20,000-item M/M/10 runs at 70% \(skewness ([\d.]+)\), 95% t intervals over 3"
        r" replications missed (\d+) of (\d+) \(([\d.]+)%\)",
    )
    deviations = np.asarray(means) - np.mean(means)
    skewness = (deviations**3).mean() / (deviations**2).mean() ** 1.5
    assert shows(said[1], f"{skewness}"), (said[0], skewness)
    assert (int(said[2]), int(said[3])) == (experiments - covered, experiments), said[0]
    assert shows(said[4], f"{100 * (experiments - covered) / experiments}"), said[0]


def test_three_replications_are_not_wildly_wider_than_student_t():
    # The run means the skew bound turned into 48,556 s where t gives 3.78 s.
    means = [2.27, 1.01, 4.04]
    assert robust_mean_ci(means).half_width == pytest.approx(3.7812, abs=1e-4)
    # On any three to five values: never wider than t (the lognormal bound made the
    # median 10.7 times and the 95th percentile 9,182 times t at 3 replications).
    rng = np.random.default_rng(20261206)
    for n in (3, 4, 5):
        for values in rng.lognormal(0.0, 1.5, (500, n)):
            assert robust_mean_ci(values).half_width <= mean_ci(values).half_width * (1 + 1e-12)


@pytest.mark.slow
def test_paired_difference_covers_the_true_difference():
    """c = 11 minus c = 10 on common random numbers; 3,000 paired runs (seed 19_102), ~15 s.

    Experiments: 500 at 6 replications, 300 at 10 (widened for skew). Below 6 the
    interval is Student t's, which on runs this short missed 8.3% at 3.
    """
    truth = mmc(ARRIVAL_RATE, 1.0, 11).wait_mean_s - mmc(ARRIVAL_RATE, 1.0, 10).wait_mean_s
    waits = _mean_waits(19_102, 3000, (10, 11))
    for k in (6, 10):
        pairs = waits.reshape(-1, k, 2)
        missed = sum(not paired_difference(p[:, 0], p[:, 1], LEVEL).contains(truth) for p in pairs)
        assert _holds(missed, len(pairs)), f"k={k}: missed {missed}/{len(pairs)}"
    # Student t at 3 replications, as the statistics guide quotes it
    pairs = waits.reshape(-1, 3, 2)
    missed = sum(not mean_ci(p[:, 1] - p[:, 0], LEVEL).contains(truth) for p in pairs)
    said = quoted(GUIDE, r"random numbers, (\d+) of ([\d,]+) at 3\.")
    assert (int(said[1]), said[2]) == (missed, f"{len(pairs):,}"), said[0]
