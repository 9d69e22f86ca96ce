"""``watch_pool``: a simulated run's pool second by second, read by running it again.

The run again must be the simulated run (every item starts when it started there), its
readings must add up to the summary's worker-seconds, and anything it cannot run again is
refused in one line before any run.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.lessons import watch_pool
from pipeline.lessons.autoscaling import POOL_COLUMNS
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    ItemClass,
    LoadSpike,
    Poisson,
    Scenario,
    simulate,
)

SCALER = Autoscaler(min_workers=2, max_workers=30, sync_s=10.0, cold_start_s=15.0)


def _scenario(config: PipelineConfig, **changes) -> Scenario:
    fields = {
        "arrivals": Poisson(rate=2.0),
        "service": Exponential(mean=1.0),
        "faults": [LoadSpike(at_s=30.0, for_s=30.0, factor=8.0)],
        "duration_s": 240.0,
        "seed": 3,
        "config": config,
    }
    return Scenario(**{**fields, **changes})


def _autoscaled(scaler: Autoscaler = SCALER) -> PipelineConfig:
    return PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=None, autoscale=scaler)


@pytest.mark.parametrize("metric", ["queue_per_worker", "oldest_age_s"])
def test_the_pool_read_every_second_is_the_simulated_run_s(metric):
    run = simulate(_scenario(_autoscaled(Autoscaler(**{**SCALER.__dict__, "metric": metric}))))
    pool = watch_pool(run)
    assert tuple(pool.columns) == POOL_COLUMNS
    assert pool.time_s.iloc[0] == 0.0 and np.all(np.diff(pool.time_s) == 1.0)
    assert pool.time_s.iloc[-1] <= run.summary["sim_time_s"] < pool.time_s.iloc[-1] + 1.0
    assert pool.workers.max() == run.summary["workers_max"]
    assert (pool.workers_starting <= pool.workers).all()
    assert (pool.workers_busy <= pool.workers).all()
    # A left Riemann sum of a step function that changes a few dozen times: within 2%.
    assert math.isclose(pool.workers.sum(), run.summary["worker_seconds"], rel_tol=0.02)
    assert math.isnan(pool.desired.iloc[0]) and not pool.desired.iloc[10:].isna().any()


def test_a_fixed_pool_reads_as_its_size_and_finer_readings_agree():
    run = simulate(_scenario(PipelineConfig(concurrency=7, queue_maxsize=None)), engine="asyncio")
    pool = watch_pool(run, every_s=0.25)
    assert (pool.workers == 7).all() and pool.desired.isna().all()
    assert (pool.workers_starting == 0).all()


@pytest.mark.parametrize(
    ("every_s", "error"),
    [
        (0, ValueError),
        (-1.0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (Decimal("-1"), ValueError),
        (True, TypeError),
        ("1", TypeError),
        (None, TypeError),
    ],
)
def test_a_bad_reading_period_is_refused_in_one_line(every_s, error):
    run = simulate(_scenario(_autoscaled()))
    with pytest.raises(error, match=r"^every_s must be .*, got") as raised:
        watch_pool(run, every_s=every_s)
    assert "\n" not in str(raised.value)


def test_numpy_and_decimal_reading_periods_are_numbers():
    run = simulate(_scenario(_autoscaled()))
    every_2 = watch_pool(run, every_s=2.0)
    for every_s in (np.int64(2), np.float32(2.0), Decimal("2")):
        assert watch_pool(run, every_s=every_s).equals(every_2)


def test_runs_it_cannot_run_again_are_refused():
    fixed = _scenario(PipelineConfig(concurrency=30, queue_maxsize=None), faults=[])
    with pytest.raises(ValueError, match="asyncio engine, got engine 'kernel'"):
        watch_pool(simulate(fixed, engine="kernel"))
    failing = _scenario(_autoscaled(), failures=IndependentFailures(p=0.2))
    with pytest.raises(ValueError, match="completed at its first attempt"):
        watch_pool(simulate(failing))
    premium = _scenario(_autoscaled(), classes=[ItemClass(name="premium", priority=0)])
    with pytest.raises(ValueError, match="without item classes or a downstream"):
        watch_pool(simulate(premium))
