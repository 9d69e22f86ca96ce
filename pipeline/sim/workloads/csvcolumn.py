"""Reading one numeric column of a CSV file: measured durations, counts per interval.

The one reader behind :meth:`~pipeline.sim.Empirical.from_csv` and
:meth:`~pipeline.sim.TimeVarying.from_counts_csv`. The file has a header row;
the column is named, or found when the file has only one. Every value must be
a finite number >= 0. Every error is one line that names the file, and where
it can the row (1 = the first after the header) and the column.
"""

from __future__ import annotations

import csv
import math
import os

__all__ = ["read_csv_column"]


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
    # utf-8-sig: a spreadsheet's byte-order mark must not hide the first column's name
    with open(name, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        try:
            header = [h.strip() for h in reader.fieldnames or ()]
            reader.fieldnames = header
            column = _choose(name, header, column)
            for row_no, row in enumerate(reader, start=1):
                values.append(_value(row.get(column), f"{name} row {row_no}", column, unit))
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{name}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
            ) from None
        except csv.Error as exc:
            raise ValueError(f"{name} line {reader.line_num}: not valid CSV ({exc})") from None
    if not values:
        raise ValueError(f"{name}: no data rows after the header")
    return name, column, values
