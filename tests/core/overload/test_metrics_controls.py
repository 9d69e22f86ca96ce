"""The overload controls in the Prometheus exporter: the limit's gauge and CoDel's counter."""

from __future__ import annotations

import asyncio

import pipeline.metrics
from pipeline import AIMD, CoDel, Pipeline, PipelineConfig
from tests.core.test_metrics import scrape, value


def served(config, handler, n):
    async def run():
        pipe = Pipeline(handler, config, name="guarded")
        with pipeline.metrics.serve(pipe) as server:
            report = await pipe.run(range(n))
            return report, await asyncio.to_thread(scrape, server.url)

    return asyncio.run(run())


def test_the_limit_gauge_and_the_codel_counter_equal_the_report():
    async def slow_then_fail(x):
        await asyncio.sleep(0.002)
        if x % 3 == 0:
            raise ValueError(x)

    config = PipelineConfig(
        concurrency=4,
        max_attempts=1,
        concurrency_limit=AIMD(min_limit=1),
        codel=CoDel(target_s=0.001, interval_s=0.005),
    )
    report, samples = served(config, slow_then_fail, 200)
    stats = report.statistics
    assert (
        value(samples, "pipeline_concurrency_limit", pipeline="guarded") == stats.concurrency_limit
    )
    shed = value(samples, "pipeline_codel_shed_total", pipeline="guarded")
    assert shed == report.codel_shed == stats.codel_shed
    everything_shed = value(samples, "pipeline_items_total", pipeline="guarded", outcome="shed")
    assert everything_shed == len(report.shed) >= shed


def test_without_a_limit_the_gauge_is_the_workers():
    async def ok(x):
        return x

    _, samples = served(PipelineConfig(concurrency=3), ok, 5)
    assert value(samples, "pipeline_concurrency_limit", pipeline="guarded") == 3
    assert value(samples, "pipeline_codel_shed_total", pipeline="guarded") == 0
