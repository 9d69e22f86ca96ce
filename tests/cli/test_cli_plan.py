"""``python -m pipeline plan``: the JSON contract, scenario files, output files and errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from pipeline.sim.analysis.theory import mmc

MM = ["--arrivals", "poisson:rate=3.2", "--service", "exponential:mean=1.0", "--items", "3000"]
# Erlang C: 0.160 s at 5 workers, 0.045 s at 6; the limit is a factor 1.8 from both.
WAIT_LIMIT = 0.085
SEARCH = ["--search", "concurrency=1..12", "--search", "maxsize=20,unbounded"]


def test_json_has_the_chosen_config_and_the_candidates(run_main, tmp_path):
    assert mmc(3.2, 1.0, 5).wait_mean_s > WAIT_LIMIT > mmc(3.2, 1.0, 6).wait_mean_s
    status, out, err = run_main(
        "plan",
        *MM,
        *SEARCH,
        "--slo",
        f"wait_mean_s<={WAIT_LIMIT}",
        "--slo",
        "utilisation<=0.9",
        "--seed",
        "3",
        "--json",
        cwd=tmp_path,
    )
    assert status == 0, err
    payload = json.loads(out)
    assert payload["status"] == "chosen"
    assert payload["chosen"] == {
        "concurrency": 6,
        "queue_maxsize": 20,
        "on_full": "block",
        "max_attempts": 3,
    }
    assert payload["binding"]["slo"] == f"wait_mean_s<={WAIT_LIMIT}"
    assert isinstance(payload["candidates"], list) and payload["candidates"]
    assert {"concurrency", "queue_maxsize", "replications", "verdict"} <= set(
        payload["candidates"][0]
    )
    assert payload["search"]["queue_maxsize"] == [20, None]
    assert "plan" in err  # the progress bar, on stderr only


def test_human_output_explains_the_choice(run_main, tmp_path):
    status, out, _ = run_main(
        "plan",
        *MM,
        "--search",
        "concurrency=4..8",
        "--slo",
        f"wait_mean_s<={WAIT_LIMIT}",
        cwd=tmp_path,
    )
    assert status == 0
    assert out.startswith("plan: chosen concurrency=6")
    assert "one step cheaper, concurrency=5: fails" in out


def test_a_scenario_file_holds_the_search_and_slos_and_flags_override_it(run_main, tmp_path):
    (tmp_path / "plan.toml").write_text(
        'arrivals = "poisson:rate=3.2"\n'
        'service = "exponential:mean=1.0"\n'
        "items = 3000\n"
        'replications = "3..12"\n'
        "confidence = 0.9\n"
        f'slo = ["wait_mean_s<={WAIT_LIMIT}"]\n'
        'search = {concurrency = "1..12", maxsize = [20, "unbounded"]}\n'
    )
    status, out, err = run_main("plan", "plan.toml", "--json", cwd=tmp_path)
    assert status == 0, err
    payload = json.loads(out)
    assert payload["replications"] == {"min": 3, "max": 12}
    assert payload["confidence"] == 0.9
    assert payload["search"]["queue_maxsize"] == [20, None]
    assert payload["chosen"]["concurrency"] == 6
    # --search replaces the file's axis of that name; --slo replaces the file's list
    status, out, err = run_main(
        "plan",
        "plan.toml",
        "--search",
        "maxsize=50",
        "--slo",
        "wait_mean_s<=0.5",
        "--json",
        cwd=tmp_path,
    )
    assert status == 0, err
    payload = json.loads(out)
    assert payload["search"] == {"concurrency": list(range(1, 13)), "queue_maxsize": [50]}
    assert payload["slos"] == ["wait_mean_s<=0.5"]
    assert payload["chosen"]["concurrency"] == 5


def test_out_writes_the_plan_the_tables_and_the_frontier(run_main, tmp_path):
    status, _, err = run_main(
        "plan",
        *MM,
        "--search",
        "concurrency=4..8",
        "--slo",
        f"wait_mean_s<={WAIT_LIMIT}",
        "--replications",
        "4",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert status == 0, err
    directory = tmp_path / "out"
    payload = json.loads((directory / "plan.json").read_text())
    assert payload["chosen"]["concurrency"] == 6
    with open(directory / "candidates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["concurrency"]) for r in rows] == [
        c["concurrency"] for c in payload["candidates"]
    ]
    assert {"wait_mean_s_mean", "wait_mean_s_bound", "wait_mean_s_verdict"} <= set(rows[0])
    with open(directory / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == payload["runs"] == 4 * sum(r["replications"] != "0" for r in rows)
    assert (directory / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_max_replications_caps_the_budget(run_main, tmp_path):
    # the limit sits on concurrency 6's Erlang C wait: undecided within 6 replications
    limit = mmc(3.2, 1.0, 6).wait_mean_s
    status, out, err = run_main(
        "plan",
        *MM,
        "--search",
        "concurrency=6",
        "--slo",
        f"wait_mean_s<={limit}",
        "--max-replications",
        "6",
        "--json",
        cwd=tmp_path,
    )
    assert status == 0, err
    payload = json.loads(out)
    assert payload["replications"] == {"min": 3, "max": 6}
    assert payload["status"] == "undecided" and payload["chosen"] is None
    assert payload["undecided"][0]["candidate"] == {"concurrency": 6}


BAD_INPUT = [
    ([*MM, "--slo", "wait_mean_s<=1"], "the search space is empty"),
    ([*MM, "--search", "concurrency=", "--slo", "wait_mean_s<=1"], "no values given"),
    ([*MM, "--search", "workers=1..4", "--slo", "wait_mean_s<=1"], "cannot vary 'workers'"),
    ([*MM, "--search", "concurrency=4..2", "--slo", "wait_mean_s<=1"], "LOW <= HIGH"),
    ([*MM, "--search", "concurrency=0..4", "--slo", "wait_mean_s<=1"], "concurrency=0..4"),
    ([*MM, "--search", "concurrency=1..4"], "give at least one --slo"),
    ([*MM, "--search", "concurrency=1..4", "--slo", "p99<=1"], "unknown metric 'p99'"),
    ([*MM, "--search", "concurrency=1..4", "--slo", "latency_p95_s<0.5"], "use '<=' or '>='"),
    ([*MM, "--search", "concurrency=1..4", "--slo", "latency_p95_s<=nan"], "must be finite"),
    ([*MM, "--search", "concurrency=1..4", "--slo", "latency_p95_s<=inf"], "must be finite"),
    ([*MM, "--search", "concurrency=1..4", "--slo", "latency_p95_s"], "METRIC<=LIMIT"),
    (
        [*MM, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--confidence", "1.5"],
        "--confidence: expected a number >= 0.5 and < 1",
    ),
    (
        [*MM, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--confidence", "nan"],
        "--confidence",
    ),
    (
        [*MM, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--replications", "1..5"],
        "--replications: expected an integer >= 2",
    ),
    (
        [*MM, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--replications", "9..3"],
        "MIN <= MAX",
    ),
    (
        [*MM, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--max-replications", "1"],
        "--max-replications: expected an integer >= 2",
    ),
    (
        [
            *MM,
            "--search",
            "concurrency=1..4",
            "--slo",
            "wait_mean_s<=1",
            "--replications",
            "5",
            "--max-replications",
            "9",
        ],
        "not both",
    ),
    (
        [*MM, "--search", "concurrency=1..4", "--slo", "wait_mean_s<=1", "--processes", "0"],
        "--processes",
    ),
    (["missing.toml"], "missing.toml"),
    (["badsearch.toml"], "badsearch.toml: search must be a table ([search])"),
    (["badslo.toml"], "slo in the scenario file must be a list of strings"),
    (["emptyaxis.toml"], "emptyaxis.toml: [search] concurrency: expected a list of values"),
]


@pytest.mark.parametrize(("args", "words"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(run_main, bad_files, args, words):
    status, out, err = run_main("plan", *args, cwd=bad_files)
    assert status == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pipeline: error: ")
    assert words in lines[0]


def test_bad_input_as_a_process_has_no_traceback(bad_files):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "plan", *MM, "--search", "concurrency=1..4",
         "--slo", "latency_p90_s<=0.5"],
        capture_output=True, text=True, cwd=bad_files, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert "unknown metric 'latency_p90_s'" in done.stderr and "allowed:" in done.stderr


def test_simulate_json_stays_light_with_plan_registered():
    code = (
        "import sys; from pipeline.cli import main; "
        f"main(['simulate', *{MM!r}, '--json']); "
        "print(sorted(m for m in ('pandas', 'matplotlib', 'pipeline.sim.analysis.planning.plan') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_scheduler_runs_the_plan_on_the_cluster_executor(run_main, tmp_path, monkeypatch):
    # The wiring only: a fake scheduler_executor hands out a thread pool (the real Dask
    # LocalCluster is tested once, in test_plan.py).
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.sim.executors import cluster

    asked = []

    @contextlib.contextmanager
    def fake(scheduler, workers=None):
        asked.append(scheduler)
        with ThreadPoolExecutor(max_workers=2) as executor:
            yield executor

    args = [*MM, "--search", "concurrency=4..8", "--slo", f"wait_mean_s<={WAIT_LIMIT}", "--json"]
    status, local, err = run_main("plan", *args, cwd=tmp_path)
    assert status == 0, err
    monkeypatch.setattr(cluster, "scheduler_executor", fake)
    status, remote, err = run_main(
        "plan", *args, "--scheduler", "tcp://127.0.0.1:8786", cwd=tmp_path
    )
    assert status == 0, err
    assert asked == ["tcp://127.0.0.1:8786"]
    assert json.loads(remote) == json.loads(local)


@pytest.mark.parametrize("scheduler", ["", "  "])
def test_an_empty_scheduler_is_an_error(run_main, tmp_path, scheduler):
    status, out, err = run_main(
        "plan",
        *MM,
        "--search",
        "concurrency=4",
        "--slo",
        "wait_mean_s<=1",
        "--scheduler",
        scheduler,
        cwd=tmp_path,
    )
    assert status == 2 and out == ""
    assert err.startswith("pipeline: error: --scheduler: expected an address or 'local'")


def test_a_missing_dask_is_one_line(run_main, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # what import sees without Dask
    status, out, err = run_main(
        "plan",
        *MM,
        "--search",
        "concurrency=4",
        "--slo",
        "wait_mean_s<=1",
        "--scheduler",
        "local",
        cwd=tmp_path,
    )
    assert status == 2 and out == ""
    assert err == (
        "pipeline: error: the Dask executor needs distributed: "
        "pip install 'pipeline-lab[cluster]'\n"
    )


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_an_infeasible_search_exits_1_after_printing_the_plan(run_main, tmp_path, json_flag):
    # Nothing in the search meets a 1 ms p95 of 1 s services: a script must see that in the
    # exit status (--check's "fails"), not only in the printed status.
    args = ["plan", *MM[:4], "--items", "300", "--search", "concurrency=4..5", "--processes", "1"]
    status, out, err = run_main(*args, "--slo", "latency_p95_s<=0.001", *json_flag, cwd=tmp_path)
    assert status == 1, err
    assert json.loads(out)["status"] == "infeasible" if json_flag else "infeasible" in out
    # The same search with a reachable SLO chooses, and exits 0.
    status, out, err = run_main(*args, "--slo", "latency_p95_s<=60", *json_flag, cwd=tmp_path)
    assert status == 0, err
