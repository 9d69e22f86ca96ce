"""``--autoscale`` and a scenario file's ``[autoscale]`` table: the same Autoscaler, and bad
settings refused in one line (exit status 2) before any run."""

from __future__ import annotations

import json

import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.cli import main
from pipeline.sim import Exponential, Poisson, Scenario, plan, simulate
from pipeline.sim.analysis.planning.cost import Cost
from tests.sim.analysis.planning.test_plan_autoscale import BASE as PLANNED_BASE

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
    assert from_file["engine"] == "kernel"


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


def test_the_kernel_runs_an_autoscaled_scenario_as_the_engine_does(scenario_file, capsys):
    runs = {}
    for engine in ("kernel", "asyncio"):
        assert main(["simulate", scenario_file(TABLE), "--engine", engine, "--json"]) == 0
        runs[engine] = _summary(capsys)
    for key in ("workers_mean", "workers_max", "worker_seconds", "scale_events", "latency_p95_s"):
        assert runs["kernel"][key] == pytest.approx(runs["asyncio"][key], rel=1e-9), key


PLANNED = """\
arrivals = "poisson:rate=10"
service = "exponential:mean=0.5"
concurrency = 2
maxsize = "unbounded"
duration = 240
drain_timeout = "none"
seed = 5

[autoscale]
max_workers = 30
target = 2
sync_s = 15
scale_down_stabilization_s = 60
"""


def test_plan_searches_autoscaler_settings_and_charges_the_pools_worker_seconds(
    scenario_file, capsys
):
    path = scenario_file(PLANNED)
    code = main(
        [
            "plan", path, "--search", "autoscale.target=1,20", "--slo", "latency_p95_s<=60",
            "--cost", "worker_hour=0.75", "--replications", "3", "--processes", "1", "--json",
        ]
    )  # fmt: skip
    assert code == 0
    out = _summary(capsys)
    assert out["search"] == {"autoscale.target": [1.0, 20.0]}
    assert out["chosen"]["autoscale.target"] == 20.0
    # The Python plan over the same scenario (its Python spelling) charges the same.
    found = plan(
        PLANNED_BASE,
        {"autoscale.target": [1.0, 20.0]},
        ["latency_p95_s<=60"],
        cost=Cost(worker_hour=0.75),
        replications=3,
        processes=1,
        progress=False,
    )
    want = found.to_dict()["cost_breakdown"]
    for key in ("workers_per_hour", "waiting_per_hour", "total_per_hour", "low", "high"):
        assert out["cost_breakdown"][key] == pytest.approx(want[key], rel=1e-12), key
    assert out["cost_breakdown"]["workers_per_hour"] > 0.75  # more than min_workers' one


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--search", "autoscale.target=2,nan"], "--search autoscale.target=nan: target must be"),
        (["--search", "autoscale.target=-1"], "--search autoscale.target=-1.0: target must be > 0"),
        (["--search", "autoscale.cold-start-s=inf"], "cold_start_s must be finite"),
        (["--search", "autoscale.max-workers=30,0"], "max_workers must be >= 1"),
        (["--search", "autoscale.min-workers=1.5"], "expected an integer, got '1.5'"),
        (["--search", "autoscale.bogus=1"], "unknown autoscaler key 'bogus' in 'autoscale.bogus'"),
        (
            ["--search", "autoscale.target=1", "--cost", "worker_hour=nan"],
            "--cost: cost worker_hour",
        ),
        (
            ["--search", "autoscale.target=1", "--cost", "worker_hour=-1"],
            "--cost: cost worker_hour",
        ),
        (["--search", "autoscale.target=1", "--cost", "cpu_hour=1"], "unknown cost key 'cpu_hour'"),
    ],
)
def test_bad_autoscaler_plans_are_one_line_before_any_run(
    flags, words, scenario_file, capsys, tmp_path, monkeypatch
):
    path = scenario_file(PLANNED)
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["plan", path, *flags, "--slo", "latency_p95_s<=5", "--out", "out"])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_an_autoscaler_search_needs_an_autoscaler(scenario_file, capsys):
    fixed = scenario_file(PLANNED.split("[autoscale]")[0])
    code = main(["plan", fixed, "--search", "autoscale.target=1,2", "--slo", "latency_p95_s<=5"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--search autoscale.target: the scenario does not autoscale" in err
