"""A real Prometheus scrapes pipeline.metrics, and its HTTP API gives back the run report.

The server is Debian's ``prometheus`` (``python -m tests.services_setup``
installs it under ``CI=true``): started on a loopback port with a scrape
config pointing at the exporter (scraped every 100 ms) and a scratch
database, stopped after. Without it the test skips with a hint, or fails
under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import pipeline.metrics
from pipeline import Backoff, Chain, Pipeline, PipelineConfig, Stage
from tests.core.test_metrics import faulty
from tests.services_setup import SERVICES, prometheus_bin

SCRAPE_CONFIG = """\
global:
  scrape_interval: 100ms
  scrape_timeout: 90ms
scrape_configs:
  - job_name: pipeline
    static_configs:
      - targets: ["{target}"]
"""


def _binary() -> str:
    found = prometheus_bin()
    if found is None:
        problem = "prometheus (and promtool) not on PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Prometheus test needs a server under CI=true; {problem}")
        pytest.skip(f"{problem}; to run it: {SERVICES['prometheus'].hint}")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_prometheus(binary: str, folder: Path, target: str) -> Iterator[str]:
    """A Prometheus scraping ``target`` (host:port); yields its base URL; stops it after."""
    config = folder / "prometheus.yml"
    config.write_text(SCRAPE_CONFIG.format(target=target))
    port = _free_port()
    log = (folder / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # up to a minute on a loaded machine
            if process.poll() is not None:
                raise AssertionError(
                    f"prometheus exited with {process.returncode}: "
                    f"{(folder / 'prometheus.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError("prometheus did not become ready within a minute")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def query(base: str, promql: str) -> dict[frozenset, tuple[float, float]]:
    """An instant query: each series' labels (without job and instance) -> (time, value)."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return {
        frozenset(
            (k, v) for k, v in row["metric"].items() if k not in {"job", "instance", "__name__"}
        ): (float(row["value"][0]), float(row["value"][1]))
        for row in body["data"]["result"]
    }


def scraped_after(base: str, moment_s: float) -> None:
    """Wait until Prometheus holds a scrape taken after ``moment_s`` (Unix time)."""
    for _ in range(600):
        rows = query(base, "timestamp(pipeline_items_offered_total)")
        if rows and min(t for _, t in rows.values()) > moment_s:
            return
        time.sleep(0.1)
    raise AssertionError("prometheus took no scrape after the run within a minute")


def test_prometheus_reads_back_the_run_report(tmp_path):
    binary = _binary()
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
        with running_prometheus(binary, tmp_path, f"127.0.0.1:{server.port}") as base:
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
