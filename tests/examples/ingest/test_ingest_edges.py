"""The ingestion example at its edges: empty runs, flags that do not run, SIGTERM at any
phase, a table of the wrong shape, a write cut mid-commit, and memory that does not grow
with the record count.

Every run is real: the partner API is a child process on 127.0.0.1 and the records land
in a real SQLite file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from pipeline.examples.ingest.chain import IngestConfig, ingest
from pipeline.examples.ingest.client import PartnerClient
from pipeline.examples.ingest.meter import QuantileSketch
from pipeline.examples.ingest.record import measure, record_run
from pipeline.examples.ingest.server import PartnerConfig, PartnerProcess
from pipeline.examples.ingest.sink import SinkError, SqliteSink
from pipeline.examples.ingest.twin import WhatIf, default_what_if, run_loop

REPO = Path(__file__).resolve().parents[3]

#: A quick partner: answers in about a millisecond, never fails, never poisons.
QUICK = {"latency_p50_s": 0.0005, "latency_p95_s": 0.001, "error_rate": 0.0, "poison_rate": 0.0}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1", **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.examples.ingest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full,
    )


# -- 12: every output handles an empty result, only what runs is checked --------------------


@pytest.mark.parametrize("twin", [False, True], ids=["no-twin", "twin"])
def test_the_table_prints_a_run_that_wrote_nothing(twin):
    flags = ["--no-twin"] if not twin else ["--replications", "2", "--repeats", "1"]
    process = cli("--records", "3", "--poison-rate", "0.999", *flags)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()
    assert b"Traceback" not in err
    text = out.decode()
    assert "3 records into sqlite" in text and "n/a" in text, text


def test_no_twin_checks_and_reports_no_what_if():
    process = cli("--records", "3", "--concurrency", "6000", "--no-twin", "--json")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert "what_if" not in result and "comparison" not in result
    assert result["accounting"]["balanced"]


def test_a_what_if_with_no_twin_is_one_line_and_exit_2():
    process = cli("--records", "3", "--what-if", "concurrency=3", "--no-twin")
    out, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1 and out == b""
    assert lines[0].startswith("pipeline: error: --what-if needs the twin")


def test_the_default_what_if_stays_within_the_allowed_workers():
    def with_workers(n):
        config = IngestConfig()
        return dataclasses.replace(config, write=dataclasses.replace(config.write, concurrency=n))

    assert default_what_if(with_workers(3)) == WhatIf(concurrency=6)
    assert default_what_if(with_workers(6000)) == WhatIf(concurrency=10_000)
    with pytest.raises(ValueError, match="what_if needs the twin"):
        asyncio.run(run_loop(3, WhatIf(concurrency=2), twin=False))


# -- 12: SIGTERM at any phase drains, cleans up and reports ---------------------------------


def _rows(folder: Path) -> int:
    for path in folder.glob("ingest-*/records.sqlite"):
        try:
            with sqlite3.connect(path, timeout=1) as db:
                return db.execute("SELECT count(*) FROM records").fetchone()[0]
        except sqlite3.OperationalError:
            return 0
    return -1  # no folder yet


# Each phase a process (1 s of CPU); "fitting" (the twin's) runs in make test only.
@pytest.mark.parametrize("phase", ["starting", pytest.param("fitting", marks=pytest.mark.slow)])
def test_sigterm_at_any_phase_reports_and_removes_the_temporary_folder(tmp_path, phase):
    # 3,000 replications keep the twin busy for far longer than the test waits; no poison
    # and no 503s, so every record is written and "fitting" is reached for sure.
    process = cli(
        "--records", "400", "--latency-ms", "1", "--poison-rate", "0", "--error-rate", "0",
        "--replications", "3000", "--json",
        env={"TMPDIR": str(tmp_path)},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    # "starting": the temporary folder exists (the partner starts, the sink opens);
    # "fitting": every record of the baseline is written, so the twin is being fitted.
    wanted = 0 if phase == "starting" else 400
    while _rows(tmp_path) < wanted and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1].decode()
        time.sleep(0.02)
    if phase == "fitting":
        time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["ended"] == "SIGTERM"
    assert result["accounting"]["balanced"]
    assert "comparison" not in result
    assert list(tmp_path.glob("ingest-*")) == [], "the temporary folder must be removed"


# -- 12: the records table is checked when the sink opens -----------------------------------


@pytest.mark.parametrize(
    ("table", "message"),
    [
        pytest.param(
            "CREATE TABLE records (x INTEGER, y TEXT)",
            "lacks column(s) id, name",
            id="other-columns",
        ),
        # Each case a process (0.6 s of CPU); these two run in make test only.
        pytest.param(
            "CREATE TABLE records (id INTEGER, name TEXT, amount_cents INTEGER, updated_at TEXT)",
            "ON CONFLICT clause does not match",
            id="no-primary-key",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "CREATE TABLE records (id INTEGER PRIMARY KEY, name TEXT, amount_cents INTEGER, "
            "updated_at TEXT, owner TEXT NOT NULL)",
            "NOT NULL constraint failed: records.owner",
            id="a-required-column-of-its-own",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_table_the_upsert_cannot_write_is_one_line_before_any_work(tmp_path, table, message):
    database = tmp_path / "theirs.sqlite"
    with sqlite3.connect(database) as db:
        db.execute(table)
    before = database.read_bytes()
    process = cli("--records", "10", "--no-twin", "--json", "--db", str(database))
    out, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1 and out == b"", err.decode()
    assert lines[0].startswith("pipeline: error: ") and message in lines[0]
    assert str(database) in lines[0]
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (0,)
    assert database.read_bytes() == before, "a refused database is left as it was"


def test_the_schema_check_leaves_a_good_table_as_it_was(tmp_path):
    database = tmp_path / "r.sqlite"

    async def main():
        async with SqliteSink(database) as sink:
            await sink.upsert({"id": 1, "name": "a", "amount_cents": 5, "updated_at": "t"})
        async with SqliteSink(database) as sink:  # checked again on a table with a row
            return await sink.count(), await sink.ids()

    assert asyncio.run(main()) == ((1, 1), {1})


def test_opening_a_bad_table_in_python_is_a_sink_error(tmp_path):
    database = tmp_path / "r.sqlite"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE records (x INTEGER)")

    async def main():
        async with SqliteSink(database):
            pass

    with pytest.raises(SinkError, match="lacks column"):
        asyncio.run(main())


# -- 13: a write the drain cut mid-commit is reported where it landed -----------------------


class _SlowDisk:
    """The sink's real aiosqlite connection, whose thread is busy when one commit comes.

    Before the commit numbered ``slow``, it sets ``stop`` (the run is asked to stop)
    and queues a ``stall_s`` sleep on the connection's own thread, so that commit waits
    behind it there: the drain's timeout falls while the commit is in the database's
    hands, as on a slow disk.
    """

    def __init__(self, db, *, slow: int, stall_s: float, stop: asyncio.Event) -> None:
        self._db, self._slow, self._stall_s, self._stop = db, slow, stall_s, stop
        self.commits = 0

    def __getattr__(self, name):
        return getattr(self._db, name)

    async def commit(self) -> None:
        self.commits += 1
        if self.commits == self._slow:
            self._stop.set()
            stall = asyncio.ensure_future(self._db.execute("SELECT stall(?)", (self._stall_s,)))
            await asyncio.sleep(0)  # the stall is on the thread's queue first
            try:
                await self._db.commit()
            finally:
                await asyncio.shield(stall)
            return
        await self._db.commit()


@pytest.mark.parametrize("workers", [1, 4])
def test_a_write_cut_mid_commit_is_reported_where_it_landed(tmp_path, workers):
    database = tmp_path / "r.sqlite"
    partner = PartnerConfig(records=400, page_size=100, **QUICK)
    base = IngestConfig(page_size=100)
    config = IngestConfig(
        page_size=100,
        deadline_s=None,
        fetch=dataclasses.replace(base.fetch, drain_timeout_s=0.05),
        write=dataclasses.replace(base.write, concurrency=workers),
    )

    async def main(url):
        stop = asyncio.Event()
        async with SqliteSink(database) as sink, PartnerClient(url, page_size=100) as client:
            await sink._db.create_function("stall", 1, time.sleep)
            sink._db = _SlowDisk(sink._db, slow=20, stall_s=0.4, stop=stop)
            run = await ingest(client, sink, config, stop_event=stop, every_s=0)
        async with SqliteSink(database) as sink:
            return run, await sink.ids()

    with PartnerProcess(partner) as server:
        run, landed = asyncio.run(main(server.url))
    write = run.report.stages["write"]
    assert write.drain_timed_out, "the drain's timeout must have cut the run"
    unfinished = {record["id"] for record in write.unfinished}
    assert unfinished, "records were left in the queue"
    assert len(landed) == run.written, "every row in the database is reported written"
    assert not landed & unfinished, "no record reported unfinished has landed"
    assert run.accounting()["balanced"]


# -- 14: the measured run keeps bounded state ------------------------------------------------


def test_the_meter_measures_what_the_whole_trace_measures(tmp_path):
    partner = PartnerConfig(
        records=600,
        page_size=50,
        error_rate=0.05,
        poison_rate=0.02,
        latency_p50_s=0.001,
        latency_p95_s=0.002,
    )

    async def main(url, workers):
        base = IngestConfig(page_size=50)
        config = dataclasses.replace(
            base, write=dataclasses.replace(base.write, concurrency=workers)
        )
        return await record_run(url, tmp_path / f"r{workers}.sqlite", config, max_events=None)

    with PartnerProcess(partner) as server:
        # 1 worker: the queue as it is; 4 workers on SQLite's one writer: rebuilt waits.
        for workers in (1, 4):
            recording = asyncio.run(main(server.url, workers))
            whole = measure(recording.trace)
            for key, value in recording.measured.items():
                assert value == pytest.approx(whole[key], rel=1e-9, abs=1e-12), (workers, key)
            assert recording.measured["records_written"] == recording.run.written > 0


def test_the_quantile_sketch_is_exact_then_within_its_relative_accuracy():
    rng = np.random.default_rng(17)
    small = rng.lognormal(-3, 1, 5000)
    exact = QuantileSketch()
    for value in small:
        exact.add(float(value))
    assert exact.quantile(0.95) == np.percentile(small, 95)
    for values in (
        rng.lognormal(-3, 1.5, 20_000),
        rng.exponential(2.0, 20_000),
        np.arange(20_000.0),
    ):
        sketch = QuantileSketch(exact_up_to=100, relative_accuracy=0.005)
        for value in values:
            sketch.add(float(value))
        ordered = np.sort(values)
        for q in (0.0, 0.5, 0.95, 0.99, 1.0):
            truth = ordered[math.floor(q * (len(values) - 1))]
            assert abs(sketch.quantile(q) - truth) <= 0.005 * truth + 1e-12, q
        assert len(sketch._buckets) < 5000
    assert math.isnan(QuantileSketch().quantile(0.95))


def _peak_bytes(url: str, database: Path, records: int, **options) -> int:
    config = IngestConfig(page_size=500)

    async def main():
        tracemalloc.start()
        try:
            # The live samples grow with the run's time, not its records (up to their own
            # cap), and a loaded machine runs longer: keep few, so that time is not measured.
            recording = await record_run(
                url, database, config, every_s=0.05, max_samples=16, **options
            )
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert recording.run.written == records
        return peak

    return asyncio.run(main())


@pytest.mark.slow  # 13,000 records through the partner under tracemalloc, twice: 12 s of a core
@pytest.mark.parametrize(
    "options", [{"trace": False}, {"max_events": 2_000}], ids=["measure-only", "bounded-trace"]
)
def test_a_runs_memory_does_not_grow_with_its_record_count(tmp_path, options):
    peaks = {}
    for records in (1_000, 12_000):
        partner = PartnerConfig(records=records, page_size=500, **QUICK)
        with PartnerProcess(partner) as server:
            peaks[records] = _peak_bytes(
                server.url, tmp_path / f"{records}.sqlite", records, **options
            )
    # Before: about 75 bytes a record kept, and a few hundred more while the trace was
    # frozen, so 11,000 more records cost megabytes. Now: what the sketch keeps exactly
    # (8 bytes a record below 65,536 records), at most 17 live samples and a little noise.
    assert peaks[12_000] - peaks[1_000] < 256 * 1024, peaks


def test_the_twin_predicts_one_replication_at_a_time_with_the_same_numbers(tmp_path):
    from pipeline.examples.ingest.twin import predict
    from pipeline.sim import calibrate, simulate

    partner = PartnerConfig(records=300, page_size=50, **QUICK)
    with PartnerProcess(partner) as server:
        recording = asyncio.run(record_run(server.url, tmp_path / "r.sqlite", IngestConfig()))
    scenario = calibrate(recording.trace, seed=3).scenario
    predicted = predict(scenario, replications=4)
    runs = simulate(scenario, replications=4).results
    assert predicted["throughput_per_s"] == pytest.approx(
        np.mean([r.summary["throughput_per_s"] for r in runs]), rel=1e-12
    )
    assert predicted["latency_p95_s"] == pytest.approx(
        np.mean([r.summary["latency_p95_s"] for r in runs]), rel=1e-12
    )
    assert predicted["queue_depth_max"] == pytest.approx(
        np.mean([r.stages["write"].summary["queue_depth_max"] for r in runs]), rel=1e-12
    )


def test_an_upsert_cancelled_twice_mid_commit_sees_its_write_through(tmp_path):
    async def main():
        stop = asyncio.Event()
        async with SqliteSink(tmp_path / "r.sqlite") as sink:
            await sink._db.create_function("stall", 1, time.sleep)
            sink._db = _SlowDisk(sink._db, slow=1, stall_s=0.3, stop=stop)
            record = {"id": 7, "name": "a", "amount_cents": 1, "updated_at": "t"}
            task = asyncio.ensure_future(sink.upsert(record))
            await stop.wait()  # the commit is in the database's hands
            for _ in range(2):
                task.cancel()
                await asyncio.sleep(0.05)
            await task  # the write's outcome: it landed, so the upsert returns
            landed = await sink.ids()
            # Waiting for the writer's lock is still cancellable: nothing was sent.
            async with sink._writer:
                waiting = asyncio.ensure_future(sink.upsert({**record, "id": 8}))
                await asyncio.sleep(0.01)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
            return landed, await sink.ids()

    assert asyncio.run(main()) == ({7}, {7})


def test_live_samples_of_a_long_ingestion_are_bounded_evenly_spaced_and_end_with_the_newest():
    from pipeline.examples.ingest.chain import keep_sample

    samples: list[int] = []
    state: dict = {}
    for t in range(100_000):
        keep_sample(samples, t, state, 64)
        assert len(samples) <= 65 and samples[-1] == t
    kept = samples[:-1]
    steps = {b - a for a, b in itertools.pairwise(kept)}
    assert kept[0] == 0 and len(steps) == 1, "evenly spaced from the start"
    assert kept[-1] >= 100_000 - 2 * steps.pop(), "they reach the end of the run"
    unbounded: list[int] = []
    none_state: dict = {}
    for t in range(1000):
        keep_sample(unbounded, t, none_state, None)
    assert unbounded == list(range(1000))
