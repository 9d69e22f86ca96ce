"""Draws shared by a plan's configurations: the same numbers, bounded, and only inside a plan."""

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
    TimeVarying,
    plan,
    simulate,
)
from pipeline.sim.running import workload
from pipeline.sim.running.workload import Workload, _RecentDraws, shared_draws


def _scenario(n: int = 2_000, **config) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=50.0),
        service=LogNormal.from_quantiles(p50=0.05, p99=1.2),
        failures=IndependentFailures(0.02),
        n_items=n,
        seed=3,
        config=PipelineConfig(max_attempts=3, **config),
    )


def _same(a: Workload, b: Workload) -> bool:
    return np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(
        a.first_attempt_s, b.first_attempt_s
    )


def test_in_a_block_a_configuration_reuses_the_draws_and_gets_its_own_copies(monkeypatch):
    base = _scenario(concurrency=4)
    other = base.replace(concurrency=9)
    alone = Workload(other, 1)  # outside any block: drawn afresh
    puts = []
    real_put = _RecentDraws.put
    monkeypatch.setattr(_RecentDraws, "put", lambda self, *a: puts.append(a) or real_put(self, *a))
    with shared_draws():
        first = Workload(base, 1)
        second = Workload(other, 1)  # a hit: the same arrival process and service objects
        assert len(puts) == 1
        for ours in (first, second):
            assert _same(ours, alone)
            assert ours.arrival_s.flags.writeable and ours.first_attempt_s.flags.writeable
        second.arrival_s[:] = -1.0  # a workload that writes into its arrays harms no other
        second.first_attempt_s[:] = np.nan
        third = Workload(base, 1)
        assert _same(third, alone) and len(puts) == 1
        # The streams a hit did not draw from are the streams the rest is drawn from.
        assert [third.retry_time(0) for _ in range(5)] == [alone.retry_time(0) for _ in range(5)]
    Workload(base, 1)  # the block is over: nothing kept, drawn and not put
    assert len(puts) == 1


def test_outside_a_block_nothing_is_shared_so_a_changed_rate_function_is_seen():
    level = {"rate": 20.0}
    arrivals = TimeVarying(rate_fn=lambda t: np.full_like(t, level["rate"]), max_rate=100.0)
    scenario = dataclasses.replace(_scenario(n=500, concurrency=64), arrivals=arrivals)
    slow = simulate(scenario, engine="kernel").summary["sim_time_s"]
    level["rate"] = 80.0  # the same object, drawing differently now
    fast = simulate(scenario, engine="kernel").summary["sim_time_s"]
    assert fast < 0.5 * slow  # 500 arrivals at 80/s, not at 20/s


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
    changed = dataclasses.replace(base, **change)
    want_changed, want_base = Workload(changed, 0), Workload(base, 2)
    with shared_draws():
        Workload(base, 0)
        assert _same(Workload(changed, 0), want_changed)
        assert _same(Workload(changed, 0), want_changed)
        assert _same(Workload(base, 2), want_base)


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


def test_many_threads_sharing_one_cache_get_the_same_numbers():
    scenario = _scenario(concurrency=4)
    want = {r: Workload(scenario, r) for r in range(4)}
    recent = _RecentDraws(most_bytes=1 << 20)
    seen, errors = [], []

    def build():
        token = workload._shared.set(recent)  # a thread starts with no block: join this one
        try:
            for replication in (0, 1, 2, 3, 1, 0):
                got = Workload(scenario.replace(concurrency=2 + replication), replication)
                seen.append(_same(got, want[replication]))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            workload._shared.reset(token)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(seen) == 48 and all(seen)
    assert len(recent._entries) == 4


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_run_is_the_same_whether_its_draws_were_shared_or_not(engine):
    scenario = _scenario(n=400, concurrency=3)
    cold = simulate(scenario, replications=2, engine=engine).summary
    with shared_draws():
        simulate(scenario.replace(concurrency=5), replications=2, engine=engine)
        warm = simulate(scenario, replications=2, engine=engine).summary
    machine = ["wall_time_s"]  # the only row that measures the machine
    assert cold.drop(index=machine).equals(warm.drop(index=machine))


def test_a_plan_shares_its_draws_and_gives_the_same_answer(monkeypatch):
    scenario = _scenario(n=3_000)
    kwargs = dict(
        search={"concurrency": range(1, 9)},
        slos=["latency_p95_s<=2"],
        replications=(3, 6),
        processes=1,
        progress=False,
    )
    hits = []
    real_get = _RecentDraws.get

    def get(self, *args):
        found = real_get(self, *args)
        hits.append(found is not None)
        return found

    monkeypatch.setattr(_RecentDraws, "get", get)
    shared = plan(scenario, **kwargs)
    # Replications 0 .. 5 are drawn once each; every other run reuses a configuration's.
    assert sum(hits) >= len(hits) - 6 and sum(hits) > 0
    monkeypatch.setattr(workload, "RECENT_DRAWS_BYTES", 0)  # keeps nothing
    hits.clear()
    drawn = plan(scenario, **kwargs)
    assert not any(hits)
    assert shared.to_dict() == drawn.to_dict()
    assert workload._shared.get() is None  # the plan's block is over
