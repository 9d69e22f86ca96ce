"""Priorities and deadlines per stage of a chain, batching stages included."""

from __future__ import annotations

import asyncio

from pipeline import Chain, PipelineConfig, Stage
from pipeline.sim.vloop import run_virtual


def sleeping(seconds, result=lambda x: x):
    async def handler(x):
        await asyncio.sleep(seconds)
        return result(x)

    return handler


def test_an_item_expiring_in_stage_two_is_in_the_chain_report():
    chain = Chain(
        [
            Stage("fetch", sleeping(0.1), PipelineConfig(concurrency=4)),
            Stage(
                "write",
                sleeping(1.0),
                PipelineConfig(concurrency=1, queue_maxsize=None, max_wait_s=2.5),
            ),
        ]
    )
    report = run_virtual(chain.run(range(8)))
    write = report.stages["write"]
    # All 8 reach "write" by t = 0.2; one worker starts them at 0.1, 1.1, 2.1, ...:
    # those whose start would come 2.5 s or more after their hand-off expire.
    assert report.completed == 3 and len(write.expired) == 5 and report.expired == 5
    assert report.balanced and write.balanced
    assert len(report.stages["fetch"].expired) == 0


def test_priority_per_stage_orders_the_second_stage():
    order = []

    async def write(x):
        order.append(x)
        await asyncio.sleep(1.0)

    async def fetch(x):
        await asyncio.sleep(0.1 * x)  # 0 reaches "write" at once, the others by 0.5 s
        return x

    chain = Chain(
        [
            Stage("fetch", fetch, PipelineConfig(concurrency=10)),
            Stage(
                "write",
                write,
                PipelineConfig(concurrency=1, queue_maxsize=None, priority=lambda x: -x),
            ),
        ],
        drain_timeout_s=None,
    )
    report = run_virtual(chain.run(range(6)))
    # 0 starts at once; the rest wait for it and are then served best key first.
    assert order == [0, 5, 4, 3, 2, 1]
    assert report.completed == 6 and report.balanced


def test_a_batching_stage_expires_whole_batches_counted_item_by_item():
    chain = Chain(
        [
            Stage("fetch", sleeping(0.0), PipelineConfig(concurrency=10)),
            Stage(
                "write",
                sleeping(5.0),
                PipelineConfig(concurrency=1, queue_maxsize=None, max_wait_s=1.0, keep_shed=1),
                batch_size=3,
                batch_window_s=0.01,
            ),
        ]
    )

    async def main():
        task = asyncio.ensure_future(chain.run(range(9)))
        await asyncio.sleep(2.0)
        stats = chain.statistics().stages["write"]
        return await task, stats

    report, stats = run_virtual(main())
    write = report.stages["write"]
    # Three batches of three: the first runs, the other two expire after 1 s in the queue.
    assert write.batches == 3
    assert write.completed == 3 and len(write.expired) == 6
    assert write.expired.kept == [6, 7, 8]  # the last batch kept (keep_shed=1 batch)
    assert report.expired == 6 and report.balanced
    assert stats.items_inside == 3  # the running batch; the expired ones are out


def test_a_batching_stage_orders_whole_batches_by_a_key_of_the_batch():
    order = []

    async def write(batch):
        order.append(tuple(batch))
        await asyncio.sleep(1.0)
        return batch

    chain = Chain(
        [
            Stage("fetch", sleeping(0.0), PipelineConfig(concurrency=10)),
            Stage(
                "write",
                write,
                PipelineConfig(concurrency=1, queue_maxsize=None, priority=lambda b: -min(b)),
                batch_size=2,
                batch_window_s=0.01,
            ),
        ],
        drain_timeout_s=None,
    )
    report = run_virtual(chain.run(range(8)))
    # The batches form first in, first out; the first runs at once, the rest by key.
    assert order == [(0, 1), (6, 7), (4, 5), (2, 3)]
    assert report.completed == 8 and report.balanced
