"""Intervals for percentiles across replications: coverage on distributions with a known answer.

Tolerances: each coverage check counts how often an interval covers the truth
over N independent experiments and asks the 99.9% Wilson interval of that
count to contain the nominal (or exact) coverage. A correct interval fails
this about once in a thousand seeds; one with the wrong spread (a normal z
where t is needed, or order statistics one place off) fails it for sure.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate
from pipeline.sim.stats.intervals import (
    proportion_ci,
    quantile_ci,
    robust_mean_ci,
    summarise_values,
)

P95_OF_EXPONENTIAL = math.log(20.0)  # the 0.95-quantile of Exponential(mean=1)


def _exact_order_statistic_coverage(n: int, q: float, level: float) -> float:
    """P(j <= B < k) for B ~ Binomial(n, q), with j, k chosen as quantile_ci documents."""
    pmf = [math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(n + 1)]
    cdf = np.cumsum(pmf)
    tail = (1 - level) / 2
    j = int(np.searchsorted(cdf, tail, side="right"))
    k = int(np.searchsorted(cdf, 1 - tail, side="left")) + 1
    return float(sum(pmf[j:k]))


@pytest.mark.slow  # coverage of 1,000 experiments
def test_t_interval_of_per_replication_p95_covers_the_true_p95():
    # 1000 experiments of R=10 replications, each replication's p95 from 2000 values.
    rng = np.random.default_rng(20261110)
    experiments, replications, items = 1000, 10, 2000
    samples = rng.exponential(1.0, (experiments, replications, items))
    p95 = np.percentile(samples, 95, axis=2)
    covered = sum(summarise_values(row).contains(P95_OF_EXPONENTIAL) for row in p95)
    band = proportion_ci(covered, experiments, level=0.999)
    assert band.contains(0.95), f"coverage {covered / experiments:.3f}, 99.9% band {band}"


def test_order_statistic_interval_has_its_exact_coverage():
    rng = np.random.default_rng(7)
    experiments, n, q = 2000, 100, 0.95
    exact = _exact_order_statistic_coverage(n, q, 0.95)
    assert exact >= 0.95  # conservative by construction
    samples = rng.exponential(1.0, (experiments, n))
    covered = sum(quantile_ci(row, q).contains(P95_OF_EXPONENTIAL) for row in samples)
    band = proportion_ci(covered, experiments, level=0.999)
    assert band.contains(exact), f"coverage {covered / experiments:.3f}, exact {exact:.4f}"


def test_order_statistic_interval_known_values():
    # n=6 at q=0.5: P(B=0) = P(B=6) = 1/64 <= 0.025, so [X_(1), X_(6)] at 96.9%.
    assert quantile_ci([5.0, 1.0, 4.0, 2.0, 6.0, 3.0], 0.5) == (3.5, 1.0, 6.0)
    # n=5: 1/32 > 0.025, so no order statistic bounds the median at 95%.
    ci = quantile_ci([1.0, 2.0, 3.0, 4.0, 5.0], 0.5)
    assert (ci.low, ci.high) == (-math.inf, math.inf) and ci.estimate == 3.0
    # A high quantile of a small sample can be bounded below but not above.
    ci = quantile_ci(np.arange(1.0, 21.0), 0.95)
    assert ci.high == math.inf and math.isfinite(ci.low)
    # The estimate is np.quantile's, as the summary's percentiles.
    x = np.random.default_rng(1).exponential(1.0, 1000)
    assert quantile_ci(x, 0.95).estimate == np.quantile(x, 0.95)


def test_order_statistic_interval_scales_to_many_values():
    x = np.random.default_rng(2).exponential(1.0, 1_000_000)
    ci = quantile_ci(x, 0.99)
    assert ci.low < math.log(100.0) < ci.high
    assert ci.high - ci.low < 0.05


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([], 0.5), "at least 1"),
        (([1.0, math.nan], 0.5), "finite"),
        (([1.0, 2.0], 0.0), "q must be > 0"),
        (([1.0, 2.0], 1.0), "q must be < 1"),
        (([1.0, 2.0], math.nan), "q"),
        (([1.0, 2.0], 0.5, 1.5), "level"),
    ],
)
def test_order_statistic_interval_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        quantile_ci(*args)


def test_replications_of_mm1_bracket_the_known_latency_p95():
    # M/M/1 FCFS: the sojourn time is exponential with rate mu - lambda = 0.5/s, so
    # p95 = ln(20) / 0.5 s. 200 cheap kernel replications of 2000 items each.
    scenario = Scenario(
        arrivals=Poisson(rate=0.5),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=1, queue_maxsize=None, drain_timeout_s=None),
        n_items=2000,
        seed=3,
        warmup_s=100.0,
    )
    runs = simulate(scenario, replications=200, processes=1, progress=False)
    truth = P95_OF_EXPONENTIAL / 0.5
    # 99% intervals: a single check that fails one seed in a hundred if the estimator is right.
    assert runs.interval("latency_p95_s", level=0.99).contains(truth)
    assert runs.quantile_interval("latency_p95_s", 0.5, level=0.99).contains(truth)
    assert runs.interval("latency_p95_s") == robust_mean_ci(runs.values("latency_p95_s"))
    summary = runs.summary.loc["latency_p95_s"]
    assert (summary["mean"], summary["half_width"]) == runs.interval("latency_p95_s")
