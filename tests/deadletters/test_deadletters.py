"""Dead letters keep their payloads' audit fields on export and can be replayed."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import pytest

from pipeline import Backoff, Pipeline, PipelineConfig, export_csv, export_jsonl, load_jsonl, replay
from pipeline.deadletters.jsoncodec import decode_value
from pipeline.examples.approval import ApprovalTask, make_tasks
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


# -- export: lossless, or refused before anything is written -------------------------------


def test_a_refusal_part_way_leaves_the_target_untouched(tmp_path):
    path = tmp_path / "dead.jsonl"
    path.write_text("the previous export\n")
    letters = [letter("fine"), letter({"ok": 1}), letter({"a": [0, 1, 2, {1, 2}]})]
    for export in (export_jsonl, export_csv):
        with pytest.raises(TypeError, match=r'dead letter 2: payload\["a"\]\[3\] is a set'):
            export(letters, path)
        assert path.read_text() == "the previous export\n"
        buffer = io.StringIO()
        with pytest.raises(TypeError):
            export(iter(letters), buffer)
        assert buffer.getvalue() == ""


def test_unknown_objects_are_refused_naming_the_letter_path_and_type():
    class Session:
        pass

    with pytest.raises(
        TypeError, match=r"dead letter 1: payload\.amount_usd is an object .*Session"
    ):
        export_jsonl([letter(1), letter(Invoice("t", Session()))], io.StringIO())
    with pytest.raises(TypeError, match=r"dead letter 0 is a dict, not a DeadLetter"):
        export_jsonl([{"payload": 1}], io.StringIO())


def test_the_encode_hook_converts_what_has_no_json_form(tmp_path):
    path = tmp_path / "dead.jsonl"
    export_jsonl([letter({"ids": {3, 1, 2}})], path, encode=sorted)
    assert load_jsonl(path)[0]["payload"] == {"ids": [1, 2, 3]}
    csv_path = tmp_path / "dead.csv"
    export_csv([letter({"ids": {3, 1, 2}})], csv_path, encode=sorted)
    with csv_path.open(newline="", encoding="utf-8") as handle:
        [row] = csv.DictReader(handle)
    assert json.loads(row["payload"]) == {"ids": [1, 2, 3]}


def test_a_malformed_dead_letter_is_refused_at_export():
    no_errors = DeadLetter(payload=1, attempts=1, errors=(), reason="max_attempts")
    with pytest.raises(ValueError, match=r"dead letter 0: errors must be a non-empty list"):
        export_jsonl([no_errors], io.StringIO())
    bad_time = letter(1, at_s=math.nan)
    with pytest.raises(ValueError, match=r"dead letter 0: errors\[0\]\.at_s must be a finite"):
        export_csv([bad_time], io.StringIO())


def strict_json(text):
    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_jsonl_is_strict_json_one_letter_a_line_whatever_the_payload(tmp_path):
    payloads = [
        math.nan,
        {"inf": -math.inf, "blob": b"\xff\x00"},
        "line\u2028separator\u2029paragraph\x85next\r\nend",
        "lone \ud800 surrogate",
        {"$bytes": "a user's own dict, not a tag"},
        "x" * 100_000,
    ]
    path = tmp_path / "dead.jsonl"
    assert export_jsonl(map(letter, payloads), path) == len(payloads)
    text = path.read_bytes().decode("utf-8")  # valid UTF-8, surrogate or not
    lines = text.splitlines()  # the widest notion of a line break there is
    assert len(lines) == len(payloads)
    for line in lines:
        strict_json(line)
    back = [record["payload"] for record in load_jsonl(path)]
    assert math.isnan(back[0])
    assert back[1:] == payloads[1:]


def test_csv_payload_and_errors_columns_are_exact_json(tmp_path):
    weird = DeadLetter(
        payload={"blob": b"\x00\xff", "ratio": math.inf},
        attempts=2,
        errors=(
            AttemptError(1, "OSError", 'first, "quoted"\nsecond line', 0.25),
            AttemptError(2, "OSError", "bad \udcff byte", 1.25),
        ),
        reason="max_attempts",
    )
    path = tmp_path / "dead.csv"
    assert export_csv([weird], path) == 1
    with path.open(newline="", encoding="utf-8") as handle:
        [row] = csv.DictReader(handle)
    assert decode_value(strict_json(row["payload"])) == weird.payload
    errors = strict_json(row["errors"])
    assert [e["message"] for e in errors] == [e.message for e in weird.errors]
    assert row["last_error_message"] == "bad \\udcff byte"  # readable; the exact text is in errors
    assert float(row["first_failure_s"]) == 0.25 and float(row["last_failure_s"]) == 1.25


def test_approval_tasks_round_trip_exactly_through_a_file(tmp_path):
    tasks = make_tasks(20, seed=3)
    path = tmp_path / "dead.jsonl"
    export_jsonl(map(letter, tasks), path)

    def task_from_json(fields):
        return ApprovalTask(
            **{
                **fields,
                "trace_id": uuid.UUID(fields["trace_id"]),
                "amount_usd": Decimal(fields["amount_usd"]),
                "submitted_at": datetime.fromisoformat(fields["submitted_at"]),
            }
        )

    assert [task_from_json(r["payload"]) for r in load_jsonl(path)] == tasks


# -- load_jsonl: the whole file is checked, and every error names its line ------------------


def exported(*payloads):
    buffer = io.StringIO()
    export_jsonl(map(letter, payloads), buffer)
    return buffer.getvalue().splitlines()


def test_empty_blank_bom_crlf_and_a_last_line_without_newline_are_read(tmp_path):
    assert load_jsonl(io.StringIO("")) == []
    assert load_jsonl(io.BytesIO(b"\n  \n")) == []
    first, second = exported("a", b"b")
    path = tmp_path / "dead.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + f"{first}\r\n\r\n{second}".encode())
    assert [r["payload"] for r in load_jsonl(path)] == ["a", b"b"]


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        (lambda r: "not json", r"not valid JSON"),
        (lambda r: "[1, 2]", r"expected an object with the fields payload, attempts.*got an array"),
        (lambda r: '"payload"', r"expected an object .*, got a string"),
        (lambda r: {k: v for k, v in r.items() if k != "reason"}, r"missing field reason"),
        (lambda r: {**r, "note": 1}, r'unknown field "note"'),
        (lambda r: {**r, "attempts": 0}, r"attempts must be an int >= 1, got 0"),
        (lambda r: {**r, "attempts": "1"}, r'attempts must be an int >= 1, got "1"'),
        (lambda r: {**r, "attempts": True}, r"attempts must be an int >= 1, got True"),
        (lambda r: {**r, "attempts": 1.0}, r"attempts must be an int >= 1, got 1.0"),
        (lambda r: {**r, "reason": None}, r"reason must be a str, got None"),
        (lambda r: {**r, "errors": []}, r"errors must be a non-empty list"),
        (lambda r: {**r, "errors": {}}, r"errors must be a non-empty list"),
        (lambda r: {**r, "errors": [1]}, r"errors\[0\]: expected an object"),
        (lambda r: {**r, "errors": [{"attempt": 1}]}, r"missing field errors\[0\]\.type"),
        (lambda r: with_error(r, message=None), r"errors\[0\]\.message must be a str"),
        (lambda r: with_error(r, attempt=2), r"errors\[0\]\.attempt must be an int in 1\.\.1"),
        (lambda r: with_error(r, at_s="0.5"), r"errors\[0\]\.at_s must be a finite number"),
        (lambda r: {**r, "first_failure_s": 0.0}, r"first_failure_s must equal .* got 0\.0"),
        (lambda r: {**r, "payload": {"$bytes": "!"}}, r"payload is a .* tag without base64"),
    ],
)
def test_a_line_that_is_not_a_dead_letter_is_refused_by_number(replace, message):
    lines = exported("a", "b", "c")
    record = json.loads(lines[1])
    bad = replace(record)
    lines[1] = bad if isinstance(bad, str) else json.dumps(bad)
    with pytest.raises(ValueError, match=rf"^dead-letter line 2: {message}"):
        load_jsonl(io.StringIO("\n".join(lines)))


def with_error(record, **fields):
    return {**record, "errors": [{**record["errors"][0], **fields}]}


def test_errors_must_rise_in_attempt_and_time_and_end_at_the_last_attempt():
    [line] = exported("a")
    record = json.loads(line)
    two = [{**record["errors"][0], "attempt": n, "at_s": 1.0 + n} for n in (1, 2)]
    ok = {**record, "attempts": 2, "errors": two, "first_failure_s": 2.0, "last_failure_s": 3.0}
    assert load_jsonl(io.StringIO(json.dumps(ok)))[0]["attempts"] == 2
    for change, message in [
        ({"attempts": 3}, r"the last error's attempt must equal attempts \(3\), got 2"),
        ({"errors": two[::-1]}, r"errors\[1\]\.attempt must be an int in 3\.\.2"),
        ({"errors": [two[0], {**two[1], "at_s": 0.0}]}, r"errors\[1\]\.at_s .* not before"),
    ]:
        with pytest.raises(ValueError, match=rf"^dead-letter line 1: {message}"):
            load_jsonl(io.StringIO(json.dumps({**ok, **change})))


def test_bare_nan_is_read_for_a_payload_but_never_for_a_time():
    [line] = exported("a")
    old = line.replace('"payload": "a"', '"payload": NaN')
    assert math.isnan(load_jsonl(io.StringIO(old))[0]["payload"])
    bad = old.replace('"first_failure_s": 0.5', '"first_failure_s": NaN')
    with pytest.raises(ValueError, match=r"dead-letter line 1: first_failure_s must equal"):
        load_jsonl(io.StringIO(bad))


def test_duplicate_keys_are_refused_not_resolved_silently():
    [line] = exported("a")
    doubled = line.replace('"payload": "a"', '"payload": "a", "payload": "b"')
    with pytest.raises(
        ValueError, match=r'dead-letter line 1: an object has the key "payload" twice'
    ):
        load_jsonl(io.StringIO(doubled))


def test_a_line_nested_beyond_any_limit_is_a_value_error_with_its_number():
    lines = exported("a", "b")
    hostile = json.loads(lines[0])
    lines.insert(1, json.dumps(hostile).replace('"a"', "[" * 100_000 + "]" * 100_000))
    with pytest.raises(ValueError, match=r"^dead-letter line 2: nested too deeply to read"):
        load_jsonl(io.StringIO("\n".join(lines)))
    lines[1] = json.dumps(hostile).replace('"a"', "[" * 500 + "]" * 500)
    with pytest.raises(ValueError, match=r"^dead-letter line 2: payload\[0\]\[0\].* nested more"):
        load_jsonl(io.StringIO("\n".join(lines)))


def test_a_file_cut_part_way_through_a_line_says_so(tmp_path):
    path = tmp_path / "dead.jsonl"
    export_jsonl([letter("a"), letter("b")], path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ValueError, match=r"^dead-letter line 2: not valid JSON .*file cut"):
        load_jsonl(path)


def test_bad_utf8_in_a_middle_line_names_it_in_a_binary_file_and_roughly_in_a_text_one(tmp_path):
    path = tmp_path / "dead.jsonl"
    export_jsonl([letter("a"), letter("b"), letter("c")], path)
    data = path.read_bytes().replace(b'"b"', b'"\xff"')
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"^dead-letter line 2: not valid UTF-8 \(byte 14: "):
        load_jsonl(path)
    with pytest.raises(ValueError, match=r"^dead-letter line 2: not valid UTF-8"):
        load_jsonl(io.BytesIO(data))
    with path.open(encoding="utf-8") as handle, pytest.raises(ValueError) as caught:
        load_jsonl(handle)
    assert "not valid UTF-8" in str(caught.value)
    assert "soon after" in str(caught.value)


# -- replay: every letter is checked before the first handler call --------------------------


def test_replay_checks_every_letter_before_it_starts():
    calls = []

    async def handler(payload):
        calls.append(payload)

    good = load_jsonl(io.StringIO("\n".join(exported("a", "b"))))
    broken = {**good[1], "attempts": 0}
    with pytest.raises(ValueError, match=r"^letters\[2\]: attempts must be an int >= 1, got 0"):
        run_virtual(replay([*good, broken], handler))
    with pytest.raises(TypeError, match=r"^letters\[1\] is a str, not a DeadLetter or a dict"):
        run_virtual(replay([good[0], "b"], handler))
    empty = DeadLetter(payload="x", attempts=1, errors=(), reason="max_attempts")
    with pytest.raises(ValueError, match=r"^letters\[0\]: errors must be a non-empty list"):
        run_virtual(replay([empty], handler))
    assert calls == []


def test_replay_rebuilds_every_payload_before_it_starts():
    calls = []

    async def handler(payload):
        calls.append(payload)

    loaded = load_jsonl(io.StringIO("\n".join(exported({"n": 1}, {"m": 2}, {"n": 3}))))
    with pytest.raises(
        ValueError, match=r"^letters\[1\]: payload= failed: KeyError: 'n'"
    ) as caught:
        run_virtual(replay(loaded, handler, payload=lambda d: d["n"]))
    assert isinstance(caught.value.__cause__, KeyError)
    assert calls == []


def test_replay_accounts_for_every_letter():
    report = failing_run()
    loaded = load_jsonl(io.StringIO("\n".join(exported(*(n for n in range(10))))))

    async def handler(payload):
        await asyncio.sleep(1.0)
        if payload % 3 == 0:
            raise ValueError("still bad")

    letters = [*report.dead_letters, *loaded]
    again = run_virtual(
        replay(letters, handler, PipelineConfig(concurrency=2, max_attempts=1), payload=int)
    )
    assert again.offered == len(letters) == 13
    assert again.balanced
    assert again.completed + len(again.dead_letters) == 13
    assert sorted(d.payload for d in again.dead_letters if isinstance(d.payload, int)) == [
        0,
        3,
        6,
        9,
    ]


def test_replay_never_compares_hashes_or_prints_a_payload():
    class Touchy:
        def __eq__(self, other):
            raise AssertionError("compared")

        def __hash__(self):
            raise AssertionError("hashed")

        def __repr__(self):
            raise AssertionError("printed")

    touchy = Touchy()
    seen = []

    async def handler(payload):
        seen.append(payload)

    again = run_virtual(replay([letter(touchy), letter(touchy)], handler))
    assert again.completed == 2
    assert all(payload is touchy for payload in seen)
    with pytest.raises(TypeError, match=r"dead letter 0: payload is an object of type .*Touchy"):
        export_jsonl([letter(touchy)], io.StringIO())
