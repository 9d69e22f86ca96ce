"""``[[classes]]`` tables in a scenario file: simulate, plan and sweep with item classes.

The JSON carries ``classes`` (each class's summary, by name) and ``expired_fraction``;
``--out`` writes the ``class`` column; plan judges per-class SLOs; sweep reports
``classes.NAME.KEY`` metrics; bad tables are one line naming the file, the class and
the key, with exit status 2 before any run.
"""

from __future__ import annotations

import csv
import json

import pytest

from pipeline import PipelineConfig
from pipeline.cli import main
from pipeline.sim import Exponential, ItemClass, Poisson, Scenario, simulate

CLASSES = """\
arrivals = "poisson:rate=1.8"
service = "exponential:mean=1.0"
concurrency = 2
maxsize = "unbounded"
drain_timeout = "none"
items = 600
seed = 3

[[classes]]
name = "high"
share = 1
priority = 0

[[classes]]
name = "low"
share = 2
priority = 1
patience = "exponential:mean=2.0"
"""

SCENARIO = Scenario(
    arrivals=Poisson(rate=1.8),
    service=Exponential(mean=1.0),
    config=PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=None),
    classes=[
        ItemClass(name="high", share=1, priority=0),
        ItemClass(name="low", share=2, priority=1, patience=Exponential(mean=2.0)),
    ],
    n_items=600,
    seed=3,
)


def test_json_carries_each_class_and_the_expired_fraction(scenario_file, capsys):
    assert main(["simulate", scenario_file(CLASSES), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = simulate(SCENARIO).summary
    assert out["expired_fraction"] == pytest.approx(want["expired_fraction"], rel=1e-12)
    assert out["items_expired"] == want["items_expired"] > 0
    assert set(out["classes"]) == {"high", "low"}
    for name in ("high", "low"):
        for key in ("items", "completed", "expired", "wait_mean_s", "latency_p95_s"):
            assert out["classes"][name][key] == pytest.approx(want["classes"][name][key]), key
    assert out["classes"]["high"]["wait_mean_ci95_s"] is None  # NaN: too few items


def test_replications_give_each_class_its_means_and_intervals(scenario_file, capsys):
    assert main(["simulate", scenario_file(CLASSES), "--json", "--replications", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    low = out["classes"]["low"]
    assert low["expired"] > 0 and "expired_fraction" in low["ci95"]
    assert "replications" not in low


def test_table_has_a_block_per_class(scenario_file, capsys):
    assert main(["simulate", scenario_file(CLASSES)]) == 0
    text = capsys.readouterr().out
    assert "class high:" in text and "class low:" in text
    assert "expired_fraction" in text


def test_out_writes_the_class_column(scenario_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["simulate", scenario_file(CLASSES), "--out", str(out)]) == 0
    with open(out / "items.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {row["class"] for row in rows} == {"high", "low"}
    assert {row["outcome"] for row in rows} == {"completed", "expired"}
    assert set(json.loads((out / "summary.json").read_text())["classes"]) == {"high", "low"}


def test_plan_judges_per_class_slos_and_the_expired_fraction(scenario_file, capsys):
    argv = [
        "plan",
        scenario_file(CLASSES),
        "--search",
        "concurrency=2..4",
        "--json",
        "--slo",
        "classes.high.wait_p95_s<=1.0",
        "--slo",
        "classes.low.expired_fraction<=0.1",
        "--slo",
        "expired_fraction<=0.1",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["chosen"]["concurrency"] in (3, 4)
    first = out["candidates"][0]
    assert first["concurrency"] == 2 and first["verdict"] == "fails"
    # auto: the kernel declines classes, so every candidate ran on the engine.
    assert {c["engine"] for c in out["candidates"]} == {"asyncio"}
    assert "classes.low.expired_fraction_bound" in first


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ("classes.mid.wait_p95_s<=1", "no class named 'mid'; classes: high, low"),
        ("classes.high.bogus<=1", "unknown metric 'bogus' of class 'high'"),
    ],
)
def test_plan_refuses_an_slo_on_a_class_it_has_not(scenario_file, capsys, slo, message):
    argv = ["plan", scenario_file(CLASSES), "--search", "concurrency=2..3", "--slo", slo]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pipeline: error: ") and err.count("\n") == 1, err
    assert message in err


def test_plan_refuses_a_class_slo_without_classes(scenario_file, capsys):
    plain = CLASSES.split("[[classes]]")[0]
    argv = [
        "plan",
        scenario_file(plain),
        "--search",
        "concurrency=2..3",
        "--slo",
        "classes.high.wait_p95_s<=1",
    ]
    assert main(argv) == 2
    assert "this scenario has no item classes" in capsys.readouterr().err


def test_sweep_reports_class_metrics(scenario_file, tmp_path, capsys):
    argv = [
        "sweep",
        scenario_file(CLASSES),
        "--grid",
        "concurrency=2,3",
        "--replications",
        "1",
        "--metrics",
        "classes.low.expired_fraction,expired_fraction",
        "--json",
        "--out",
        str(tmp_path / "sweep"),
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    two, three = (point["mean"] for point in out["points"])
    assert two["classes.low.expired_fraction"] > three["classes.low.expired_fraction"]
    header = (tmp_path / "sweep" / "sweep.csv").read_text().splitlines()[0]
    assert "classes.high.wait_mean_s" in header.split(",")


HEAD = 'arrivals = "poisson:rate=1"\nservice = "exponential:mean=1"\nitems = 5\n'
BAD_CLASSES = [
    ("[[classes]]\nshare = 1\n", "class 1: missing 'name'"),
    ('[[classes]]\nname = "a"\ncolour = 1\n', "class 1 ('a'): unknown key 'colour'; allowed:"),
    ('[[classes]]\nname = "a"\nshare = -1\n', "class 1 ('a'): share must be >= 0"),
    ('[[classes]]\nname = "a"\nshare = nan\n', "class 1 ('a'): share must be finite"),
    ('[[classes]]\nname = "a"\nshare = "x"\n', "class 1 ('a'): share must be a number"),
    ('[[classes]]\nname = "a"\npriority = true\n', "class 1 ('a'): priority must be a number"),
    ('[[classes]]\nname = "a b"\n', "class 1 ('a b'): class name must be 1 to 64"),
    ('[[classes]]\nname = "a"\npatience = "exponential:mean=0"\n', "class 1 ('a'): patience:"),
    ('[[classes]]\nname = "a"\npatience = "constant:value=0"\n', "patience must draw seconds > 0"),
    ('[[classes]]\nname = "a"\nservice = 3\n', "class 1 ('a'): service must be a string"),
    (
        '[[classes]]\nname = "a"\n[[classes]]\nname = "a"\n',
        "class 2 ('a'): name 'a' is given to an earlier class",
    ),
    ('[[classes]]\nname = "a"\nshare = 0\n', "at least one class must have a share > 0"),
    ("classes = 3\n", "classes must be [[classes]] tables"),
    ("classes = []\n", "classes holds no class"),
    ("classes = [1]\n", "class 1 must be a table"),
]


@pytest.mark.parametrize(("body", "message"), BAD_CLASSES)
def test_a_bad_class_table_is_one_line_and_exit_2(scenario_file, capsys, body, message):
    path = scenario_file(HEAD + body)
    for command in (
        ["simulate", path],
        ["sweep", path, "--grid", "concurrency=1,2"],
        ["plan", path, "--search", "concurrency=1..2", "--slo", "wait_mean_s<=1"],
    ):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"pipeline: error: {path}: "), err
        assert err.count("\n") == 1, err
        assert message in err, err


def test_a_chain_reads_classes_too(scenario_file, capsys):
    path = scenario_file(
        'arrivals = "poisson:rate=1.5"\nitems = 300\nseed = 2\n'
        '[[stages]]\nname = "s"\nservice = "exponential:mean=1"\nconcurrency = 2\n'
        'maxsize = "unbounded"\ndrain_timeout = "none"\n'
        '[[stages]]\nname = "t"\nservice = "exponential:mean=0.2"\n'
        '[[classes]]\nname = "a"\n'
        '[[classes]]\nname = "b"\npriority = 1\npatience = "constant:value=0.5"\n'
    )
    assert main(["simulate", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["classes"]["b"]["expired"] == out["items_expired"] > 0
    assert set(out["stages"]["t"]["classes"]) == {"a", "b"}
    assert out["stages"]["t"]["classes"]["b"]["expired"] == 0  # patience: the first stage only
