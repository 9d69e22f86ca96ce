"""Run-length advice: how many replications (or items) an interval needs, in words and numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.sim.stats.intervals import mean_ci, paired_difference, robust_mean_ci, t_quantile
from pipeline.sim.stats.runlength import (
    DEFAULT_RELATIVE_PRECISION,
    replications_needed,
    run_length_advice,
)

# Two values with sample standard deviation exactly 1 (ddof=1).
UNIT_SPREAD = [0.0, math.sqrt(2.0)]


def test_replications_needed_is_the_smallest_n_that_reaches_the_half_width():
    # s = 1: n = 18 gives t(0.975, 17) / sqrt(18) = 0.497 <= 0.5; n = 17 gives 0.514.
    assert replications_needed(UNIT_SPREAD, 0.5) == 18
    for target in (0.05, 0.2, 1.0):
        n = replications_needed(UNIT_SPREAD, target)
        assert t_quantile(0.975, n - 1) / math.sqrt(n) <= target
        assert n == 2 or t_quantile(0.975, n - 2) / math.sqrt(n - 1) > target


def test_replications_needed_follows_the_square_rule_for_many_runs():
    values = np.random.default_rng(4).normal(10.0, 2.0, 20)
    h0 = mean_ci(values).half_width
    n = replications_needed(values, h0 / 4)  # a quarter of the half-width: about 16x the runs
    assert 14 * 20 <= n <= 16 * 20


def test_replications_already_run_are_not_given_back():
    values = [1.0, 1.01, 0.99, 1.0, 1.0, 1.02]
    assert replications_needed(values, 10.0) == len(values)
    assert replications_needed([3.0, 3.0, 3.0], 0.1) == 3  # no spread at all


@pytest.mark.parametrize(
    ("values", "half_width", "match"),
    [
        ([1.0], 0.1, "at least 2"),
        ([1.0, math.nan], 0.1, "finite"),
        ([1.0, 2.0], 0.0, "half_width must be > 0"),
        ([1.0, 2.0], -1.0, "half_width"),
        ([1.0, 2.0], math.inf, "half_width"),
        ([1.0, 2.0], math.nan, "half_width"),
    ],
)
def test_replications_needed_bad_input(values, half_width, match):
    with pytest.raises(ValueError, match=match):
        replications_needed(values, half_width)


def test_precise_enough_gives_no_advice():
    assert run_length_advice(2.0, 0.2, 5) is None  # exactly 10%
    assert run_length_advice(2.0, 0.5, 5, relative_precision=0.25) is None
    assert run_length_advice(2.0, 0.5, 5, limit=3.0) is None  # clears the SLO
    assert run_length_advice(math.nan, 0.5, 5) is None  # nothing to judge
    assert run_length_advice(2.0, math.nan, 5) is None


def test_advice_for_precision_names_the_runs_needed():
    text = run_length_advice(2.0, 0.5, 5, metric="latency_p95_s")
    # +-25% to +-10%: (0.5 / 0.2)**2 = 6.25 times the 5 runs
    assert text.startswith("latency_p95_s = 2 ± 0.5 (95%) is ±25% of its mean")
    assert "about 32 replications (now 5)" in text and "n ~ n0 (h0/h)^2" in text
    assert "utilisation" not in text
    assert DEFAULT_RELATIVE_PRECISION == 0.10


def test_advice_for_an_slo_that_the_interval_straddles():
    text = run_length_advice(0.45, 0.1, 10, metric="latency_p95_s", limit=0.5, unit="items")
    # h must fall below |0.45 - 0.5| = 0.05: (0.1 / 0.05)**2 = 4 times the items
    assert "contains the limit 0.5" in text and "about 40 items (now 10)" in text
    stuck = run_length_advice(0.5, 0.1, 10, limit=0.5)
    assert "no run length will settle it" in stuck


def test_heavy_traffic_is_told_to_run_longer():
    light = run_length_advice(2.0, 0.5, 5, utilisation=0.5)
    heavy = run_length_advice(2.0, 0.5, 5, utilisation=0.95)
    assert "rho near 1" not in light
    assert "At utilisation 0.95 (rho near 1)" in heavy and "1/(1-rho)^2" in heavy


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n must be >= 1"),
        ({"relative_precision": 0}, "relative_precision"),
        ({"relative_precision": math.nan}, "relative_precision"),
        ({"limit": math.inf}, "limit"),
        ({"level": 0.0}, "level"),
        ({"unit": "seconds"}, "unit must be"),
    ],
)
def test_run_length_advice_bad_input(kwargs, match):
    args = {"mean": 2.0, "half_width": 0.5, "n": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        run_length_advice(args.pop("mean"), args.pop("half_width"), args.pop("n"), **args)


def test_paired_difference_known_value_and_errors():
    ci = paired_difference([1.0, 2.0, 3.0], [2.0, 3.0, 5.0])
    # differences 1, 1, 2: mean 4/3, s = 0.577, t(0.975, 2) = 4.303; three values cannot
    # show a skew, so the interval is Student t's (widened for skew from six values on).
    assert ci.mean == pytest.approx(4 / 3)
    assert ci == robust_mean_ci([1.0, 1.0, 2.0])
    assert ci.half_width == pytest.approx(4.302653 * math.sqrt(1 / 3) / math.sqrt(3), rel=1e-6)
    skewed = paired_difference([0.0] * 6, [1.0, 1.0, 1.0, 1.0, 1.0, 3.0])
    assert skewed.half_width > 2.570582 * float(np.std([1, 1, 1, 1, 1, 3], ddof=1)) / math.sqrt(6)
    # Symmetric differences keep the t half-width where the lognormal bound is not wider.
    sym = paired_difference([0.0, 0.0, 0.0], [-1.0, 0.0, 1.0])
    assert sym.half_width == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    with pytest.raises(ValueError, match="must pair up"):
        paired_difference([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        paired_difference([1.0, 2.0], [1.0, math.inf])


def test_replications_advice_uses_the_runs_own_interval():
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario, simulate

    heavy = Scenario(
        arrivals=Poisson(rate=3.8),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=None, drain_timeout_s=None),
        n_items=2000,
        seed=1,
    )
    runs = simulate(heavy, replications=3, processes=1, progress=False)
    mean, half = runs.interval("wait_mean_s")
    text = runs.advice("wait_mean_s")
    assert text is not None and "(now 3)" in text and "rho near 1" in text
    assert runs.advice("wait_mean_s", relative_precision=2 * half / mean) is None
    assert runs.advice("wait_mean_s", limit=mean + 2 * half) is None
