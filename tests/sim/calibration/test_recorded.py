"""calibrate() recovers known parameters from synthetic traces (runs recorded on the virtual clock).

The traces are recorded from the real engine running on the virtual clock with
known arrivals, service times and failures, so the true values are known
exactly. Tolerances come from each estimator's sampling distribution (stated
per test); the seeds are fixed, so a run either passes or fails for good.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from pipeline import Backoff, Chain, PermanentError, PipelineConfig, Stage
from pipeline.sim import (
    Empirical,
    Exponential,
    IndependentFailures,
    LogNormal,
    Poisson,
    TraceRecorder,
    calibrate,
    simulate,
)
from pipeline.sim.calibration.arrivals import fit_arrivals
from pipeline.sim.calibration.ks import ks_distance
from pipeline.sim.calibration.service import fit_service
from pipeline.sim.vloop import run_virtual
from pipeline.sim.workloads.traces.runtrace import RunTrace


def record(
    arrivals_s, service_s, *, fails=(), permanent=(), concurrency=4, capacity=None, max_attempts=3
):
    """Run one stage on the virtual clock and return its trace (and the true service times)."""
    recorder = TraceRecorder()
    config = PipelineConfig(
        concurrency=concurrency,
        queue_maxsize=None,
        max_attempts=max_attempts,
        backoff=Backoff.constant(0.01),
        drain_timeout_s=None,
    )
    draws = iter(service_s)
    lock = asyncio.Semaphore(capacity) if capacity else None
    attempts: dict[int, int] = {}

    async def handler(item):
        attempts[item] = attempts.get(item, 0) + 1
        seconds = next(draws)
        if lock is not None:
            async with lock:
                await asyncio.sleep(seconds)
        else:
            await asyncio.sleep(seconds)
        if item in permanent:
            raise PermanentError("bad item")
        if (item, attempts[item]) in fails:
            raise RuntimeError("transient")
        return item

    async def source():
        loop = asyncio.get_running_loop()
        for item, at in enumerate(arrivals_s):
            await asyncio.sleep(max(0.0, at - loop.time()))
            yield item

    async def main():
        recorder.start(0.0)
        await Chain(
            [Stage("work", handler, config, on_event=recorder.listener("work", capacity=capacity))]
        ).run(source())
        recorder.stop()

    run_virtual(main())
    return recorder.trace(configs={"work": config})


def test_poisson_arrivals_lognormal_service_and_failures_are_recovered():
    rng = np.random.default_rng(7)
    n, rate, p = 3000, 20.0, 0.1
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    truth = LogNormal(mean=0.1, cv=0.6)
    service = truth.sample(rng, 2 * n)
    fails = {(i, 1) for i in range(n) if rng.random() < p}
    fit = calibrate(record(arrivals, service, fails=fails))

    assert fit.arrivals.kind == "poisson"
    # The rate's 95% interval (Poisson count over the span) must contain the truth.
    assert abs(fit.arrivals.rate_per_s - rate) <= fit.arrivals.rate_ci95
    stage = fit.stages["work"]
    assert stage.service.family == "lognormal" and stage.service.fits
    # Mean of n log-normal draws: 3 standard errors (cv * mean / sqrt(n)).
    n_attempts = stage.service.n
    assert abs(stage.service.distribution.mean - 0.1) <= 3 * 0.6 * 0.1 / math.sqrt(n_attempts)
    # sigma of the logs has standard error sigma / sqrt(2n); cv = sqrt(exp(sigma^2) - 1).
    sigma = math.sqrt(math.log1p(0.6**2))
    fitted_sigma = math.sqrt(math.log1p(stage.service.distribution.cv**2))
    assert abs(fitted_sigma - sigma) <= 3 * sigma / math.sqrt(2 * n_attempts)
    # Failed share of attempts: the Wilson interval must hold the share that was scripted.
    scripted = len(fails) / (n + len(fails))
    assert stage.failure_rate.low <= scripted <= stage.failure_rate.high
    assert stage.permanent_fraction.estimate == 0
    assert isinstance(stage.spec.failures, IndependentFailures)


def test_exponential_service_is_told_apart_and_permanent_failures_counted():
    rng = np.random.default_rng(3)
    n = 2000
    arrivals = np.cumsum(rng.exponential(0.05, n))
    service = Exponential(mean=0.02).sample(rng, n)
    bad = {i for i in range(n) if rng.random() < 0.05}
    fit = calibrate(record(arrivals, service, permanent=bad))
    stage = fit.stages["work"]
    assert stage.service.family == "exponential" and stage.service.fits
    assert stage.permanent_fraction.low <= len(bad) / n <= stage.permanent_fraction.high
    assert stage.failure_rate.estimate == 0


def test_service_that_no_family_fits_is_resampled_and_a_backlog_replayed():
    rng = np.random.default_rng(5)
    n = 1500
    # Two modes, 5 ms and 80 ms: neither a log-normal nor an exponential.
    service = np.where(rng.random(n) < 0.7, 0.005, 0.08) * rng.uniform(0.95, 1.05, n)
    fit = calibrate(record(np.zeros(n), service))
    assert fit.arrivals.kind == "backlog"
    stage = fit.stages["work"]
    assert stage.service.family == "empirical" and not stage.service.fits
    assert isinstance(stage.spec.service, Empirical)
    # The twin of a backlog through 4 workers takes about sum(service) / 4.
    twin = simulate(fit.scenario)
    assert twin.summary["sim_time_s"] == pytest.approx(service.sum() / 4, rel=0.1)


def test_a_single_writer_behind_many_workers_is_one_server_and_its_times_are_rebuilt():
    rng = np.random.default_rng(11)
    n = 400
    service = rng.uniform(0.001, 0.01, n)
    trace = record(np.zeros(n), service, concurrency=8, capacity=1)
    stage = trace.stages["work"]
    # FIFO single server: service times rebuilt from departures are exact (virtual time).
    assert np.allclose(np.sort(stage.service_s()), np.sort(service), atol=1e-9)
    fit = calibrate(trace, family="empirical")
    assert fit.stages["work"].servers == 1
    assert fit.scenario.stages[0].config.concurrency == 1
    # Everyone waits for the writer: at the start all n wait (none is being written yet).
    _times, waiting = stage.waiting_depth()
    assert waiting.max() == n


def test_ks_distance_of_a_sample_from_its_own_law_is_small_and_from_another_large():
    rng = np.random.default_rng(1)
    x = rng.exponential(1.0, 5000)
    assert ks_distance(x, lambda v: 1 - np.exp(-v)) < 1.36 / math.sqrt(5000)
    assert ks_distance(x, lambda v: 1 - np.exp(-v / 3)) > 0.3


def test_bad_input_is_refused_naming_it():
    with pytest.raises(TypeError, match="trace must be a RunTrace"):
        calibrate({"work": []})
    trace = record([0.0], [0.01])
    with pytest.raises(ValueError, match="family must be one of"):
        calibrate(trace, family="weibull")
    with pytest.raises(ValueError, match="no service times"):
        fit_service(np.array([]))
    with pytest.raises(ValueError, match="no arrivals"):
        fit_arrivals(np.array([]))
    with pytest.raises(ValueError, match="non-decreasing"):
        RunTrace.of(list(trace.stages.values()), source_arrivals_s=[1.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        RunTrace.of(list(trace.stages.values()), source_arrivals_s=[math.nan])
    recorder = TraceRecorder()
    recorder.listener("a")
    with pytest.raises(ValueError, match="already has a listener"):
        recorder.listener("a")
    with pytest.raises(ValueError, match="never started"):
        recorder.trace(configs={"a": PipelineConfig()})


def test_a_calibrated_twin_replays_its_own_poisson_trace_closely():
    # Poisson in, lognormal service: the fitted twin's mean latency matches the run's
    # within the twin's own replication interval plus the run's batch-means spread.
    rng = np.random.default_rng(2)
    arrivals = np.cumsum(rng.exponential(1 / 30.0, 2000))
    trace = record(arrivals, LogNormal(mean=0.1, cv=0.5).sample(rng, 4000))
    fit = calibrate(trace)
    assert isinstance(fit.scenario.arrivals, Poisson)
    runs = simulate(fit.scenario, replications=5)
    stage = trace.stages["work"]
    done = stage.outcome == "completed"
    real = float(np.mean(stage.finish_s[done] - stage.arrival_s[done]))
    interval = runs.interval("latency_mean_s")
    assert abs(real - interval.mean) <= 3 * interval.half_width + 0.1 * real


def record_chain(*, n=200, children=4, batch_size=1, bad=(), seed=1):
    """A fetch stage that fans each page out into ``children`` records, into a write stage.

    The write stage is small and refuses what it cannot queue (``on_full="reject"``),
    or batches its input when ``batch_size`` > 1. Pages in ``bad`` fail for good.
    Returns the trace and the chain's report.
    """
    rng = np.random.default_rng(seed)
    recorder = TraceRecorder()
    fetch_config = PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=None)
    if batch_size > 1:
        write_config = PipelineConfig(concurrency=1, queue_maxsize=None, drain_timeout_s=None)
    else:
        write_config = PipelineConfig(
            concurrency=1, queue_maxsize=2, on_full="reject", drain_timeout_s=None
        )

    async def fetch(page):
        await asyncio.sleep(rng.exponential(0.01))
        if page in bad:
            raise PermanentError("no such page")
        return [page * children + k for k in range(children)]

    async def write(record):
        await asyncio.sleep(rng.exponential(0.01))

    stages = [
        Stage("fetch", fetch, fetch_config, fan_out=True, on_event=recorder.listener("fetch")),
        Stage(
            "write",
            write,
            write_config,
            batch_size=batch_size,
            on_event=recorder.listener("write"),
        ),
    ]
    arrivals = np.cumsum(rng.exponential(1 / 20.0, n))
    reports = []

    async def source():
        loop = asyncio.get_running_loop()
        for page, at in enumerate(arrivals):
            await asyncio.sleep(max(0.0, at - loop.time()))
            yield page

    async def main():
        recorder.start(0.0)
        reports.append(await Chain(stages).run(source()))
        recorder.stop()

    run_virtual(main())
    trace = recorder.trace(configs={"fetch": fetch_config, "write": write_config})
    return trace, reports[0]


def test_fan_out_counts_the_children_the_next_stage_shed():
    # 200 pages of 4 records into a write stage that sheds more than half of them:
    # fan-out is what fetch produced (4), not what write admitted (about 1.7).
    trace, report = record_chain()
    shed = len(report.stages["write"].shed)
    assert shed > 300  # the case that matters: most children never got a row at write
    assert trace.stages["write"].shed == shed
    assert len(trace.stages["write"]) + trace.stages["write"].shed == report.stages["fetch"].outputs
    assert trace.children_per_item("fetch") == 4.0
    fit = calibrate(trace)
    assert [stage.fan_out for stage in fit.stages.values()] == [4, 1]
    assert fit.to_dict()["stages"]["fetch"]["fan_out"] == 4
    # The twin now sees 800 records arrive at write and sheds as the run did; with the
    # admissions-only fan-out it predicted about a tenth of the real sheds.
    for engine in ("kernel", "asyncio"):
        twin = simulate(fit.scenario, replications=2, engine=engine)
        predicted = float(twin.values("items_shed").mean())
        assert shed / 2 < predicted < shed * 2, engine


def test_fan_out_of_a_stage_whose_items_fail_counts_per_completed_item():
    # Dead-lettered pages yield nothing: fan-out divides by completed items only.
    trace, report = record_chain(children=3, bad=set(range(0, 200, 5)))
    assert report.stages["fetch"].completed == 160
    assert len(report.stages["write"].shed) > 0
    assert trace.children_per_item("fetch") == 3.0
    assert trace.children_per_item("write") == 1.0


@pytest.mark.parametrize("batch_size", [2, 3])
def test_a_chain_with_a_batching_stage_is_refused_in_one_line(batch_size):
    trace, report = record_chain(batch_size=batch_size)
    assert report.stages["write"].completed == 800
    assert trace.stages["write"].batching and not trace.stages["fetch"].batching
    with pytest.raises(ValueError, match=r"stage 'write' batches its input") as caught:
        calibrate(trace)
    assert "\n" not in str(caught.value)
