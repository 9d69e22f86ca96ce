"""Files in and out of the command line, as a hostile user gives them.

Every file the commands read (a scenario file, a trace, a measured
distribution or a counts file) is read defensively: whatever is in it, the
answer is one line naming the file and exit status 2, never a traceback.
Every name that becomes a file name (a stage's) is checked when the file is
parsed, and every ``--out`` before any work, for ``simulate``, ``sweep`` and
``plan`` alike. What ``--out`` gets is written all at once: a run that cannot
finish writing leaves nothing of its own behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main

REPO = Path(__file__).resolve().parents[2]

SINGLE = 'arrivals = "poisson:rate=2"\nservice = "exponential:mean=0.1"\nitems = 50\n'
CHAIN = """arrivals = "poisson:rate=2"
items = 50
[[stages]]
name = "fetch"
service = "exponential:mean=0.1"
[[stages]]
name = {name}
service = "exponential:mean=0.05"
"""

# Each command's extra arguments (a small grid, a small search), for a one-stage
# scenario and for a chain whose second stage is "write".
COMMANDS = {
    "simulate": ([], []),
    "sweep": (
        ["--grid", "concurrency=1,2", "--replications", "2"],
        ["--grid", "write.concurrency=1,2", "--replications", "2"],
    ),
    "plan": (
        ["--search", "concurrency=1..2", "--slo", "latency_p95_s<=5", "--replications", "2"],
        ["--search", "write.concurrency=1..2", "--slo", "latency_p95_s<=5", "--replications", "2"],
    ),
}


def run(command, scenario, *extra, chain=False, cwd=None, monkeypatch=None, capsys=None):
    """``main()`` in this process; returns (status, stdout, stderr)."""
    args = [command, str(scenario), *COMMANDS[command][chain], *map(str, extra)]
    if cwd is not None:
        monkeypatch.chdir(cwd)
    try:
        status = main(args)
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line_error(status, out, err, *words):
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("pipeline: error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    assert out == ""


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a command starts its real work (the runs)."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the command started its runs before refusing its input")

    import pipeline.cli.sweep
    import pipeline.sim.analysis.planning.plan
    import pipeline.sim.running.simulate

    monkeypatch.setattr(pipeline.sim.running.simulate, "simulate", refuse)
    monkeypatch.setattr(pipeline.sim.analysis.planning.plan, "plan", refuse)
    monkeypatch.setattr(pipeline.cli.sweep, "_sweep_frame", refuse)


# -- files read ---------------------------------------------------------------------------------


def _nested(depth: int) -> bytes:
    return (SINGLE + "deep = " + "[" * depth + "]" * depth + "\n").encode()


HOSTILE_SCENARIOS = {
    # tomllib parses nesting recursively: 1,000 levels are a RecursionError inside it.
    "nested-1000": (_nested(1000), "nested too deeply"),
    "nested-100000": (_nested(100_000), "nested too deeply"),
    "not-utf8": (SINGLE.encode() + b'seed = "\xff\xfe"\n', "not a UTF-8 text file"),
    "not-toml": (b"arrivals = [unclosed\n", "not valid TOML"),
    "nul-bytes": (b"\0" * 64, "not valid TOML"),
    "empty": (b"", "missing --arrivals"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", HOSTILE_SCENARIOS)
def test_a_hostile_scenario_file_is_one_line_before_any_work(
    tmp_path, monkeypatch, capsys, no_work, command, case
):
    content, words = HOSTILE_SCENARIOS[case]
    scenario = tmp_path / "scenario.toml"
    scenario.write_bytes(content)
    status, out, err = run(command, scenario, monkeypatch=monkeypatch, capsys=capsys)
    one_line_error(status, out, err, words)
    if case != "empty":
        assert str(scenario) in err


def test_400_levels_of_nesting_are_read_and_the_key_refused(tmp_path, monkeypatch, capsys):
    scenario = tmp_path / "scenario.toml"
    scenario.write_bytes(_nested(400))
    status, out, err = run("simulate", scenario, monkeypatch=monkeypatch, capsys=capsys)
    one_line_error(status, out, err, "unknown key 'deep'")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_endless_or_huge_scenario_file_is_refused_unread(
    tmp_path, monkeypatch, capsys, no_work, command
):
    # /dev/zero never ends: it is read no further than the size limit.
    status, out, err = run(command, "/dev/zero", monkeypatch=monkeypatch, capsys=capsys)
    one_line_error(status, out, err, "/dev/zero", "more than 10,485,760 bytes")
    status, out, err = run(command, tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    one_line_error(status, out, err, f"cannot use {tmp_path}")


HOSTILE_CSV = {
    "not-utf8": (b"arrival_s,service_s\n0.1,\xff\n", "not a UTF-8 text file"),
    "huge-field": (
        b'arrival_s,service_s\n0.1,"' + b"1" * 200_000 + b'"\n',
        "not valid CSV (field larger than field limit",
    ),
    "huge-line": (b"arrival_s,service_s\n" + b"1" * (2 << 20) + b"\n", "longer than 1,048,576"),
    "nul-bytes": (b"arrival_s,service_s\n\0\0,\0\n", "must be a number"),
}


@pytest.mark.parametrize("case", HOSTILE_CSV)
@pytest.mark.parametrize("use", ["trace", "empirical", "counts"])
def test_a_hostile_csv_file_is_one_line_naming_it(
    tmp_path, monkeypatch, capsys, no_work, case, use
):
    content, words = HOSTILE_CSV[case]
    data = tmp_path / "data.csv"
    data.write_bytes(content)
    scenario = tmp_path / "scenario.toml"
    specs = {
        "trace": 'trace = "data.csv"\nitems = 5\n',
        "empirical": (
            'arrivals = "poisson:rate=2"\nitems = 5\n'
            'service = "empirical:file=data.csv,column=service_s"\n'
        ),
        "counts": (
            'service = "exponential:mean=0.1"\nitems = 5\n'
            'arrivals = "counts:file=data.csv,column=service_s,interval_s=60"\n'
        ),
    }
    scenario.write_text(specs[use])
    status, out, err = run("simulate", scenario, monkeypatch=monkeypatch, capsys=capsys)
    one_line_error(status, out, err, str(data), words)


def test_an_endless_trace_is_refused_at_its_first_long_line(capsys, no_work):
    # /dev/zero has no line end: without a bound, reading its "first line" fills the memory.
    try:
        status = main(["simulate", "--trace", "/dev/zero", "--json"])
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    one_line_error(status, captured.out, captured.err, "/dev/zero line 1: longer than")


# -- names that become file names ---------------------------------------------------------------

BAD_NAMES = {
    "slash": ('"write/v2"', "cannot hold '/'"),
    "dot-dot-slash": ('"../../escape"', "cannot hold '/'"),
    "backslash": ('"write\\\\v2"', "cannot hold '\\\\'"),
    "tab": ('"write\\tv2"', "cannot hold '\\t'"),
    "newline": ('"write\\nv2"', "cannot hold '\\n'"),
    "zero-width": ('"write\\u200bv2"', "cannot hold '\\u200b'"),
    "too-long": ('"' + "é" * 101 + '"', "at most 200 bytes in UTF-8"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", BAD_NAMES)
def test_a_stage_name_that_cannot_name_a_file_is_refused_at_parse_time(
    tmp_path, monkeypatch, capsys, no_work, command, case
):
    name, words = BAD_NAMES[case]
    scenario = tmp_path / "chain.toml"
    scenario.write_text(CHAIN.format(name=name), encoding="utf-8")
    out_dir = tmp_path / "out"
    status, out, err = run(
        command, scenario, "--out", out_dir, chain=True, monkeypatch=monkeypatch, capsys=capsys
    )
    one_line_error(status, out, err, f"{scenario}: stage 2", words)
    assert not out_dir.exists()
    assert sorted(os.listdir(tmp_path)) == ["chain.toml"]


def test_a_stage_name_with_spaces_and_unicode_names_its_files(tmp_path, monkeypatch, capsys):
    scenario = tmp_path / "chain.toml"
    scenario.write_text(CHAIN.format(name='"écrire v2.1"'), encoding="utf-8")
    status, _, err = run(
        "simulate", scenario, "--json", "--out", tmp_path / "out", chain=True,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert status == 0, err
    assert (tmp_path / "out" / "items-écrire v2.1.csv").is_file()


# -- --out --------------------------------------------------------------------------------------


def _unusable_out(tmp_path: Path, case: str) -> tuple[Path, str]:
    plain = tmp_path / "plain-file"
    plain.write_text("a file\n")
    if case == "a-file":
        return plain, "exists and is not a directory"
    return plain / "sub", "Not a directory"  # ENOTDIR: refused to root too


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", ["a-file", "under-a-file"])
@pytest.mark.parametrize("chain", [False, True], ids=["one-stage", "chain"])
def test_an_unusable_out_is_one_line_before_any_work(
    tmp_path, monkeypatch, capsys, no_work, command, case, chain
):
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(CHAIN.format(name='"write"') if chain else SINGLE)
    target, words = _unusable_out(tmp_path, case)
    status, out, err = run(
        command, scenario, "--out", target, chain=chain, monkeypatch=monkeypatch, capsys=capsys
    )
    one_line_error(status, out, err, str(target), words)
    assert (tmp_path / "plain-file").read_text() == "a file\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_out_in_the_scenario_file_is_checked_before_any_work(
    tmp_path, monkeypatch, capsys, no_work, command
):
    (tmp_path / "plain-file").write_text("a file\n")
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SINGLE + 'out = "plain-file"\n')
    status, out, err = run(command, scenario, monkeypatch=monkeypatch, capsys=capsys)
    one_line_error(status, out, err, "exists and is not a directory")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_run_whose_files_cannot_all_land_leaves_none_of_them(
    tmp_path, monkeypatch, capsys, command
):
    # A folder in --out already holds a directory where one of the files goes: found once
    # every file is written (in a hidden staging folder), before any is moved into place.
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SINGLE)
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("kept\n")
    last = {"simulate": "report.png", "sweep": "sweep.csv", "plan": "frontier.png"}[command]
    (target / last).mkdir()
    status, out, err = run(
        command, scenario, "--json", "--out", target, monkeypatch=monkeypatch, capsys=capsys
    )
    # The runs ran (a progress bar may be on stderr): the error is the one last line.
    assert status == 2 and out == "", err
    assert err.splitlines()[-1].startswith("pipeline: error: ")
    assert f"{last} is a directory there" in err.splitlines()[-1]
    assert "Traceback" not in err
    assert sorted(os.listdir(target)) == sorted([last, "old.txt"])
    assert (target / "old.txt").read_text() == "kept\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_failed_run_removes_the_out_folder_it_made(tmp_path, monkeypatch, capsys, command):
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SINGLE)
    target = tmp_path / "new" / "out"

    def fail(*_args, **_kwargs):
        raise MemoryError

    import pipeline.cli.sweep
    import pipeline.sim.analysis.planning.plan
    import pipeline.sim.running.simulate

    monkeypatch.setattr(pipeline.sim.running.simulate, "simulate", fail)
    monkeypatch.setattr(pipeline.sim.analysis.planning.plan, "plan", fail)
    monkeypatch.setattr(pipeline.cli.sweep, "_sweep_frame", fail)
    if command == "sweep":  # its metrics probe runs the real simulate first
        monkeypatch.setattr(pipeline.cli.sweep, "_check_metrics", lambda *_: None)
        monkeypatch.setattr(pipeline.cli.sweep, "_summary_metrics", lambda *_: [])
    status, out, err = run(
        command, scenario, "--out", target, monkeypatch=monkeypatch, capsys=capsys
    )
    one_line_error(status, out, err, "out of memory")
    assert not target.exists()


@contextlib.contextmanager
def _tiny_tmpfs(folder: Path):
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN (mount refused here)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_filesystem_that_fills_up_while_writing_leaves_nothing_half_written(tmp_path):
    # A real full disk, not a mock: 48 KiB holds the CSVs but not them and the figure.
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SINGLE.replace("items = 50", "items = 300"))
    with _tiny_tmpfs(tmp_path / "small") as folder:
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "simulate", str(scenario), "--json",
             "--out", str(folder)],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1"),
        )  # fmt: skip
        left = os.listdir(folder)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "No space left on device" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert left == []
