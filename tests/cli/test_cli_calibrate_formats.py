"""``calibrate --format otlp|locust|k6``: each tool's file of a known run, in and out of the CLI.

The files are written from one simulated run of known truth
(``tests/sim/workloads/telemetry/known.py``: Poisson 20/s, log-normal service
of mean 20 ms, 5% of attempts failing) the way each tool writes them (the
readers' own tests check them line by line). Here the command's JSON must be
the fit of what the reader read, recover the truth within sampling error at
``known.LEVEL``, and its ``--out`` scenario must run; a file given the wrong
format is one line, exit 2, and no ``--out``.
"""

from __future__ import annotations

import json
import math

import pytest

from pipeline.sim.calibration.telemetry import calibrate_observed
from pipeline.sim.workloads import telemetry
from tests.sim.workloads.telemetry import known, test_k6, test_locust, test_otlp


def k6_file(path, run):
    return test_k6.write(path / "run.json", test_k6.k6_lines(run))


def locust_file(path, run):
    return test_locust.write(path / "x_stats_history.csv", test_locust.history(run))


def otlp_file(path, run):
    spans = test_otlp.pipeline_spans(run)
    return test_otlp.write(path / "spans.json", test_otlp.export_lines(spans, run.end_ns))


# (format, writer, arrivals counted: requests (every attempt) or items)
FORMATS = [
    ("k6", k6_file, "requests"),
    ("locust", locust_file, "requests"),
    ("otlp", otlp_file, "items"),
]


@pytest.mark.parametrize(("format", "writer", "counted"), FORMATS, ids=[f[0] for f in FORMATS])
def test_a_tools_file_calibrates_a_scenario_that_runs(run_main, tmp_path, format, writer, counted):
    run = known.run(n_items=3000, seed=5)
    path = writer(tmp_path, run)
    out = tmp_path / "fitted.toml"
    status, text, err = run_main(
        "calibrate", str(path), "--format", format, "--json", "--out", str(out),
        "--concurrency", "64",  # none of these tools knows the server's workers
    )  # fmt: skip
    assert status == 0, err
    fitted = json.loads(text)
    observed = telemetry.reader(format).read(str(path))
    expected = calibrate_observed(observed, concurrency=64).to_dict()
    assert {k: fitted[k] for k in expected} == json.loads(json.dumps(expected))
    attempts = run.item.size
    rate = known.RATE * (known.attempts_per_item() if counted == "requests" else 1.0)
    n = attempts if counted == "requests" else run.arrival_ns.size
    assert abs(fitted["arrival_rate_per_s"] / rate - 1) <= known.Z / math.sqrt(n)
    mean_slack = 0.001 if format == "locust" else 0.0  # Locust rounds to whole milliseconds
    assert abs(fitted["service_mean_s"] - known.MEAN) <= (
        known.Z * known.CV * known.MEAN / math.sqrt(attempts) + mean_slack
    )
    spread = known.Z * math.sqrt(known.P_FAIL * (1 - known.P_FAIL) / attempts)
    assert abs(fitted["failure_rate"] - known.P_FAIL) <= spread
    status, text, err = run_main("simulate", str(out), "--json")
    assert status == 0, err
    assert json.loads(text)["items_offered"] > 0


@pytest.mark.parametrize(
    ("written", "read_as"),
    [("k6", "locust"), ("locust", "otlp"), ("otlp", "k6"), ("k6", "prometheus")],
)
def test_a_file_read_as_another_format_is_one_line_exit_2_and_no_out(
    run_main, tmp_path, written, read_as
):
    writer = {f: w for f, w, _ in FORMATS}[written]
    path = writer(tmp_path, known.run(n_items=100))
    out = tmp_path / "never.toml"
    status, text, err = run_main("calibrate", str(path), "--format", read_as, "--out", str(out))
    assert status == 2 and text == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("pipeline: error: "), err
    assert not out.exists() and not list(tmp_path.glob(".partial-*"))


def test_a_flag_the_format_does_not_take_is_refused(run_main, tmp_path):
    path = k6_file(tmp_path, known.run(n_items=100))
    status, _, err = run_main("calibrate", str(path), "--format", "k6", "--destination", "orders")
    assert status == 2 and "--destination" in err and len(err.strip().splitlines()) == 1
