"""Dead letters keep their payloads' audit fields on export and can be replayed."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from dataclasses import dataclass
from decimal import Decimal

import pytest

from pipeline import Backoff, Pipeline, PipelineConfig, export_csv, export_jsonl, load_jsonl, replay
from pipeline.records import AttemptError, DeadLetter
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


# -- lossless, or refused: the four findings -----------------------------------------------


def letter(payload, *, attempts=1, at_s=0.5, reason="not_retryable"):
    errors = tuple(
        AttemptError(n, "ValueError", "bad", at_s + n - 1) for n in range(1, attempts + 1)
    )
    return DeadLetter(payload=payload, attempts=attempts, errors=errors, reason=reason)


def test_bytes_payloads_replay_as_the_same_bytes():
    raw = bytes(range(256))
    buffer = io.StringIO()
    export_jsonl([letter(raw), letter({"blob": b"\x00\xff", "n": 1})], buffer)
    buffer.seek(0)
    seen = []

    async def handler(payload):
        seen.append(payload)

    run_virtual(replay(load_jsonl(buffer), handler))
    assert seen == [raw, {"blob": b"\x00\xff", "n": 1}]
    assert type(seen[0]) is bytes


def test_dict_keys_that_collide_as_strings_are_refused_at_export():
    buffer = io.StringIO()
    with pytest.raises(TypeError, match=r"dead letter 0: payload has a key 1 \(int\)") as caught:
        export_jsonl([letter({1: "int key", "1": "str key"})], buffer)
    assert "encode=" in str(caught.value)
    assert buffer.getvalue() == ""


def test_a_json_line_that_is_not_a_dead_letter_is_refused_with_its_line_number():
    good = io.StringIO()
    export_jsonl([letter("a"), letter("b")], good)
    lines = good.getvalue().splitlines()
    bad = io.StringIO("\n".join([lines[0], '{"payload": "c"}', lines[1]]) + "\n")
    with pytest.raises(ValueError, match=r"dead-letter line 2: .*attempts"):
        load_jsonl(bad)


def test_a_file_cut_inside_a_utf8_character_names_the_line(tmp_path):
    path = tmp_path / "dead.jsonl"
    export_jsonl([letter("plain"), letter("naïve €")], path)
    data = path.read_bytes()
    path.write_bytes(data[: data.index("€".encode()) + 1])
    with pytest.raises(ValueError, match=r"dead-letter line 2: not valid UTF-8"):
        load_jsonl(path)
