"""RunCache: a plan asked again re-uses its runs and gives the answer a fresh plan gives."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, ThreadPoolExecutor

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.executors import RunCache

SEARCH = {"concurrency": range(1, 8), "queue_maxsize": [10, None]}


def base() -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=4),
        n_items=2000,
        seed=3,
    )


def echo(value):
    return value


def refuse_negative(value):
    if value < 0:
        raise ValueError(f"negative: {value}")
    return {"value": value, "items": [value]}


def test_a_cached_plan_is_the_plan_and_asking_again_runs_nothing() -> None:
    fresh = plan(base(), SEARCH, ["wait_mean_s<=0.2"], processes=1, progress=False)
    cache = RunCache()
    first = plan(base(), SEARCH, ["wait_mean_s<=0.2"], executor=cache, progress=False)
    assert first.to_dict() == fresh.to_dict()
    assert cache.misses == first.runs_total and cache.hits == 0 and len(cache) == cache.misses
    again = plan(base(), SEARCH, ["wait_mean_s<=0.2"], executor=cache, progress=False)
    assert again.to_dict() == fresh.to_dict()
    assert cache.misses == first.runs_total and cache.hits == again.runs_total


def test_another_limit_reuses_the_runs_both_plans_need() -> None:
    cache = RunCache()
    loose = plan(base(), SEARCH, ["wait_mean_s<=0.2"], executor=cache, progress=False)
    misses = cache.misses
    tight = plan(base(), SEARCH, ["wait_mean_s<=0.1"], executor=cache, progress=False)
    fresh = plan(base(), SEARCH, ["wait_mean_s<=0.1"], processes=1, progress=False)
    assert tight.to_dict() == fresh.to_dict()
    assert cache.hits > 0  # the configurations both plans examined ran once
    assert cache.misses - misses == tight.runs_total - cache.hits
    assert tight.chosen["concurrency"] >= loose.chosen["concurrency"]


def test_a_miss_runs_on_the_inner_executor_and_is_remembered() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        cache = RunCache(pool)
        assert cache.submit(echo, 41).result() == 41
        assert cache.submit(echo, 41).result() == 41
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)


def test_an_uncacheable_call_runs_every_time() -> None:
    cache = RunCache()
    calls = []

    def note(value):  # a local function cannot be pickled: no key
        calls.append(value)
        return value

    assert [cache.submit(note, 1).result() for _ in range(2)] == [1, 1]
    assert calls == [1, 1] and len(cache) == 0 and cache.misses == 2


def make_lock(_name):
    return threading.Lock()


def test_a_result_that_cannot_be_pickled_is_returned_but_not_kept() -> None:
    cache = RunCache()
    first, second = (cache.submit(make_lock, "a").result() for _ in range(2))
    assert first is not second and len(cache) == 0 and cache.misses == 2


def test_errors_reach_the_caller_and_are_not_remembered() -> None:
    cache = RunCache()
    for _ in range(2):
        with pytest.raises(ValueError, match="negative: -1"):
            cache.submit(refuse_negative, -1).result()
    assert cache.misses == 2 and cache.hits == 0 and len(cache) == 0


def test_each_hit_is_a_copy_the_caller_may_change() -> None:
    cache = RunCache()
    first = cache.submit(refuse_negative, 3).result()
    first["items"].append("changed")
    assert cache.submit(refuse_negative, 3).result() == {"value": 3, "items": [3]}


def test_the_oldest_results_are_forgotten_first() -> None:
    cache = RunCache(max_entries=2)
    for value in (1, 2, 3):
        cache.submit(echo, value).result()
    assert len(cache) == 2
    cache.submit(echo, 3).result()
    cache.submit(echo, 1).result()  # forgotten: runs again
    assert (cache.hits, cache.misses) == (1, 4)
    cache.clear()
    assert len(cache) == 0


def test_after_shutdown_nothing_more_is_accepted() -> None:
    cache = RunCache()
    with cache:
        assert isinstance(cache, Executor) and cache.submit(echo, 1).result() == 1
    with pytest.raises(RuntimeError, match="after shutdown"):
        cache.submit(echo, 1)
    cache.shutdown()  # twice is harmless
    assert "closed" in repr(cache)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_max_entries_must_be_a_positive_integer(bad) -> None:
    with pytest.raises(ValueError, match=f"max_entries must be an integer >= 1, got {bad!r}"):
        RunCache(max_entries=bad)


def test_the_inner_executor_must_be_an_executor() -> None:
    with pytest.raises(TypeError, match=r"executor must be a concurrent\.futures\.Executor"):
        RunCache("local")
