"""Calibration from a real Prometheus: over HTTP and from its saved answer, the same fit.

A simulated run of a known truth is written with ``simulate --metrics-out``,
backfilled with ``promtool tsdb create-blocks-from openmetrics`` into a
Prometheus server on a loopback port (the fixture of the backfill test), and
then calibrated twice: from the server's URL with a window and a step, and
from the ``query_range`` answer for ``{__name__=~"pipeline_.+"}`` saved to a
file. Both give the same numbers, and they are the run's own.

Needs Debian's ``prometheus`` (``python -m tests.services_setup`` installs it
under ``CI=true``); without it the test is skipped with a hint.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request

from tests.sim.running.test_openmetrics_prometheus import prometheus  # noqa: F401 (a fixture)

WINDOW_S = 1200
HEADLINE = ("arrival_rate_per_s", "service_mean_s", "service_p95_s", "failure_rate",
            "concurrency", "backlog", "window_s")  # fmt: skip


def test_a_backfilled_run_calibrates_alike_from_the_server_and_its_saved_answer(
    prometheus,  # noqa: F811
    run_main,
    tmp_path,
):
    start = math.floor(time.time() - WINDOW_S - 3600)  # an hour ago: inside any retention
    metrics = tmp_path / "run.om"
    status, out, err = run_main(
        "simulate", "--arrivals", "poisson:rate=5", "--service", "lognormal:mean=0.2,cv=1",
        "--concurrency", "4", "--maxsize", "1000", "--failure-rate", "0.05",
        "--duration", WINDOW_S, "--seed", 8, "--json", "--metrics-out", metrics,
        "--metrics-start", start, "--metrics-step", "15s", "--metrics-pipeline", "orders",
    )  # fmt: skip
    assert status == 0, err
    summary = json.loads(out)
    prometheus.backfill(metrics)
    prometheus.start()
    window = ["--start", start, "--end", start + WINDOW_S, "--step", "15s"]
    status, live, err = run_main(
        "calibrate", prometheus.url, "--format", "prometheus", "--json", *window
    )
    assert status == 0, err  # fmt: skip
    params = urllib.parse.urlencode({"query": '{__name__=~"pipeline_.+"}', "start": start,
                                     "end": start + WINDOW_S, "step": 15})  # fmt: skip
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/query_range?{params}") as answer:
        saved = tmp_path / "saved.json"
        saved.write_bytes(answer.read())
    status, offline, err = run_main("calibrate", saved, "--format", "prometheus", "--json")
    assert status == 0, err
    a, b = json.loads(live), json.loads(offline)
    assert {k: a[k] for k in HEADLINE} == {k: b[k] for k in HEADLINE}
    assert a["arrivals"] == b["arrivals"] and a["service"] == b["service"]
    # The run's own numbers: every arrival of the window, every attempt that ended in it.
    assert a["arrivals"]["n"] == summary["items_offered"]
    assert a["window_s"] == WINDOW_S and a["concurrency"] == 4
    assert 4.5 < a["arrival_rate_per_s"] < 5.5 and 0.03 < a["failure_rate"] < 0.07
