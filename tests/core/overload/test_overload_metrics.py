"""What the controls did, in Prometheus's terms: the counters and the state gauge."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import pipeline.metrics
from pipeline import Backoff, CircuitBreaker, Pipeline, PipelineConfig, RetryBudget


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("state")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_metrics_equal_the_statistics_while_open_and_after():
    calls = []

    async def down(x):
        calls.append(x)
        await asyncio.sleep(0.001)
        raise ConnectionError("down")

    config = PipelineConfig(
        concurrency=2,
        max_attempts=3,
        backoff=Backoff(kind="constant", base_s=0.001, jitter=False),
        drain_timeout_s=0.5,
        retry_budget=RetryBudget(ratio=0.5, min_retries_per_s=0, window_s=60),
        breaker=CircuitBreaker(window=4, min_calls=4, open_s=60, half_open_calls=1),
    )

    async def run():
        pipe = Pipeline(down, config, name="guarded")
        with pipeline.metrics.serve(pipe) as server:
            report = await pipe.run(range(10))
            return report, await asyncio.to_thread(scrape, server.url)

    report, samples = asyncio.run(run())
    stats = report.statistics
    assert stats.breaker_state == "open" and stats.breaker_calls_refused > 0
    assert samples[("pipeline_retries_denied_total", None)] == stats.retries_denied
    assert samples[("pipeline_breaker_calls_refused_total", None)] == stats.breaker_calls_refused
    states = {s: samples[("pipeline_breaker_state", s)] for s in ("closed", "open", "half_open")}
    assert states == {"closed": 0, "open": 1, "half_open": 0}
    assert report.balanced and len(report.unfinished) > 0  # held by the open breaker


def test_without_a_breaker_the_state_gauge_is_all_zero():
    async def run():
        pipe = Pipeline(lambda x: x, PipelineConfig(concurrency=1), name="plain")
        with pipeline.metrics.serve(pipe) as server:
            await pipe.run(range(3))
            return await asyncio.to_thread(scrape, server.url)

    samples = asyncio.run(run())
    assert [samples[("pipeline_breaker_state", s)] for s in ("closed", "open", "half_open")] == [
        0,
        0,
        0,
    ]
    assert samples[("pipeline_retries_denied_total", None)] == 0
