"""Reading trace CSV files: the one parser behind ``load_trace`` and ``Trace.from_csv``.

A trace CSV has a header and one row per item, in arrival order:
``arrival_s`` (absolute seconds, finite, >= 0, non-decreasing), ``service_s``
(seconds per attempt, >= 0) and ``fails`` (failing attempts before success,
integer >= 0). Other columns are ignored. Every error is one line naming the
file, the row and the column.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from ..csvcolumn import csv_rows

__all__ = ["read_trace_csv"]


def _cell(row: dict[str, str | None], column: str, where: str) -> str:
    raw = row.get(column)
    if raw is None or not raw.strip():
        raise ValueError(f"{where}: {column} is missing")
    return raw.strip()


def _seconds(row: dict[str, str | None], column: str, where: str) -> float:
    raw = _cell(row, column, where)
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{where}: {column} must be a number of seconds, got {raw!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: {column} must be finite and >= 0 seconds, got {raw}")
    return value


def _count(row: dict[str, str | None], column: str, where: str) -> int:
    raw = _cell(row, column, where)
    try:
        count = int(raw)
    except ValueError:
        count = -1
    if count < 0:
        raise ValueError(
            f"{where}: {column} must be an integer >= 0 (failing attempts before success), "
            f"got {raw!r}"
        )
    return count


def read_trace_csv(
    path: str | os.PathLike[str], required: Sequence[str], optional: Sequence[str] = ()
) -> tuple[str, dict[str, list[Any]]]:
    """Read and check a trace CSV: the one parser of ``load_trace`` and ``Trace.from_csv``.

    Columns may be ``arrival_s`` (finite, >= 0, non-decreasing), ``service_s``
    (finite, >= 0) and ``fails`` (integer >= 0); other columns are ignored.
    Rows are numbered from 1, the first data row after the header; blank lines
    are skipped and not counted.

    Returns:
        The path as a str, and column -> values for every ``required`` column
        and every ``optional`` one the header has.

    Raises:
        ValueError: a missing required column, no rows, a bad value, or a file
            that is not UTF-8 text CSV (see :func:`~.csvcolumn.csv_rows`); the
            one-line message names the file, the row and the column, e.g.
            ``trace.csv row 7: arrival_s must be >= the previous row's (12.5), got 12.0``.
        OSError: the file cannot be read.
    """
    name = os.fspath(path)
    with csv_rows(name) as reader:
        header = [h.strip() for h in reader.fieldnames or ()]
        reader.fieldnames = header
        missing = [c for c in required if c not in header]
        if missing:
            read = ", ".join(required) + (
                f" and optionally {', '.join(optional)}" if optional else ""
            )
            raise ValueError(
                f"{name}: the header needs the column(s) {', '.join(missing)}, found "
                f"{header or 'no header'} (columns read: {read}; others are ignored)"
            )
        columns: dict[str, list[Any]] = {
            c: [] for c in (*required, *(c for c in optional if c in header))
        }
        previous = 0.0
        for row_no, row in enumerate(reader, start=1):
            where = f"{name} row {row_no}"
            for column, values in columns.items():
                if column == "fails":
                    values.append(_count(row, column, where))
                    continue
                value = _seconds(row, column, where)
                if column == "arrival_s":
                    if value < previous:
                        raise ValueError(
                            f"{where}: arrival_s must be >= the previous row's ({previous!r}), "
                            f"got {value!r}"
                        )
                    previous = value
                values.append(value)
    if not any(columns.values()):
        raise ValueError(f"{name}: no data rows after the header")
    return name, columns
