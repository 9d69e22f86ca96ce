"""A simulated run's OpenMetrics file backfilled into a real Prometheus, and queried back.

``promtool tsdb create-blocks-from openmetrics`` turns the file into TSDB
blocks in a temporary folder; a Prometheus server is started on those blocks
on a free loopback port (no scrape targets), and its HTTP API
(``/api/v1/query``) answers: ``max_over_time(pipeline_queue_depth[...])``
over the run is the summary's ``queue_depth_max``, and the counters at the
run's end are its item and attempt counts. The server is stopped afterwards.

Needs Debian's ``prometheus`` (``prometheus`` and ``promtool``):
``python -m tests.services_setup``, which ``make test`` runs, installs it when
``CI=true``. Without it the test is skipped with a hint, or fails under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, StageSpec, simulate
from tests.prometheus_server import require_prometheus, running_prometheus

# promtool and a real Prometheus server: not in make test-fast.
pytestmark = pytest.mark.service


class _Prometheus:
    """A Prometheus server on ``data`` (backfilled blocks), on a free loopback port."""

    def __init__(self, folder: Path, binary: str) -> None:
        self.folder = folder
        self.binary = binary
        self.data = folder / "data"
        self.url = ""
        self._stack = contextlib.ExitStack()

    def backfill(self, metrics: Path) -> None:
        made = subprocess.run(
            [shutil.which("promtool") or "promtool", "tsdb", "create-blocks-from", "openmetrics",
             str(metrics), str(self.data)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr or made.stdout

    def start(self) -> None:
        self.url = self._stack.enter_context(
            running_prometheus(self.binary, self.folder, data=self.data)
        )

    def query(self, expression: str, at_s: float) -> dict[str, float]:
        """An instant query's answer: each series' labels (as text) -> value."""
        params = urllib.parse.urlencode({"query": expression, "time": f"{at_s:.3f}"})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{params}", timeout=30) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return {
            ",".join(f"{k}={v}" for k, v in sorted(item["metric"].items())): float(item["value"][1])
            for item in body["data"]["result"]
        }

    def stop(self) -> None:
        self._stack.close()


@pytest.fixture
def prometheus(tmp_path) -> Iterator[_Prometheus]:
    server = _Prometheus(tmp_path, require_prometheus("the backfill test"))
    try:
        yield server
    finally:
        server.stop()


def test_a_backfilled_run_answers_with_its_own_numbers(prometheus, tmp_path):
    scenario = Scenario(
        arrivals=Poisson(rate=2.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=1.0),
                      config=PipelineConfig(concurrency=3, queue_maxsize=8, max_attempts=3),
                      failures=IndependentFailures(0.1)),
            StageSpec(name="write", service=Exponential(mean=0.4),
                      config=PipelineConfig(concurrency=2, queue_maxsize=4)),
        ],
        n_items=1500,
        seed=4,
    )  # fmt: skip
    result = simulate(scenario)
    end = result.summary["sim_time_s"]
    start = math.floor(time.time() - end - 3600)  # an hour ago: inside any retention
    path = tmp_path / "run.om"
    result.to_openmetrics(path, start_s=start, step_s=1.0, pipeline="orders")
    prometheus.backfill(path)
    prometheus.start()
    at = start + round(end, 3)
    span = f"{math.ceil(end) + 2}s"  # the whole run, from before its first sample
    peaks = prometheus.query(
        f'max_over_time(pipeline_queue_depth{{pipeline="orders"}}[{span}])', at
    )
    items = prometheus.query('pipeline_items_total{pipeline="orders"}', at)
    attempts = prometheus.query('sum by (stage) (pipeline_attempts_total{pipeline="orders"})', at)
    offered = prometheus.query('pipeline_items_offered_total{pipeline="orders"}', at)
    for name, stage in result.stages.items():
        s = stage.summary
        assert peaks[f"pipeline=orders,stage={name}"] == s["queue_depth_max"]
        assert (
            offered[f"__name__=pipeline_items_offered_total,pipeline=orders,stage={name}"]
            == (s["items_offered"])
        )
        assert attempts[f"stage={name}"] == s["attempts_total"]
        for outcome, key in (
            ("completed", "items_completed"),
            ("dead_lettered", "items_dead_lettered"),
        ):
            got = items[
                f"__name__=pipeline_items_total,outcome={outcome},pipeline=orders,stage={name}"
            ]
            assert got == s[key], (name, outcome)
    assert sum(s.summary["queue_depth_max"] for s in result.stages.values()) > 0
