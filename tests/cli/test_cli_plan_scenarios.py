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
        (
            ["--scenario", "peak"],
            "--scenario: expected NAME=FILE or NAME=FILE@SHARE (peak=peak.toml@0.1), got 'peak'",
        ),
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
        (
            [
                "--scenario",
                "normal={normal}@0.9",
                "--scenario",
                "peak={peak}@0.2",
                "--cost",
                "worker_hour=1,wait_hour=2",
            ],
            "--scenario: the shares of the hours must sum to 1, got 1.1 (normal@0.9, peak@0.2)",
        ),
        (
            [
                "--scenario",
                "normal={normal}@-0.1",
                "--scenario",
                "peak={peak}@1.1",
                "--cost",
                "worker_hour=1",
            ],
            "--scenario normal: the share of the hours must be a finite number >= 0",
        ),
        (
            [
                "--scenario",
                "normal={normal}@nan",
                "--scenario",
                "peak={peak}@1",
                "--cost",
                "worker_hour=1",
            ],
            "got 'nan'",
        ),
        (["--scenario", "peak={peak}@lots", "--cost", "worker_hour=1"], "got 'lots'"),
        (["--scenario", "peak={peak}@inf", "--cost", "worker_hour=1"], "got 'inf'"),
        (
            [
                "--scenario",
                "normal={normal}@0.9",
                "--scenario",
                "peak={peak}",
                "--cost",
                "worker_hour=1",
            ],
            "--scenario peak: no share of the hours",
        ),
        (
            ["--scenario", "normal={normal}@0.9", "--scenario", "peak={peak}@0.1"],
            "shares weigh the cost per hour over the scenarios; give --cost too",
        ),
        (
            ["--scenario", "peak={peak}", "--cost", "worker_hour=1,wait_hour=-2"],
            "--cost: cost wait_hour must be a finite number >= 0 and <= 1e+12",
        ),
        (
            ["--scenario", "peak={peak}", "--cost", "worker_hour=nan"],
            "--cost: cost worker_hour must be a finite number >= 0",
        ),
        (
            ["--scenario", "normal={normal}", "--scenario", "peak={otherslo}"],
            "--scenario peak: ",
        ),
        (
            [
                "--scenario",
                "a={chain}",
                "--scenario",
                "b={chain}",
                "--search",
                "fetch.concurrency=1",
                "--cost",
                "fetch.worker_hour=1",
            ],
            "--cost (scenario a): cost: stage 'write' has no price",
        ),
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
    otherslo = _write(tmp_path, "otherslo", 8, 2, 'slo = ["wait_mean_s<=0.5"]\n')
    values = {"peak": peak, "normal": normal, "bad": bad, "chain": chain, "short": short}
    values["otherslo"] = otherslo
    values["missing"] = tmp_path / "missing.toml"
    argv = [f.format(**values) for f in flags]
    if not any(a.startswith("--search") for a in argv):
        argv += ["--search", "concurrency=9..12"]
    status, out, err = run_main("plan", *argv, "--slo", "wait_mean_s<=1")
    assert status == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
    if "otherslo" in " ".join(flags):
        assert "sets slo = ['wait_mean_s<=0.5'], unlike" in err


def test_a_wait_cost_over_the_hours_of_a_set(run_main, files):
    # Peak one hour in ten: least E(TC) = c + 40 (0.9 * 4 Wq(4, c) + 0.1 * 8 Wq(8, c)).
    normal, peak = files
    exact = {
        c: c
        + 40 * (0.9 * 4 * mmc(4.0, 1.0, c).wait_mean_s + 0.1 * 8 * mmc(8.0, 1.0, c).wait_mean_s)
        for c in range(9, 21)
    }
    best = min(exact, key=exact.get)
    assert best == 12 and sorted(exact.values())[1] / exact[best] > 1.02
    status, out, _ = run_main(
        "plan",
        "--scenario",
        f"normal={normal}@0.9",
        "--scenario",
        f"peak={peak}@0.1",
        "--search",
        "concurrency=9..20",
        "--slo",
        "wait_mean_s<=2",
        "--cost",
        "worker_hour=1,wait_hour=40",
        "--processes",
        "1",
        "--json",
    )
    payload = json.loads(out)
    assert status == 0 and payload["chosen"]["concurrency"] == best
    assert payload["prices"]["scenario_shares"] == {"normal": 0.9, "peak": 0.1}
    assert payload["prices"]["scenario_shares_given"] is True
    assert payload["cost_per_hour"] == pytest.approx(exact[best], rel=0.1)


def test_a_file_named_with_an_at_sign_is_a_file(run_main, tmp_path):
    path = _write(tmp_path, "peak@2", 8, 2)
    status, _, err = run_main(
        "plan",
        "--scenario",
        f"peak={path}",
        "--check",
        "concurrency=11",
        "--slo",
        f"wait_mean_s<={LIMIT}",
        "--json",
    )
    assert status == 0, err
