"""``python -m pipeline calibrate``: telemetry in, a scenario file out that the other commands read.

The input is a saved ``query_range`` answer of a known truth (Poisson 5/s,
log-normal service of mean 0.2 s and cv 1, 5% failures, 4 workers;
``tests/sim/workloads/telemetry/scraped.py`` makes it). The scenario file
written by ``--out`` is run by ``simulate`` and planned by ``plan``; every bad
input is one line on stderr, exit status 2, and no ``--out`` file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.sim.calibration.telemetry import calibrate_observed
from pipeline.sim.workloads.telemetry.prometheus import read
from tests.sim.workloads.telemetry.scraped import GOLDEN_INPUT

INPUT = str(GOLDEN_INPUT)
REPO = Path(__file__).resolve().parents[2]
DURATION = {"__name__": "pipeline_attempt_duration_seconds_bucket", "pipeline": "orders"}


def test_json_has_the_contract_keys_and_says_how(run_main):
    status, out, err = run_main("calibrate", INPUT, "--format", "prometheus", "--json")
    assert status == 0, err
    d = json.loads(out)
    for key in ("arrival_rate_per_s", "service_mean_s", "service_p95_s", "failure_rate"):
        assert isinstance(d[key], float), key
    expected = calibrate_observed(read(INPUT)).to_dict()
    assert {k: d[k] for k in expected} == json.loads(json.dumps(expected))
    assert d["format"] == "prometheus"
    assert d["arrivals"]["fitted"] == "poisson" and d["service"]["fitted"] == "lognormal"
    assert d["concurrency"] == 4 and d["backlog"] == 0
    for part in ("arrivals", "service", "failures", "workers"):
        assert d[part]["how"]


def test_the_table_says_how_each_part_was_fitted(run_main):
    status, out, _ = run_main("calibrate", INPUT, "--format", "prometheus")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("calibrated from prometheus")
    assert [line.split(":")[0] for line in lines[1:]] == [
        "arrivals", "service", "failures", "workers", "attempts", "backlog"]  # fmt: skip


def test_out_is_a_scenario_that_simulate_sweep_and_plan_read(run_main, tmp_path):
    out = tmp_path / "orders.toml"
    status, _, err = run_main("calibrate", INPUT, "--format", "prometheus", "--out", out)
    assert status == 0, err
    text = out.read_text()
    assert 'arrivals = "poisson:rate=' in text and 'service = "lognormal:mean=' in text
    assert "concurrency = 4" in text and "duration = 1200.0" in text
    assert "# backlog: 0 item(s)" in text and "backlog = 0" in text
    status, sim, err = run_main("simulate", out, "--json")
    assert status == 0, err
    assert json.loads(sim)["items_offered"] > 5000
    status, plan, err = run_main(
        "plan", out, "--duration", "300", "--search", "concurrency=1..6",
        "--slo", "latency_p95_s<=2", "--replications", "3", "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(plan)["chosen"]["concurrency"] >= 2  # the load is 1.05 workers busy
    status, _, err = run_main(
        "sweep", out, "--duration", "100", "--grid", "concurrency=2,4", "--replications", "1",
        "--out", tmp_path / "sweep", "--json",
    )  # fmt: skip
    assert status == 0, err


def test_a_varying_rate_and_a_bucketed_service_are_written_beside_it(run_main, tmp_path):
    data = json.loads(GOLDEN_INPUT.read_text())
    buckets = {s["metric"].get("le"): s for s in data["data"]["result"]
               if s["metric"]["__name__"] == DURATION["__name__"]}  # fmt: skip
    for le in ("0.05", "0.1"):
        # Nothing between 25 ms and 100 ms, where most of the truth lies: no log-normal does that.
        buckets[le]["values"] = [list(point) for point in buckets["0.025"]["values"]]
    for series in data["data"]["result"]:
        if series["metric"]["__name__"] == "pipeline_items_offered_total":
            half = len(series["values"]) // 2  # no arrival in the second half
            for point in series["values"][half:]:
                point[1] = series["values"][half - 1][1]
    source = tmp_path / "odd.json"
    source.write_text(json.dumps(data))
    out = tmp_path / "odd.toml"
    status, got, err = run_main(
        "calibrate", source, "--format", "prometheus", "--out", out, "--json")  # fmt: skip
    assert status == 0, err
    d = json.loads(got)
    assert d["arrivals"]["fitted"] == "time_varying" and d["service"]["fitted"] == "buckets"
    text = out.read_text()
    assert 'arrivals = "counts:file=odd.arrivals.csv,column=count,interval_s=15.0"' in text
    assert 'service = "empirical:file=odd.service.csv,column=service_s"' in text
    assert len((tmp_path / "odd.arrivals.csv").read_text().splitlines()) == 81
    status, _, err = run_main("simulate", out, "--json", cwd=REPO)
    assert status == 0, err


def test_concurrency_given_wins_and_says_so(run_main):
    status, out, _ = run_main("calibrate", INPUT, "--format", "prometheus", "--json",
                              "--concurrency", "9")  # fmt: skip
    assert status == 0
    d = json.loads(out)
    assert d["concurrency"] == 9 and "(the data says 4)" in d["workers"]["how"]


def _bad(tmp_path):
    """Bad inputs by name -> (argv after 'calibrate', what the one line must say)."""
    good = json.loads(GOLDEN_INPUT.read_text())
    (tmp_path / "broken.json").write_text(GOLDEN_INPUT.read_text()[:500])
    (tmp_path / "vector.json").write_text(json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": []}}))  # fmt: skip
    missing = {**good, "data": {**good["data"], "result": [
        s for s in good["data"]["result"]
        if s["metric"]["__name__"] != "pipeline_items_offered_total"]}}  # fmt: skip
    (tmp_path / "missing.json").write_text(json.dumps(missing))
    nan = json.loads(GOLDEN_INPUT.read_text())
    bucket = next(s for s in nan["data"]["result"] if s["metric"] == {**DURATION, "le": "0.25"})
    bucket["values"][5][1] = "NaN"
    (tmp_path / "nan.json").write_text(json.dumps(nan))
    down = json.loads(GOLDEN_INPUT.read_text())
    bucket = next(s for s in down["data"]["result"] if s["metric"] == {**DURATION, "le": "0.5"})
    bucket["values"][7][1] = "1"
    (tmp_path / "down.json").write_text(json.dumps(down))
    (tmp_path / "folder.json").mkdir()
    huge = json.loads(GOLDEN_INPUT.read_text())
    for series in huge["data"]["result"]:
        if series["metric"]["__name__"] == "pipeline_workers":
            series["values"] = [[t, "200000"] for t, _ in series["values"]]
    (tmp_path / "huge.json").write_text(json.dumps(huge))
    for name, value in (
        ("pipeline_items_offered_total", "1e308"),
        ("pipeline_workers", "1e30"),
        ("pipeline_queue_depth", "1e20"),
        ("pipeline_items_offered_total", "0"),
    ):
        data = json.loads(GOLDEN_INPUT.read_text())
        for series in data["data"]["result"]:
            if series["metric"]["__name__"] == name:
                for point in series["values"][-1:] if value != "0" else series["values"]:
                    point[1] = value
        (tmp_path / f"{name}-{value}.json").write_text(json.dumps(data))  # fmt: skip
    locust = ["Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,Total Request Count,"
              "Total Failure Count,Total Median Response Time,Total Average Response Time",
              "100,1,,Aggregated,1,0,20,10,0,20,20", "101,1,,Aggregated,1,0,20,"
              "123456789012345678,0,20,20"]  # fmt: skip
    (tmp_path / "l_stats_history.csv").write_text("\n".join(locust) + "\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nobody listens there
    p = ["--format", "prometheus"]
    return {
        "malformed JSON": (["broken.json", *p], "broken.json: not valid JSON"),
        "not a matrix": (["vector.json", *p], 'vector.json: data.resultType: expected "matrix"'),
        "a missing series": (["missing.json", *p], "no series pipeline_items_offered_total"),
        "a NaN bucket": (["nan.json", *p], "nan.json: data.result["),
        "a decreasing bucket": (["down.json", *p], "buckets are cumulative"),
        "an unknown format": ([INPUT, "--format", "nagios"], "--format: format must be one of"),
        "no such file": (["absent.json", *p], "absent.json: no such file"),
        "a folder": (["folder.json", *p], "folder.json: is a directory"),
        "a URL that refuses": (
            [f"http://127.0.0.1:{port}", *p, "--start", "now-10m"],
            "cannot connect",
        ),
        "a window for a file": ([INPUT, *p, "--step", "15s"], "a window and step are for a"),
        "a bad step": ([f"http://127.0.0.1:{port}", *p, "--step", "soon"], "--step must be"),
        "a bad start": ([INPUT, *p, "--start", "yesterday"], "--start must be UNIX seconds"),
        "a bad concurrency": ([INPUT, *p, "--concurrency", "0"], "expected an integer >= 1"),
        "an empty label": ([INPUT, *p, "--pipeline", " "], "--pipeline must not be empty"),
        "a bad selector": ([INPUT, *p, "--errors-series", "x{a=b}"], "cannot read the label"),
        "too many workers": (["huge.json", *p], "200000 workers is more than a scenario file"),
        "a counter past a scenario": (
            ["pipeline_items_offered_total-1e308.json", *p],
            'values[80]: pipeline_items_offered_total{pipeline="orders"} (at 1e+308) has '
            "increased by 1e+308 arrivals in the window; allowed: a finite number from 0 to "
            "1,000,000,000 (the most a scenario runs)",
        ),
        "workers past a scenario": (
            ["pipeline_workers-1e30.json", *p],
            'pipeline_workers{pipeline="orders"} is 1e+30 workers; allowed: a finite number from '
            "0 to 1,000,000",
        ),
        "a backlog past a scenario": (
            ["pipeline_queue_depth-1e20.json", *p],
            'pipeline_queue_depth{pipeline="orders"} is 1e+20 items waiting; allowed:',
        ),
        "a counter that never moves": (
            ["pipeline_items_offered_total-0.json", *p],
            "pipeline_items_offered_total-0.json: pipeline_items_offered_total does not increase",
        ),
        "a Locust total past a scenario": (
            ["l_stats_history.csv", "--format", "locust", "--concurrency", "2"],
            "l_stats_history.csv row 2: Total Request Count is 1.23457e+17 requests; allowed:",
        ),
    }


BAD = [
    "malformed JSON", "not a matrix", "a missing series", "a NaN bucket", "a decreasing bucket",
    "an unknown format", "no such file", "a folder", "a URL that refuses", "a window for a file",
    "a bad step", "a bad start", "a bad concurrency", "an empty label", "a bad selector",
    "too many workers", "a counter past a scenario", "workers past a scenario",
    "a backlog past a scenario", "a counter that never moves", "a Locust total past a scenario",
]  # fmt: skip


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_exit_2_and_no_out(run_main, tmp_path, case):
    argv, message = _bad(tmp_path)[case]
    out = tmp_path / "never.toml"
    status, stdout, err = run_main("calibrate", *argv, "--out", out, cwd=tmp_path)
    assert status == 2 and stdout == ""
    assert len(err.splitlines()) == 1 and err.startswith("pipeline: error: "), err
    assert message in err, err
    assert not out.exists() and not list(tmp_path.glob("never*")) and not list(
        tmp_path.glob(".partial-*"))  # fmt: skip


def test_a_byte_order_mark_and_a_bucket_series_name_are_taken(run_main, tmp_path):
    # A JSON saved by a Windows editor (a BOM), as the other JSON readers take it; the
    # histogram named by its _bucket series, as a UI lists it.
    source = tmp_path / "bom.json"
    source.write_bytes(b"\xef\xbb\xbf" + GOLDEN_INPUT.read_bytes())
    status, out, err = run_main(
        "calibrate", source, "--format", "prometheus", "--json",
        "--duration-series", "pipeline_attempt_duration_seconds_bucket",
    )  # fmt: skip
    assert status == 0, err
    want = calibrate_observed(read(INPUT)).to_dict()
    got = json.loads(out)
    assert got["service_mean_s"] == want["service_mean_s"]
    assert got["service_p95_s"] == pytest.approx(want["service_p95_s"], rel=1e-12)


def test_an_unusable_out_is_found_before_reading(run_main, tmp_path):
    (tmp_path / "broken.json").write_text("{")
    for out, message in ((tmp_path / "no" / "s.toml", "does not exist"),
                         (tmp_path, "is a directory")):  # fmt: skip
        status, _, err = run_main(
            "calibrate", tmp_path / "broken.json", "--format", "prometheus", "--out", out
        )
        assert status == 2 and f"--out {out}: " in err and message in err  # fmt: skip


def test_help_does_not_need_the_simulator():
    code = (
        "import sys; from pipeline.cli import main\n"
        "try:\n    main(['calibrate', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('numpy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--format NAME" in done.stdout and done.stdout.splitlines()[-1] == "False"


def test_a_live_backlog_is_kept_for_a_warm_start(run_main, tmp_path):
    data = json.loads(GOLDEN_INPUT.read_text())
    for series in data["data"]["result"]:
        if series["metric"]["__name__"] == "pipeline_queue_depth":
            series["values"][-1][1] = "5000"  # the queue holds 5,000 items now
    source = tmp_path / "busy.json"
    source.write_text(json.dumps(data))
    out = tmp_path / "busy.toml"
    status, got, err = run_main(
        "calibrate", source, "--format", "prometheus", "--json", "--out", out)  # fmt: skip
    assert status == 0, err
    d = json.loads(got)
    assert d["backlog"] == 5000 and "5000 item(s) waiting" in d["backlog_how"]
    assert "\nbacklog = 5000\n" in out.read_text()
    status, got, err = run_main("simulate", out, "--json")
    assert status == 0, err
    simulated = json.loads(got)
    assert simulated["items_backlog"] == 5000 and simulated["backlog_cleared_s"] > 0


def test_a_gamma_service_is_written_as_one_that_simulate_runs(run_main, tmp_path):
    # A known gamma truth scraped as Prometheus answers it: the gamma wins the bucket
    # likelihood, is written as gamma:mean=,cv= and runs; its mean is _sum/_count exactly.
    from pipeline import PipelineConfig
    from pipeline.sim import Gamma, Poisson, Scenario, simulate
    from pipeline.sim.running.scrape import query_range_answer

    truth = Scenario(
        arrivals=Poisson(rate=20.0), service=Gamma(mean=0.1, cv=0.5),
        config=PipelineConfig(concurrency=4), duration_s=1200.0, seed=4,
    )  # fmt: skip
    answer = query_range_answer(simulate(truth, engine="kernel"), start_s=1.7e9, step_s=15.0,
                                until_s=1200.0)  # fmt: skip
    source = tmp_path / "gamma.json"
    source.write_text(json.dumps(answer))
    out = tmp_path / "gamma.toml"
    status, got, err = run_main("calibrate", source, "--format", "prometheus", "--json",
                                "--out", out)  # fmt: skip
    assert status == 0, err
    d = json.loads(got)
    assert d["service"]["fitted"] == "gamma" and "_sum / _count" in d["service"]["how"]
    assert d["service_mean_s"] == d["service"]["observed_mean_s"]
    low, high = d["service_mean_interval"]  # 95%: widened to 99.9% (z 3.29 for 1.96)
    assert abs(d["service_mean_s"] - 0.1) <= (high - low) / 2 * 3.29 / 1.96
    assert 'service = "gamma:mean=' in out.read_text()
    status, sim, err = run_main("simulate", out, "--json")
    assert status == 0, err
    assert json.loads(sim)["items_completed"] > 20_000
