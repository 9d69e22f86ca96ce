"""``python -m pipeline simulate``: the contract's keys, files and errors, as a subprocess."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from pipeline.sim.analysis.theory import mmc

CONTRACT_KEYS = {
    "items_offered",
    "items_admitted",
    "items_completed",
    "items_dead_lettered",
    "items_shed",
    "items_unfinished",
    "attempts_total",
    "wait_mean_s",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "throughput_per_s",
    "utilisation",
    "queue_depth_mean",
    "queue_depth_max",
    "producer_blocked_s",
    "memory_peak_bytes",
    "sim_time_s",
    "wall_time_s",
}
ITEM_COLUMNS = [
    "item_id",
    "arrival_s",
    "admitted_s",
    "start_s",
    "finish_s",
    "wait_s",
    "latency_s",
    "attempts",
    "outcome",
]
MM4 = ["--arrivals", "poisson:rate=3.2", "--service", "exponential:mean=1.0"]


BAD_INPUT = [
    (
        ["--arrivals", "poisson:rate=-1", "--service", "exponential:mean=1", "--items", "5"],
        "--arrivals",
    ),
    (
        ["--arrivals", "poisson:rate=1", "--service", "expo:mean=1", "--items", "5"],
        "unknown distribution 'expo'",
    ),
    ([*MM4, "--items", "5", "--concurrency", "0"], "--concurrency"),
    ([*MM4, "--items", "5", "--maxsize", "0"], "'unbounded'"),
    ([*MM4, "--items", "5", "--on-full", "drop"], "'block' or 'reject'"),
    ([*MM4, "--items", "5", "--failure-rate", "2"], "--failure-rate"),
    ([*MM4, "--items", "5", "--backoff", "linear:x=1"], "unknown backoff 'linear'"),
    ([*MM4, "--items", "5", "--drain-timeout", "soon"], "--drain-timeout"),
    ([*MM4, "--items", "5", "--duration", "9"], "not both"),
    (MM4, "--items N or --duration S"),
    ([*MM4, "--items", "5", "--bogus"], "unrecognized arguments: --bogus"),
    (["--trace", "missing.csv"], "missing.csv"),
    (["missing.toml"], "missing.toml"),
    (["--trace", "bad.csv"], "bad.csv row 2: arrival_s"),
    (["bad.toml"], "unknown key 'colour'"),
    (["--trace", "bad.csv", "--arrivals", "poisson:rate=1"], "drop --arrivals"),
    ([*MM4, "--items", "5", "--replications", "0"], "--replications"),
    ([*MM4, "--items", "5", "--attempt-timeout", "0"], "--attempt-timeout"),
    ([*MM4, "--items", "5", "--backoff", "constant:delay=-1"], "base_s must be >= 0"),
    # upper bounds: a typo fails at once instead of overflowing, hanging or exhausting memory
    (
        [*MM4, "--items", "5", "--item-size", "100000000000000000000"],
        "--item-size: expected an integer >= 0 and <= 4_294_967_296 (bytes)",
    ),
    ([*MM4, "--items", "5", "--item-size", "1000000000000000000"], "--item-size"),
    ([*MM4, "--items", "10000000000000"], "--items: expected an integer >= 0 and <= 1_000_000_000"),
    ([*MM4, "--items", "5", "--concurrency", "100000000000000000000"], "<= 100_000 (workers)"),
    ([*MM4, "--items", "5", "--concurrency", "1e20"], "--concurrency"),
    ([*MM4, "--items", "5", "--maxsize", "10000000000"], "--maxsize"),
    ([*MM4, "--items", "5", "--max-attempts", "1001"], "<= 1_000 (attempts per item)"),
    ([*MM4, "--items", "5", "--replications", "10001"], "<= 10_000 (independent runs)"),
    ([*MM4, "--items", "9" * 5000], "(5000 characters)"),
    (["big.toml"], "big.toml: items: expected an integer"),
    # the conflict is worded for where each setting came from
    (["trace.toml"], "'trace' in trace.toml replays the arrival and service times"),
    (["trace.toml"], "drop 'arrivals' in trace.toml"),
    (["trace.toml", "--service", "constant:value=1"], "in trace.toml and --service"),
    # the engine: a bad name (the kernel's refusals: tests/sim/running/test_engine_choice.py)
    ([*MM4, "--items", "5", "--engine", "fast"], "--engine: expected 'auto', 'asyncio' or"),
]


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "simulate", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def cli_json(*args, cwd=None):
    done = cli(*args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def test_mm4_json_has_every_key_and_sane_values():
    out = cli_json(
        *MM4,
        "--concurrency",
        4,
        "--maxsize",
        100,
        "--on-full",
        "block",
        "--max-attempts",
        3,
        "--failure-rate",
        0.0,
        "--items",
        20_000,
        "--seed",
        1,
    )
    assert set(out) >= CONTRACT_KEYS
    assert out["items_offered"] == out["items_completed"] == 20_000
    assert out["items_dead_lettered"] == out["items_shed"] == out["items_unfinished"] == 0
    assert out["attempts_total"] == 20_000
    # rho = 3.2 / 4 = 0.8; one run of 20,000 items is within a few percent
    assert out["utilisation"] == pytest.approx(0.8, abs=0.04)
    assert out["throughput_per_s"] == pytest.approx(3.2, rel=0.04)
    # Erlang C mean wait 0.745 s; one run's standard error is about 10%, allow 3 of them
    assert out["wait_mean_s"] == pytest.approx(mmc(3.2, 1.0, 4).wait_mean_s, rel=0.3)
    assert out["latency_p50_s"] <= out["latency_p95_s"] <= out["latency_p99_s"]
    assert out["latency_mean_s"] == pytest.approx(out["wait_mean_s"] + 1.0, rel=0.05)
    assert 0 <= out["queue_depth_mean"] <= out["queue_depth_max"] <= 100
    assert out["memory_peak_bytes"] > 0 and out["sim_time_s"] > 6000


def main_json(capsys, *args):
    """main() in this process, for the cheaper checks of the JSON object."""
    from pipeline.cli import main

    assert main(["simulate", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_nan_is_null_and_unbounded_queue(capsys):
    out = main_json(capsys, *MM4, "--items", 0, "--maxsize", "unbounded")
    assert out["items_offered"] == 0
    assert out["wait_mean_s"] is None and out["latency_p99_s"] is None
    out = main_json(
        capsys, *MM4, "--items", 3000, "--maxsize", "unbounded", "--arrivals", "poisson:rate=5"
    )
    assert out["producer_blocked_s"] == 0 and out["queue_depth_max"] > 100


def test_replications_report_means_and_ci95(capsys):
    out = main_json(capsys, *MM4, "--items", 1000, "--replications", 3, "--failure-rate", 0.1)
    assert out["replications"] == 3
    assert set(out) >= CONTRACT_KEYS and set(out["ci95"]) >= CONTRACT_KEYS
    assert out["ci95"]["wait_mean_s"] > 0 and out["ci95"]["items_offered"] == 0
    assert out["attempts_total"] > 1000


def test_out_writes_the_four_files(tmp_path):
    done = cli(
        *MM4,
        "--items",
        2000,
        "--maxsize",
        10,
        "--failure-rate",
        0.2,
        "--backoff",
        "exponential:base=0.1,factor=2,cap=30,jitter=1",
        "--out",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "utilisation" in done.stdout and "diagnostics" in done.stdout
    assert {p.name for p in tmp_path.iterdir()} >= {
        "summary.json",
        "items.csv",
        "timeseries.csv",
        "report.png",
    }
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) >= CONTRACT_KEYS
    with open(tmp_path / "items.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[: len(ITEM_COLUMNS)] == ITEM_COLUMNS
    assert len(rows) == 2000 and rows[0]["item_id"] == "0"
    assert {r["outcome"] for r in rows} <= {"completed", "dead_lettered", "shed", "unfinished"}
    assert sum(r["outcome"] == "dead_lettered" for r in rows) == summary["items_dead_lettered"]
    first = rows[0]
    assert float(first["wait_s"]) == pytest.approx(
        float(first["start_s"]) - float(first["arrival_s"])
    )
    header = (tmp_path / "timeseries.csv").read_text().splitlines()[0].split(",")
    assert header[0] == "time_s" and "queue_depth" in header and "memory_bytes" in header
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scenario_file_and_flag_override(tmp_path):
    (tmp_path / "scenario.toml").write_text(
        'arrivals = "poisson:rate=3.2"\n'
        'service = "exponential:mean=1.0"\n'
        "concurrency = 4\n"
        'maxsize = "unbounded"\n'
        'on-full = "block"\n'
        "max_attempts = 3\n"
        'drain_timeout = "none"\n'
        "items = 500\n"
        "seed = 3\n"
    )
    from_file = cli_json("scenario.toml", cwd=tmp_path)
    assert from_file["items_offered"] == 500
    overridden = cli_json("scenario.toml", "--items", 300, "--concurrency", 8, cwd=tmp_path)
    assert overridden["items_offered"] == 300
    assert overridden["wait_mean_s"] < from_file["wait_mean_s"]
    by_duration = cli_json("scenario.toml", "--duration", 10, cwd=tmp_path)
    assert by_duration["items_offered"] < 100


def test_trace_replay(tmp_path):
    rows = ["arrival_s,service_s,fails", "0,2,0", "0,2,1", "0.5,1,0", "1,1,5"]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    out = cli_json(
        "--trace",
        "trace.csv",
        "--concurrency",
        2,
        "--max-attempts",
        3,
        "--backoff",
        "none",
        cwd=tmp_path,
    )
    assert out["items_offered"] == 4
    assert out["items_completed"] == 3 and out["items_dead_lettered"] == 1
    assert out["attempts_total"] == 1 + 2 + 1 + 3


@pytest.mark.parametrize(("args", "words"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(run_main, bad_files, args, words):
    status, out, err = run_main("simulate", *args, cwd=bad_files)
    assert status == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pipeline: error: ")
    assert words in lines[0]


@pytest.mark.parametrize("index", [0, 10, 13])  # a bad spec, a bad flag, a bad file
def test_bad_input_as_a_process_has_no_traceback(bad_files, index):
    args, words = BAD_INPUT[index]
    done = cli(*args, cwd=bad_files)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr
    assert "Traceback" not in done.stderr


def test_json_path_stays_light():
    code = (
        "import sys; from pipeline.cli import main; "
        f"main(['simulate', *{MM4!r}, '--items', '50', '--json']); "
        "print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_human_table(capsys):
    from pipeline.cli import main

    assert main(["simulate", *MM4, "--items", "2000", "--arrivals", "poisson:rate=5"]) == 0
    out = capsys.readouterr().out
    assert "wait_mean_s" in out and "throughput_per_s" in out
    assert "CONSUMER_LAG" in out


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (MemoryError("Unable to allocate 7 EiB for an array"), "out of memory (Unable to allocate"),
        (OverflowError("Python int too large to convert to C long"), "too large"),
        (ValueError("deep inside the run"), "deep inside the run"),
    ],
)
def test_errors_while_running_are_one_line(run_main, monkeypatch, tmp_path, error, words):
    import importlib

    def fail(*args, **kwargs):
        raise error

    # the module, not the function that pipeline.sim re-exports under the same name
    monkeypatch.setattr(importlib.import_module("pipeline.sim.running.simulate"), "simulate", fail)
    status, out, err = run_main("simulate", *MM4, "--items", "5", cwd=tmp_path)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("pipeline: error: ") and words in err


def test_engine_flag_names_the_engine_and_both_agree(capsys):
    args = (*MM4, "--items", 300, "--failure-rate", 0.2, "--maxsize", 3, "--seed", 4)
    auto = main_json(capsys, *args)
    engine = main_json(capsys, *args, "--engine", "asyncio")
    kernel = main_json(capsys, *args, "--engine", "KERNEL")
    assert (auto["engine"], engine["engine"], kernel["engine"]) == ("kernel", "asyncio", "kernel")
    for key, value in engine.items():
        if value is None:  # a half-width a 300-item run is too short for: null in both
            assert kernel[key] is None, key
        elif key not in ("engine", "wall_time_s"):
            assert kernel[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
    # attempt timeouts are inside the kernel's domain too
    cut = main_json(capsys, *args, "--attempt-timeout", "5")
    assert cut["engine"] == "kernel"
    # with replications, the engine is named once (not averaged)
    many = main_json(capsys, *args, "--replications", 2)
    assert many["engine"] == "kernel" and "engine" not in many["ci95"]


def test_the_largest_item_size_does_not_overflow(capsys):
    out = main_json(capsys, *MM4, "--items", 200, "--item-size", 2**32, "--maxsize", "unbounded")
    assert out["memory_peak_bytes"] > 0 and out["memory_peak_bytes"] % 2**32 == 0


# -- workloads as users measured them ----------------------------------------------------

ISSUE_SERVICE = ["--service", "lognormal:mean=0.08,p99=1.2"]  # p99 / mean = 15 > 14.97


def test_inconsistent_percentiles_warn_in_one_line_and_the_run_goes_on():
    done = cli("--arrivals", "poisson:rate=5", *ISSUE_SERVICE, "--items", 200, "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pipeline: warning: "), done.stderr
    assert "p99 at most 1.197 s" in lines[0] and "p99 will be 1.197 s" in lines[0]
    assert json.loads(done.stdout)["items_completed"] == 200
    # consistent numbers: no warning at all (cli_json checks stderr is empty)
    consistent = ["--service", "lognormal:p50=0.05,p99=1.2"]
    out = cli_json("--arrivals", "poisson:rate=5", *consistent, "--items", 200)
    assert out["items_completed"] == 200


def test_a_warning_made_an_error_is_one_line_and_exit_2():
    command = [sys.executable, "-W", "error", "-m", "pipeline", "simulate"]
    args = [*MM4[:2], *ISSUE_SERVICE, "--items", "10"]
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("pipeline: error: ")
    assert "Traceback" not in done.stderr


@pytest.fixture
def measured(tmp_path):
    (tmp_path / "durations.csv").write_text("request,duration_s\na,0.2\nb,0.05\nc,1.4\n")
    (tmp_path / "counts.csv").write_text("minute,count\n0,30\n1,90\n2,0\n")
    (tmp_path / "words.csv").write_text("duration_s\n0.2\nslow\n")
    return tmp_path


BAD_WORKLOADS = [
    (["--service", "lognormal:p50=0.5,p99=0.2"], "--service: invalid distribution spec"),
    (["--service", "lognormal:p50=0.5,p99=0.2"], "p99 must be > p50"),
    (["--service", "lognormal:mean=0.1,p50=0.2"], "p50 must be < mean"),
    (["--service", "lognormal:p99=1"], "needs two of mean, cv, p50, p90, p95, p99"),
    (["--service", "empirical:file=missing.csv"], "cannot read missing.csv: No such file"),
    (["--service", "empirical:file=durations.csv"], "the header has request, duration_s"),
    (["--service", "empirical:file=durations.csv,column=ms"], "no column 'ms'"),
    (["--service", "empirical:file=words.csv"], "words.csv row 2: duration_s must be a number"),
    (["--arrivals", "counts:file=counts.csv,column=count"], "missing interval_s for counts"),
    (["--arrivals", "counts:file=nope.csv,interval_s=60"], "cannot read nope.csv"),
    (["--arrivals", "counts:file=counts.csv,column=count,interval_s=-1"], "interval_s must be > 0"),
]


@pytest.mark.parametrize(("change", "words"), BAD_WORKLOADS)
def test_bad_measured_workloads_are_one_line_and_exit_2(run_main, measured, change, words):
    base = {"--arrivals": "poisson:rate=1", "--service": "constant:value=0.1"}
    base[change[0]] = change[1]
    args = [text for pair in base.items() for text in pair] + ["--items", "5"]
    status, out, err = run_main("simulate", *args, cwd=measured)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pipeline: error: "), err
    assert words in lines[0]


def test_spec_files_are_relative_to_the_scenario_file(measured):
    (measured / "scenarios").mkdir()
    (measured / "scenarios" / "measured.toml").write_text(
        'arrivals = "counts:file=../counts.csv,column=count,interval_s=60"\n'
        'service = "empirical:file=../durations.csv,column=duration_s"\n'
        "duration = 1800\n"
        "concurrency = 2\n"
    )
    elsewhere = measured / "elsewhere"
    elsewhere.mkdir()
    from_file = cli_json(measured / "scenarios" / "measured.toml", "--seed", 3, cwd=elsewhere)
    # flags are relative to the working directory, as --trace is
    arrivals = "counts:file=counts.csv,column=count,interval_s=60"
    service = "empirical:file=durations.csv,column=duration_s"
    from_flags = cli_json(
        *("--arrivals", arrivals, "--service", service),
        *("--duration", 1800, "--concurrency", 2, "--seed", 3),
        cwd=measured,
    )
    assert from_file == {**from_flags, "wall_time_s": from_file["wall_time_s"]}
    # 10 periods of 30 + 90 + 0 arrivals: 1200 expected, a Poisson count (4 sd: 139)
    assert abs(from_file["items_offered"] - 1200) < 4 * 1200**0.5
    assert from_file["engine"] == "kernel"


PROBE = """\
import os, runpy, sys
sys.argv = ["pipeline", "simulate", "--arrivals", "poisson:rate=3", "--service",
            "exponential:mean=1", "--concurrency", "4", "--items", "200", "--json"]
try:
    runpy.run_module("pipeline", run_name="__main__")
except SystemExit as done:
    assert done.code == 0, done.code
threads = len(os.listdir("/proc/self/task"))
print(os.environ.get("OPENBLAS_NUM_THREADS"), threads, file=sys.stderr)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("2", "2")])
def test_the_command_runs_numpy_with_one_blas_thread_unless_told(given, expected):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    value, threads = done.stderr.split()[-2:]
    assert value == expected
    if given is None:
        # the main thread only: no BLAS pool was started at numpy's import
        assert threads == "1"


def test_version_is_the_installed_distributions():
    from importlib import metadata

    expected = f"pipeline (pipeline-lab) {metadata.version('pipeline-lab')}\n"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


def test_the_kernels_refusal_and_the_drain_warning_speak_python_to_python():
    # The command line's messages name its flags (above); the same messages in Python name
    # the keywords a Python caller sets.
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario, simulate

    scenario = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(max_wait_s=1.0),
        n_items=5,
    )
    with pytest.raises(ValueError, match=r"^engine='kernel' does not support .* engine='auto'"):
        simulate(scenario, engine="kernel")


CHAIN_WARM = """\
arrivals = "poisson:rate=3"
items = 50
warmup = 1000

[[stages]]
name = "fetch"
service = "exponential:mean=0.2"

[[stages]]
name = "write"
service = "exponential:mean=0.2"
"""


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--items", "50", "--warmup", "1000"], "--warmup 1000 s is longer than the arrivals (the "
         "last came at "),
        (["--items", "50", "--warmup", "1000", "--replications", "2"], "longer than the arrivals "
         "of replication 0"),
        (["--duration", "100", "--warmup", "100"], "--warmup 100 s is not shorter than the "
         "arrivals' 100 s (--duration)"),
        (["chain_warm.toml"], "'warmup' in chain_warm.toml 1000 s is longer than the arrivals"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_warmup_that_leaves_nothing_to_measure_is_refused(
    run_main, tmp_path, args, words, engine
):
    # Not a table of dashes with exit 0: one line, exit 2, and nothing written.
    (tmp_path / "chain_warm.toml").write_text(CHAIN_WARM)
    if args[0] != "chain_warm.toml":
        args = [*MM4, *args]
    out, metrics = tmp_path / "out", tmp_path / "run.om"
    status, stdout, err = run_main(
        "simulate", *args, "--engine", engine, "--out", out, "--metrics-out", metrics,
        cwd=tmp_path,
    )  # fmt: skip
    assert (status, stdout) == (2, ""), err
    assert len(err.splitlines()) == 1 and err.startswith("pipeline: error: ") and words in err
    assert "nothing was measured" in err or "no item would arrive" in err
    assert not out.exists() and not metrics.exists()


def test_a_warmup_shorter_than_the_arrivals_still_measures(run_main, tmp_path):
    status, stdout, err = run_main("simulate", *MM4, "--items", "300", "--warmup", "20", "--json")
    assert status == 0, err
    assert json.loads(stdout)["latency_mean_s"] > 0


def test_the_diagnosis_names_the_flags_on_the_command_line(run_main):
    # A short run with failures and a drain cut: each fix names what the reader sets, in
    # the command line's words (diagnose() from Python names the keywords: test_diagnostics).
    args = [*MM4, "--items", "500", "--failure-rate", "0.2", "--max-attempts", "1",
            "--drain-timeout", "1", "--seed", "2"]  # fmt: skip
    status, out, err = run_main("simulate", *args)
    assert status == 0, err
    diagnosis = out[out.index("diagnostics") :]
    for said in ("(--replications R)", "--max-attempts ", "raise --drain-timeout from 1 s"):
        assert said in diagnosis, said
    for python in ("replications=R", "simulate(", "max_attempts=", "drain_timeout_s"):
        assert python not in diagnosis, python
