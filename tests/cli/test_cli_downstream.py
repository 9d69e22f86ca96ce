"""A scenario file's [downstream] and [[faults]] tables: read into the very Scenario the
Python API builds, the recovery keys in the JSON, and every bad value one line, exit 2."""

from __future__ import annotations

import json

import pytest

from pipeline import Backoff, PipelineConfig
from pipeline.cli import main
from pipeline.sim import CapacityDrop, Downstream, Exponential, LoadSpike, Poisson, Scenario
from pipeline.sim import simulate as run

OVERLOAD = """\
arrivals = "poisson:rate=20"
concurrency = 1000
maxsize = "unbounded"
attempt_timeout = 1.0
max_attempts = 3
backoff = "constant:delay=0.1"
drain_timeout = "none"
duration = 40
seed = 5

[downstream]
concurrency = 2
service = "exponential:mean=0.05"
maxsize = 50

[[faults]]
kind = "capacity_drop"
at = 10.0
for = 2.0
factor = 0.5

[[faults]]
kind = "load_spike"
at = 11.0
for = 3.0
factor = 1.5
"""

SCENARIO = Scenario(
    arrivals=Poisson(rate=20.0),
    config=PipelineConfig(
        concurrency=1000,
        queue_maxsize=None,
        attempt_timeout_s=1.0,
        max_attempts=3,
        backoff=Backoff(kind="constant", base_s=0.1),
        drain_timeout_s=None,
    ),
    duration_s=40.0,
    seed=5,
    downstream=Downstream(concurrency=2, service=Exponential(mean=0.05), queue_maxsize=50),
    faults=[
        CapacityDrop(at_s=10.0, for_s=2.0, factor=0.5),
        LoadSpike(at_s=11.0, for_s=3.0, factor=1.5),
    ],
)


def test_the_file_builds_the_same_run_and_prints_the_overload_keys(scenario_file, capsys):
    assert main(["simulate", scenario_file(OVERLOAD), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = run(SCENARIO).summary
    for key in ("items_completed", "goodput_per_s", "recovered", "recovery_s",
                "downstream_served", "downstream_orphaned", "downstream_rejected",
                "downstream_queue_mean"):  # fmt: skip
        assert out[key] == want[key], key
    assert out["engine"] == "kernel"  # auto: the kernel runs a downstream
    assert out["recovered"] in (True, False)


def test_replications_give_the_fraction_recovered(scenario_file, capsys):
    assert main(["simulate", scenario_file(OVERLOAD), "--replications", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recovered"] in (0.0, 0.5, 1.0)
    assert out["goodput_per_s"] > 0


def test_without_faults_the_recovery_keys_are_null(scenario_file, capsys):
    body = OVERLOAD.split("[[faults]]")[0]
    assert main(["simulate", scenario_file(body), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["recovered"], out["recovery_s"]) == (None, None)


def test_the_kernel_and_the_engine_print_the_same_overload_keys(scenario_file, capsys):
    outs = []
    for engine in ("kernel", "asyncio"):
        assert main(["simulate", scenario_file(OVERLOAD), "--engine", engine, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    for key in ("items_completed", "goodput_per_s", "recovered", "recovery_s",
                "downstream_served", "downstream_orphaned", "downstream_rejected"):  # fmt: skip
        assert outs[0][key] == outs[1][key], key


HEAD = 'arrivals = "poisson:rate=1"\nduration = 5\n'
DOWN = '[downstream]\nconcurrency = 1\nservice = "constant:value=0.1"\n'
BAD = [
    ("[downstream]\nservice = \"constant:value=1\"\n", "[downstream]: missing 'concurrency'"),
    ("[downstream]\nconcurrency = 1\n", "[downstream]: missing 'service'"),
    (DOWN + "colour = 1\n", "[downstream]: unknown key 'colour'; allowed: concurrency,"),
    (DOWN.replace("= 1\n", "= 0\n", 1), "[downstream]: concurrency must be >= 1"),
    (DOWN.replace("= 1\n", "= 1.5\n", 1), "[downstream]: concurrency must be an integer"),
    (DOWN.replace("= 1\n", "= true\n", 1), "[downstream]: concurrency must be an integer"),
    (DOWN + "maxsize = 0\n", "[downstream]: maxsize must be >= 1"),
    (DOWN + 'maxsize = "lots"\n', "[downstream]: maxsize must be an integer >= 1 or 'unbounded'"),
    (DOWN.replace('"constant:value=0.1"', "0.1"), "[downstream]: service must be a string"),
    (DOWN.replace("value=0.1", "value=-1"), "[downstream]: service: "),
    ("downstream = 3\n", "[downstream] must be a table"),
    (DOWN + "[[faults]]\nkind = \"capacity_drop\"\nat = 1\nfor = 1\nfactor = 0\n",
     "[[faults]] 1: factor must be > 0"),
    (DOWN + "[[faults]]\nkind = \"capacity_drop\"\nat = 1\nfor = 1\nfactor = nan\n",
     "[[faults]] 1: factor must be finite"),
    (DOWN + "[[faults]]\nkind = \"capacity_drop\"\nat = -1\nfor = 1\nfactor = 0.5\n",
     "[[faults]] 1: at must be >= 0"),
    (DOWN + "[[faults]]\nkind = \"capacity_drop\"\nat = 1\nfor = inf\nfactor = 0.5\n",
     "[[faults]] 1: for must be finite"),
    (DOWN + "[[faults]]\nkind = \"capacity_drop\"\nat = 1\nfor = 1\nfactor = \"x\"\n",
     "[[faults]] 1: factor must be a number"),
    (DOWN + "[[faults]]\nkind = \"meteor\"\nat = 1\nfor = 1\nfactor = 2\n",
     "[[faults]] 1: kind must be one of capacity_drop, load_spike"),
    (DOWN + "[[faults]]\nkind = \"load_spike\"\nat = 1\nfactor = 2\n",
     "[[faults]] 1: missing 'for'"),
    (DOWN + "[[faults]]\nkind = \"load_spike\"\nat = 1\nfor = 1\nfactor = 2\nwhy = 1\n",
     "[[faults]] 1: unknown key 'why'"),
    ("faults = 3\n", "faults must be [[faults]] tables"),
    ("[[faults]]\nkind = \"capacity_drop\"\nat = 1\nfor = 1\nfactor = 0.5\n",
     "faults[0] is CapacityDrop"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "message"), BAD)
def test_a_bad_overload_table_is_one_line_and_exit_2(scenario_file, capsys, body, message):
    service = "" if "[downstream]" in body else 'service = "constant:value=0.1"\n'
    path = scenario_file(HEAD + service + body)
    for command in (
        ["simulate", path],
        ["sweep", path, "--grid", "concurrency=1,2"],
        ["plan", path, "--search", "concurrency=1..2", "--slo", "wait_mean_s<=1"],
    ):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert err.startswith(f"pipeline: error: {path}: "), err
        assert err.count("\n") == 1, err
        assert message in err, err
