"""Dead letters keep their payloads' audit fields on export and can be replayed."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from dataclasses import dataclass
from decimal import Decimal

from pipeline import Backoff, Pipeline, PipelineConfig, export_csv, export_jsonl, load_jsonl, replay
from pipeline.sim.vloop import run_virtual


@dataclass(frozen=True)
class Invoice:
    trace_id: str
    amount_usd: Decimal


def failing_run():
    async def handler(invoice):
        raise ConnectionError(f"ledger unavailable for {invoice.trace_id}")

    config = PipelineConfig(max_attempts=2, backoff=Backoff.constant(1.0))
    items = [Invoice(f"t-{n}", Decimal("10.10") * n) for n in range(3)]
    return run_virtual(Pipeline(handler, config).run(items))


def test_jsonl_round_trip_keeps_exact_amounts_and_every_error():
    report = failing_run()
    buffer = io.StringIO()
    assert export_jsonl(report.dead_letters, buffer) == 3
    buffer.seek(0)
    loaded = load_jsonl(buffer)
    assert [row["payload"]["amount_usd"] for row in loaded] == ["0.00", "10.10", "20.20"]
    assert loaded[1]["attempts"] == 2
    assert [e["type"] for e in loaded[1]["errors"]] == ["ConnectionError"] * 2
    assert loaded[1]["last_failure_s"] - loaded[1]["first_failure_s"] == 1.0


def test_csv_export_has_one_row_per_dead_letter(tmp_path):
    report = failing_run()
    path = tmp_path / "dead.csv"
    export_csv(report.dead_letters, path)
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3
    assert json.loads(rows[2]["payload"])["trace_id"] == "t-2"
    assert rows[0]["last_error_type"] == "ConnectionError"


def test_replay_sends_payloads_through_a_fixed_handler():
    report = failing_run()
    seen = []

    async def fixed(invoice):
        await asyncio.sleep(0.1)
        seen.append(invoice)

    again = run_virtual(replay(report.dead_letters, fixed, PipelineConfig(concurrency=1)))
    assert again.completed == 3
    assert seen == [letter.payload for letter in report.dead_letters]


def test_replay_from_loaded_records_rebuilds_payloads(tmp_path):
    path = tmp_path / "dead.jsonl"
    export_jsonl(failing_run().dead_letters, path)
    seen = []

    async def fixed(invoice):
        seen.append(invoice)

    rebuild = lambda d: Invoice(d["trace_id"], Decimal(d["amount_usd"]))  # noqa: E731
    run_virtual(replay(load_jsonl(path), fixed, payload=rebuild))
    assert seen[2] == Invoice("t-2", Decimal("20.20"))
