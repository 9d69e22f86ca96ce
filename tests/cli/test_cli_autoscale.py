"""``--autoscale`` and a scenario file's ``[autoscale]`` table: the same Autoscaler, and bad
settings refused in one line (exit status 2) before any run."""

from __future__ import annotations

import json

import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.cli import main
from pipeline.sim import Exponential, Poisson, Scenario, simulate

TABLE = """\
arrivals = "poisson:rate=20"
service = "exponential:mean=0.5"
concurrency = 2
maxsize = "unbounded"
items = 1500
seed = 4

[autoscale]
max_workers = 30
target = 2
sync_s = 5
metric = "queue_per_worker"
max_scale_up = [2, 0.5]
cold_start_s = 1.5
"""
SCALER = Autoscaler(max_workers=30, target=2.0, sync_s=5.0, max_scale_up=(2, 0.5), cold_start_s=1.5)
SCENARIO = Scenario(
    arrivals=Poisson(rate=20.0),
    service=Exponential(mean=0.5),
    config=PipelineConfig(concurrency=2, queue_maxsize=None, autoscale=SCALER),
    n_items=1500,
    seed=4,
)
FLAGS = [
    "--arrivals", "poisson:rate=20", "--service", "exponential:mean=0.5", "--concurrency", "2",
    "--maxsize", "unbounded", "--items", "1500", "--seed", "4",
]  # fmt: skip


def _summary(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_the_table_and_the_flag_are_the_python_autoscaler(scenario_file, capsys):
    want = simulate(SCENARIO).summary
    assert main(["simulate", scenario_file(TABLE), "--json"]) == 0
    from_file = _summary(capsys)
    spec = (
        "max_workers=30,target=2,sync_s=5,max_scale_up_pods=2,max_scale_up_fraction=0.5,"
        "cold_start_s=1.5"
    )
    assert main(["simulate", *FLAGS, "--autoscale", spec, "--json"]) == 0
    from_flag = _summary(capsys)
    for out in (from_file, from_flag):
        for key in (
            "workers_mean",
            "workers_max",
            "worker_seconds",
            "scale_events",
            "latency_p95_s",
        ):
            assert out[key] == pytest.approx(want[key], rel=1e-12), key
    assert from_file["engine"] == "asyncio"


def test_the_flag_overrides_the_table_and_none_turns_it_off(scenario_file, capsys):
    assert main(["simulate", scenario_file(TABLE), "--autoscale", "none", "--json"]) == 0
    assert "workers_mean" not in _summary(capsys)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("max_workers=0", "--autoscale: max_workers must be >= 1"),
        ("target=nan", "--autoscale: target must be finite and > 0"),
        ("target=-2", "--autoscale: target must be > 0"),
        ("sync_s=0", "--autoscale: sync_s must be > 0"),
        ("bogus=1", "--autoscale: unknown autoscale key 'bogus'; allowed: min_workers"),
        ("target", "--autoscale: expected key=value pairs"),
        ("target=1,target=2", "--autoscale: autoscale key 'target' given twice"),
        ("min_workers=3.5", "--autoscale: autoscale min_workers: expected an integer"),
        ("min_workers=5,max_workers=4", "--autoscale: min_workers must be <= max_workers"),
        ("metric=cpu", "--autoscale: metric must be 'queue_per_worker' or 'oldest_age_s'"),
        ("max_scale_up_fraction=-1", "--autoscale: max_scale_up's fraction must be >= 0"),
        ("max_workers=1", "concurrency must be within the autoscaler's min_workers..max_workers"),
    ],
)
def test_bad_flags_are_one_line_before_any_run(spec, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["simulate", *FLAGS, "--autoscale", spec, "--out", "out"])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ("max_workers = true", "[autoscale] max_workers must be a string or a number"),
        ("target = {a = 1}", "[autoscale] target must be a string or a number"),
        ('metric = "a,b"', "[autoscale] metric: unexpected ',' or '='"),
        ("max_scale_up = [1, 2, 3]", "[autoscale] max_scale_up must be a string or a number"),
        ("sync_s = -1", "sync_s must be > 0"),
    ],
)
def test_bad_tables_are_one_line_naming_the_file(table, words, scenario_file, capsys):
    path = scenario_file(TABLE.split("[autoscale]")[0] + f"[autoscale]\n{table}\n")
    assert main(["simulate", path, "--json"]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_the_kernel_is_refused_for_an_autoscaled_scenario(scenario_file, capsys):
    assert main(["simulate", scenario_file(TABLE), "--engine", "kernel"]) == 2
    assert "--engine kernel does not support autoscaling" in capsys.readouterr().err
