"""A real Prometheus scrapes pipeline.metrics, and its HTTP API gives back the run report.

The server is Debian's ``prometheus`` (``python -m tests.services_setup``
installs it under ``CI=true``): started on a loopback port with a scrape
config pointing at the exporter (scraped every 100 ms) and a scratch
database, stopped after. Without it the test skips with a hint, or fails
under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

import pipeline.metrics
from pipeline import Backoff, Chain, Pipeline, PipelineConfig, Stage
from tests.core.test_metrics import faulty
from tests.prometheus_server import query, require_prometheus, running_prometheus, scraped_after

# A real Prometheus server: not in make test-fast.
pytestmark = pytest.mark.service


def test_prometheus_reads_back_the_run_report(tmp_path):
    binary = require_prometheus("the Prometheus scrape test")
    fast = Backoff(kind="constant", base_s=0.001)
    pipe = Pipeline(
        faulty(random.Random(11), fail=0.3, slow=0.05),
        PipelineConfig(
            concurrency=3, queue_maxsize=3, on_full="reject", backoff=fast, attempt_timeout_s=0.02
        ),
        name="orders",
        rng=random.Random(1),
    )

    async def split(x: int) -> list[int]:
        await asyncio.sleep(0.001)
        return [x, x + 1000]

    chain = Chain(
        [
            Stage("split", split, PipelineConfig(concurrency=2, queue_maxsize=2), fan_out=True),
            Stage(
                "check",
                faulty(random.Random(12), fail=0.2, slow=0.0),
                PipelineConfig(concurrency=2, backoff=fast),
            ),
        ],
        name="ingest",
    )

    async def run():
        async def paced(n: int):
            for x in range(n):
                yield x
                if x % 10 == 9:  # bursts of 10 (over a queue of 3: some are shed), over
                    await asyncio.sleep(0.02)  # several scrapes, so the counters move

        return await asyncio.gather(pipe.run(paced(80)), chain.run(paced(40)))

    server = pipeline.metrics.serve([pipe, chain])
    try:
        with running_prometheus(binary, tmp_path, [f"127.0.0.1:{server.port}"]) as base:
            report, chain_report = asyncio.run(run())
            scraped_after(base, time.time())
            reports = {
                frozenset({("pipeline", "orders")}): report,
                **{
                    frozenset({("pipeline", "ingest"), ("stage", name)}): stage
                    for name, stage in chain_report.stages.items()
                },
            }
            offered = query(base, "pipeline_items_offered_total")
            items = query(base, "pipeline_items_total")
            attempts = query(base, "sum without (result) (pipeline_attempts_total)")
            retries = query(base, "pipeline_retries_total")
            latency = query(base, "pipeline_latency_seconds_count")
            capacity = query(base, "pipeline_queue_capacity")
    finally:
        server.close()

    assert set(offered) == set(reports)
    for labels, each in reports.items():
        assert offered[labels][1] == each.offered
        outcome = {
            "completed": each.completed,
            "dead_lettered": len(each.dead_letters),
            "shed": each.statistics.shed,
            "unfinished": len(each.unfinished),
            "expired": 0,
        }
        for name, count in outcome.items():
            assert items[labels | {("outcome", name)}][1] == count, (labels, name)
        assert attempts[labels][1] == each.attempts
        assert retries[labels][1] == each.statistics.retried
        assert latency[labels][1] == each.completed
    assert report.statistics.shed > 0 and report.dead_letters  # the faults happened
    assert capacity[frozenset({("pipeline", "orders")})][1] == 3
