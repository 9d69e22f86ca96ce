"""The recent draws a plan's or a sweep's configurations share: the same numbers, bounded."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import (
    Exponential,
    IndependentFailures,
    LogNormal,
    Poisson,
    Scenario,
    plan,
    simulate,
)
from pipeline.sim.running import workload
from pipeline.sim.running.workload import Workload, _RecentDraws


def _scenario(n: int = 2_000, **config) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=50.0),
        service=LogNormal.from_quantiles(p50=0.05, p99=1.2),
        failures=IndependentFailures(0.02),
        n_items=n,
        seed=3,
        config=PipelineConfig(max_attempts=3, **config),
    )


def _fresh(scenario: Scenario, replication: int) -> Workload:
    workload._recent.clear()
    try:
        return Workload(scenario, replication)
    finally:
        workload._recent.clear()


def test_a_configuration_reuses_the_draws_and_gets_its_own_copies():
    base = _scenario(concurrency=4)
    other = base.replace(concurrency=9)
    first = Workload(base, 1)
    second = Workload(other, 1)  # a hit: the same arrival process and service objects
    alone = _fresh(other, 1)
    for ours in (first, second):
        assert np.array_equal(ours.arrival_s, alone.arrival_s)
        assert np.array_equal(ours.first_attempt_s, alone.first_attempt_s)
        assert ours.arrival_s.flags.writeable and ours.first_attempt_s.flags.writeable
    second.arrival_s[:] = -1.0  # a workload that writes into its arrays harms no other
    second.first_attempt_s[:] = np.nan
    third = Workload(base, 1)
    assert np.array_equal(third.arrival_s, alone.arrival_s)
    assert np.array_equal(third.first_attempt_s, alone.first_attempt_s)
    # The streams a hit did not draw from are the streams the rest is drawn from.
    assert [third.retry_time(0) for _ in range(5)] == [alone.retry_time(0) for _ in range(5)]


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 4},
        {"n_items": 1_999},
        {"arrivals": Poisson(rate=50.0)},  # equal, not the same object: drawn again, same numbers
        {"arrivals": Poisson(rate=51.0)},
        {"service": Exponential(mean=0.1)},
        {"initial_backlog": 5},
    ],
)
def test_anything_that_decides_the_draws_draws_them_again(change):
    base = _scenario(concurrency=4)
    Workload(base, 0)
    changed = dataclasses.replace(base, **change)
    assert np.array_equal(Workload(changed, 0).arrival_s, _fresh(changed, 0).arrival_s)
    assert np.array_equal(Workload(changed, 0).first_attempt_s, _fresh(changed, 0).first_attempt_s)
    assert np.array_equal(Workload(base, 2).arrival_s, _fresh(base, 2).arrival_s)


def test_the_draws_kept_are_bounded_by_bytes_oldest_first():
    recent = _RecentDraws(most_bytes=64_000)
    scenario = _scenario()
    row = np.arange(1_000.0)  # 8,000 bytes an array, 16,000 a replication
    for replication in range(10):
        recent.put(scenario, replication, row + replication, row)
        assert recent._held <= 64_000
    # Four replications fit: the last four put are kept, the oldest went first.
    assert all(recent.get(scenario, r) is not None for r in (6, 7, 8, 9))
    assert all(recent.get(scenario, r) is None for r in range(6))
    got = recent.get(scenario, 9)
    assert np.array_equal(got[0], row + 9)
    big = np.arange(2_001.0)  # a quarter of the bound or more: not kept
    recent.put(scenario, 20, big, big)
    assert recent.get(scenario, 20) is None
    recent.put(scenario, 9, row, row)  # replaced, counted once
    assert recent._held <= 64_000 and len(recent._entries) <= 4


def test_many_threads_get_the_same_numbers():
    workload._recent.clear()
    scenario = _scenario(concurrency=4)
    want = {r: _fresh(scenario, r) for r in range(4)}
    seen, errors = [], []

    def build():
        try:
            for replication in (0, 1, 2, 3, 1, 0):
                got = Workload(scenario.replace(concurrency=2 + replication), replication)
                seen.append(
                    np.array_equal(got.arrival_s, want[replication].arrival_s)
                    and np.array_equal(got.first_attempt_s, want[replication].first_attempt_s)
                )
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(seen) == 48 and all(seen)


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_run_is_the_same_whether_its_draws_were_kept_or_not(engine):
    scenario = _scenario(n=400, concurrency=3)
    workload._recent.clear()
    cold = simulate(scenario, replications=2, engine=engine).summary
    warm = simulate(scenario.replace(concurrency=3), replications=2, engine=engine).summary
    machine = ["wall_time_s"]  # the only row that measures the machine
    assert cold.drop(index=machine).equals(warm.drop(index=machine))


def test_a_plan_is_the_same_whether_its_draws_were_kept_or_not(monkeypatch):
    scenario = _scenario(n=3_000)
    kwargs = dict(
        search={"concurrency": range(1, 9)},
        slos=["latency_p95_s<=2"],
        replications=(3, 6),
        processes=1,
    )
    workload._recent.clear()
    kept = plan(scenario, **kwargs)
    monkeypatch.setattr(workload, "_recent", _RecentDraws(most_bytes=0))  # keeps nothing
    drawn = plan(scenario, **kwargs)
    assert kept.to_dict() == drawn.to_dict()
