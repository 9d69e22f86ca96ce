"""``[retry_budget]`` and ``[breaker]`` tables in a scenario file: simulate, sweep and plan.

The JSON carries ``retries_denied`` and ``breaker_open_s``, equal to the same scenario
run from Python; bad tables are one line naming the file, the table, the key and the
value, with exit status 2 before any run (nothing written).
"""

from __future__ import annotations

import json

import pytest

from pipeline import Backoff, CircuitBreaker, PipelineConfig, RetryBudget
from pipeline.cli import main
from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, simulate

HEAD = """\
arrivals = "poisson:rate=4"
service = "exponential:mean=0.5"
concurrency = 2
max_attempts = 4
failure_rate = 0.7
backoff = "constant:delay=0.5"
drain_timeout = "none"
items = 300
seed = 5
"""

CONTROLS = (
    HEAD
    + """
[retry_budget]
ratio = 0.1
min_retries_per_s = 0.5
window_s = 10

[breaker]
failure_rate = 0.6
window = 20
min_calls = 10
open_s = 5
half_open_calls = 3
"""
)

SCENARIO = Scenario(
    arrivals=Poisson(rate=4),
    service=Exponential(mean=0.5),
    config=PipelineConfig(
        concurrency=2,
        max_attempts=4,
        backoff=Backoff(kind="constant", base_s=0.5, jitter=False),
        drain_timeout_s=None,
        retry_budget=RetryBudget(ratio=0.1, min_retries_per_s=0.5, window_s=10),
        breaker=CircuitBreaker(
            failure_rate=0.6, window=20, min_calls=10, open_s=5, half_open_calls=3
        ),
    ),
    failures=IndependentFailures(0.7),
    n_items=300,
    seed=5,
)


def test_simulate_json_carries_what_the_controls_did(scenario_file, capsys):
    assert main(["simulate", scenario_file(CONTROLS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = simulate(SCENARIO).summary
    assert out["engine"] == want["engine"] == "kernel"  # inside the kernel's domain
    assert out["retries_denied"] == want["retries_denied"] > 0
    assert out["breaker_open_s"] == pytest.approx(want["breaker_open_s"], rel=1e-12)
    assert want["breaker_open_s"] > 0
    assert out["attempts_total"] == want["attempts_total"]


def test_the_metrics_file_carries_what_the_controls_did(scenario_file, capsys, tmp_path):
    from pipeline.sim.running.scrape import openmetrics_series

    path = tmp_path / "run.om"
    argv = ["simulate", scenario_file(CONTROLS), "--json", "--metrics-out", str(path)]
    assert main([*argv, "--metrics-start", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    found = openmetrics_series(path)
    labels = (("pipeline", "sim"),)
    assert found["pipeline_retries_denied_total", labels][-1][1] == out["retries_denied"] > 0
    states = {dict(key)["state"] for name, key in found if name == "pipeline_breaker_state"}
    assert states == {"closed", "open", "half_open"}
    assert not any("codel" in name or "concurrency_limit" in name for name, _ in found)


def test_empty_tables_take_the_defaults(scenario_file, capsys):
    assert main(["simulate", scenario_file(HEAD + "[retry_budget]\n[breaker]\n"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "retries_denied" in out and "breaker_open_s" in out


def test_the_kernel_runs_a_scenario_with_a_budget_and_a_breaker(scenario_file, capsys):
    path = scenario_file(CONTROLS)
    assert main(["simulate", path, "--engine", "kernel", "--json"]) == 0
    kernel = json.loads(capsys.readouterr().out)
    assert main(["simulate", path, "--engine", "asyncio", "--json"]) == 0
    engine = json.loads(capsys.readouterr().out)
    for key in ("retries_denied", "breaker_open_s", "attempts_total", "items_dead_lettered"):
        assert kernel[key] == engine[key], key


def test_sweep_runs_with_the_controls(scenario_file, tmp_path, capsys):
    out_dir = tmp_path / "out"
    path = scenario_file(CONTROLS)
    argv = ["sweep", path, "--grid", "concurrency=1,2", "--out", str(out_dir)]
    argv += ["--metrics", "retries_denied,breaker_open_s"]
    assert main(argv) == 0, capsys.readouterr().err
    text = (out_dir / "sweep.csv").read_text()
    assert "retries_denied" in text and "breaker_open_s" in text


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[retry_budget]\nratio = -0.1\n", "[retry_budget]: ratio must be >= 0"),
        ("[retry_budget]\nwindow_s = 0\n", "[retry_budget]: window_s must be > 0"),
        ("[retry_budget]\nratio = nan\n", "[retry_budget]: ratio must be finite"),
        ("[retry_budget]\nratio = inf\n", "[retry_budget]: ratio must be finite"),
        ("[retry_budget]\nratio = true\n", "[retry_budget]: ratio must be a number, got bool"),
        ("[retry_budget]\nratio = '0.2'\n", "[retry_budget]: ratio must be a number, got str"),
        ("[retry_budget]\nbudget = 1\n", "[retry_budget]: unknown key 'budget'; allowed: ratio"),
        ("retry_budget = 0.2\n", "[retry_budget] must be a table of RetryBudget settings"),
        ("[breaker]\nfailure_rate = 1.5\n", "[breaker]: failure_rate must be <= 1"),
        ("[breaker]\nwindow = 10\nmin_calls = 11\n", "[breaker]: min_calls must be <= window"),
        ("[breaker]\nwindow = 2.5\n", "[breaker]: window must be an integer"),
        ("[breaker]\nopen_s = 0\n", "[breaker]: open_s must be > 0"),
        ("[breaker]\nslow_call_s = -1\n", "[breaker]: slow_call_s must be > 0"),
    ],
)
@pytest.mark.parametrize("command", ["simulate", "sweep", "plan"])
def test_bad_tables_are_one_line_and_exit_2_before_any_run(
    table, message, command, scenario_file, tmp_path, capsys
):
    path = scenario_file(HEAD + table)
    err = refused_before_any_run(command, path, "concurrency", tmp_path / "out", capsys)
    assert path in err and message in err, err


def refused_before_any_run(command: str, path: str, axis: str, out_dir, capsys) -> str:
    """Run ``command`` on scenario ``path`` (varying ``axis``): exit 2, nothing written.

    Returns the one line of error."""
    argv = {
        "simulate": ["simulate", path, "--json", "--out", str(out_dir)],
        "sweep": ["sweep", path, "--grid", f"{axis}=1,2", "--out", str(out_dir)],
        "plan": ["plan", path, "--search", f"{axis}=1..3", "--slo", "wait_mean_s<=1"],
    }[command]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0, err
    assert captured.out == "" and not out_dir.exists()
    return err


def test_the_tables_do_not_go_with_stages(scenario_file, capsys):
    text = """\
    arrivals = "poisson:rate=1"
    items = 10

    [breaker]

    [[stages]]
    name = "one"
    service = "constant:value=0.5"
    """
    assert main(["simulate", scenario_file(text), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "[breaker] with [[stages]]" in err and "\n" not in err


CHAIN = """\
arrivals = "poisson:rate=1"
items = 10

[[stages]]
name = "one"
service = "constant:value=0.5"
"""
ONE_PIPELINE = {
    "retry_budget": "[retry_budget]\nratio = 0.1\n",
    "breaker": "[breaker]\n",
    "concurrency_limit": '[concurrency_limit]\nkind = "aimd"\n',
    "codel": "[codel]\n",
    "autoscale": "[autoscale]\nmax_workers = 4\n",
}


@pytest.mark.parametrize("command", ["simulate", "sweep", "plan"])
@pytest.mark.parametrize("table", list(ONE_PIPELINE))
def test_what_sets_one_pipeline_is_refused_with_stages_before_any_run(
    scenario_file, capsys, tmp_path, command, table
):
    # Each of these would be silently ignored by a chain, whose stages run pipelines of
    # their own ([autoscale] was): one line and exit 2 instead, before anything runs.
    path = scenario_file(CHAIN + ONE_PIPELINE[table])
    err = refused_before_any_run(command, path, "one.concurrency", tmp_path / "out", capsys)
    assert f"[{table}]" in err and "[[stages]]" in err and path in err, err


def test_the_autoscale_flag_is_refused_with_stages(scenario_file, capsys):
    path = scenario_file(CHAIN)
    assert main(["simulate", path, "--autoscale", "max_workers=4", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--autoscale with [[stages]]" in err and "\n" not in err
