"""``record_fastest``: the fastest of a few real runs, against a real partner and database."""

from __future__ import annotations

import asyncio
import math
import sqlite3

import numpy as np
import pytest

from pipeline.examples.ingest import record
from pipeline.examples.ingest.record import record_fastest
from pipeline.examples.ingest.server import PartnerConfig, PartnerProcess

QUICK = {"latency_p50_s": 0.0005, "latency_p95_s": 0.001, "error_rate": 0.0, "poison_rate": 0.0}


@pytest.mark.parametrize("runs", [0, -1, True, 1.5, "3", None, math.nan])
def test_a_bad_run_count_is_refused_before_any_run(tmp_path, runs):
    # Nothing listens on port 9 of loopback: a run started would fail otherwise.
    with pytest.raises(ValueError, match=r"^runs must be a whole number >= 1, got "):
        asyncio.run(record_fastest("http://127.0.0.1:9", tmp_path / "r.sqlite", runs=runs))
    assert not (tmp_path / "r.sqlite").exists()


def test_it_makes_every_run_and_keeps_the_fastest(tmp_path, monkeypatch):
    made = []
    real = record.record_run

    async def counted(*args, **kwargs):
        made.append(await real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(record, "record_run", counted)
    database = tmp_path / "r.sqlite"
    with PartnerProcess(PartnerConfig(records=200, page_size=20, **QUICK)) as server:
        fastest = asyncio.run(record_fastest(server.url, database, runs=np.int64(3)))
    assert len(made) == 3
    rates = [each.measured["throughput_per_s"] for each in made]
    assert fastest is made[int(np.argmax(rates))]
    assert fastest.run.written == 200 and fastest.trace is not None
    with sqlite3.connect(database) as db:  # three runs, the same rows: upserts
        assert db.execute("SELECT count(*), count(DISTINCT id) FROM records").fetchone() == (
            200,
            200,
        )


def test_a_run_that_failed_propagates_and_no_later_run_starts(tmp_path, monkeypatch):
    made = []
    real = record.record_run

    async def second_fails(*args, **kwargs):
        made.append(None)
        if len(made) == 2:
            raise OSError("the disk is full")
        return await real(*args, **kwargs)

    monkeypatch.setattr(record, "record_run", second_fails)
    partner = PartnerProcess(PartnerConfig(records=40, page_size=20, **QUICK))
    with partner as server, pytest.raises(OSError, match="the disk is full"):
        asyncio.run(record_fastest(server.url, tmp_path / "r.sqlite", runs=3))
    assert len(made) == 2
