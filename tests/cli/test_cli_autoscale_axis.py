"""The ``autoscale`` axis of ``plan --search`` and ``sweep --grid``: a fixed pool beside
autoscaled ones from the shell, as ``plan(search={"autoscale": [None, Autoscaler(...)]})``
does in Python, with the same numbers, and bad axes refused in one line before any run."""

from __future__ import annotations

import csv
import json

import pytest

from pipeline import Autoscaler
from pipeline.cli import main
from pipeline.cli.values import autoscale_text, parse_autoscale
from pipeline.sim import plan, sweep
from pipeline.sim.analysis.planning.cost import Cost
from tests.sim.analysis.planning.test_plan_autoscale import FIXED, SCALER

#: The Python tests' fixed scenario (six workers, no autoscaler) as a file.
FIXED_FILE = """\
arrivals = "poisson:rate=10"
service = "exponential:mean=0.5"
concurrency = 6
maxsize = "unbounded"
duration = 240
drain_timeout = "none"
seed = 5
"""
#: A fixed pool (none) and SCALER, as --autoscale spells it.
POOLS = "autoscale=none;max_workers=30,target=2,sync_s=15,scale_down_stabilization_s=60"
PLAN_FLAGS = [
    "--slo", "latency_p95_s<=60", "--cost", "worker_hour=1", "--replications", "3",
    "--processes", "1",
]  # fmt: skip


def _plan_json(args: list[str], capsys) -> dict:
    assert main(["plan", *args, *PLAN_FLAGS, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_puts_a_fixed_pool_beside_an_autoscaled_one(scenario_file, capsys):
    path = scenario_file(FIXED_FILE)
    out = _plan_json([path, "--search", POOLS], capsys)
    found = plan(
        FIXED.replace(concurrency=6),
        {"autoscale": [None, SCALER]},
        ["latency_p95_s<=60"],
        cost=Cost(worker_hour=1.0),
        replications=3,
        processes=1,
        progress=False,
    )
    want = found.to_dict()
    assert out["search"] == want["search"] == {"autoscale": [None, repr(SCALER)]}
    arms = {candidate["autoscale"]: candidate for candidate in out["candidates"]}
    assert set(arms) == {None, repr(SCALER)}
    for candidate in want["candidates"]:
        got = arms[candidate["autoscale"]]
        for key in ("latency_p95_s_mean", "cost_per_hour", "workers_cost_per_hour"):
            assert got[key] == pytest.approx(candidate[key], rel=1e-12), key
    assert arms[None]["workers_cost_per_hour"] == 6.0  # six workers for the hour, exactly
    assert arms[repr(SCALER)]["workers_cost_per_hour"] != 6.0  # what its runs paid for
    # The report shows both arms, each by its own spelling.
    assert main(["plan", path, "--search", POOLS, *PLAN_FLAGS]) == 0
    report = capsys.readouterr().out
    assert "none" in report and repr(SCALER) in report


def test_a_search_table_gives_the_pools_as_the_flag_does(scenario_file, capsys):
    table = '\n[search]\nautoscale = ["none", "max_workers=30,target=2,sync_s=15,'
    table += 'scale_down_stabilization_s=60"]\n'
    from_table = _plan_json([scenario_file(FIXED_FILE + table)], capsys)
    from_flag = _plan_json([scenario_file(FIXED_FILE, "flag.toml"), "--search", POOLS], capsys)
    assert from_table["search"] == from_flag["search"]
    assert from_table["candidates"] == from_flag["candidates"]


def test_sweep_grids_fixed_and_autoscaled_pools(scenario_file, tmp_path, capsys):
    path = scenario_file(FIXED_FILE)
    out = tmp_path / "out"
    args = [
        "sweep", path, "--grid", POOLS, "--grid", "concurrency=2,6", "--metrics",
        "worker_seconds,latency_p95_s", "--replications", "2", "--processes", "1",
        "--out", str(out), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["grid"] == {"autoscale": [None, repr(SCALER)], "concurrency": [2, 6]}
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    grid = {"autoscale": [None, SCALER], "concurrency": [2, 6]}
    expected = sweep(FIXED, grid, replications=2, processes=1, progress=False)
    assert [row["autoscale"] for row in rows] == ["none"] * 4 + [repr(SCALER)] * 4
    for row, (_, want) in zip(rows, expected.iterrows(), strict=True):
        assert float(row["latency_p95_s"]) == pytest.approx(want["latency_p95_s"], rel=1e-12)
        if row["autoscale"] == "none":
            assert row["worker_seconds"] == ""  # a fixed pool has no pool keys
        else:
            assert float(row["worker_seconds"]) == pytest.approx(want["worker_seconds"])


@pytest.mark.parametrize(
    "scaler",
    [
        None,
        Autoscaler(),
        SCALER,
        Autoscaler(metric="oldest_age_s", target=0.5, max_scale_up=(8, 0.5), cold_start_s=3),
    ],
)
def test_the_flags_spelling_of_an_autoscaler_rebuilds_it(scaler):
    assert parse_autoscale(autoscale_text(scaler)) == scaler
    assert eval(repr(scaler), {"Autoscaler": Autoscaler}) == scaler


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (
            ["autoscale=none,max_workers=30"],
            "autoscale=none,max_workers=30: expected key=value pairs separated by commas, got "
            "'none' (an autoscale axis's values are none, a fixed pool, or --autoscale's "
            "KEY=VALUE,..., separated by ';'",
        ),
        (["autoscale=none;bogus=1"], "autoscale=bogus=1: unknown autoscale key 'bogus'"),
        (["autoscale=none;target=nan"], "autoscale=target=nan: target must be finite"),
        (["autoscale="], "autoscale: no values given"),
        (["autoscale=none;NONE"], "axis autoscale: value none given twice"),
        (["autoscale=target=2;target=2.0"], "axis autoscale: value target=2.0 given twice"),
        (
            ["autoscale=none;max_workers=4"],
            "--{flag} autoscale=max_workers=4: concurrency must be within the autoscaler's "
            "min_workers..max_workers (1..4), got 6",
        ),
        (
            ["autoscale=max_workers=30;max_workers=40", "concurrency=6,35"],
            "--{flag} autoscale=max_workers=30, --{flag} concurrency=35: concurrency must be",
        ),
        (
            ["autoscale=none;target=2", "autoscale.target=1,2"],
            "--{flag} autoscale.target: varies the autoscaler, but --{flag} autoscale holds "
            "none (a fixed pool, with no autoscaler to vary)",
        ),
        (
            ["autoscale=max_workers=30;max_workers=40", "autoscale.min-workers=35"],
            "--{flag} autoscale=max_workers=30, --{flag} autoscale.min-workers=35: min_workers "
            "must be <= max_workers (30), got 35",
        ),
        (["autoscale.target=1,2"], "--{flag} autoscale.target: the scenario does not autoscale"),
    ],
)
@pytest.mark.parametrize("command", ["plan", "sweep"])
def test_bad_pool_axes_are_one_line_before_any_run(
    command, flags, words, scenario_file, capsys, tmp_path, monkeypatch
):
    flag = "search" if command == "plan" else "grid"
    path = scenario_file(FIXED_FILE)
    monkeypatch.chdir(tmp_path)
    given = [part for axis in flags for part in (f"--{flag}", axis)]
    extra = ["--slo", "latency_p95_s<=5"] if command == "plan" else []
    try:
        code = main([command, path, *given, *extra, "--out", "out"])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert words.format(flag=flag) in err, err
    assert not (tmp_path / "out").exists()


def test_a_chain_has_no_pool_to_put_beside_a_fixed_one(scenario_file, capsys):
    chain = scenario_file(
        'arrivals = "poisson:rate=5"\nduration = 20\n\n[[stages]]\nname = "fetch"\n'
        'service = "exponential:mean=0.1"\n'
    )
    code = main(["sweep", chain, "--grid", "autoscale=none;max_workers=4"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--grid autoscale: varies a single pipeline's autoscaler" in err
