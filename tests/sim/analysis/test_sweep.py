"""sweep(): tidy frames, the same numbers however many processes, common random numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, TimeVarying, simulate
from pipeline.sim.analysis.sweep import (
    DEFAULT_METRICS,
    simulate_replication,
    summarise_sweep,
    sweep,
)

BASE = Scenario(
    arrivals=Poisson(rate=3.2),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=4),
    n_items=1500,
    seed=11,
)
GRID = {"concurrency": [4, 6], "queue_maxsize": [5, None]}


@pytest.fixture(scope="module")
def inline():
    return sweep(BASE, GRID, replications=2, processes=1, progress=False)


def test_frame_is_tidy(inline):
    assert len(inline) == 4 * 2
    assert list(inline.columns[:3]) == ["concurrency", "queue_maxsize", "replication"]
    assert set(simulate_replication(BASE, 0).summary) <= set(inline.columns)
    assert inline.attrs["grid"] == ["concurrency", "queue_maxsize"]
    assert inline["replication"].tolist() == [0, 1] * 4
    assert inline["concurrency"].tolist() == [4, 4, 4, 4, 6, 6, 6, 6]
    # None (the unbounded queue) stays None, not NaN
    assert inline["queue_maxsize"].tolist() == [5, 5, None, None] * 2


def test_rows_equal_simulate(inline):
    row = inline.iloc[5]  # concurrency 6, maxsize 5, replication 1
    expected = simulate(BASE.replace(concurrency=6, queue_maxsize=5), replications=2)
    summary = expected.results[1].summary
    for key in ("wait_mean_s", "latency_p95_s", "utilisation", "sim_time_s"):
        assert row[key] == summary[key]


def test_two_processes_give_the_same_frame(inline):
    pooled = sweep(BASE, GRID, replications=2, processes=2, progress=False)
    pd.testing.assert_frame_equal(
        inline.drop(columns="wall_time_s"), pooled.drop(columns="wall_time_s")
    )


def test_common_random_numbers():
    a = simulate_replication(BASE.replace(concurrency=4, queue_maxsize=5), 1)
    b = simulate_replication(BASE.replace(concurrency=8, queue_maxsize=None), 1)
    assert np.array_equal(a.columns.arrival_s, b.columns.arrival_s)
    # single-attempt items: finish - start is the item's service time, the same in both
    done = (a.columns.attempts == 1) & (b.columns.attempts == 1)
    service_a = (a.columns.finish_s - a.columns.start_s)[done]
    service_b = (b.columns.finish_s - b.columns.start_s)[done]
    assert np.allclose(service_a, service_b, rtol=0, atol=1e-9)
    other = simulate_replication(BASE, 2)
    assert not np.array_equal(a.columns.arrival_s, other.columns.arrival_s)


def test_waits_do_not_depend_on_maxsize_under_crn(inline):
    # FCFS with on_full="block": the wait from arrival does not depend on maxsize
    by_size = inline.set_index(["concurrency", "replication"]).groupby(
        "queue_maxsize", dropna=False
    )
    waits = [part["wait_mean_s"].sort_index().to_numpy() for _, part in by_size]
    assert np.allclose(waits[0], waits[1], rtol=1e-12)


def test_summarise(inline):
    table = summarise_sweep(inline, metrics=("wait_mean_s", "utilisation"))
    assert list(table.columns) == [
        "concurrency",
        "queue_maxsize",
        "replications",
        "drain_timed_out",
        "wait_mean_s_mean",
        "wait_mean_s_ci95",
        "wait_mean_s_drain_cut",  # a wait leaves out what a timed-out drain left
        "utilisation_mean",
        "utilisation_ci95",
    ]
    assert len(table) == 4 and (table["replications"] == 2).all()
    assert (table["drain_timed_out"] == 0).all() and (table["wait_mean_s_drain_cut"] == 0).all()
    assert table["queue_maxsize"].tolist() == [5, None, 5, None]
    first = inline[(inline.concurrency == 4) & (inline.queue_maxsize == 5)]["wait_mean_s"]
    assert table["wait_mean_s_mean"].iloc[0] == pytest.approx(first.mean())
    assert table["wait_mean_s_ci95"].iloc[0] > 0
    # more workers, less waiting
    assert table["wait_mean_s_mean"].iloc[2] < table["wait_mean_s_mean"].iloc[0]
    every = summarise_sweep(inline, metrics=None)
    assert "sim_time_s_mean" in every.columns and "drain_timed_out_mean" not in every.columns
    assert {f"{m}_mean" for m in DEFAULT_METRICS} <= set(summarise_sweep(inline).columns)
    with pytest.raises(ValueError, match="unknown metric"):
        summarise_sweep(inline, metrics=("nope",))


def test_one_replication_has_no_interval():
    frame = sweep(BASE.replace(n_items=200), {}, replications=1, processes=1, progress=False)
    assert len(frame) == 1 and frame["replication"].tolist() == [0]
    table = summarise_sweep(frame, metrics=("wait_mean_s",))
    assert math.isnan(table["wait_mean_s_ci95"].iloc[0])


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"unknown scenario or config field.*'workers'"):
        sweep(BASE, {"workers": [1]}, progress=False)
    with pytest.raises(ValueError, match=r"grid point \{'concurrency': 0\}"):
        sweep(BASE, {"concurrency": [0]}, progress=False)
    with pytest.raises(TypeError, match="must be a sequence"):
        sweep(BASE, {"concurrency": 4}, progress=False)
    with pytest.raises(ValueError, match="at least one value"):
        sweep(BASE, {"concurrency": []}, progress=False)
    with pytest.raises(ValueError, match="replications must be"):
        sweep(BASE, GRID, replications=0)
    with pytest.raises(ValueError, match="processes must be"):
        sweep(BASE, GRID, processes=0)
    with pytest.raises(TypeError, match="base must be a Scenario"):
        sweep("scenario", GRID)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="replication must be"):
        simulate_replication(BASE, -1)


def test_unpicklable_scenario_fails_clearly():
    varying = BASE.replace(
        arrivals=TimeVarying(lambda t: np.full_like(t, 3.0), max_rate=3.0), n_items=100
    )
    with pytest.raises(ValueError, match=r"picklable.*processes=1"):
        sweep(varying, {"concurrency": [4, 5]}, replications=1, processes=2, progress=False)
    # inline needs no pickling
    frame = sweep(varying, {"concurrency": [4]}, replications=1, processes=1, progress=False)
    assert frame["items_offered"].tolist() == [100]


def test_summarise_missing_values_without_warnings():
    # a metric no replication has (e.g. latency when nothing completed): NaN, and no warning
    frame = pd.DataFrame(
        {
            "concurrency": [1, 1, 2, 2],
            "replication": [0, 1, 0, 1],
            "latency_p95_s": [math.nan, math.nan, 3.0, math.nan],
            "wait_mean_s": [1.0, 3.0, 2.0, 2.0],
        }
    )
    frame.attrs["grid"] = ["concurrency"]
    table = summarise_sweep(frame, metrics=("latency_p95_s", "wait_mean_s"))
    assert math.isnan(table["latency_p95_s_mean"].iloc[0])
    assert table["latency_p95_s_mean"].iloc[1] == 3.0
    assert table["latency_p95_s_ci95"].isna().all()
    assert table["wait_mean_s_mean"].tolist() == [2.0, 2.0]
    assert table["wait_mean_s_ci95"].iloc[0] > 0 and table["wait_mean_s_ci95"].iloc[1] == 0
