"""The ingestion and its twin, end to end on loopback: record, calibrate, predict, verify.

Real sockets, a real partner process and a real SQLite file, so runs take
about a second. Timings are never compared with fixed thresholds: the twin's
prediction is compared with what was measured on this machine, minutes
apart, within the prediction interval widened by a stated tolerance.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.examples.ingest import twin as twin_module
from pipeline.examples.ingest.chain import IngestConfig
from pipeline.examples.ingest.record import record_run
from pipeline.examples.ingest.server import PartnerConfig, PartnerProcess, record
from pipeline.examples.ingest.twin import WhatIf, run_loop

TOLERANCE = 0.25
"""Share of the prediction allowed beyond its interval: what no twin models (a loaded
2-core machine, connection set-up, the GIL). Service times are dominated by the
partner's waits (20 ms median), not by CPU, so this holds under load."""

REPO = Path(__file__).resolve().parents[3]


def poisoned(records: int, config: PartnerConfig) -> int:
    return sum(not isinstance(record(i, config)["amount_cents"], int) for i in range(records))


def cli(*args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.examples.ingest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        **kwargs,
    )


@pytest.mark.measures  # a prediction checked against a later real run
def test_the_whole_loop_predicts_what_it_then_measures():
    result = asyncio.run(
        run_loop(400, WhatIf(concurrency=2), replications=10, repeats=1, tolerance=TOLERANCE)
    )
    assert result["ended"] == "done"
    for side in ("measured", "predicted"):
        for key in ("throughput_per_s", "latency_p95_s", "queue_depth_max"):
            assert result[side][key] > 0
    assert result["calibration"]["stages"]["write"]["servers"] == 1  # SQLite: one writer
    assert result["calibration"]["stages"]["fetch"]["fan_out"] == 20
    for comparison in (result["comparison"], result["baseline"]["comparison"]):
        for key in ("throughput_per_s", "latency_p95_s"):
            row = comparison[key]
            assert row["agrees"], f"{key}: measured {row['measured']}, predicted {row['predicted']}"
    accounts = [result["accounting"], *result["accounting_what_if"]]
    assert all(a["balanced"] and a["total"] == 400 for a in accounts)


@pytest.mark.measures  # a prediction checked against a later real run
def test_halving_the_partner_latency_is_predicted_for_the_faster_partner():
    result = asyncio.run(
        run_loop(400, WhatIf(api_latency=0.5), replications=10, tolerance=TOLERANCE)
    )
    row = result["comparison"]["throughput_per_s"]
    assert row["agrees"], row
    # The twin predicts a faster run than the baseline it was fitted to, and it was.
    assert row["predicted"] > result["baseline"]["predicted"]["throughput_per_s"]
    assert row["measured"] > result["baseline"]["measured"]["throughput_per_s"]


def test_upserts_are_idempotent_a_rerun_leaves_one_row_per_record(tmp_path):
    partner = PartnerConfig(records=300, latency_p50_s=0.002, latency_p95_s=0.004)
    database = tmp_path / "records.sqlite"

    async def twice():
        with PartnerProcess(partner) as server:
            first = await record_run(server.url, database)
            second = await record_run(server.url, database)
        return first, second

    first, second = asyncio.run(twice())
    bad = poisoned(300, partner)
    for run in (first, second):
        assert run.run.accounting()["balanced"]
        assert run.run.written == 300 - bad
        assert len(run.run.report.stages["write"].dead_letters) == bad
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*), count(DISTINCT id) FROM records").fetchone() == (
            300 - bad,
            300 - bad,
        )


def test_a_partner_that_dies_mid_run_leaves_every_record_accounted_for(tmp_path):
    partner = PartnerConfig(
        records=400, latency_p50_s=0.002, latency_p95_s=0.004, error_rate=0.0, die_after_requests=5
    )
    config = IngestConfig(
        fetch=IngestConfig().fetch.__class__(
            concurrency=1, queue_maxsize=1, max_attempts=2, drain_timeout_s=10.0
        )
    )

    async def run():
        with PartnerProcess(partner) as server:
            return await record_run(server.url, tmp_path / "r.sqlite", config)

    recording = asyncio.run(run())
    accounts = recording.run.accounting()
    # The 5th request (page 4) kills the partner before it answers: pages 0-3 made it.
    assert recording.run.ended == "page 4 was dead-lettered"
    assert accounts["balanced"] and accounts["not_fetched"] == 320
    assert accounts["written"] + accounts["dead_lettered"] == 80
    letter = recording.run.report.stages["fetch"].dead_letters[0]
    assert letter.errors[-1].type == "TransientHTTPError"


def test_the_request_loop_is_bounded_in_time_and_in_count(tmp_path):
    partner = PartnerConfig(records=2000, latency_p50_s=0.02, latency_p95_s=0.03)

    async def run(config):
        with PartnerProcess(partner) as server:
            return await record_run(server.url, tmp_path / "r.sqlite", config)

    timed = asyncio.run(run(IngestConfig(deadline_s=0.3)))
    assert timed.run.ended == "deadline 0.3 s" and timed.run.accounting()["balanced"]
    assert 0 < timed.run.fetched < 2000
    counted = asyncio.run(run(IngestConfig(max_pages=3)))
    assert counted.run.ended == "stopped at max_pages=3"
    assert counted.run.fetched == 60 and counted.run.accounting()["not_fetched"] == 1940


def test_an_error_mid_run_stops_the_partner_and_leaves_no_socket(monkeypatch):
    started: list[PartnerProcess] = []

    class Watched(PartnerProcess):
        def start(self):
            started.append(self)
            return super().start()

    monkeypatch.setattr(twin_module, "PartnerProcess", Watched)

    def explode(samples):
        if len(samples) >= 2:
            raise RuntimeError("injected failure")

    with pytest.raises(RuntimeError, match="injected failure"):
        asyncio.run(run_loop(2000, WhatIf(concurrency=2), on_sample=explode))
    assert started, "the partner should have started"
    for server in started:
        assert server.process.poll() is not None, "the partner process must have exited"
        port = int(server.url.rsplit(":", 1)[1])
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, "nothing may listen any more"


@pytest.mark.slow  # two ingestions as processes: 3 s
def test_sigterm_drains_and_a_rerun_completes_without_duplicates(tmp_path):
    database = tmp_path / "records.sqlite"
    args = ("--records", "3000", "--no-twin", "--json", "--db", str(database))
    process = cli(*args)
    deadline = time.monotonic() + 60
    written = 0
    while written < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
        if database.exists():
            try:
                with sqlite3.connect(database, timeout=1) as db:
                    written = db.execute("SELECT count(*) FROM records").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["ended"] == "SIGTERM"
    accounts = result["accounting"]
    assert accounts["balanced"] and accounts["not_fetched"] > 0
    assert accounts["unfinished"] == accounts["stranded"] == 0, "the drain finished its pages"

    rerun = cli(*args)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err.decode()
    assert json.loads(out)["ended"] == "done"
    bad = poisoned(3000, PartnerConfig(records=3000))
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*), count(DISTINCT id) FROM records").fetchone() == (
            3000 - bad,
            3000 - bad,
        )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--records", "0"), "--records must be from 1"),
        (("--records", "10", "--what-if", "workers=3"), "--what-if must be concurrency=N"),
        # Each case a process (0.6 s of CPU); these four run in make test only.
        *(
            pytest.param(("--records", "10", *flags), message, marks=pytest.mark.slow)
            for flags, message in [
                (("--what-if", "concurrency=x"), "concurrency must be an integer"),
                (("--what-if", "api_latency=0"), "api_latency must be a factor"),
                (("--error-rate", "nan"), "--error-rate must be in [0, 1)"),
                (("--replications", "1"), "--replications must be >= 2"),
            ]
        ),
        (("--records", "10", "--db", "/nonexistent/folder/r.sqlite"), "folder does not exist"),
        (
            ("--records", "10", "--db", "postgresql://who:secret@127.0.0.1:1/none"),
            "cannot connect to Postgres",
        ),
    ],
)
def test_bad_flags_and_targets_are_one_line_and_exit_2(args, message):
    process = cli(*args, "--no-twin")
    out, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1, err.decode()
    assert lines[0].startswith("pipeline: error: ") and message in lines[0]
    assert "secret" not in lines[0], "a password must never be printed"
    assert out == b""


@contextlib.contextmanager
def _tmpfs(folder: Path, *options: str):
    """A tiny tmpfs mounted at ``folder`` for the block, or a skip where mounting is not allowed."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(("size=16k", *options)), "tmpfs", str(folder)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN (mount refused here)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _under_a_file(tmp_path: Path) -> contextlib.AbstractContextManager[Path]:
    (tmp_path / "plain-file").write_text("not a folder\n")
    return contextlib.nullcontext(tmp_path / "plain-file")


def _locked(tmp_path: Path) -> contextlib.AbstractContextManager[Path]:
    if os.geteuid() == 0:
        pytest.skip("root writes into a 0o500 folder; the other cases refuse root too")
    (tmp_path / "locked").mkdir(mode=0o500)
    return contextlib.nullcontext(tmp_path / "locked")


def _read_only(tmp_path: Path) -> contextlib.AbstractContextManager[Path]:
    return _tmpfs(tmp_path / "read-only", "ro")


@contextlib.contextmanager
def _full(tmp_path: Path):
    with _tmpfs(tmp_path / "full") as folder:
        filler = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill it: the database's first write then gets ENOSPC
            with contextlib.suppress(OSError):
                while True:
                    os.write(filler, b"\0" * 4096)
        finally:
            os.close(filler)
        yield folder


@pytest.mark.parametrize(
    ("refusal", "message"),
    [
        (_under_a_file, b"folder is a file, not a folder"),  # ENOTDIR, even for root
        (_locked, b"folder is not writable"),
        (_read_only, b"folder is not writable"),  # EROFS, even for root
        (_full, b"database or disk is full"),  # ENOSPC, even for root
    ],
    ids=["under-a-file", "locked", "read-only", "full"],
)
def test_an_unwritable_folder_is_one_line(tmp_path, refusal, message):
    with refusal(tmp_path) as folder:
        process = cli("--records", "10", "--no-twin", "--db", str(folder / "r.sqlite"))
        out, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1, err.decode()
    # A full disk may first show when the sink tries its one rolled-back write at open.
    opening = ("pipeline: error: cannot open database", "pipeline: error: cannot write records")
    assert lines[0].startswith(opening) and message in err
    assert out == b""


# The Postgres sink's tests, against a real server, are in test_ingest_postgres.py.
