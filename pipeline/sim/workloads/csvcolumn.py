"""Reading one numeric column of a CSV file: measured durations, counts per interval.

The one reader behind :meth:`~pipeline.sim.Empirical.from_csv` and
:meth:`~pipeline.sim.TimeVarying.from_counts_csv`; :func:`csv_rows`, the way
every CSV file is opened (trace files too), turns whatever a hostile file
does (bytes that are not UTF-8, a line of gigabytes or ``/dev/zero``, broken
quoting, running out of memory) into one ``ValueError`` line naming the file
and the line. The file has a header row;
the column is named, or found when the file has only one. Every value must be
a finite number >= 0. Every error is one line that names the file, and where
it can the row (1 = the first after the header) and the column.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
from collections.abc import Iterator
from typing import IO

__all__ = ["MAX_LINE_CHARS", "csv_rows", "read_csv_column"]

MAX_LINE_CHARS = 1 << 20
"""The longest line a CSV file may have, characters (1 Mi; rows of numbers are short)."""


def _bounded_lines(f: IO[str], name: str) -> Iterator[str]:
    """The file's lines, refusing one longer than :data:`MAX_LINE_CHARS` before reading it all."""
    number = 0
    while True:
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise ValueError(
                f"{name} line {number}: longer than {MAX_LINE_CHARS:,} characters; "
                "not a CSV file of numbers"
            )
        yield line


@contextlib.contextmanager
def csv_rows(path: str | os.PathLike[str]) -> Iterator[csv.DictReader[str]]:
    """A ``csv.DictReader`` over ``path``; errors met while reading it become one-line ValueErrors.

    UTF-8 (a spreadsheet's byte-order mark is dropped, so that it cannot hide
    the first column's name). Errors the caller raises pass through unchanged.

    Raises:
        ValueError: not UTF-8, not valid CSV, a line longer than
            :data:`MAX_LINE_CHARS`, or too large for the memory available.
        OSError: the file cannot be opened or read.
    """
    name = os.fspath(path)
    with open(name, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(_bounded_lines(f, name))
        try:
            yield reader
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{name}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
            ) from None
        except csv.Error as exc:
            raise ValueError(f"{name} line {reader.line_num}: not valid CSV ({exc})") from None
        except MemoryError:
            raise ValueError(f"{name}: too large to read in the memory available") from None


def _choose(name: str, header: list[str], column: str | None) -> str:
    if not header:
        raise ValueError(f"{name}: no header row (expected column names on the first line)")
    if column is None:
        if len(header) == 1:
            return header[0]
        raise ValueError(
            f"{name}: name the column to read (column=...); the header has {', '.join(header)}"
        )
    if column not in header:
        raise ValueError(f"{name}: no column {column!r}; the header has {', '.join(header)}")
    return column


def _value(raw: str | None, where: str, column: str, unit: str) -> float:
    if raw is None or not raw.strip():
        raise ValueError(f"{where}: {column} is missing")
    text = raw.strip()
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: {column} must be a number ({unit}), got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: {column} must be finite and >= 0 ({unit}), got {text}")
    return value


def read_csv_column(
    path: str | os.PathLike[str], column: str | None, *, unit: str
) -> tuple[str, str, list[float]]:
    """Read one column of numbers >= 0 from a CSV file with a header.

    Args:
        path: the file.
        column: the column's name in the header; ``None`` reads the only
            column of a one-column file.
        unit: what the numbers count, for messages (``"seconds"``).

    Returns:
        The path as a str, the column read and its values, in file order.
        Blank lines are skipped.

    Raises:
        ValueError: no header, no such column (the message lists those
            present), no data rows, a value that is missing, not a number,
            NaN, infinite or negative, or a file that is not UTF-8 text CSV.
        OSError: the file cannot be opened or read.
    """
    name = os.fspath(path)
    values: list[float] = []
    with csv_rows(name) as reader:
        header = [h.strip() for h in reader.fieldnames or ()]
        reader.fieldnames = header
        column = _choose(name, header, column)
        for row_no, row in enumerate(reader, start=1):
            values.append(_value(row.get(column), f"{name} row {row_no}", column, unit))
    if not values:
        raise ValueError(f"{name}: no data rows after the header")
    return name, column, values
