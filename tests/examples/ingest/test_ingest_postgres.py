"""The ingestion example's Postgres sink against a real PostgreSQL server.

A scratch cluster is made for this module in a temporary folder (``initdb``),
started on a free loopback port with its socket in that folder (``pg_ctl
start``), and stopped and removed afterwards. The server refuses to run as
root, so as root the cluster belongs to the ``postgres`` user and every
server program runs through ``runuser -u postgres``. It listens on
127.0.0.1 only and asks a password (scram-sha-256) that is made for the run.

Needs Debian's ``postgresql`` (server programs under
``/usr/lib/postgresql/N/bin``): ``python -m tests.services_setup``, which
``make test`` runs, installs it when ``CI=true``. Without it the tests are
skipped with a hint, or fail under ``CI=true``. ``PIPELINE_TEST_POSTGRES_DSN``
(a scratch database's ``postgresql://`` DSN) uses that server instead; its
``records`` table is emptied.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.examples.ingest.chain import IngestConfig
from pipeline.examples.ingest.record import record_run
from pipeline.examples.ingest.server import PartnerConfig, PartnerProcess, record
from pipeline.examples.ingest.sink import PostgresSink
from pipeline.sim import calibrate
from tests.services_setup import SERVICES, postgres_bin

# A real PostgreSQL server: not in make test-fast.
pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[3]
SERVER_USER = "postgres"
"""The account the server runs as when the tests run as root (Debian's package makes it)."""


def poisoned(records: int, config: PartnerConfig) -> int:
    return sum(not isinstance(record(i, config)["amount_cents"], int) for i in range(records))


def _missing(problem: str) -> None:
    """Skip (fail under ``CI=true``, where the set-up must have installed it) for ``problem``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"the Postgres tests need a server under CI=true; {problem}", pytrace=False)
    pytest.skip(
        f"{problem}; to run the Postgres sink's tests: {SERVICES['postgresql'].hint} "
        "(or set PIPELINE_TEST_POSTGRES_DSN=postgresql://... to a scratch database)"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Cluster:
    """A PostgreSQL cluster in ``folder``, its programs run as ``user`` (None: as we are)."""

    def __init__(self, bin_dir: str, folder: Path, user: str | None) -> None:
        self.bin_dir = bin_dir
        self.folder = folder
        self.data = folder / "data"
        self.user = user
        self.password = secrets.token_hex(16)
        self.port = 0

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [os.path.join(self.bin_dir, tool), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(
            command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
        )

    def create(self) -> None:
        secret = self.folder / "password"
        secret.write_text(self.password + "\n")
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.folder, secret):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        made = self.run(
            "initdb",
            "-D", str(self.data),
            "-U", "pipeline",
            "--auth=scram-sha-256",
            f"--pwfile={secret}",
            "-E", "UTF8",
            "--no-sync",  # a scratch cluster: nothing to keep through a power cut
        )  # fmt: skip
        secret.unlink()
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed: {made.stderr.strip() or made.stdout.strip()}")

    def start(self) -> None:
        # A free port can be taken between the probe and the start: try a few.
        for _ in range(5):
            self.port = _free_port()
            options = f"-k {self.folder} -h 127.0.0.1 -p {self.port} -c fsync=off"
            started = self.run(
                "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"),
                "-o", options, "-w", "-t", "60", "start",
            )  # fmt: skip
            if started.returncode == 0:
                return
        log = self.folder / "server.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {' '.join(tail)}")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    @property
    def dsn(self) -> str:
        return f"postgresql://pipeline:{self.password}@127.0.0.1:{self.port}/postgres"


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    """A DSN of a running scratch PostgreSQL: the override's, or a cluster made for the module."""
    override = os.environ.get("PIPELINE_TEST_POSTGRES_DSN")
    if override:
        yield override
        return
    bin_dir = postgres_bin()
    if bin_dir is None:
        _missing("no PostgreSQL server programs (initdb, pg_ctl) under /usr/lib/postgresql")
    user = None
    if os.geteuid() == 0:
        # The server refuses root: run it as the account Debian's package made.
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            _missing(f"running as root and there is no {SERVER_USER!r} user to run the server")
        if shutil.which("runuser") is None:
            _missing("running as root and runuser is missing (util-linux)")
        user = SERVER_USER
    # Not pytest's tmp_path: its folders are private to us, and the server's user must enter.
    folder = Path(tempfile.mkdtemp(prefix="pipeline-pg-"))
    cluster = _Cluster(bin_dir, folder, user)
    try:
        cluster.create()
        cluster.start()
        try:
            yield cluster.dsn
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _emptied(dsn: str) -> None:
    async with PostgresSink(dsn, pool_size=1) as sink:
        await sink.clear()


async def _count(dsn: str) -> tuple[int, int]:
    async with PostgresSink(dsn, pool_size=1) as sink:
        return await sink.count()


def _config(concurrency: int) -> IngestConfig:
    config = IngestConfig()
    return IngestConfig(write=config.write.__class__(concurrency=concurrency))


def test_upserts_are_idempotent_through_the_pool(postgres_dsn):
    # Two runs of the same listing, and a record written twice by hand: one row per record.
    partner = PartnerConfig(records=200, latency_p50_s=0.002, latency_p95_s=0.004)

    async def run():
        await _emptied(postgres_dsn)
        with PartnerProcess(partner) as server:
            first = await record_run(server.url, postgres_dsn, _config(4), pool_size=4)
            await record_run(server.url, postgres_dsn, _config(4), pool_size=4)
        async with PostgresSink(postgres_dsn, pool_size=2) as sink:
            row = dict(id=0, name="changed", amount_cents=7, updated_at="now")
            await asyncio.gather(sink.upsert(row), sink.upsert(row))
            return first, await sink.count()

    first, (rows, distinct) = asyncio.run(run())
    good = 200 - poisoned(200, partner)
    assert first.run.report.stages["write"].completed == good
    assert rows == distinct == good


def test_pool_size_is_the_write_stage_concurrency_the_twin_models(postgres_dsn):
    # 8 write workers share 3 connections: the database writes 3 at once, and so does the twin.
    partner = PartnerConfig(records=300, latency_p50_s=0.002, latency_p95_s=0.004)

    async def run():
        await _emptied(postgres_dsn)
        with PartnerProcess(partner) as server:
            return await record_run(server.url, postgres_dsn, _config(8), pool_size=3)

    recording = asyncio.run(run())
    assert recording.writers == 3
    assert recording.trace.stages["write"].capacity == 3
    fit = calibrate(recording.trace)
    assert fit.stages["write"].servers == 3
    write = next(spec for spec in fit.scenario.stages if spec.name == "write")
    assert write.config.concurrency == 3


def cli(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.examples.ingest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def test_sigterm_drains_and_a_rerun_completes_without_duplicates(postgres_dsn):
    asyncio.run(_emptied(postgres_dsn))
    args = ("--records", "3000", "--no-twin", "--json", "--db", postgres_dsn)
    process = cli(*args)
    try:
        # SIGTERM once some records have landed, so that the run is cut half way.
        deadline = time.monotonic() + 60
        written = 0
        while written < 100 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            with contextlib.suppress(Exception):  # the table may not exist yet
                written = asyncio.run(_count(postgres_dsn))[0]
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err.decode()
    password = urllib.parse.urlsplit(postgres_dsn).password
    if password:
        assert password not in (out + err).decode(), "the password is never printed"
    result = json.loads(out)
    assert result["ended"] == "SIGTERM"
    accounts = result["accounting"]
    assert accounts["balanced"] and accounts["not_fetched"] > 0
    assert accounts["unfinished"] == accounts["stranded"] == 0, "the drain finished its pages"

    rerun = cli(*args)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err.decode()
    assert json.loads(out)["ended"] == "done"
    good = 3000 - poisoned(3000, PartnerConfig(records=3000))
    assert asyncio.run(_count(postgres_dsn)) == (good, good)
