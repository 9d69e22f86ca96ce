"""``python -m pipeline sweep|plan chain.toml``: axes of one stage, ``STAGE.NAME``.

A chain sweep's CSV is ``sweep()`` from Python with the axes named as given;
a chain plan walks total workers first and names each stage's config; every
axis that does not fit the scenario is one line, exit 2, before any run.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec
from pipeline.sim.analysis.sweep import sweep

CHAIN = """\
arrivals = "poisson:rate=2"
items = 150
seed = 3

[[stages]]
name = "fetch"
service = "exponential:mean=0.8"
concurrency = 3
maxsize = 10
fan_out = 2

[[stages]]
name = "write"
service = "exponential:mean=0.1"
concurrency = 4
maxsize = "unbounded"
"""

# The same chain in Python.
SCENARIO = Scenario(
    arrivals=Poisson(rate=2.0),
    stages=[
        StageSpec(
            name="fetch",
            service=Exponential(mean=0.8),
            config=PipelineConfig(concurrency=3, queue_maxsize=10),
            fan_out=2,
        ),
        StageSpec(
            name="write",
            service=Exponential(mean=0.1),
            config=PipelineConfig(concurrency=4, queue_maxsize=None),
        ),
    ],
    n_items=150,
    seed=3,
)
SINGLE = ["--arrivals", "poisson:rate=2", "--service", "exponential:mean=0.3", "--items", "50"]
QUICK = ["--replications", "2", "--processes", "1"]


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chain.toml").write_text(CHAIN)
    return tmp_path


def test_a_chain_sweep_csv_equals_the_python_sweep(run_main, files):
    status, out, err = run_main(
        "sweep",
        "chain.toml",
        "--grid",
        "write.concurrency=1,4",
        "--grid",
        "write.maxsize=5,unbounded",
        *QUICK,
        "--out",
        "out",
        "--json",
    )
    assert status == 0, err
    summary = json.loads(out)
    assert summary["grid"] == {"write.concurrency": [1, 4], "write.maxsize": [5, None]}
    assert summary["metrics"] == [
        "latency_p95_s", "latency_mean_s", "throughput_per_s", "memory_peak_bytes",
        "items_held_max",
    ]  # fmt: skip
    assert "heatmap_items_held_max.png" in summary["files"]
    cli = pd.read_csv(files / "out" / "sweep.csv")
    python = sweep(
        SCENARIO,
        {"write.concurrency": [1, 4], "write.queue_maxsize": [5, None]},
        replications=2,
        processes=1,
        progress=False,
    )
    assert list(cli["write.maxsize"]) == ["5", "5", "unbounded", "unbounded"] * 2
    python = python.rename(columns={"write.queue_maxsize": "write.maxsize"})
    python["write.maxsize"] = [
        "unbounded" if v is None else str(v) for v in python["write.maxsize"]
    ]
    assert list(cli.columns) == list(python.columns)
    pd.testing.assert_frame_equal(
        cli.drop(columns="wall_time_s"),
        python.drop(columns="wall_time_s").reset_index(drop=True),
        check_dtype=False,
    )
    # One stage's workers matter: one writer for 2 x 2 records/s at 0.1 s each is busier.
    slow, fast = (p["mean"]["latency_mean_s"] for p in summary["points"][:2])
    assert summary["points"][0]["point"] == {"write.concurrency": 1, "write.maxsize": 5}
    assert slow > fast


def test_the_file_grid_takes_stage_axes_dotted_or_quoted_and_flags_replace_them(
    scenario_file, run_main, files
):
    path = scenario_file(
        CHAIN + '[grid]\nwrite.concurrency = [1, 2]\n"fetch.maxsize" = "2,unbounded"\n'
        "fetch.fan-out = [1, 3]\n",
        "grid.toml",
    )
    status, out, err = run_main(
        "sweep",
        path,
        "--grid",
        "write.concurrency=3",
        "--metrics",
        "items_held_max",
        "--axes",
        "fetch.maxsize,fetch.fan-out",
        "--replications",
        "1",
        "--processes",
        "1",
        "--out",
        "out",
        "--json",
    )
    assert status == 0, err
    assert json.loads(out)["grid"] == {
        "write.concurrency": [3],
        "fetch.maxsize": [2, None],
        "fetch.fan_out": [1, 3],
    }


def test_a_chain_plan_walks_total_workers_and_names_each_stage(run_main, files):
    status, out, err = run_main(
        "plan",
        "chain.toml",
        "--search",
        "fetch.concurrency=1..3",
        "--search",
        "write.concurrency=1..2",
        "--slo",
        "latency_p95_s<=6",
        "--slo",
        "items_held_max<=1000",
        "--replications",
        "3",
        "--processes",
        "1",
        "--json",
    )
    assert status == 0, err
    payload = json.loads(out)
    assert payload["cost"] == ["fetch.concurrency", "write.concurrency"]
    totals = [c["fetch.concurrency"] + c["write.concurrency"] for c in payload["candidates"]]
    assert totals == sorted(totals)  # total workers never decrease along the walk
    assert payload["search"] == {"fetch.concurrency": [1, 2, 3], "write.concurrency": [1, 2]}
    chosen = payload["chosen"] or payload["fallback"]
    assert set(chosen) >= {"fetch.concurrency", "write.queue_maxsize", "fetch.max_attempts"}
    assert chosen["write.queue_maxsize"] is None and chosen["fetch.queue_maxsize"] == 10


def test_a_chain_plan_reads_its_search_from_the_file(scenario_file, run_main, files):
    path = scenario_file(
        'slo = ["items_offered<=1000"]\nreplications = 2\n'
        + CHAIN
        + '[search]\nwrite.maxsize = [5, "unbounded"]\n',
        "plan.toml",
    )
    status, out, err = run_main("plan", path, "--processes", "1", "--json")
    assert status == 0, err
    payload = json.loads(out)
    assert payload["status"] == "chosen"
    assert payload["chosen"]["write.queue_maxsize"] == 5


BAD = [
    (["sweep", "chain.toml", "--grid", "concurrency=1,2"],
     "--grid concurrency: each stage of the chain has its own concurrency; name the stage: "
     "fetch.concurrency or write.concurrency (stages: fetch, write)"),
    (["plan", "chain.toml", "--search", "max-attempts=1..3", "--slo", "latency_p95_s<=1"],
     "--search max-attempts: each stage of the chain has its own max-attempts"),
    (["sweep", "chain.toml", "--grid", "wrte.concurrency=1,2"],
     "--grid wrte.concurrency: no stage named 'wrte'; stages: fetch, write"),
    (["plan", "chain.toml", "--search", "wrte.concurrency=1,2", "--slo", "latency_p95_s<=1"],
     "--search wrte.concurrency: no stage named 'wrte'; stages: fetch, write"),
    (["sweep", "chain.toml", "--grid", "write.workers=1,2"],
     "--grid write.workers: cannot vary 'write.workers'; this scenario's axes: arrivals, "
     "item-size, backlog, or STAGE.NAME (stages: fetch, write; NAME: service, concurrency"),
    (["plan", "chain.toml", "--search", "write.seed=1,2", "--slo", "latency_p95_s<=1"],
     "--search write.seed: cannot vary 'write.seed'; this scenario's axes: arrivals"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=0..2"],
     "write.concurrency=0..2: expected an integer >= 1"),
    (["sweep", "chain.toml", "--grid", "write.fan-out=0"], "write.fan_out=0: expected an integer"),
    (["sweep", "chain.toml", "--grid", "write.maxsize=nan"], "write.maxsize=nan"),
    (["sweep", "chain.toml", "--grid", ".concurrency=1"], "expected NAME=VALUES or STAGE.NAME"),
    (["sweep", *SINGLE, "--grid", "write.concurrency=1,2"],
     "--grid write.concurrency: names stage 'write', but the scenario has no stages"),
    (["plan", *SINGLE, "--search", "write.concurrency=1,2", "--slo", "latency_p95_s<=1"],
     "--search write.concurrency: names stage 'write', but the scenario has no stages"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=1", "--grid", "write.concurrency=2"],
     "--grid write.concurrency given twice"),
    (["plan", "chain.toml", "--search", "write.concurrency=1", "--search",
      "write.concurrency=2", "--slo", "latency_p95_s<=1"],
     "--search write.concurrency given twice"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=1,1"],
     "grid axis write.concurrency: value 1 given twice"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=1", "--metrics", "utilisation"],
     "unknown metric(s) ['utilisation']"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=1", "--metrics", "stages"],
     "unknown metric(s) ['stages']"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=1", "--axes", "write.maxsize"],
     "--axes write.maxsize: not a grid axis"),
    (["plan", "chain.toml", "--search", "write.concurrency=1", "--slo", "write.utilisation<=0.8"],
     "'write.utilisation' is one stage's metric"),
    (["plan", "chain.toml", "--search", "write.concurrency=1", "--slo", "wait_mean_s<=1"],
     "a chain's summary is end to end and has no wait_mean_s"),
    (["plan", "chain.toml", "--search", "write.concurrency=1", "--slo", "shed_fraction<=0.1"],
     "a stage of this chain fans out"),
    (["plan", *SINGLE, "--search", "concurrency=1", "--slo", "items_held_max<=5"],
     "items_held_max is a chain's metric"),
    (["sweep", "badgrid.toml", "--grid", "write.concurrency=1"],
     "badgrid.toml: [grid] fetch.concurency: cannot vary 'fetch.concurency'"),
    (["sweep", "twice.toml"],
     "twice.toml: [grid] write.max-attempts: twice.toml: [grid] write.max_attempts names the "
     "same axis"),
    (["plan", "badsearch.toml", "--slo", "latency_p95_s<=1"],
     "badsearch.toml: [search] reader.concurrency: no stage named 'reader'"),
    (["sweep", "chain.toml", "--grid", "write.concurrency=1", "--processes", "1025"],
     "--processes: expected an integer >= 1 and <= 1_024 (worker processes)"),
    (["plan", "chain.toml", "--search", "write.concurrency=1", "--slo", "latency_p95_s<=1",
      "--processes", "1025"],
     "--processes: expected an integer >= 1 and <= 1_024 (worker processes)"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "words"), BAD)
def test_bad_axes_are_one_line_exit_2_and_run_nothing(
    scenario_file, run_main, files, monkeypatch, args, words
):
    import pipeline.sim.analysis.planning.plan as plan_module
    import pipeline.sim.analysis.sweep as sweep_module

    def never(*args, **kwargs):
        raise AssertionError("a run started before the input was checked")

    monkeypatch.setattr(sweep_module, "sweep", never)
    monkeypatch.setattr(plan_module, "Runner", never)
    scenario_file(CHAIN + "[grid]\nfetch.concurency = [1, 2]\n", "badgrid.toml")
    scenario_file(CHAIN + "[grid]\nwrite.max_attempts = 1\nwrite.max-attempts = 2\n", "twice.toml")
    scenario_file(CHAIN + '[search]\nreader.concurrency = "1..2"\n', "badsearch.toml")
    before = sorted(p.name for p in files.iterdir())
    status, out, err = run_main(*args)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pipeline: error: ") and words in lines[0], lines[0]
    assert sorted(p.name for p in files.iterdir()) == before  # no output directory made
