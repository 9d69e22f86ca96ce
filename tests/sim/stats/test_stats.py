"""Estimation helpers: t quantiles, interval coverage, batch means, step functions."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from pipeline.sim.stats.intervals import (
    batch_means_ci,
    mean_ci,
    proportion_ci,
    robust_mean_ci,
    summarise_values,
    t_quantile,
)
from pipeline.sim.stats.quantiles import percentiles, quantiles
from pipeline.sim.stats.stepstats import time_weighted_mean, time_weighted_quantile


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        # standard t tables (6 decimals)
        (0.975, 9, 2.262157),
        (0.975, 1, 12.706205),
        (0.975, 2, 4.302653),
        (0.975, 3, 3.182446),
        (0.95, 5, 2.015048),
        (0.999, 4, 7.173182),
        (0.995, 30, 2.749996),
        (0.975, 100, 1.983972),
        (0.975, 1000, 1.962339),
        (0.975, 1e9, 1.959964),
        (0.9, 19, 1.327728),
    ],
)
def test_t_quantile_table(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-6)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, abs=2e-6)


def test_t_quantile_is_continuous_across_methods():
    # the incomplete-beta solver (df <= 200) and Cornish-Fisher (df > 200) agree:
    # moving df by 1e-4 moves the quantile by about 6e-9, the methods by ~1e-12
    assert t_quantile(0.975, 200) == pytest.approx(t_quantile(0.975, 200.0001), abs=1e-8)
    assert t_quantile(0.5, 7) == 0.0
    with pytest.raises(ValueError, match=r"p must be < 1"):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError, match=r"df must be > 0"):
        t_quantile(0.9, 0)


def test_mean_ci_known_value():
    ci = mean_ci([1, 2, 3, 4, 5])
    assert ci.mean == 3.0
    # t_{0.975,4} * s / sqrt(5), s = sqrt(2.5)
    assert ci.half_width == pytest.approx(2.776445 * math.sqrt(2.5) / math.sqrt(5), rel=1e-6)
    mean, half = ci  # unpacks as a pair
    assert ci.low == mean - half and ci.contains(3.5) and not ci.contains(10)


def test_mean_ci_coverage():
    # 2000 replications of 10 normal samples: the 95% interval should cover the
    # true mean 95% of the time; check with a 99.99% Wilson interval on the count.
    rng = np.random.default_rng(3)
    data = rng.normal(5.0, 2.0, size=(2000, 10))
    covered = sum(mean_ci(row).contains(5.0) for row in data)
    assert proportion_ci(covered, 2000, level=0.9999).contains(0.95)


def test_batch_means_on_an_autocorrelated_series():
    # x_t = mean of 50 consecutive iid N(0,1): lag correlation up to 49 steps,
    # long-run variance sum(weights)**2 = 1, so the mean of N values has SE
    # 1/sqrt(N), seven times the naive sqrt(var(x)/N) = 1/sqrt(50 N).
    rng = np.random.default_rng(8)
    n, window, reps = 20_000, 50, 300
    covered = 0
    for _ in range(reps):
        e = rng.standard_normal(n + window - 1)
        x = np.convolve(e, np.full(window, 1 / window), mode="valid")
        ci = batch_means_ci(x, n_batches=20)
        covered += ci.contains(0.0)
    assert proportion_ci(covered, reps, level=0.9999).contains(0.95)
    naive = mean_ci(x)
    assert ci.half_width > 4 * naive.half_width


def test_batch_means_drops_nothing():
    x = np.arange(1003, dtype=float)
    ci = batch_means_ci(x, n_batches=10)
    assert ci.mean == pytest.approx(x.mean())
    with pytest.raises(ValueError, match=r"n_batches must be >= 2"):
        batch_means_ci(x, n_batches=1)
    with pytest.raises(ValueError, match=r"at least 40 values, got 39"):
        batch_means_ci(x[:39], n_batches=20)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mean_ci([1.0]), r"at least 2 values, got 1"),
        (lambda: mean_ci([1.0, math.nan]), r"samples\[1\]=nan"),
        (lambda: mean_ci([1.0, 2.0], level=1.0), r"level must be < 1"),
        (lambda: mean_ci([[1.0, 2.0]]), "1-D"),
        (lambda: proportion_ci(3, 2), r"successes must be <= n=2, got 3"),
        (lambda: proportion_ci(0, 0), r"n must be >= 1"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_wilson_interval_values():
    # Wilson 95% for 0/10: [0, z^2 / (n + z^2)] = [0, 0.2775]
    ci = proportion_ci(0, 10)
    assert ci.estimate == 0.0 and ci.low == 0.0 and ci.high == pytest.approx(0.27753, abs=1e-5)
    ci = proportion_ci(5, 10)
    assert (ci.low, ci.high) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert proportion_ci(10, 10).high == 1.0
    assert proportion_ci(50, 1000, 0.99).contains(0.05)


STEP_T = [0.0, 1.0, 3.0]
STEP_V = [2.0, 4.0, 0.0]


def test_time_weighted_mean():
    # 2 on [0,1), 4 on [1,3), 0 on [3,4]
    assert time_weighted_mean(STEP_T, STEP_V, 4.0) == pytest.approx((2 + 8 + 0) / 4)
    assert time_weighted_mean(STEP_T, STEP_V, 4.0, t_start=0.5) == pytest.approx(9 / 3.5)
    assert time_weighted_mean(STEP_T, STEP_V, 2.0) == pytest.approx((2 + 4) / 2)  # clipped
    # equal times: the later value wins, the earlier one holds for zero time
    assert time_weighted_mean([0, 1, 1], [1, 100, 3], 2) == pytest.approx(2.0)
    assert time_weighted_mean([5.0], [7.0], 6.0) == 7.0


def test_time_weighted_mean_matches_fine_sampling():
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 100, 200))
    t[0] = 0.0
    v = rng.integers(0, 10, 200).astype(float)
    grid = np.linspace(0, 120, 1_200_001)[:-1] + 0.5 * 120 / 1_200_000
    sampled = v[np.searchsorted(t, grid, side="right") - 1]
    assert time_weighted_mean(t, v, 120.0) == pytest.approx(sampled.mean(), abs=1e-3)
    for q in (0.1, 0.5, 0.9, 0.99):
        assert time_weighted_quantile(t, v, 120.0, q) == np.quantile(
            sampled, q, method="inverted_cdf"
        )


def test_time_weighted_quantile():
    # held: 0 for 1 s, 2 for 1 s, 4 for 2 s (of 4 s)
    assert time_weighted_quantile(STEP_T, STEP_V, 4.0, 0.0) == 0.0
    assert time_weighted_quantile(STEP_T, STEP_V, 4.0, 0.25) == 0.0
    assert time_weighted_quantile(STEP_T, STEP_V, 4.0, 0.5) == 2.0
    assert time_weighted_quantile(STEP_T, STEP_V, 4.0, 0.51) == 4.0
    assert time_weighted_quantile(STEP_T, STEP_V, 4.0, 1.0) == 4.0
    # zero-duration values never count
    assert time_weighted_quantile([0, 1, 1], [1, 100, 3], 2, 1.0) == 3.0
    with pytest.raises(ValueError, match=r"q must be <= 1"):
        time_weighted_quantile(STEP_T, STEP_V, 4.0, 1.5)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (([0, 2, 1], [1, 1, 1], 3), {}, r"times\[1\]=2.0 then times\[2\]=1.0"),
        (([0, 1], [1], 3), {}, "one length"),
        (([], [], 3), {}, "non-empty"),
        (([0, 1], [1, 2], 0), {}, r"t_end must be > 0"),
        (([1, 2], [1, 2], 3), {"t_start": 0.5}, r"t_start must be >= 1"),
        (([0, 1], [1, math.inf], 3), {}, "finite"),
    ],
)
def test_step_function_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        time_weighted_mean(*args, **kwargs)


# -- mean +- CI with missing values: the one rule ------------------------------------------------


def test_summarise_values_is_the_robust_interval_when_every_value_is_there():
    values = [3.0, 5.0, 4.0, 6.5]
    for level in (0.95, 0.99):
        got = summarise_values(values, level=level)
        assert got == robust_mean_ci(values, level=level)
        assert got.mean == mean_ci(values, level).mean
        assert got.half_width >= mean_ci(values, level).half_width
    assert robust_mean_ci([2.0, 2.0, 2.0]) == (2.0, 0.0)


@pytest.mark.parametrize(
    ("values", "mean"),
    [
        ([2.0, math.nan, 4.0], 3.0),  # a run without a value: mean of the others, no interval
        ([2.0, math.inf], 2.0),  # non-finite counts as missing too
        ([7.0], 7.0),  # one value: no spread, no interval
        ([math.nan, math.nan], math.nan),  # nothing at all
        ([], math.nan),
    ],
)
def test_summarise_values_without_a_full_set_has_no_interval(values, mean):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in particular no "Mean of empty slice"
        got = summarise_values(np.array(values, dtype=np.float64))
    assert got.mean == pytest.approx(mean, nan_ok=True)
    assert math.isnan(got.half_width)


def test_summarise_values_rejects_bad_input():
    with pytest.raises(ValueError, match="values must be 1-D"):
        summarise_values([[1.0, 2.0]])
    with pytest.raises(ValueError, match="level must be < 1"):
        summarise_values([1.0, 2.0], level=1.0)


# -- one time average: StepSeries and the diagnostics' facts call time_weighted_mean ---------------


@pytest.fixture(scope="module")
def run():
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario, simulate

    scenario = Scenario(
        arrivals=Poisson(rate=3.5),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4, queue_maxsize=5),
        n_items=3000,
        seed=4,
    )
    return simulate(scenario)


@pytest.mark.parametrize("start_s", [0.0, 100.0, 333.3])
def test_step_series_time_mean_is_time_weighted_mean(run, start_s):
    s = run.series
    for values in (s.queue_depth, s.in_flight, s.in_system, s.upstream_backlog > 0):
        # the formula, bit for bit (numpy's own summation loop, never BLAS's threaded dot)
        ends = np.append(s.time_s[1:], s.end_s)
        durations = np.clip(ends - np.maximum(s.time_s, start_s), 0.0, None)
        before = float(np.einsum("i,i->", values, durations)) / float(durations.sum())
        assert s.time_mean(values, start_s) == before
        assert s.time_mean(values, start_s) == time_weighted_mean(
            s.time_s, values, s.end_s, t_start=start_s
        )
    assert math.isnan(s.time_mean(s.queue_depth, s.end_s))  # an empty window
    assert math.isnan(s.time_mean(s.queue_depth, s.end_s + 1.0))


def test_share_of_time_is_the_time_mean_of_the_mask(run):
    from pipeline.sim.analysis.diagnostics.facts import Facts

    facts, s = Facts(run), run.series
    full = s.queue_depth >= 5
    start, end = 50.0, 600.0
    share = facts.share_of_time(full, start, end)
    assert share == pytest.approx(time_weighted_mean(s.time_s, full, end, t_start=start))
    assert 0 < share < 1
    # past the end of the series nothing is held: the share shrinks with the window
    longer = facts.share_of_time(full, start, s.end_s + 100.0)
    expected = s.time_mean(full, start) * (s.end_s - start) / (s.end_s + 100.0 - start)
    assert longer == pytest.approx(expected)
    assert facts.share_of_time(full, end, start) == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 100, 1001])
def test_percentiles_equal_numpy_bit_for_bit(n):
    rng = np.random.default_rng(n)
    qs = (0, 1, 25, 33.3, 50, 95, 99, 99.9, 100)
    for values in (rng.exponential(1.0, n), np.round(rng.exponential(1.0, n), 1), np.ones(n)):
        original = values.copy()
        assert percentiles(values, qs) == np.percentile(values, qs).tolist()
        assert percentiles(values, (95,)) == [float(np.percentile(values, 95))]
        assert np.array_equal(values, original)  # the input is left alone


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 20_000])
def test_quantiles_equal_numpy_bit_for_bit(n):
    rng = np.random.default_rng(n)
    for level in (0.5, 0.9, 0.95, 0.975, 0.99, 0.999):
        qs = [1.0 - level, level]
        for values in (rng.standard_normal(n) * 3.0, np.round(rng.exponential(1.0, n), 1)):
            original = values.copy()
            assert quantiles(values, qs) == np.quantile(values, qs).tolist()
            assert np.array_equal(values, original)  # the input is left alone
            assert quantiles(values.copy(), qs, overwrite=True) == np.quantile(values, qs).tolist()


def test_percentiles_of_nothing_or_of_nan_are_nan():
    assert all(math.isnan(v) for v in percentiles(np.empty(0), (50, 95)))
    assert all(math.isnan(v) for v in percentiles(np.array([1.0, np.nan, 2.0]), (0, 50)))


def test_summaries_do_not_depend_on_how_many_blas_threads_a_process_has():
    # A Dask worker runs with one BLAS thread, a notebook's kernel with several; a
    # threaded dot product rounded their time-weighted means differently.
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json; from pipeline import PipelineConfig; "
        "from pipeline.sim import Exponential, Poisson, Scenario, simulate; "
        "s = simulate(Scenario(arrivals=Poisson(3.5), service=Exponential(1.0), "
        "config=PipelineConfig(concurrency=4), n_items=60_000, seed=2)).summary; "
        "s.pop('wall_time_s'); print(json.dumps(s))"
    )
    outputs = []
    for threads in ("1", "4"):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
