"""``plan --scenario NAME=FILE``: one configuration for every scenario of a set.

On M/M/c (Erlang C exact, :mod:`pipeline.sim.analysis.theory`): a normal and a
peak arrival rate; the peak binds, and ``--check`` judges one configuration in
every scenario. Bad input is one line and exit status 2, before any run (the
progress bar, also on stderr, never starts).
"""

import json

import pytest

from pipeline.sim.analysis.theory import mmc

LIMIT = 0.13  # mean wait, s: c = 10 fails and c = 11 meets at rate 8, each by about 1.6x


def _write(folder, name, rate, seed, extra=""):
    path = folder / f"{name}.toml"
    path.write_text(
        f'arrivals = "poisson:rate={rate}"\nservice = "exponential:mean=1"\n'
        f'maxsize = "unbounded"\nitems = 5000\nseed = {seed}\n{extra}'
    )
    return path


@pytest.fixture
def files(tmp_path):
    return _write(tmp_path, "normal", 4, 1), _write(tmp_path, "peak", 8, 2)


def _set(files):
    normal, peak = files
    return ["--scenario", f"normal={normal}", "--scenario", f"peak={peak}"]


def test_the_peak_binds_in_json_and_text(run_main, files):
    assert mmc(8.0, 1.0, 10).wait_mean_s > 1.5 * LIMIT > 1.5**2 * mmc(8.0, 1.0, 11).wait_mean_s
    flags = [*_set(files), "--search", "concurrency=1..20", "--slo", f"wait_mean_s<={LIMIT}"]
    status, out, _ = run_main("plan", *flags, "--processes", "1", "--json")
    assert status == 0
    payload = json.loads(out)
    assert payload["status"] == "chosen"
    assert payload["chosen"]["concurrency"] == 11
    assert payload["binding_scenario"] == "peak"
    assert {n: s["verdict"] for n, s in payload["scenarios"].items()} == {
        "normal": "meets",
        "peak": "meets",
    }
    status, out, _ = run_main("plan", *flags, "--processes", "1")
    assert status == 0
    assert "in scenario 'peak'" in out
    table = out[out.index("scenarios at the chosen configuration") :].splitlines()
    assert table[2].split()[:2] == ["normal", "meets"]
    assert table[3].split()[:2] == ["peak", "meets"] and table[3].endswith("<- binding")


@pytest.mark.parametrize(
    "concurrency, verdict, status", [(11, "meets", 0), (9, "fails", 1), (6, "fails", 1)]
)
def test_check_judges_one_configuration_in_every_scenario(
    run_main, files, concurrency, verdict, status
):
    # c = 9 meets at the normal rate and fails at the peak; c = 6 cannot keep up at the peak.
    assert mmc(4.0, 1.0, 9).wait_mean_s < LIMIT / 10 and mmc(8.0, 1.0, 9).wait_mean_s > 3 * LIMIT
    got, out, _ = run_main(
        "plan",
        *_set(files),
        "--check",
        f"concurrency={concurrency}",
        "--slo",
        f"wait_mean_s<={LIMIT}",
        "--json",
    )
    payload = json.loads(out)
    assert (got, payload["verdict"]) == (status, verdict)
    if concurrency == 9:
        assert payload["scenarios"]["normal"]["verdict"] == "meets"
        assert payload["scenarios"]["peak"]["verdict"] == "fails"
    if concurrency == 6:
        assert "scenario 'peak'" in payload["note"]


def test_worker_cost_over_a_set(run_main, files):
    status, out, _ = run_main(
        "plan",
        *_set(files),
        "--search",
        "concurrency=9..12",
        "--slo",
        f"wait_mean_s<={LIMIT}",
        "--cost",
        "worker_hour=0.5",
        "--json",
    )
    payload = json.loads(out)
    assert status == 0 and payload["chosen"]["concurrency"] == 11
    assert payload["cost_per_hour"] == pytest.approx(5.5)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--scenario", "peak"], "--scenario: expected NAME=FILE (peak=peak.toml), got 'peak'"),
        (["--scenario", "=x.toml"], "--scenario: expected NAME=FILE"),
        (["--scenario", "pe ak={peak}"], "--scenario: the name 'pe ak' may hold only"),
        (["--scenario", "peak={peak}", "--scenario", "peak={normal}"], "peak is given twice"),
        (["--scenario", "peak={missing}"], "--scenario peak: no such scenario file"),
        (["--scenario", "peak={bad}"], "bad.toml: not valid TOML"),
        (["--scenario", "peak={peak}", "--scenario", "bad={bad}"], "--scenario bad: "),
        (["--scenario", "peak={peak}", "--search", "write.concurrency=1,2"], "--scenario peak: "),
        (
            ["--scenario", "chain={chain}", "--scenario", "peak={peak}"],
            "--scenario: chain is a chain and peak a single stage",
        ),
        (
            [
                "--scenario",
                "a={chain}",
                "--scenario",
                "b={short}",
                "--search",
                "fetch.concurrency=1",
            ],
            "--scenario b: --search fetch.concurrency",
        ),
        (["--scenario", "peak={peak}", "--cost", "worker_hour=1,wait_hour=2"], "wait_hour"),
        (["{normal}", "--scenario", "peak={peak}"], "not both"),
        (
            ["--scenario", "peak={peak}", "--scenario", "chain={chain}"],
            "--scenario: chain is a chain and peak a single stage",
        ),
    ],
)
def test_bad_scenario_input_is_one_line_and_exit_2(run_main, files, tmp_path, flags, message):
    normal, peak = files
    bad = tmp_path / "bad.toml"
    bad.write_text("arrivals = [\n")

    def chain_file(name, *stages):
        path = tmp_path / f"{name}.toml"
        path.write_text(
            'arrivals = "poisson:rate=1"\nitems = 100\n'
            + "".join(
                f'[[stages]]\nname = "{s}"\nservice = "exponential:mean=0.1"\n' for s in stages
            )
        )
        return path

    chain, short = chain_file("chain", "fetch", "write"), chain_file("short", "write")
    values = {"peak": peak, "normal": normal, "bad": bad, "chain": chain, "short": short}
    values["missing"] = tmp_path / "missing.toml"
    argv = [f.format(**values) for f in flags]
    if not any(a.startswith("--search") for a in argv):
        argv += ["--search", "concurrency=9..12"]
    status, out, err = run_main("plan", *argv, "--slo", "wait_mean_s<=1")
    assert status == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
