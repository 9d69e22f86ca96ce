"""The ingestion example serves its chain's Prometheus metrics while it runs.

``ingest(serve_metrics=...)`` and the command line's ``--metrics-port``: the
exporter sees the real run (its counters equal the run report when scraped
before it closes), it is closed after the run whether it ends well or not,
and a port in use is one line, exit 2, before any work.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.request

import pytest

import pipeline.metrics
from pipeline.examples.ingest.chain import IngestConfig, ingest
from pipeline.examples.ingest.client import PartnerClient
from pipeline.examples.ingest.server import PartnerConfig, PartnerProcess
from pipeline.examples.ingest.sink import SqliteSink
from tests.examples.ingest.test_ingest_edges import QUICK, cli


class Kept:
    """A server ``ingest`` closes; the test reads it first, then really closes it."""

    def __init__(self, chain) -> None:
        self.server = pipeline.metrics.serve(chain)
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    rows = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            rows[name] = float(value)
    return rows


async def _ingest(tmp_path, records: int, serve_metrics):
    with PartnerProcess(PartnerConfig(records=records, page_size=20, **QUICK)) as partner:
        client = PartnerClient(partner.url, page_size=20)
        async with SqliteSink(tmp_path / "r.sqlite") as sink, client:
            return await ingest(
                client, sink, IngestConfig(page_size=20), serve_metrics=serve_metrics
            )


def test_the_served_counters_equal_the_run_report_and_the_server_is_closed(tmp_path):
    kept: list[Kept] = []

    def serve(chain):
        kept.append(Kept(chain))
        return kept[-1]

    run = asyncio.run(_ingest(tmp_path, 120, serve))
    (served,) = kept
    try:
        assert served.closes == 1
        rows = scrape(served.server.url)
    finally:
        served.server.close()
    write = run.report.stages["write"]
    label = '{outcome="completed",pipeline="ingest",stage="write"}'
    assert rows[f"pipeline_items_total{label}"] == write.completed == 120
    assert rows['pipeline_items_offered_total{pipeline="ingest",stage="fetch"}'] == (
        run.report.stages["fetch"].offered
    )


def test_a_serve_that_fails_fails_the_run_before_it_starts_and_leaves_no_task(tmp_path):
    def serve(_chain):
        raise OSError("metrics server cannot listen on 127.0.0.1:1: in use")

    async def attempt():
        with pytest.raises(OSError, match="cannot listen"):
            await _ingest(tmp_path, 20, serve)
        await asyncio.sleep(0)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(attempt()) == []


def test_a_metrics_port_in_use_is_one_line_and_exit_2_before_any_work():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = cli("--records", "3", "--no-twin", "--metrics-port", str(port))
        out, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and out == b"" and len(lines) == 1, err.decode()
    assert lines[0].startswith(f"pipeline: error: --metrics-port {port}: 127.0.0.1 cannot listen")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--metrics-linger", "2"], "--metrics-linger needs --metrics-port"),
        (["--metrics-port", "0"], "--metrics-port must be from 1 to 65,535, got 0"),
        (["--metrics-port", "70000"], "--metrics-port must be from 1 to 65,535, got 70000"),
        (["--metrics-port", "9", "--metrics-linger", "nan"], "--metrics-linger must be"),
    ],
)
def test_bad_metrics_flags_are_one_line_and_exit_2(flags, message):
    process = cli("--records", "3", "--no-twin", *flags)
    out, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and out == b"" and len(lines) == 1, err.decode()
    assert message in lines[0]
