"""The kernel replays an autoscaled pipeline as the asyncio engine runs it, item by item.

Random scenarios with an :class:`~pipeline.Autoscaler` (both metrics, short syncs, cold
starts and stabilisation windows of 0 and more, bounds near each other and far apart)
with failures, retries, backoff and drain timeouts, on both kernel paths; and runs where
a sync falls at the very instant of an arrival, a service's end, a retry's readmission
and a cold start's end (every time a multiple of 0.5 s). Everything a caller reads must
agree (``assert_same_run``): the items, the timeseries with its ``workers`` and
``workers_desired`` columns, the pool's series, the summary with ``workers_mean``,
``workers_max``, ``worker_seconds`` and ``scale_events``, and the report.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Autoscaler, Backoff, PipelineConfig, RetryPolicy
from pipeline.sim import Constant, IndependentFailures, NoFailures, Scenario, Trace
from pipeline.sim.running.engine_choice import unsupported
from pipeline.sim.running.kernel import driver
from pipeline.sim.running.kernel.paths import kernel_path
from pipeline.sim.running.single import simulate_once
from tests.sim.running.kernel.test_kernel_equality import (
    SETTINGS,
    arrivals,
    assert_same_run,
    backoffs,
    failures,
    service,
)
from tests.tiers import examples

PATHS = ["plain", "compiled"]


def skip_without_numba(path: str) -> None:
    """Skip a check of the compiled path where numba is not installed (make test runs the
    kernel's tests without it too)."""
    if path == "compiled" and driver.compiled() is None:
        pytest.skip("numba is not installed: pip install 'pipeline-lab[fast]'")


def assert_pools_agree(scenario: Scenario, replication: int, path: str) -> None:
    assert unsupported(scenario) is None, unsupported(scenario)
    engine = simulate_once(scenario, replication, "asyncio")
    with kernel_path(path):
        kernel = simulate_once(scenario, replication, "kernel")
    assert_same_run(engine, kernel)
    for name in ("time_s", "workers", "desired"):
        np.testing.assert_array_equal(getattr(engine.pool, name), getattr(kernel.pool, name))


@st.composite
def scalers(draw, concurrency: int) -> Autoscaler:
    low = draw(st.integers(1, concurrency))
    return Autoscaler(
        min_workers=low,
        max_workers=concurrency + draw(st.sampled_from([0, 1, 2, 5, 30])),
        metric=draw(st.sampled_from(["queue_per_worker", "oldest_age_s"])),
        target=draw(st.one_of(st.sampled_from([0.5, 1.0, 2.0, 5.0]), st.floats(0.05, 10.0))),
        sync_s=draw(st.one_of(st.sampled_from([0.25, 0.5, 1.0, 2.0]), st.floats(0.1, 3.0))),
        tolerance=draw(st.sampled_from([0.0, 0.1, 0.5])),
        scale_up_stabilization_s=draw(st.sampled_from([0.0, 0.0, 0.5, 2.0])),
        scale_down_stabilization_s=draw(st.sampled_from([0.0, 1.0, 3.0, 300.0])),
        max_scale_up=(draw(st.integers(1, 4)), draw(st.sampled_from([0.0, 0.5, 1.0]))),
        cold_start_s=draw(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 2.5])),
    )


@st.composite
def scenarios(draw) -> Scenario:
    n = draw(st.integers(0, 60))
    process = draw(arrivals(n))
    if isinstance(process, Trace):
        n = min(n, len(process))
    concurrency = draw(st.integers(1, 5))
    config = PipelineConfig(
        concurrency=concurrency,
        queue_maxsize=draw(st.sampled_from([None, 1, 2, 5, 100])),
        on_full=draw(st.sampled_from(["block", "reject"])),
        max_attempts=draw(st.integers(1, 4)),
        backoff=draw(backoffs()),
        drain_timeout_s=draw(st.sampled_from([None, 0.0, 0.5, 2.0, 30.0])),
        retry=draw(st.sampled_from([RetryPolicy(), RetryPolicy(give_up_on=())])),
        autoscale=draw(scalers(concurrency)),
    )
    # a shedding queue holds no backlog beyond its bound
    backlog = draw(st.sampled_from([0, 0, 0, 12])) if config.on_full == "block" else 0
    return Scenario(
        arrivals=process,
        service=draw(service(n + backlog)),
        config=config,
        failures=draw(failures(n + backlog)),
        seed=draw(st.integers(0, 2**32 - 1)),
        n_items=n,
        warmup_s=draw(st.sampled_from([0.0, 1.0])),
        initial_backlog=backlog,
    )


@settings(max_examples=examples(250), **SETTINGS)
@given(scenario=scenarios(), replication=st.integers(0, 3))
def test_the_plain_replay_equals_the_engine_on_autoscaled_runs(scenario, replication):
    assert_pools_agree(scenario, replication, "plain")


@settings(max_examples=examples(60), **SETTINGS)
@given(scenario=scenarios(), replication=st.integers(0, 3))
def test_the_compiled_replay_equals_the_engine_on_autoscaled_runs(scenario, replication):
    skip_without_numba("compiled")
    assert_pools_agree(scenario, replication, "compiled")


def tied(metric: str, cold_start_s: float, *, fails: bool) -> Scenario:
    """Arrivals, service ends, readmissions, cold starts and syncs on multiples of 0.5 s.

    A burst of 14 items at 0 s, then one every 0.5 s, each 1 s of work: the pool grows at
    the first syncs and shrinks as the burst is served (no window holds it).
    """
    times = np.concatenate([np.zeros(14), 0.5 * np.arange(1, 30)])
    return Scenario(
        arrivals=Trace(times),
        service=Constant(1.0),
        n_items=len(times),
        failures=IndependentFailures(0.3) if fails else NoFailures(),
        seed=5,
        config=PipelineConfig(
            concurrency=2,
            queue_maxsize=None,
            max_attempts=3,
            backoff=Backoff.constant(0.5),
            drain_timeout_s=3.0,
            autoscale=Autoscaler(
                min_workers=1,
                max_workers=9,
                metric=metric,
                target=1.0,
                sync_s=1.0,
                tolerance=0.0,
                scale_down_stabilization_s=0.0,
                cold_start_s=cold_start_s,
            ),
        ),
    )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fails", [False, True])
@pytest.mark.parametrize("cold_start_s", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("metric", ["queue_per_worker", "oldest_age_s"])
def test_a_sync_tied_with_arrivals_service_ends_retries_and_cold_starts(
    metric, cold_start_s, fails, path
):
    skip_without_numba(path)
    scenario = tied(metric, cold_start_s, fails=fails)
    assert_pools_agree(scenario, 0, path)
    # The ties happened: the pool changed at syncs on the instants of arrivals and ends.
    assert simulate_once(scenario, 0, "asyncio").summary["scale_events"] >= 2


def traced(times: np.ndarray, service_s: float, **autoscale: float) -> Scenario:
    """Three workers, an unbounded queue, ``times`` and a constant service (s), scaled every
    1 s to one item a worker, at once both ways (no tolerance, no window)."""
    scaler = Autoscaler(target=1.0, sync_s=1.0, tolerance=0.0, scale_down_stabilization_s=0.0,
                        **autoscale)  # fmt: skip
    config = PipelineConfig(concurrency=3, queue_maxsize=None, autoscale=scaler)
    return Scenario(arrivals=Trace(times), service=Constant(service_s), n_items=len(times),
                    seed=1, config=config)  # fmt: skip


@pytest.mark.parametrize("path", PATHS)
def test_a_shrink_cancels_cold_starts_and_retires_busy_workers(path):
    # Cold starts of 2.5 s under syncs every 1 s: a shrink finds workers still starting
    # (cancelled, the latest first) and busy ones (they leave after their item).
    skip_without_numba(path)
    times = np.concatenate([np.zeros(20), [3.0, 3.0, 7.0]])
    scenario = traced(times, 2.0, min_workers=1, max_workers=40, cold_start_s=2.5)
    assert_pools_agree(scenario, 0, path)
    assert simulate_once(scenario, 0, "asyncio").summary["scale_events"] >= 2


def test_an_autoscaled_chain_stage_an_endless_window_and_a_huge_pool_stay_with_the_engine():
    from pipeline.sim import StageSpec

    scaled = PipelineConfig(concurrency=2, autoscale=Autoscaler(max_workers=4))
    chain = Scenario(
        arrivals=Trace([0.0]),
        stages=[StageSpec(name="a", service=Constant(1.0), config=scaled)],
        n_items=1,
    )
    assert unsupported(chain) == "stage 'a': autoscaling in a chain (config.autoscale)"
    long = PipelineConfig(autoscale=Autoscaler(sync_s=1e-4, scale_down_stabilization_s=300.0))
    single = Scenario(arrivals=Trace([0.0]), service=Constant(1.0), n_items=1, config=long)
    assert "1,000,000 syncs" in unsupported(single)
    huge = single.replace(autoscale=Autoscaler(max_workers=100_001))
    assert unsupported(huge) == "an autoscaler of more than 100,000 workers (config.autoscale)"


@pytest.mark.parametrize("path", PATHS)
def test_an_idle_worker_retired_as_an_item_arrives_passes_it_on(path):
    # A sync shrinks the pool at the instant an item arrives (the sync first): the item
    # wakes the first idle worker, and each retired one, leaving get() with an item
    # queued, wakes the next idle one too (which finds the queue empty and waits again).
    skip_without_numba(path)
    times = np.concatenate([np.zeros(20), 1.0 + np.arange(14)])
    assert_pools_agree(traced(times, 0.25, min_workers=3, max_workers=12), 0, path)


@pytest.mark.parametrize("path", PATHS)
def test_a_desired_count_past_two_to_the_62_is_the_engines(path):
    # A target of 1e-18 items a worker: 8 queued items ask for 8e18 workers, a count
    # an int64 still holds (the pool stops at max_workers).
    skip_without_numba(path)
    scenario = Scenario(
        arrivals=Trace([*np.zeros(10), 1.0, 2.0]),
        service=Constant(1.0),
        n_items=12,
        config=PipelineConfig(
            concurrency=2,
            queue_maxsize=None,
            autoscale=Autoscaler(max_workers=5, target=1e-18, sync_s=0.5),
        ),
    )
    assert_pools_agree(scenario, 0, path)
    assert simulate_once(scenario, 0, "asyncio").pool.desired.max() > 2**62
