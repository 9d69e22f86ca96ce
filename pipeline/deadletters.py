"""Dead letters out and back in: export to JSONL or CSV, and replay.

Payloads keep their audit fields on export: dataclasses become objects,
``Decimal`` amounts become exact strings (never floats), UUIDs and datetimes
become their standard text forms.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import decimal
import enum
import json
import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from .config import PipelineConfig
from .engine import Handler, Pipeline
from .records import DeadLetter, RunReport

__all__ = ["dead_letter_to_dict", "export_csv", "export_jsonl", "load_jsonl", "replay"]

PathOrFile = str | os.PathLike[str] | IO[str]


def _plain(value: Any) -> Any:
    """A JSON-ready copy of ``value``; exact types become strings, not floats."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def dead_letter_to_dict(letter: DeadLetter) -> dict[str, Any]:
    """One dead letter as a flat, JSON-ready dict."""
    return {
        "payload": _plain(letter.payload),
        "attempts": letter.attempts,
        "reason": letter.reason,
        "first_failure_s": letter.first_failure_s,
        "last_failure_s": letter.last_failure_s,
        "errors": [dataclasses.asdict(error) for error in letter.errors],
    }


def _open_for_write(target: PathOrFile) -> tuple[IO[str], bool]:
    if isinstance(target, str | os.PathLike):
        return open(Path(target), "w", encoding="utf-8", newline=""), True
    return target, False


def export_jsonl(letters: Iterable[DeadLetter], target: PathOrFile) -> int:
    """Write one JSON object per dead letter; return how many were written."""
    handle, owned = _open_for_write(target)
    try:
        count = 0
        for letter in letters:
            handle.write(json.dumps(dead_letter_to_dict(letter), ensure_ascii=False) + "\n")
            count += 1
        return count
    finally:
        if owned:
            handle.close()


def export_csv(letters: Iterable[DeadLetter], target: PathOrFile) -> int:
    """Write a CSV row per dead letter (payload and errors as JSON text); return the count."""
    handle, owned = _open_for_write(target)
    try:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "payload",
                "attempts",
                "reason",
                "first_failure_s",
                "last_failure_s",
                "last_error_type",
                "last_error_message",
                "errors",
            ]
        )
        count = 0
        for letter in letters:
            row = dead_letter_to_dict(letter)
            last = letter.errors[-1]
            writer.writerow(
                [
                    json.dumps(row["payload"], ensure_ascii=False),
                    letter.attempts,
                    letter.reason,
                    letter.first_failure_s,
                    letter.last_failure_s,
                    last.type,
                    last.message,
                    json.dumps(row["errors"], ensure_ascii=False),
                ]
            )
            count += 1
        return count
    finally:
        if owned:
            handle.close()


def load_jsonl(source: PathOrFile) -> list[dict[str, Any]]:
    """Read dead letters written by :func:`export_jsonl` back as dicts.

    Raises:
        ValueError: a line is not valid JSON (the message names the line).
    """
    if isinstance(source, str | os.PathLike):
        with open(Path(source), encoding="utf-8") as handle:
            return load_jsonl(handle)
    records = []
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"dead-letter line {number} is not valid JSON: {error}") from None
    return records


async def replay(
    letters: Iterable[DeadLetter | dict[str, Any]],
    handler: Handler,
    config: PipelineConfig | None = None,
    *,
    payload: Callable[[Any], Any] | None = None,
    **pipeline_options: Any,
) -> RunReport:
    """Send dead letters' payloads through a fresh pipeline with its own settings.

    Args:
        letters: :class:`~pipeline.records.DeadLetter` records, or dicts from
            :func:`load_jsonl`.
        handler: the (fixed) handler to try again with.
        config: the replay pipeline's config (often lower concurrency).
        payload: rebuilds a payload from a loaded dict's ``"payload"`` value
            (e.g. ``lambda d: ApprovalTask(**d)``); identity if None.
        **pipeline_options: passed on to :class:`~pipeline.Pipeline`.

    Returns:
        The replay's own :class:`~pipeline.records.RunReport`.
    """
    rebuild = payload if payload is not None else (lambda value: value)

    def payloads() -> Iterable[Any]:
        for letter in letters:
            if isinstance(letter, DeadLetter):
                yield letter.payload
            else:
                yield rebuild(letter["payload"])

    return await Pipeline(handler, config, **pipeline_options).run(payloads())
