"""pipeline.sim.workloads.telemetry.jsonlines: the one streamed, defensive JSON-lines reader."""

from __future__ import annotations

import gzip
import json

import pytest

from pipeline.sim.workloads.telemetry.jsonlines import json_objects

WHAT = "a test object"


def objects(path, **options):
    return list(json_objects(path, what=WHAT, max_line_chars=options.pop("cap", 1000), **options))


def test_lines_blank_lines_a_byte_order_mark_and_gzip(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n   \n{"b": 2}')
    assert objects(path) == [(1, {"a": 1}), (4, {"b": 2})]
    path.write_bytes(gzip.compress(b'{"a": 1}\n{"b": 2}\n'))
    assert objects(path) == [(1, {"a": 1}), (2, {"b": 2})]
    path.write_bytes(b"")
    assert objects(path) == []


def test_a_whole_document_only_when_asked_and_within_the_cap(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text(json.dumps({"a": [1, 2], "b": {"c": 3}}, indent=2))
    assert objects(path, whole_document=True) == [(1, {"a": [1, 2], "b": {"c": 3}})]
    with pytest.raises(ValueError, match=r"doc\.json line 1: not valid JSON \(Expecting property"):
        objects(path)
    with pytest.raises(
        ValueError,
        match=r"doc\.json line 1: not a complete JSON object on one line, and longer than 20 "
        r"bytes to read as one document; expected a test object$",
    ):
        objects(path, whole_document=True, cap=20)
    # A line that is wrong, not unfinished, is reported as that line.
    path.write_text('{"a": 1]\n{"b": 2}\n')
    with pytest.raises(ValueError, match=r"doc\.json line 1: not valid JSON \(Expecting ','"):
        objects(path, whole_document=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('"text"', r"line 1: expected a test object, got a string$"),
        ("3", r"line 1: expected a test object, got a number$"),
        ("null", r"line 1: expected a test object, got null$"),
        ("true", r"line 1: expected a test object, got a boolean$"),
        ('{"a": Infinity}', r"line 1: Infinity is not a JSON number; expected a test object$"),
        ('{"a": -1e400}', r"line 1: the number -1e400 is too large for a float; expected"),
        (
            '{"a": ' + "9" * 5000 + "}",
            r"line 1: the number 99999999999999999999\.\.\. has 5,000 digits, too many; expected",
        ),
    ],
)
def test_what_json_allows_but_a_telemetry_line_may_not_be(tmp_path, text, message):
    path = tmp_path / "a.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        objects(path, cap=10_000)


def test_an_unreadable_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        objects(tmp_path / "missing.json")
    with pytest.raises(IsADirectoryError):
        objects(tmp_path)
