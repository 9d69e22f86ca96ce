"""``[concurrency_limit]`` and ``[codel]`` in a scenario file: read by every command, and each
bad section is one line naming the file, the section, the key and the value, exit status 2,
before any run (the kernel refuses them in one line too)."""

from __future__ import annotations

import json

import pytest

from pipeline import AIMD, CoDel, PipelineConfig
from pipeline.cli import main
from pipeline.sim import Exponential, Poisson, Scenario, simulate

HEAD = """\
arrivals = "poisson:rate=3.2"
service = "exponential:mean=1.0"
concurrency = 4
items = 400
seed = 2
"""

GOOD = (
    HEAD
    + """
[concurrency_limit]
kind = "aimd"
min_limit = 2
backoff_ratio = 0.5

[codel]
target_s = 0.5
interval_s = 5.0
lifo = false
"""
)


def test_the_sections_become_the_config_and_the_json_reports_them(scenario_file, capsys):
    assert main(["simulate", scenario_file(GOOD), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    config = PipelineConfig(
        concurrency=4,
        concurrency_limit=AIMD(min_limit=2, backoff_ratio=0.5),
        codel=CoDel(target_s=0.5, interval_s=5.0, lifo=False),
    )
    scenario = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=config,
        n_items=400,
        seed=2,
    )
    want = simulate(scenario).summary
    assert out["engine"] == "asyncio"
    for key in ("codel_shed", "concurrency_limit", "items_shed", "items_completed"):
        assert out[key] == want[key], key
    assert out["items_shed"] == out["codel_shed"]


def test_gradient2_is_a_kind(scenario_file, capsys):
    body = HEAD + '[concurrency_limit]\nkind = "gradient2"\nqueue_size = 2\n'
    assert main(["simulate", scenario_file(body), "--json"]) == 0
    assert 1 <= json.loads(capsys.readouterr().out)["concurrency_limit"] <= 4


BAD = [
    ('[concurrency_limit]\nkind = "vegas"\n', "[concurrency_limit]: kind must be one of"),
    ("[concurrency_limit]\nmin_limit = 2\n", "kind must be one of 'aimd', 'gradient2', got None"),
    ('[concurrency_limit]\nkind = "aimd"\nmin_limit = 9\n', "[concurrency_limit]: concurrency_"),
    ('[concurrency_limit]\nkind = "aimd"\nmin_limit = 0\n', "min_limit must be >= 1"),
    ('[concurrency_limit]\nkind = "aimd"\nbackoff_ratio = nan\n', "backoff_ratio must be finite"),
    ('[concurrency_limit]\nkind = "aimd"\nbackoff_ratio = 1.0\n', "backoff_ratio must be >= 0.5"),
    ('[concurrency_limit]\nkind = "aimd"\ntimeout_s = -inf\n', "timeout_s must be finite"),
    ('[concurrency_limit]\nkind = "aimd"\nmin_limit = true\n', "got True"),
    ('[concurrency_limit]\nkind = "aimd"\nsmoothing = 0.5\n', "unknown key 'smoothing'"),
    ('[concurrency_limit]\nkind = "gradient2"\nsmoothing = 0\n', "smoothing must be > 0"),
    ('[concurrency_limit]\nkind = "gradient2"\nlong_window = 0\n', "long_window must be >= 1"),
    ("[codel]\ntarget_s = 0\n", "[codel]: target_s must be > 0 (seconds), got 0"),
    ("[codel]\ninterval_s = nan\n", "[codel]: interval_s must be finite"),
    ('[codel]\nlifo = "yes"\n', "[codel]: lifo must be True or False, got 'yes'"),
    ("[codel]\nwindow = 3\n", "unknown key 'window' for CoDel"),
    ("codel = 3\n", "[codel] must be a table"),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_a_bad_section_is_one_line_and_exit_2_before_any_run(scenario_file, capsys, body, message):
    path = scenario_file(HEAD + body)
    for command in (
        ["simulate", path],
        ["sweep", path, "--grid", "maxsize=10,20"],
        ["plan", path, "--search", "maxsize=10..20", "--slo", "wait_mean_s<=1"],
    ):
        assert main(command) == 2
        captured = capsys.readouterr()
        err = captured.err
        assert err.startswith(f"pipeline: error: {path}: "), err
        assert err.count("\n") == 1, err
        assert message in err, err
        assert captured.out == ""


def test_the_kernel_refuses_a_scenario_with_a_control(scenario_file, capsys):
    assert main(["simulate", scenario_file(GOOD), "--engine", "kernel"]) == 2
    err = capsys.readouterr().err
    assert "--engine kernel does not support adaptive concurrency limits" in err
    assert err.count("\n") == 1
