"""``python -m pipeline simulate chain.toml``: a chain from ``[[stages]]`` tables.

The JSON carries the end-to-end summary and a ``stages`` object (each stage's
single-stage keys, by name); ``--out`` writes per-stage files and the stages
figure; a bad stage table is one line naming the file, the stage and the key,
with exit status 2.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.cli import main
from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, StageSpec, simulate

CHAIN = """\
arrivals = "poisson:rate=2"
items = 300
seed = 3

[[stages]]
name = "fetch"
service = "exponential:mean=1.0"
concurrency = 3
maxsize = 10
fan_out = 5

[[stages]]
name = "write"
service = "exponential:mean=0.1"
concurrency = 4
maxsize = "unbounded"
failure_rate = 0.05
max_attempts = 2
backoff = "none"
"""

# The same chain, built in Python: the CLI must run exactly this.
SCENARIO = Scenario(
    arrivals=Poisson(rate=2.0),
    stages=[
        StageSpec(
            name="fetch",
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=3, queue_maxsize=10),
            fan_out=5,
        ),
        StageSpec(
            name="write",
            service=Exponential(mean=0.1),
            config=PipelineConfig(
                concurrency=4, queue_maxsize=None, max_attempts=2, backoff=Backoff.none()
            ),
            failures=IndependentFailures(0.05),
        ),
    ],
    n_items=300,
    seed=3,
)


def test_json_has_the_end_to_end_summary_and_each_stage(scenario_file, tmp_path):
    path = scenario_file(CHAIN)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "simulate", path, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    expected = simulate(SCENARIO)
    for key in ("items_offered", "items_completed", "items_dead_lettered", "latency_p95_s"):
        assert out[key] == pytest.approx(expected.summary[key], rel=1e-12), key
    assert out["items_offered"] == 300
    assert set(out["stages"]) == {"fetch", "write"}
    for name in ("fetch", "write"):
        stage, want = out["stages"][name], expected.stages[name].summary
        assert {"utilisation", "queue_depth_mean", "wait_mean_s"} <= set(stage)
        assert stage["items_completed"] == want["items_completed"]
        assert stage["queue_depth_max"] == want["queue_depth_max"]
    assert out["stages"]["write"]["items_offered"] == 1500  # fan_out 5


def test_table_names_each_stage_and_the_bottleneck(scenario_file, tmp_path, capsys):
    slow = CHAIN.replace('service = "exponential:mean=0.1"', 'service = "exponential:mean=1.0"')
    assert main(["simulate", scenario_file(slow)]) == 0
    text = capsys.readouterr().out
    assert "chain fetch -> write" in text
    assert "stage write: concurrency 4, maxsize unbounded" in text
    assert "BOTTLENECK: Stage 'write' is the bottleneck" in text
    assert "bound the queue of stage 'write'" in text


def test_replications_give_means_per_stage(scenario_file, tmp_path, capsys):
    assert main(["simulate", scenario_file(CHAIN), "--json", "--replications", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replications"] == 2
    assert out["stages"]["write"]["replications"] == 2
    assert "items_completed" in out["stages"]["write"]["ci95"]


def test_out_writes_per_stage_files_and_the_stages_figure(scenario_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["simulate", scenario_file(CHAIN), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert {
        "summary.json",
        "items.csv",
        "timeseries.csv",
        "report.png",
        "items-fetch.csv",
        "items-write.csv",
        "timeseries-fetch.csv",
        "timeseries-write.csv",
    } <= names
    assert json.loads((out / "summary.json").read_text())["stages"]["fetch"]["items_offered"] == 300


def test_service_files_are_relative_to_the_scenario(scenario_file, tmp_path, capsys):
    (tmp_path / "durations.csv").write_text("duration_s\n0.1\n0.2\n0.3\n")
    text = CHAIN.replace(
        'service = "exponential:mean=0.1"',
        'service = "empirical:file=durations.csv,column=duration_s"',
    )
    assert main(["simulate", scenario_file(text), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items_completed"] > 0


BAD_STAGES = [
    ("stages = 3\n", "stages must be [[stages]] tables"),
    ("stages = []\n", "holds no stage"),
    ('[[stages]]\nservice = "exponential:mean=1"\n', "stage 1: missing 'name'"),
    ('[[stages]]\nname = "a"\n', "stage 1 ('a'): missing 'service'"),
    ('[[stages]]\nname = ""\nservice = "exponential:mean=1"\n', "name must be a non-empty"),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nworkers = 3\n',
        "stage 1 ('a'): unknown key 'workers'; allowed: name, service",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nconcurrency = 0\n',
        "stage 1 ('a'): concurrency: expected an integer >= 1",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nmaxsize = -5\n',
        "stage 1 ('a'): maxsize",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=nan"\n',
        "stage 1 ('a'): service",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nfan_out = 0\n',
        "stage 1 ('a'): fan_out: expected an integer >= 1 and <= 10_000",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nfan_out = 1e9\n',
        "fan_out",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nfailure_rate = 1.5\n',
        "stage 1 ('a'): failure_rate",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\nbackoff = [1]\n',
        "backoff must be a string or a number",
    ),
    (
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\n'
        '[[stages]]\nname = "a"\nservice = "exponential:mean=1"\n',
        "stage names must be unique, got 'a' twice",
    ),
    (
        'service = "exponential:mean=1"\n[[stages]]\nname = "a"\nservice = "exponential:mean=1"\n',
        "'service' in",
    ),
    (
        'concurrency = 4\n[[stages]]\nname = "a"\nservice = "exponential:mean=1"\n',
        "set them in its [[stages]] table",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD_STAGES)
def test_a_bad_stage_table_is_one_line_and_exit_2(scenario_file, tmp_path, capsys, body, message):
    path = scenario_file('arrivals = "poisson:rate=1"\nitems = 5\n' + body)
    assert main(["simulate", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pipeline: error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_stage_settings_as_flags_are_refused(scenario_file, tmp_path, capsys):
    path = scenario_file(CHAIN)
    for flag, value in (("--concurrency", "8"), ("--failure-rate", "0.1"), ("--trace", "t.csv")):
        assert main(["simulate", path, flag, value]) == 2
        err = capsys.readouterr().err
        assert f"{flag}: with [[stages]]" in err and err.count("\n") == 1, err
