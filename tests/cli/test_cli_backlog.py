"""``--backlog N`` and a scenario file's ``backlog = N``: items waiting at time 0."""

from __future__ import annotations

import csv
import json

import pytest

MM = ["--arrivals", "poisson:rate=15", "--service", "exponential:mean=1.0"]
DRAIN = [*MM, "--concurrency", "20", "--items", "0", "--backlog", "2000", "--seed", "1"]


def simulate_json(run_main, *args, cwd=None):
    status, out, err = run_main("simulate", *args, "--json", cwd=cwd)
    assert status == 0, err
    return json.loads(out)


def test_the_queue_holds_two_thousand_items_how_long_until_it_drains(run_main):
    runs = simulate_json(run_main, *DRAIN, "--replications", "5")
    assert runs["items_offered"] == 2000 and runs["items_backlog"] == 2000
    # No arrivals, 20 workers at 1 item/s each: (2000 - 20) / 20 s until the queue is empty.
    low = runs["backlog_drained_s"] - runs["ci95"]["backlog_drained_s"]
    high = runs["backlog_drained_s"] + runs["ci95"]["backlog_drained_s"]
    # One run's drain time is Gamma(1980, 20/s): sd 2.2 s. Five replications' skew-robust
    # interval is wider than t's (about +-6 s), but still an answer: within 10% of it.
    assert low < 99.0 < high and runs["ci95"]["backlog_drained_s"] < 0.1 * 99.0
    assert runs["backlog_cleared_s"] > runs["backlog_drained_s"]


def test_the_file_key_gives_what_the_flag_gives_and_the_flag_overrides_it(run_main, scenario_file):
    path = scenario_file(
        """
        arrivals = "poisson:rate=15"
        service = "exponential:mean=1.0"
        concurrency = 20
        items = 0
        seed = 1
        backlog = 2000
        """
    )
    from_file = simulate_json(run_main, path)
    from_flags = simulate_json(run_main, *DRAIN)
    for key in ("items_offered", "backlog_cleared_s", "backlog_drained_s", "wait_mean_s"):
        assert from_file[key] == from_flags[key], key
    assert simulate_json(run_main, path, "--backlog", "10")["items_backlog"] == 10


def test_without_a_backlog_no_backlog_key_appears(run_main):
    summary = simulate_json(run_main, *MM, "--items", "50")
    assert "items_backlog" not in summary and "backlog_cleared_s" not in summary


def test_out_marks_the_backlog_items(run_main, tmp_path):
    out = tmp_path / "run"
    status, _, err = run_main("simulate", *MM, "--items", "20", "--backlog", "5", "--out", out)
    assert status == 0, err
    with open(out / "items.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["backlog"] for row in rows[:6]] == ["True"] * 5 + ["False"]
    assert json.loads((out / "summary.json").read_text())["items_backlog"] == 5


@pytest.mark.parametrize("value", ["-1", "3.5", "nan", "1e3", "", "true", "1000000001", "5 000"])
def test_a_bad_backlog_is_one_line_exit_2_before_any_work(run_main, tmp_path, value):
    out = tmp_path / "never"
    status, stdout, err = run_main(
        "simulate", *MM, "--items", "5", "--backlog", value, "--out", out
    )
    assert status == 2 and stdout == ""
    assert err.count("\n") == 1 and "--backlog" in err and "items waiting at time 0" in err
    assert not out.exists()


def test_a_bad_backlog_in_a_file_names_the_file(run_main, scenario_file):
    path = scenario_file(
        'arrivals = "poisson:rate=1"\nservice = "constant:value=1"\nbacklog = -4\n'
    )
    status, _, err = run_main("simulate", path, "--items", "5")
    assert status == 2 and err.count("\n") == 1
    assert f"{path}: backlog" in err and "got '-4'" in err


def test_a_backlog_a_shedding_queue_cannot_hold_is_refused_naming_the_flag(run_main):
    status, _, err = run_main(
        "simulate", *MM, "--items", "5", "--backlog", "50", "--maxsize", "10",
        "--on-full", "reject",
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1
    assert "--backlog (50) cannot be waiting" in err and "queue_maxsize + concurrency" in err


def test_a_backlog_with_the_arrivals_beyond_the_item_cap_is_refused(run_main):
    status, _, err = run_main("simulate", *MM, "--items", "999999999", "--backlog", "50")
    assert status == 2 and err.count("\n") == 1 and "at most 1_000_000_000 items" in err


def test_a_backlog_with_a_trace_is_refused_in_one_line(run_main, tmp_path):
    (tmp_path / "trace.csv").write_text("arrival_s,service_s\n0,1\n1,1\n")
    status, _, err = run_main("simulate", "--trace", "trace.csv", "--backlog", "3", cwd=tmp_path)
    assert status == 2 and err.count("\n") == 1
    assert "--backlog 3 with --trace" in err and "none to a backlog" in err


def test_a_duration_bounded_run_counts_the_backlog_on_top(run_main):
    base = simulate_json(run_main, *MM, "--concurrency", "20", "--duration", "60")
    more = simulate_json(
        run_main, *MM, "--concurrency", "20", "--duration", "60", "--backlog", "100"
    )
    assert more["items_offered"] == base["items_offered"] + 100


def test_a_sweep_varies_the_backlog(run_main, tmp_path):
    out = tmp_path / "sweep"
    status, stdout, err = run_main(
        "sweep", *MM, "--concurrency", "20", "--items", "0", "--grid", "backlog=0,200,800",
        "--replications", "2", "--processes", "1", "--metrics", "backlog_drained_s",
        "--out", out, "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(stdout)["grid"] == {"backlog": [0, 200, 800]}
    assert (out / "heatmap_backlog_drained_s.png").exists()
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    drained = {row["backlog"]: row["backlog_drained_s"] for row in rows}
    assert drained["0"] == ""  # no backlog, no drain to time
    assert float(drained["200"]) < float(drained["800"])


def test_a_plan_takes_a_backlog(run_main):
    status, stdout, err = run_main(
        "plan", *MM, "--items", "300", "--backlog", "300", "--search", "concurrency=18..24",
        "--slo", "latency_p95_s<=40", "--replications", "3", "--processes", "1", "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(stdout)["chosen"]["concurrency"] >= 18


def test_a_plan_finds_the_workers_that_drain_a_backlog_in_time(run_main):
    # 2,000 waiting, no arrivals: E[drained] = (2000 - c) / c s; at most 210 s needs c = 10
    # (199 s; 9 workers take 221 s).
    status, stdout, err = run_main(
        "plan", *MM, "--items", "0", "--backlog", "2000", "--search", "concurrency=5..15",
        "--slo", "backlog_drained_s<=210", "--seed", "2", "--processes", "1", "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(stdout)["chosen"]["concurrency"] == 10


def test_a_backlog_slo_without_a_backlog_is_refused_before_any_run(run_main):
    status, stdout, err = run_main(
        "plan", *MM, "--items", "100", "--search", "concurrency=5..15",
        "--slo", "backlog_cleared_s<=210", "--json",
    )  # fmt: skip
    assert status == 2 and stdout == "" and err.count("\n") == 1
    assert "backlog_cleared_s times the drain of an initial backlog" in err
