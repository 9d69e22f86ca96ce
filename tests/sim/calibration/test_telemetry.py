"""Calibration from telemetry recovers a known truth within its sampling error.

The truth: Poisson arrivals at 5/s, log-normal service (mean 0.2 s, cv 1),
each attempt failing with probability 0.05, 4 workers. The run is simulated,
its metrics are queried as Prometheus would answer ``query_range`` every 15 s
(``tests/sim/workloads/telemetry/scraped.py``), read and fitted. Each recovered
number must sit within its own interval at 99.9% (z = 3.29): the Poisson
count's for the rate, the Wilson interval for the failure share, the
maximum-likelihood standard errors for the service mean and p95. The intervals
themselves are checked by coverage over seeds where that is cheap.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline._metric_names import BUCKETS_S
from pipeline.sim import IndependentFailures, LogNormal, Poisson, Scenario, simulate
from pipeline.sim.calibration.histogram import fit_histogram
from pipeline.sim.calibration.telemetry import calibrate_observed, service_quantile
from pipeline.sim.running.scrape import query_range_answer
from pipeline.sim.stats.chisquare import dispersion_test
from pipeline.sim.stats.intervals import proportion_ci
from pipeline.sim.workloads.arrivals import TimeVarying
from pipeline.sim.workloads.telemetry.observed import Observed, ServiceHistogram
from pipeline.sim.workloads.telemetry.prometheus import read
from tests.sim.workloads.telemetry.scraped import save

RATE, MEAN, CV, P_FAIL, WORKERS = 5.0, 0.2, 1.0, 0.05, 4
WINDOW_S = 1200.0  # 80 steps of 15 s
Z999 = NormalDist().inv_cdf(1 - 0.001 / 2)
TRUE_P95 = service_quantile(LogNormal(mean=MEAN, cv=CV), 0.95)


def _truth(seed: int) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=RATE), service=LogNormal(mean=MEAN, cv=CV),
        config=PipelineConfig(concurrency=WORKERS, queue_maxsize=1000),
        failures=IndependentFailures(P_FAIL), duration_s=WINDOW_S, seed=seed,
    )  # fmt: skip


def _calibrated(tmp_path, seed: int, engine: str = "auto"):
    result = simulate(_truth(seed), engine=engine)
    answer = query_range_answer(result, start_s=1.7e9, step_s=15.0, until_s=WINDOW_S)
    return calibrate_observed(read(str(save(answer, tmp_path / "range.json")))), result


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_simulated_run_is_recovered_within_its_sampling_error(tmp_path, engine):
    fit, result = _calibrated(tmp_path, seed=11, engine=engine)
    d = fit.to_dict()
    # Arrivals: N ~ Poisson(rate * T), so the rate is within z sqrt(rate T) / T.
    assert abs(d["arrival_rate_per_s"] - RATE) <= Z999 * math.sqrt(RATE * WINDOW_S) / WINDOW_S
    assert d["window_s"] == WINDOW_S
    assert fit.arrivals.kind == "poisson"  # a constant rate, as the dispersion test found
    # Failures: the truth inside the Wilson interval at 99.9%.
    failed, attempts = fit.failures_counted
    wilson = proportion_ci(failed, attempts, level=0.999)
    assert wilson.low <= P_FAIL <= wilson.high
    assert d["failure_rate"] == pytest.approx(failed / attempts)
    # Service: a log-normal passed its chi-square test; mean and p95 within 3.29 SE.
    assert d["service"]["fitted"] == "lognormal"
    service = fit.service
    assert abs(d["service_mean_s"] - MEAN) <= Z999 * service.mean_se_s
    assert abs(d["service_p95_s"] - TRUE_P95) <= Z999 * service.p95_se_s
    assert d["concurrency"] == WORKERS
    assert (
        d["backlog"]
        == result.timeseries["queue_depth"].to_numpy()[
            np.searchsorted(result.timeseries["time_s"].to_numpy(), WINDOW_S, side="right") - 1
        ]
    )
    for part in ("arrivals", "service", "failures", "workers"):
        assert d[part]["how"]


def test_both_engines_give_the_same_calibration(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    kernel, _ = _calibrated(tmp_path / "a", seed=5, engine="kernel")
    engine, _ = _calibrated(tmp_path / "b", seed=5, engine="asyncio")
    a, b = kernel.to_dict(), engine.to_dict()
    for key in ("arrival_rate_per_s", "service_mean_s", "service_p95_s", "failure_rate"):
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key


def test_the_calibrated_scenario_predicts_what_the_original_does(tmp_path):
    fit, _ = _calibrated(tmp_path, seed=3)
    # Utilisation = rate * mean service * attempts per item / workers: the load the twin carries.
    original = simulate(_truth(21), replications=4)
    twin = simulate(fit.scenario, replications=4)
    u0 = np.array([r.summary["utilisation"] for r in original.results])
    u1 = np.array([r.summary["utilisation"] for r in twin.results])
    # The fit's own error (rate and mean, each a few %) dominates the replications' spread.
    rel = math.hypot(Z999 / math.sqrt(RATE * WINDOW_S), Z999 * fit.service.mean_se_s / MEAN)
    assert abs(u1.mean() / u0.mean() - 1) <= rel + Z999 * u0.std(ddof=1) / u0.mean()


@pytest.mark.slow
def test_the_histogram_fit_s_interval_covers_the_truth():
    # 200 samples of 2,000 log-normal times into the contract's buckets: the 95% interval
    # (fit +- 1.96 SE) must cover the true mean in about 95% of them. Binomial(200, 0.95)
    # falls below 181 with probability < 0.001.
    rng = np.random.default_rng(7)
    sigma = math.sqrt(math.log1p(CV * CV))
    mu = math.log(MEAN) - sigma * sigma / 2
    bounds = np.array([*BUCKETS_S, math.inf])
    covered = passed = 0
    for _ in range(200):
        x = rng.lognormal(mu, sigma, 2000)
        hist = ServiceHistogram(bounds, np.array([(x <= b).sum() for b in bounds]), float(x.sum()))
        fit = fit_histogram(hist)
        covered += abs(fit.lognormal.mean - MEAN) <= 1.96 * fit.mean_se_s
        passed += fit.family == "lognormal"
    assert covered >= 181
    # The chi-square test at 5% rejects a true log-normal in about 5% of samples.
    assert passed >= 181


def test_the_dispersion_test_holds_its_level_and_sees_a_rate_that_varies():
    # Constant-rate Poisson counts: rejected in about 5% of 400 seeds (Binomial(400, 0.05)
    # exceeds 35 with probability < 0.001); a rate doubling half-way is always seen.
    rng = np.random.default_rng(3)
    rejected = sum(dispersion_test(rng.poisson(75, 80)).p_value < 0.05 for _ in range(400))
    assert rejected <= 35
    counts = np.concatenate([rng.poisson(50, 40), rng.poisson(100, 40)])
    observed = Observed(
        source="test", interval_s=15.0, counts=counts,
        histogram=ServiceHistogram(np.array([0.5, math.inf]), np.array([90.0, 100.0])),
        workers=2,
    )  # fmt: skip
    fit = calibrate_observed(observed)
    assert isinstance(fit.scenario.arrivals, TimeVarying)
    assert fit.arrivals.kind == "time_varying"
    assert fit.scenario.arrivals.rate == pytest.approx(counts.sum() / (80 * 15.0))


def test_arrivals_and_service_one_by_one_are_fitted_as_calibrate_does():
    rng = np.random.default_rng(2)
    arrivals = np.cumsum(rng.exponential(1 / RATE, 3000))
    service = rng.lognormal(
        math.log(MEAN) - math.log1p(CV * CV) / 2, math.sqrt(math.log1p(1)), 3000
    )
    fit = calibrate_observed(
        Observed(source="test", arrivals_s=arrivals, service_s=service, attempts=3000, failed=150),
        concurrency=3,
    )
    assert fit.arrivals.kind == "poisson"
    assert fit.service.family == "lognormal"
    assert fit.concurrency == 3
    assert fit.to_dict()["failure_rate"] == pytest.approx(0.05)


def test_quantiles_and_a_mean_make_a_log_normal():
    observed = Observed(
        source="test", interval_s=10.0, counts=np.full(30, 50.0),
        quantiles_s={0.5: 0.1, 0.95: 0.5}, workers=4,
    )  # fmt: skip
    fit = calibrate_observed(observed)
    assert fit.to_dict()["service_p95_s"] == pytest.approx(0.5)
    assert service_quantile(fit.scenario.service, 0.5) == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("observed", "message"),
    [
        (Observed(source="s", quantiles_s={0.5: 0.1}, interval_s=1.0, counts=[5.0]),
         "a log-normal needs two of"),
        (Observed(source="s", interval_s=1.0, counts=[0.0, 0.0], quantiles_s={0.5: 0.1, 0.9: 1.0}),
         r"^s: no arrivals counted in the window \(2 intervals of 1 s\)"),
        (Observed(source="s", interval_s=1.0, counts=[3.0], quantiles_s={0.5: 0.1, 0.9: 1.0}),
         "how many workers"),
        (Observed(source="s", interval_s=1.0, counts=[3.0]), "no service times"),
        (Observed(source="s", quantiles_s={0.5: 0.1, 0.9: 1.0}), "no arrivals"),
        (Observed(source="s", interval_s=1.0, counts=[3.0], quantiles_s={0.5: 0.1, 0.9: 1.0},
                  workers=1, attempts=4, failed=4), "every one of 4 attempts failed"),
        (Observed(source="Locust h.csv", interval_s=1.0, counts=[3.0],
                  quantiles_s={0.5: 0.02, 0.95: 0.02}, workers=1),
         r"^Locust h\.csv: its service times \(p50=0\.02 s, p95=0\.02 s\) admit no log-normal: "
         "p95 must be > p50"),
    ],
)  # fmt: skip
def test_what_cannot_be_fitted_is_one_clear_error(observed, message):
    with pytest.raises(ValueError, match=message):
        calibrate_observed(observed)


def test_the_rate_interval_of_counts_covers_the_truth():
    # Poisson counts per interval at a known rate: the 95% interval covers it in about 95%
    # of 400 seeds (Binomial(400, 0.95) falls below 368 with probability < 0.001).
    from pipeline.sim.calibration.arrivals import fit_counts

    rng = np.random.default_rng(5)
    covered = 0
    for _ in range(400):
        fit, _ = fit_counts(rng.poisson(RATE * 15.0, 40).astype(float), 15.0)
        covered += abs(fit.rate_per_s - RATE) <= fit.rate_ci95
    assert covered >= 368
