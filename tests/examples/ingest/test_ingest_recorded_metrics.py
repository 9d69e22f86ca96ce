"""``data/make_ingest_metrics.py``: a real ingestion scraped by a real Prometheus, calibrated.

The script runs for real into a temporary folder (a smaller run than the
shipped file's): Prometheus on a loopback port scraping the example's
exporter, the ingestion with one write worker, the ``query_range`` answer
saved beside the run report. The counters read back through the
calibration's own reader end at the report's numbers (records written, pages
fetched, dead letters), and the scenario calibrated from the write stage is
one ``plan`` accepts. Without Debian's ``prometheus`` the test skips with a
hint (fails under ``CI=true``).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.sim import plan
from pipeline.sim.calibration.telemetry import calibrate_observed
from pipeline.sim.workloads.telemetry import reader
from pipeline.sim.workloads.telemetry.query_range import read_answers
from tests.prometheus_server import require_prometheus

# A real Prometheus server: not in make test-fast. It scrapes the run as it goes, each
# scrape timed out at 90 ms: beside a browser test on a loaded machine none answered in a
# minute. So it runs alone (measures), and the twin is calibrated from what it scraped.
pytestmark = [pytest.mark.service, pytest.mark.measures]

SCRIPT = Path(__file__).resolve().parents[3] / "data" / "make_ingest_metrics.py"
RECORDS = 1000
PAGE_SIZE = 20  # the example's default


def _last(series, name: str, **labels: str) -> float:
    (found,) = [
        s for s in series if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return float(found.values[-1])


def test_the_recorded_counters_are_the_run_report_and_calibrate_into_a_plan(tmp_path):
    binary = require_prometheus("the recorded-metrics test")
    made = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--records", str(RECORDS),
         "--prometheus", binary],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    saved = tmp_path / "ingest_prometheus.json"
    report = json.loads((tmp_path / "ingest_run.json").read_text())
    assert report["ended"] == "done" and report["accounting"]["not_fetched"] == 0
    series = read_answers(str(saved), "saved")
    at = {"pipeline": "ingest"}
    written = _last(series, "pipeline_items_total", stage="write", outcome="completed", **at)
    dead = _last(series, "pipeline_items_total", stage="write", outcome="dead_lettered", **at)
    pages = _last(series, "pipeline_items_total", stage="fetch", outcome="completed", **at)
    assert written == report["accounting"]["written"] == report["measured"]["records_written"]
    assert dead == report["accounting"]["dead_lettered"]
    assert pages == math.ceil(RECORDS / PAGE_SIZE)
    assert _last(series, "pipeline_items_offered_total", stage="write", **at) == RECORDS

    observed = reader("prometheus").read(str(saved), pipeline="ingest", stage="write")
    fit = calibrate_observed(observed)
    # The arrivals counted are the counter's increase over the window (from its first scrape).
    offered = [s for s in series if s.name == "pipeline_items_offered_total"
               and s.labels.get("stage") == "write"]  # fmt: skip
    assert fit.arrivals.n == round(offered[0].values[-1] - offered[0].values[0])
    assert fit.concurrency == 1 and fit.failure_rate is not None
    chosen = plan(
        fit.scenario,
        {"concurrency": [1, 2, 4, 8]},
        ["latency_p95_s <= 1"],
        replications=(3, 6),
        engine="kernel",
        progress=False,
    )
    assert chosen.status == "chosen", chosen
