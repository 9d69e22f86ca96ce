"""The naive re-enqueueing pool deadlocks on the virtual clock; the engine does not."""

from __future__ import annotations

import asyncio

import pytest

from pipeline import Backoff, DeadlockError, Pipeline, PipelineConfig
from pipeline.examples.naive import naive_pool
from pipeline.sim import run_virtual


async def healthy(item: int) -> int:
    await asyncio.sleep(1.0)
    return item


async def outage_until_30s(item: int) -> int:
    await asyncio.sleep(1.0)
    if asyncio.get_running_loop().time() < 30.0:
        raise ConnectionError(f"downstream unavailable (item {item})")
    return item


def test_naive_pool_works_while_the_downstream_is_healthy() -> None:
    report = run_virtual(naive_pool(healthy, range(20), concurrency=2, maxsize=4))
    assert sorted(report.completed) == list(range(20))
    assert report.dead_letters == []
    assert report.attempts == 20


def test_naive_pool_gives_up_after_max_attempts_when_the_queue_has_room() -> None:
    async def always_fails(item: int) -> None:
        await asyncio.sleep(1.0)
        raise ConnectionError("down")

    report = run_virtual(
        naive_pool(always_fails, range(3), concurrency=2, maxsize=100, max_attempts=3)
    )
    assert sorted(report.dead_letters) == [0, 1, 2]
    assert report.attempts == 9


def test_naive_pool_deadlocks_and_the_error_names_every_waiter() -> None:
    with pytest.raises(DeadlockError) as caught:
        run_virtual(naive_pool(outage_until_30s, range(20), concurrency=2, maxsize=4))
    message = str(caught.value)
    assert "deadlock at virtual time 1.0 s" in message
    for task in ("naive-producer", "naive-worker-0", "naive-worker-1"):
        assert f"Task {task!r}" in message
    assert message.count("waiting on Queue.put") == 3


def test_the_engine_with_the_same_settings_finishes_and_accounts_for_every_item() -> None:
    config = PipelineConfig(
        concurrency=2, queue_maxsize=4, max_attempts=3, backoff=Backoff.constant(10.0)
    )
    report = run_virtual(Pipeline(outage_until_30s, config).run(range(20)))
    assert report.balanced
    assert report.completed + len(report.dead_letters) == 20
    assert report.completed > 0
