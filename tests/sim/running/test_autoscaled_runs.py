"""A simulated pipeline that autoscales: the kernel runs it (``auto``), its summary says so."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from pipeline import Autoscaler, Backoff, Pipeline, PipelineConfig
from pipeline.sim import (
    CapacityDrop,
    Constant,
    Downstream,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    StageSpec,
    simulate,
)
from pipeline.sim.running import single
from pipeline.sim.running.openmetrics import METRICS
from tests.sim.running.test_openmetrics import read


def scenario(**scaler) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=20.0),
        service=Exponential(mean=0.5),
        n_items=2000,
        seed=3,
        config=PipelineConfig(
            concurrency=2,
            queue_maxsize=None,
            autoscale=Autoscaler(max_workers=30, target=2.0, sync_s=5.0, **scaler),
        ),
    )


def test_the_summary_carries_the_pool_and_utilisation_divides_by_it():
    summary = simulate(scenario(scale_down_stabilization_s=30.0)).summary
    assert summary["engine"] == "kernel"  # auto: inside the kernel's domain
    assert summary["scale_events"] >= 2 and 2 < summary["workers_max"] <= 30
    assert summary["workers_mean"] == pytest.approx(
        summary["worker_seconds"] / summary["sim_time_s"], rel=1e-12
    )
    # 20 items/s of 0.5 s keep about 10 workers busy, out of the pool's mean
    assert summary["utilisation"] == pytest.approx(10.0 / summary["workers_mean"], rel=0.1)


def test_a_fixed_pool_has_no_pool_keys():
    fixed = Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=0.5), n_items=50, seed=1)
    assert "workers_mean" not in simulate(fixed).summary


def test_the_kernel_refuses_an_autoscaled_chain_stage_in_one_line():
    stages = [StageSpec(name="fetch", service=Exponential(mean=0.3), config=scenario().config)]
    chain = Scenario(arrivals=Poisson(rate=20.0), stages=stages, n_items=10, seed=2)
    with pytest.raises(
        ValueError, match=r"^engine='kernel' does not support stage 'fetch': autoscaling in a"
    ):
        simulate(chain, engine="kernel")


def test_a_burst_ramps_the_pool_as_the_rules_say():
    # 1,000 items waiting at 0 s and one more a second, each 100 s of work: syncs at 15,
    # 30 and 45 s grow the pool 1 -> 5 -> 10 -> 20 (its max), where it stays while items
    # arrive (the syncs stop when the drain begins, after the last arrival).
    burst = Scenario(
        arrivals=Poisson(rate=1.0),
        service=Constant(value=100.0),
        n_items=300,
        initial_backlog=1000,
        seed=1,
        config=PipelineConfig(
            concurrency=1,
            queue_maxsize=None,
            drain_timeout_s=None,
            autoscale=Autoscaler(max_workers=20),
        ),
    )
    summary = simulate(burst).summary
    assert summary["workers_max"] == 20 and summary["scale_events"] == 3
    assert summary["items_completed"] == 1300
    # Every second of work is a second of some worker's time.
    assert summary["worker_seconds"] >= 1300 * 100.0
    assert summary["workers_mean"] <= 20


class WatchedPipeline(Pipeline):
    """The engine, with every event's ``statistics()`` pool readings kept (time, workers,
    desired; -1 for no desired count yet)."""

    seen: ClassVar[list[tuple[float, int, int]]] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_listener(self._watch)

    def _watch(self, kind, now: float, item) -> None:
        stats = self.statistics()
        desired = -1 if stats.workers_desired is None else stats.workers_desired
        WatchedPipeline.seen.append((now, stats.workers, desired))


def watched(monkeypatch, scenario: Scenario):
    """The run of ``scenario``, and the engine's readings at every one of its events."""
    WatchedPipeline.seen = []
    monkeypatch.setattr(single, "Pipeline", WatchedPipeline)
    return simulate(scenario, engine="asyncio"), WatchedPipeline.seen


HOSTILE = [
    # scale-ups and scale-downs with cold starts, busy workers leaving after long items
    dict(metric="queue_per_worker", target=2.0, scale_down_stabilization_s=10.0, cold_start_s=3.0),
    # the age of the oldest item, no scale-down window: the pool swings
    dict(metric="oldest_age_s", target=1.0, scale_down_stabilization_s=0.0),
    # a tolerance that holds most syncs, a slow scale-up window
    dict(target=1.0, tolerance=0.5, scale_up_stabilization_s=10.0, max_scale_up=(1, 0.5)),
]


@pytest.mark.parametrize("scaler", HOSTILE, ids=["queue", "age", "held"])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_timeseries_pool_is_what_statistics_showed_at_every_event(monkeypatch, scaler, seed):
    # Failures, retries and deadlines too: items leave the queue every way they can.
    sc = Scenario(
        arrivals=Poisson(rate=6.0),
        service=Exponential(mean=1.0),
        failures=IndependentFailures(0.2),
        n_items=600,
        seed=seed,
        config=PipelineConfig(
            concurrency=2,
            queue_maxsize=None,
            max_attempts=3,
            backoff=Backoff(base_s=0.5),
            max_wait_s=8.0,
            autoscale=Autoscaler(max_workers=12, sync_s=2.0, **scaler),
        ),
    )
    result, seen = watched(monkeypatch, sc)
    ts = result.timeseries
    assert list(ts.columns[-2:]) == ["workers", "workers_desired"]
    seen_times = np.array([t for t, _, _ in seen])
    # After all the events of an instant: the engine's last reading there, the row there.
    last = np.append(seen_times[1:] != seen_times[:-1], True)
    times = seen_times[last]
    workers = np.array([w for _, w, _ in seen])[last]
    desired = np.array([d for _, _, d in seen])[last]
    rows = ts.set_index("time_s").loc[times]
    assert (rows["workers"].to_numpy() == workers).all()
    assert (rows["workers_desired"].fillna(-1).to_numpy() == desired).all()
    assert ts["workers_desired"].dtype == pd.Int64Dtype()
    assert ts["workers_desired"].isna().iloc[0]  # no sync yet at the start
    # The pool shrank and grew, busy workers left after their items, and the column's
    # time-weighted mean is the summary's workers_mean.
    assert ts["workers"].nunique() > 2
    if scaler is HOSTILE[0]:  # busy workers left between syncs, after their items
        changed = ts[ts["workers"].diff().fillna(0) != 0]
        assert ((changed["time_s"] % 2.0) > 1e-9).sum() > 10
    summary = result.summary
    assert ts["workers"].max() == summary["workers_max"]
    assert result.series.time_mean(ts["workers"].to_numpy()) == pytest.approx(
        summary["workers_mean"], rel=1e-9
    )


def test_a_fixed_pool_has_no_pool_columns():
    fixed = Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=0.5), n_items=50, seed=1)
    result = simulate(fixed, engine="asyncio")
    assert "workers" not in result.timeseries and result.pool is None


def test_a_chain_stage_that_autoscales_has_its_pool_columns():
    scaled = PipelineConfig(
        concurrency=2, queue_maxsize=None, autoscale=Autoscaler(max_workers=10, sync_s=5.0)
    )
    stages = [
        StageSpec(name="fetch", service=Exponential(mean=0.3), config=scaled),
        StageSpec(name="write", service=Exponential(mean=0.05), config=PipelineConfig()),
    ]
    chain = simulate(
        Scenario(arrivals=Poisson(rate=20.0), stages=stages, n_items=800, seed=2), engine="asyncio"
    )
    fetch, write = chain.stages["fetch"], chain.stages["write"]
    assert "workers" not in write.timeseries
    ts = fetch.timeseries
    assert ts["workers"].max() == fetch.summary["workers_max"] > 2
    # The stage's workers were paid until the stage closed (the chain ends a little later).
    closed = fetch.report.finished_s
    start = np.minimum(ts["time_s"].to_numpy(), closed)
    end = np.minimum(np.append(ts["time_s"].to_numpy()[1:], fetch.series.end_s), closed)
    paid = float((ts["workers"].to_numpy() * (end - start)).sum())
    assert paid == pytest.approx(fetch.summary["worker_seconds"], rel=1e-9)
    synced = ts[ts["workers_desired"].notna()]
    assert synced["time_s"].iloc[0] == 5.0  # the first sync


def test_the_metrics_file_carries_the_pool_as_the_timeseries_does(tmp_path):
    result = simulate(scenario(scale_down_stabilization_s=30.0))
    result.to_openmetrics(tmp_path / "m.om", start_s=1_700_000_000, step_s=0.5)
    series, families = read(tmp_path / "m.om")
    desired = families.index("pipeline_workers_desired")
    assert desired == families.index("pipeline_workers_busy") + 1
    assert families[:desired] + families[desired + 1 :] == [n for n, _, _ in METRICS.values()]
    ts = result.timeseries
    pairs = (("pipeline_workers", "workers"), ("pipeline_workers_desired", "workers_desired"))
    for name, column in pairs:
        points = series[(name, 'pipeline="sim"')]
        assert len(points) > 100
        for stamp, value in points:
            t = round(stamp - 1_700_000_000, 3)
            # a value the column held within the sample's millisecond
            inside = ts[(ts.time_s > t - 0.0005) & (ts.time_s <= t + 0.0005)][column]
            held = ts[ts.time_s <= t - 0.0005][column].iloc[-1:]
            assert value in pd.concat([held, inside]).dropna().tolist(), (name, t)
    assert (
        max(v for _, v in series[("pipeline_workers", 'pipeline="sim"')])
        == result.summary["workers_max"]
    )
    # no desired count before the first sync at 5 s
    first = series[("pipeline_workers_desired", 'pipeline="sim"')][0][0]
    assert first - 1_700_000_000 == pytest.approx(5.0)


def test_a_fixed_pool_writes_no_desired_family(tmp_path):
    fixed = Scenario(arrivals=Poisson(rate=2.0), service=Exponential(mean=0.5), n_items=50, seed=1)
    simulate(fixed).to_openmetrics(tmp_path / "m.om", start_s=1_700_000_000)
    assert "pipeline_workers_desired" not in (tmp_path / "m.om").read_text()


def retry_storm(autoscale: Autoscaler | None, seed: int) -> Scenario:
    """100 requests/s to a downstream of 10 servers (125/s), cut to 20% for 8 s at 20 s; the
    client waits 1 s and tries 4 times; a pool of 12, or one autoscaled from 12 to 200."""
    return Scenario(
        arrivals=Poisson(rate=100.0),
        duration_s=90.0,
        seed=seed,
        downstream=Downstream(concurrency=10, service=Exponential(mean=0.08)),
        faults=[CapacityDrop(at_s=20.0, for_s=8.0, factor=0.2)],
        config=PipelineConfig(
            concurrency=12,
            queue_maxsize=None,
            max_attempts=4,
            attempt_timeout_s=1.0,
            drain_timeout_s=None,
            backoff=Backoff(kind="constant", base_s=0.1),
            autoscale=autoscale,
        ),
    )


STORM_SCALER = Autoscaler(
    min_workers=12, max_workers=200, target=2.0, sync_s=5.0, scale_down_stabilization_s=30.0
)


@pytest.mark.slow  # three retry storms: 3 s
def test_an_autoscaler_scaling_on_a_queue_of_retries_can_keep_a_downstream_stuck():
    # The fixed pool caps the requests in flight at 12: the cut's backlog waits in the
    # pipeline's queue, not past the client's timeout, and the run recovers.
    for seed in (1, 2):
        fixed = simulate(retry_storm(None, seed)).summary
        assert fixed["recovered"] and fixed["items_dead_lettered"] == 0
        assert fixed["downstream_orphaned"] < 50
    # The autoscaler grows the pool on that backlog; after the cut, its requests wait
    # behind each other at the 10 servers past the 1 s timeout, every attempt leaves an
    # orphan and a retry, and the retries keep the queue the pool scales on.
    stuck = simulate(retry_storm(STORM_SCALER, 1))
    s = stuck.summary
    assert not s["recovered"] and s["workers_max"] == 200
    assert s["items_dead_lettered"] > 1000 and s["downstream_orphaned"] > 10_000
    ts = stuck.timeseries
    late = ts[(ts["time_s"] % 5 == 0) & (ts["time_s"] >= 45) & (ts["time_s"] <= 85)]
    assert (late["workers"] == 200).all() and (late["retry_waiting"] > 0).all()
    assert (late["workers_desired"] > 200).all()  # the metric asks for more than the max
    # Not every run: with other traffic the same autoscaler gets out of it.
    lucky = simulate(retry_storm(STORM_SCALER, 2)).summary
    assert lucky["recovered"] and lucky["workers_max"] > 100
