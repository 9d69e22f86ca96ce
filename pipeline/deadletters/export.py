"""Dead letters out and back in: export to JSONL or CSV, load, and replay -- losslessly.

Export writes each payload in the faithful encoding of :mod:`pipeline.deadletters.jsoncodec`:
``bytes`` and non-finite floats are tagged and come back as themselves, dataclasses
become objects, ``Decimal`` amounts exact strings (never floats), UUIDs and datetimes
their standard text. A payload that cannot be written so that it comes back exactly
(a set, a dict with a non-str key, an object of another type) is refused, naming the
dead letter, the path inside its payload and the type -- unless an ``encode=`` hook
converts it. Every letter is encoded before the target is opened, so a refusal
leaves no half-written file behind (and does not truncate an existing one).

:func:`load_jsonl` checks the whole file before it returns: every line must be a
dead-letter record with the fields and types that export writes, and every error
names the line. :func:`replay` checks every letter, and rebuilds every payload,
before the pipeline starts, so a bad record never leaves a replay half done.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ..config import PipelineConfig
from ..engine import Handler, Pipeline
from ..records import AttemptError, DeadLetter, RunReport, describe_error
from .jsoncodec import decode_value, encode_value, short_repr

__all__ = [
    "CSV_COLUMNS",
    "ERROR_FIELDS",
    "RECORD_FIELDS",
    "export_csv",
    "export_jsonl",
    "load_jsonl",
    "replay",
]

PathOrFile = str | os.PathLike[str] | IO[str]
Encoder = Callable[[Any], Any]

#: The fields of one exported dead letter, in the order they are written.
RECORD_FIELDS = ("payload", "attempts", "reason", "first_failure_s", "last_failure_s", "errors")
#: The fields of each entry of a record's ``errors``.
ERROR_FIELDS = ("attempt", "type", "message", "at_s")
#: The columns of :func:`export_csv`, in order.
CSV_COLUMNS = (
    "payload",
    "attempts",
    "reason",
    "first_failure_s",
    "last_failure_s",
    "last_error_type",
    "last_error_message",
    "errors",
)
# Raw in JSON strings, these end a line for str.splitlines() and for JavaScript.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def export_jsonl(
    letters: Iterable[DeadLetter], target: PathOrFile, *, encode: Encoder | None = None
) -> int:
    """Write one JSON object per dead letter, one per line, in UTF-8.

    Each line is one dead letter as a flat JSON object with the keys :data:`RECORD_FIELDS`
    (the payload in the faithful encoding, ``errors`` a list of objects with the keys
    :data:`ERROR_FIELDS`), as strict JSON (no ``NaN``; U+2028,
    U+2029 and U+0085 escaped, so every tool splits the lines alike). Every letter
    is encoded before ``target`` is opened or written.

    Args:
        letters: the dead letters, e.g. ``report.dead_letters``.
        target: a path, or a text file opened for writing (with ``encoding="utf-8"``).
        encode: the hook for payload values without a JSON form of their own, e.g.
            ``encode=sorted`` to write sets as sorted lists.

    Returns:
        How many dead letters were written.

    Raises:
        TypeError: an element is not a :class:`DeadLetter`, or a payload holds a
            value without a JSON form; the message names the letter's index, the
            path inside its payload and the type. Nothing has been written.
        ValueError: a payload cannot be written exactly (a cycle,
            nesting deeper than :data:`~pipeline.deadletters.jsoncodec.MAX_DEPTH`). Nothing
            has been written.

    Example::

        export_jsonl(report.dead_letters, "dead.jsonl", encode=sorted)  # sets as lists
    """
    lines = [_dumps(record) + "\n" for record in _records(letters, encode)]
    _write(target, lambda handle: handle.writelines(lines))
    return len(lines)


def export_csv(
    letters: Iterable[DeadLetter], target: PathOrFile, *, encode: Encoder | None = None
) -> int:
    """Write a CSV header and one row per dead letter, for spreadsheets and auditors.

    The columns are ``payload`` (the payload as JSON, encoded as in
    :func:`export_jsonl`), ``attempts``, ``reason``, ``first_failure_s``,
    ``last_failure_s``, ``last_error_type``, ``last_error_message`` (for reading;
    a message that is not valid Unicode is written with backslash escapes there) and
    ``errors`` (every error, as JSON, exact).

    Args:
        letters: the dead letters.
        target: a path, or a text file opened with ``newline=""``.
        encode: as for :func:`export_jsonl`.

    Returns:
        How many rows were written (the header not counted).

    Raises:
        TypeError, ValueError: as for :func:`export_jsonl`; nothing has been written.
    """
    rows = [
        [
            _dumps(record["payload"]),
            record["attempts"],
            _readable(record["reason"]),
            record["first_failure_s"],
            record["last_failure_s"],
            _readable(record["errors"][-1]["type"]),
            _readable(record["errors"][-1]["message"]),
            _dumps(record["errors"]),
        ]
        for record in _records(letters, encode)
    ]

    def write(handle: IO[str]) -> None:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(rows)

    _write(target, write)
    return len(rows)


def load_jsonl(source: PathOrFile | IO[bytes]) -> list[dict[str, Any]]:
    """Read dead letters written by :func:`export_jsonl` back, checking the whole file.

    Every non-blank line must be one JSON object with exactly the fields
    :data:`RECORD_FIELDS`: ``attempts`` an int >= 1, ``reason`` a str, ``errors`` a
    non-empty list of objects with exactly :data:`ERROR_FIELDS` (``attempt`` ints
    rising to ``attempts``, ``type`` and ``message`` strs, ``at_s`` finite numbers in
    order), ``first_failure_s`` and ``last_failure_s`` the first and last ``at_s``.
    Blank lines, a UTF-8 byte-order mark and a last line without a newline are
    accepted; duplicate keys are not. The bare ``NaN`` and ``Infinity`` that older
    exports wrote are read as floats.

    Args:
        source: a path, or a file opened for reading (binary, or text in UTF-8).

    Returns:
        One dict per dead letter, in file order, with the payload decoded
        (``bytes`` and non-finite floats restored; see :mod:`pipeline.deadletters.jsoncodec`).
        An empty file gives an empty list.

    Raises:
        ValueError: a line is not valid UTF-8 (e.g. a file cut inside a character),
            not JSON, or not a dead-letter record; the message names the line
            number and what is wrong, and nothing is returned.
    """
    if isinstance(source, str | os.PathLike):
        with open(Path(source), "rb") as handle:
            return _load_lines(handle)
    return _load_lines(source)


async def replay(
    letters: Iterable[DeadLetter | dict[str, Any]],
    handler: Handler,
    config: PipelineConfig | None = None,
    *,
    payload: Callable[[Any], Any] | None = None,
    **pipeline_options: Any,
) -> RunReport:
    """Send dead letters' payloads through a fresh pipeline with its own settings.

    Every letter is checked, and every payload rebuilt, before the pipeline starts:
    a bad letter raises before any handler call, never part-way through a replay.

    Args:
        letters: :class:`~pipeline.records.DeadLetter` records, or dicts from
            :func:`load_jsonl` (checked as :func:`load_jsonl` checks a line).
        handler: the (fixed) handler to try again with.
        config: the replay pipeline's config (often lower concurrency).
        payload: rebuilds a payload from a loaded dict's ``"payload"`` value
            (e.g. ``lambda d: ApprovalTask(**d)``); identity if None. Not applied
            to :class:`DeadLetter` records, whose payloads are the originals.
        **pipeline_options: passed on to :class:`~pipeline.Pipeline`.

    Returns:
        The replay's own :class:`~pipeline.records.RunReport`; ``offered`` is the
        number of letters, each completed, dead-lettered again, unfinished or shed.

    Raises:
        TypeError: a letter is neither a :class:`DeadLetter` nor a dict.
        ValueError: a letter is not a valid dead-letter record, or ``payload``
            raised for one (chained); the message names its index in ``letters``.

    Example::

        report = await replay(load_jsonl(path), fixed_handler,
                              PipelineConfig(concurrency=2),
                              payload=lambda d: ApprovalTask(**d))
    """
    payloads = _replay_payloads(letters, payload)
    return await Pipeline(handler, config, **pipeline_options).run(payloads)


# -- records -------------------------------------------------------------------------------


def _records(letters: Iterable[DeadLetter], encode: Encoder | None) -> Iterator[dict[str, Any]]:
    for index, letter in enumerate(letters):
        yield _to_record(letter, encode, f"dead letter {index}")


def _to_record(letter: Any, encode: Encoder | None, where: str) -> dict[str, Any]:
    if not isinstance(letter, DeadLetter):
        raise TypeError(f"{where} is a {type(letter).__name__}, not a DeadLetter")
    record = _describe(letter, where)
    record["payload"] = encode_value(letter.payload, encode=encode, name=f"{where}: payload")
    return record


def _describe(letter: DeadLetter, where: str) -> dict[str, Any]:
    """Every field of ``letter`` but the payload, checked, as plain JSON values."""
    errors = letter.errors
    if not isinstance(errors, tuple | list) or not all(
        isinstance(error, AttemptError) for error in errors
    ):
        raise ValueError(f"{where}: errors must be a tuple of AttemptError, got {_show(errors)}")
    record: dict[str, Any] = {
        "payload": None,
        "attempts": letter.attempts,
        "reason": letter.reason,
        "first_failure_s": errors[0].at_s if errors else None,
        "last_failure_s": errors[-1].at_s if errors else None,
        "errors": [{name: getattr(error, name) for name in ERROR_FIELDS} for error in errors],
    }
    problem = _record_problem(record)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")
    # The checks allow subclasses of str and int; write their plain values.
    return encode_value(record, name=where)


def _record_problem(record: Any) -> str | None:
    """What makes ``record`` no dead-letter record, or None when it is one."""
    if not isinstance(record, dict):
        return f"expected an object with the fields {_names(RECORD_FIELDS)}, got {_kind(record)}"
    problem = _fields_problem(record, RECORD_FIELDS, "")
    if problem is not None:
        return problem
    attempts, reason, errors = record["attempts"], record["reason"], record["errors"]
    if not _is_int(attempts) or attempts < 1:
        return f"attempts must be an int >= 1, got {_show(attempts)}"
    if not isinstance(reason, str):
        return f"reason must be a str, got {_show(reason)}"
    if not isinstance(errors, list) or not errors:
        return f"errors must be a non-empty list, got {_show(errors)}"
    previous_attempt, previous_at = 0, -math.inf
    for index, error in enumerate(errors):
        where = f"errors[{index}]"
        if not isinstance(error, dict):
            fields = _names(ERROR_FIELDS)
            return f"{where}: expected an object with the fields {fields}, got {_kind(error)}"
        problem = _fields_problem(error, ERROR_FIELDS, f"{where}.")
        if problem is not None:
            return problem
        attempt, at_s = error["attempt"], error["at_s"]
        if not _is_int(attempt) or not previous_attempt < attempt <= attempts:
            return (
                f"{where}.attempt must be an int in {previous_attempt + 1}..{attempts} "
                f"(rising, at most attempts), got {_show(attempt)}"
            )
        for name in ("type", "message"):
            if not isinstance(error[name], str):
                return f"{where}.{name} must be a str, got {_show(error[name])}"
        if not _is_time(at_s) or at_s < previous_at:
            return f"{where}.at_s must be a finite number, not before the last, got {_show(at_s)}"
        previous_attempt, previous_at = attempt, at_s
    if errors[-1]["attempt"] != attempts:
        last = errors[-1]["attempt"]
        return f"the last error's attempt must equal attempts ({attempts}), got {last}"
    for name, error in (("first_failure_s", errors[0]), ("last_failure_s", errors[-1])):
        value = record[name]
        if not _is_time(value) or value != error["at_s"]:
            return f"{name} must equal that error's at_s ({error['at_s']!r}), got {_show(value)}"
    return None


def _fields_problem(record: dict[Any, Any], fields: tuple[str, ...], prefix: str) -> str | None:
    for name in fields:
        if name not in record:
            return f"missing field {prefix}{name} (a record has {_names(fields)})"
    for name in record:
        if name not in fields:
            return f"unknown field {prefix}{_show(name)} (a record has {_names(fields)})"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _names(fields: tuple[str, ...]) -> str:
    return ", ".join(fields)


def _kind(value: Any) -> str:
    """``value``'s type in JSON's words where it has one."""
    json_names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    for python, name in json_names.items():
        if isinstance(value, python):
            return name
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"


def _show(value: Any) -> str:
    return short_repr(value, limit=60)


# -- writing -------------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    """Strict JSON text on one line, in UTF-8 where it can be, escapes where it cannot."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only an escape writes it exactly
        return json.dumps(value, allow_nan=False)
    return text.translate(_LINE_BREAKS)


def _readable(text: str) -> str:
    """``text`` as it can be written in UTF-8 (lone surrogates as backslash escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _write(target: PathOrFile, write: Callable[[IO[str]], None]) -> None:
    if isinstance(target, str | os.PathLike):
        with open(Path(target), "w", encoding="utf-8", newline="") as handle:
            write(handle)
    else:
        write(target)


# -- reading -------------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"an object has the key {_show(key)} twice")
            seen.add(key)
    return value


def _load_lines(handle: IO[str] | IO[bytes]) -> list[dict[str, Any]]:
    records = []
    lines = iter(handle)
    number = 0
    while True:
        number += 1
        where = f"dead-letter line {number}"
        try:
            line = next(lines)
        except StopIteration:
            return records
        except UnicodeDecodeError as error:
            # A text stream decodes ahead, so the bad byte may sit a few lines further on.
            raise ValueError(
                f"{where} or soon after: not valid UTF-8 ({error.reason}); "
                "read a path or a binary file for the exact line"
            ) from None
        newline = b"\n" if isinstance(line, bytes) else "\n"
        cut = "" if line.endswith(newline) else "; the last line has no newline: is the file cut?"
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{where}: not valid UTF-8 (byte {error.start + 1}: {error.reason}){cut}"
                ) from None
        if number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        if not line.strip(" \t\r\n"):
            continue
        try:
            record = json.loads(line, object_pairs_hook=_unique_keys)
        except _DuplicateKey as error:
            raise ValueError(f"{where}: {error}") from None
        except RecursionError:
            raise ValueError(f"{where}: nested too deeply to read") from None
        except ValueError as error:
            raise ValueError(f"{where}: not valid JSON ({error}){cut}") from None
        problem = _record_problem(record)
        if problem is not None:
            raise ValueError(f"{where}: {problem}")
        record["payload"] = decode_value(record["payload"], name=f"{where}: payload")
        records.append(record)


# -- replay --------------------------------------------------------------------------------


def _replay_payloads(
    letters: Iterable[DeadLetter | dict[str, Any]], rebuild: Callable[[Any], Any] | None
) -> list[Any]:
    payloads = []
    for index, letter in enumerate(letters):
        where = f"letters[{index}]"
        if isinstance(letter, DeadLetter):
            _describe(letter, where)
            payloads.append(letter.payload)
            continue
        if not isinstance(letter, dict):
            raise TypeError(f"{where} is a {type(letter).__name__}, not a DeadLetter or a dict")
        problem = _record_problem(letter)
        if problem is not None:
            raise ValueError(f"{where}: {problem}")
        if rebuild is None:
            payloads.append(letter["payload"])
            continue
        try:
            payloads.append(rebuild(letter["payload"]))
        except Exception as error:
            failure = f"{type(error).__name__}: {describe_error(error)}"
            raise ValueError(f"{where}: payload= failed: {failure}") from error
    return payloads
