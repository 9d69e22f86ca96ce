"""Reading a JSON-lines telemetry file defensively: one object per line, streamed.

The one reader behind the k6 (``--out json``) and OTLP/JSON (the collector's
file exporter) readers. It streams: one line at a time, each refused before
it is read whole when longer than the format allows, so a file of gigabytes
(or ``/dev/zero``) costs one line's memory. A gzip-compressed file (k6 writes
one for ``--out json=file.gz``) is read through :mod:`gzip`, still streamed.

Whatever a hostile file does becomes one ``ValueError`` line naming the file
and the line: bytes that are not UTF-8, a truncated gzip stream, broken JSON,
``NaN``/``Infinity`` (not JSON, though Python's parser takes them), a number
too large for a float, nesting deep enough to exhaust the recursion limit, a
line that is an array or a number rather than an object, or running out of
memory. Blank lines are skipped.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["json_objects", "utf8_text"]

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value


def _short_int(text: str) -> int:
    # Telemetry integers fit in 64 bits (20 digits); a longer one is refused before the
    # quadratic conversion of a 4,000-digit string.
    if len(text.lstrip("-")) > 40:
        raise ValueError(f"the number {text[:20]}... has {len(text):,} digits, too many")
    return int(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


_DECODER = json.JSONDecoder(
    parse_float=_finite_float, parse_int=_short_int, parse_constant=_no_constant
)


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    return "a number"


def _open(name: str, what: str) -> IO[bytes]:
    with open(name, "rb") as f:
        magic = f.read(4)
    if magic.startswith(_ZSTD_MAGIC):
        raise ValueError(
            f"{name}: compressed with zstd; decompress it first (zstd -d), {what} is read as "
            "JSON text or gzip"
        )
    if magic.startswith(_GZIP_MAGIC):
        return gzip.open(name, "rb")
    return open(name, "rb")


def utf8_text(data: bytes, where: str, what: str, *, part: str = "") -> str:
    """``data`` decoded as UTF-8, a leading byte-order mark (Windows editors write one) dropped.

    Every JSON reader of telemetry decodes through this, so a file one reader
    takes is not refused by another for its first three bytes.

    Raises:
        ValueError: not UTF-8 (one line naming ``where``, the byte counted within
            ``part`` (``" of the line"``; the file when empty), and ``what`` was expected).
    """
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start + 1}{part}); expected {what}"
        ) from None


def _text(data: bytes, where: str, what: str) -> str:
    # A byte-order mark is one only at the file's start; later lines keep every character.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return utf8_text(data, where, what, part=" of the line")  # raises, in the shared words


def _parse(text: str, where: str, what: str) -> dict[str, Any]:
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} " if exc.lineno > 1 else ""
        raise ValueError(
            f"{where}: not valid JSON ({exc.msg} at {at}column {exc.colno}); expected {what}"
        ) from None
    except RecursionError:
        raise ValueError(
            f"{where}: nested too deeply to read (hundreds of arrays or objects inside one "
            f"another); expected {what}"
        ) from None
    except ValueError as exc:
        # From parse_float, parse_int and parse_constant.
        raise ValueError(f"{where}: {exc}; expected {what}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected {what}, got {_kind(value)}")
    return value


def json_objects(
    path: str | os.PathLike[str],
    *,
    what: str,
    max_line_chars: int,
    whole_document: bool = False,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of a JSON-lines file.

    Args:
        path: the file (plain UTF-8 text, or gzip-compressed).
        what: what each line should be, for messages (``"a k6 --out json line"``).
        max_line_chars: the longest line accepted, bytes; a longer one is
            refused before it is read whole.
        whole_document: also accept a file that is one JSON object spread over
            several lines (pretty-printed, as an OTLP/HTTP request body), when
            its first line is not a complete object and the whole file is
            within ``max_line_chars``; it is yielded once, as line 1.

    Raises:
        ValueError: one line naming the file and the line, as the module says.
        OSError: the file cannot be opened or read.
    """
    name = os.fspath(path)
    number = 0
    try:
        with _open(name, what) as f:
            while True:
                data = f.readline(max_line_chars + 1)
                if not data:
                    return
                number += 1
                if len(data) > max_line_chars:
                    raise ValueError(
                        f"{name} line {number}: longer than {max_line_chars:,} bytes; "
                        f"expected {what}"
                    )
                where = f"{name} line {number}"
                # Decoded line by line (not by a text stream's read-ahead): errors name lines.
                line = (
                    utf8_text(data, where, what, part=" of the line")
                    if number == 1
                    else _text(data, where, what)
                )
                if not line.strip():
                    continue
                if whole_document and number == 1 and _incomplete(line):
                    rest = f.read(max_line_chars + 1 - len(data))
                    if len(data) + len(rest) > max_line_chars:
                        raise ValueError(
                            f"{where}: not a complete JSON object on one line, and longer "
                            f"than {max_line_chars:,} bytes to read as one document; "
                            f"expected {what}"
                        )
                    yield 1, _parse(line + _text(rest, name, what), name, what)
                    return
                yield number, _parse(line, where, what)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ValueError(
            f"{name} line {number + 1}: not a complete gzip file ({exc or 'cut short'})"
        ) from None
    except MemoryError:
        raise ValueError(
            f"{name} line {number}: too large to read in the memory available"
        ) from None


def _incomplete(line: str) -> bool:
    """True when ``line`` opens an object that it does not close (a pretty-printed document)."""
    try:
        _DECODER.decode(line)
    except json.JSONDecodeError as exc:
        # The parser ran off the end of the line, not into a wrong character.
        return line.lstrip().startswith("{") and exc.pos >= len(line.rstrip())
    except (RecursionError, ValueError):
        return False
    return False
