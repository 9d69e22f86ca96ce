"""Locust's ``--csv`` history (``PREFIX_stats_history.csv``) as an :class:`~.observed.Observed`.

Locust appends one row about every second (``Timestamp``: whole Unix
seconds) for the ``Aggregated`` entry and, with ``--csv-full-history``, one
per request name before it. Each row holds totals since the start
(``Total Request Count``, ``Total Failure Count``, ``Total Average Response
Time``, ``Total Median Response Time``, ...), a windowed rate
(``Requests/s``, over the last ten seconds or so) and the response-time
percentile columns (``50%``, ..., ``99.99%``, ``100%``; milliseconds, ``N/A``
before any request). Which window those percentiles cover depends on the run
(Locust's ``StatsCSVFileWriter``): without ``--csv-full-history`` they are
the totals since the start; with it, every row's are over the last ten
seconds or so only.

So this reader takes:

- arrivals per interval from the increase of ``Total Request Count`` between
  rows, on a grid of the rows' time step (1 s); a gap of several steps
  between two rows is spread evenly over them. Locust counts a request when
  it ends, and its users are a closed loop: the rate is what they made of
  this service's response times, not an open arrival process;
- the service-time quantiles from the last row's percentiles when they are
  totals; from ``Total Median Response Time`` alone when the file is a full
  history (the windowed percentiles of different windows do not combine);
- ``mean_service_s`` from the last row's ``Total Average Response Time``;
- ``attempts`` and ``failed`` from the last row's totals.

Locust rounds each response time before its percentiles (to 1 ms below
100 ms, 10 ms below 1 s, to two significant digits above), so they are
within about 5 % of the exact ones. Every time in the file is milliseconds;
the ``Observed`` holds seconds. Failed requests are in the response times
(Locust records both).
"""

from __future__ import annotations

import itertools
import math
import os
import re
from typing import Any

import numpy as np

from ..csvcolumn import csv_rows
from .observed import MAX_ARRIVALS, MAX_INTERVALS, Observed, check_number

__all__ = ["MAX_GAP_S", "MAX_INTERVALS", "read"]

MAX_GAP_S = 3600
"""The longest time between two rows of one run, seconds (Locust writes one a second)."""

_AGGREGATED = "Aggregated"
_REQUIRED = (
    "Timestamp",
    "Type",
    "Name",
    "Total Request Count",
    "Total Failure Count",
    "Total Median Response Time",
    "Total Average Response Time",
)
_PERCENTILE = re.compile(r"(\d+(?:\.\d+)?)%")


def _cell(row: dict[str, Any], column: str, where: str) -> str:
    raw = row.get(column)
    if raw is None or not raw.strip():
        raise ValueError(f"{where}: {column} is missing")
    return raw.strip()


def _count(row: dict[str, Any], column: str, where: str) -> int:
    raw = _cell(row, column, where)
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
        raise ValueError(f"{where}: {column} must be a whole number >= 0, got {raw!r:.60}")
    return int(raw)


def _ms(row: dict[str, Any], column: str, where: str, *, na: bool = False) -> float | None:
    raw = _cell(row, column, where)
    if na and raw == "N/A":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= 1e12):
        allowed = " or N/A" if na else ""
        raise ValueError(
            f"{where}: {column} must be milliseconds, a number from 0 to 1e12{allowed}, "
            f"got {raw!r:.60}"
        )
    return value


def _levels(header: list[str]) -> dict[str, float]:
    levels = {}
    for column in header:
        match = _PERCENTILE.fullmatch(column)
        if match and 0 < float(match.group(1)) < 100:
            # Rounded so that '99.9%' is the level 0.999, not 0.9990000000000001.
            levels[column] = round(float(match.group(1)) / 100, 12)
    return levels


def read(
    path: str | os.PathLike[str], *, name: str | None = None, method: str | None = None
) -> Observed:
    """Read a Locust ``--csv`` stats history: request counts per second, percentiles, failures.

    Args:
        path: the ``PREFIX_stats_history.csv`` file.
        name: read this request name's rows (needs ``--csv-full-history``);
            None (default): the ``Aggregated`` rows, every request together.
        method: with ``name``, the request type (``Type`` column, ``GET``)
            when several share the name.

    Returns:
        An :class:`~.observed.Observed` with ``counts`` per ``interval_s``
        (seconds), ``quantiles_s`` and ``mean_service_s`` (seconds, of the
        response times: ``response_times``), ``attempts``, ``failed`` and
        ``max_attempts`` 1 (each request is one attempt).

    Raises:
        ValueError: one line naming the file, the row and the column: not a
            Locust history (a required column missing), a bad number, time or
            a total going backwards (``--reset-stats``, or two runs in one
            file), fewer than two rows of the entry, or no rows of that name
            (the message lists the names).
        OSError: the file cannot be opened or read.
    """
    source = os.fspath(path)
    with csv_rows(source) as reader:
        header = [h.strip() for h in reader.fieldnames or ()]
        reader.fieldnames = header
        missing = [c for c in _REQUIRED if c not in header]
        if missing:
            raise ValueError(
                f"{source}: not a Locust stats history (PREFIX_stats_history.csv): no column "
                f"{', '.join(missing)}; the header has {', '.join(header) or 'nothing'}"
            )
        rows = _Rows(source, name, method, _levels(header))
        for row_no, cells in enumerate(reader, start=1):
            # A file written with ", " (or padded by hand) keeps its names and numbers.
            rows.see({k: v.strip() if isinstance(v, str) else v for k, v in cells.items()},
                     f"{source} row {row_no}")  # fmt: skip
    return rows.observed()


class _Rows:
    """The rows of one request name (or of ``Aggregated``), each checked against the last."""

    def __init__(
        self, source: str, name: str | None, method: str | None, levels: dict[str, float]
    ) -> None:
        self.source = source
        self.name = name
        self.method = method
        self.wanted = _AGGREGATED if name is None else name
        self.levels = levels
        self.times: list[int] = []
        self.totals: list[int] = []
        self.last: dict[str, Any] | None = None
        self.last_where = ""
        self.names: set[tuple[str, str]] = set()
        self.users: list[int] = []
        self.full_history = False

    def see(self, row: dict[str, Any], where: str) -> None:
        """Note the row's name; keep it, checked, when it is of the entry being read."""
        row_name = row.get("Name") or ""
        row_type = (row.get("Type") or "").strip()
        if row_name != _AGGREGATED:
            self.full_history = True
        if len(self.names) < 50:
            self.names.add((row_type, row_name))
        if row_name != self.wanted or (self.method is not None and row_type != self.method):
            return
        last = self.last
        if (
            self.name is not None
            and self.method is None
            and last is not None
            and (last.get("Type") or "").strip() != row_type
        ):
            raise ValueError(
                f"{where}: requests of several types are named {self.name!r} "
                f"({(last.get('Type') or '').strip()!r}, {row_type!r}); choose one "
                "with method="
            )
        self._keep(row, where)

    def _keep(self, row: dict[str, Any], where: str) -> None:
        time = _count(row, "Timestamp", where)
        total = _count(row, "Total Request Count", where)
        failures = _count(row, "Total Failure Count", where)
        check_number(
            total, MAX_ARRIVALS, f"{where}: Total Request Count is", "requests",
            "the most a scenario runs",
        )  # fmt: skip
        if failures > total:
            raise ValueError(
                f"{where}: Total Failure Count ({failures}) exceeds Total Request Count ({total})"
            )
        self._check_order(time, total, failures, where)
        for column in self.levels:
            _ms(row, column, where, na=True)
        _ms(row, "Total Average Response Time", where)
        _ms(row, "Total Median Response Time", where)
        user_count = (row.get("User Count") or "").strip()
        if user_count.isdigit():
            self.users.append(int(user_count))
        self.times.append(time)
        self.totals.append(total)
        self.last, self.last_where = row, where

    def _check_order(self, time: int, total: int, failures: int, where: str) -> None:
        """Time and the totals never go back within one run."""
        times, totals = self.times, self.totals
        if times and time < times[-1]:
            raise ValueError(
                f"{where}: Timestamp goes back from {times[-1]} to {time}; "
                "rows of one run are in time order"
            )
        if totals and total < totals[-1]:
            raise ValueError(
                f"{where}: Total Request Count falls from {totals[-1]} to {total} (the "
                "stats were reset, --reset-stats, or the file holds two runs); give the "
                "rows of one run"
            )
        if self.last is not None and failures < int(self.last["Total Failure Count"]):
            raise ValueError(f"{where}: Total Failure Count falls; give the rows of one run")

    def observed(self) -> Observed:
        """What the rows kept say, once the file is read (at least two rows of the entry)."""
        source, wanted = self.source, self.wanted
        if not self.times:
            if not self.names:
                raise ValueError(f"{source}: no data rows after the header")
            listing = ", ".join(f"{t} {n}".strip() for t, n in sorted(self.names))
            raise ValueError(
                f"{source}: no rows named {wanted!r}"
                f"{f' of type {self.method!r}' if self.method else ''}; names seen: {listing}"
            )
        if len(self.times) < 2:
            raise ValueError(
                f"{source}: one row of {wanted!r}; counting requests per interval needs two or more"
            )
        assert self.last is not None
        return _observed(
            source, wanted, self.times, self.totals, self.last, self.last_where, self.levels,
            self.full_history, self.users,
        )  # fmt: skip


def _grid(source: str, times: list[int], totals: list[int]) -> tuple[float, np.ndarray]:
    t = np.asarray(times, dtype=np.int64)
    n = np.asarray(totals, dtype=np.float64)
    steps = np.diff(t)
    positive = steps[steps > 0]
    if not positive.size:
        raise ValueError(
            f"{source}: every row has the same Timestamp; counting requests per "
            "interval needs rows at different times"
        )
    widest = int(np.argmax(steps))
    if steps[widest] > MAX_GAP_S:
        raise ValueError(
            f"{source}: {int(steps[widest]):,} s between the rows at {times[widest]} and "
            f"{times[widest + 1]} (Locust writes one a second); rows of several runs?"
        )
    step = int(np.gcd.reduce(positive))
    cells = int((t[-1] - t[0]) // step)
    if cells > MAX_INTERVALS:
        raise ValueError(
            f"{source}: the rows span {int(t[-1] - t[0]):,} s in steps of {step} s, "
            f"more than {MAX_INTERVALS:,} intervals; rows of several runs?"
        )
    counts = np.zeros(cells)
    index = (t - t[0]) // step
    increase = np.diff(n)
    for k in range(increase.size):
        lo, hi = int(index[k]), int(index[k + 1])
        if hi == lo:
            # Two rows in one step: the increase belongs to that step.
            counts[min(lo, cells - 1)] += increase[k]
        else:
            counts[lo:hi] += increase[k] / (hi - lo)
    return float(step), counts


def _observed(
    source: str,
    wanted: str,
    times: list[int],
    totals: list[int],
    last: dict[str, Any],
    where: str,
    levels: dict[str, float],
    full_history: bool,
    users: list[int],
) -> Observed:
    interval_s, counts = _grid(source, times, totals)
    if totals[-1] == totals[0]:
        raise ValueError(
            f"{where}: Total Request Count of {wanted!r} stays at {totals[0]} over its "
            f"{len(times)} rows: no request in the window to fit a rate to; allowed: a count "
            "that increases"
        )
    attempts = int(last["Total Request Count"])
    failed = int(last["Total Failure Count"])
    notes = [
        f"{wanted!r}: requests per {interval_s:g} s from the increase of Total Request Count "
        f"between rows; the {totals[0]} requests before the first row count in the totals "
        "only",
        "Locust counts a request when it ends, and its users are a closed loop: the rate is "
        "what they made of the response times, not an open arrival process",
    ]
    if users:
        notes.append(f"User Count from {min(users)} to {max(users)}")
    quantiles: dict[float, float] = {}
    if attempts:
        if full_history:
            median = _ms(last, "Total Median Response Time", where)
            quantiles = {0.5: median / 1e3}
            notes.append(
                "a full history (--csv-full-history): its percentile columns cover ten-second "
                "windows, so only the median (Total Median Response Time) is taken"
            )
        else:
            for column, level in sorted(levels.items(), key=lambda kv: kv[1]):
                value = _ms(last, column, where, na=True)
                if value is not None:
                    quantiles[level] = value / 1e3
            values = list(quantiles.values())
            if any(b < a for a, b in itertools.pairwise(values)):
                raise ValueError(
                    f"{where}: the percentile columns decrease; expected Locust's "
                    "percentiles, in milliseconds"
                )
        notes.append(
            "response times are Locust's, rounded to two significant digits above "
            "100 ms before its percentiles, and converted from milliseconds to seconds"
        )
    mean = _ms(last, "Total Average Response Time", where) / 1e3 if attempts else None
    return Observed(
        source=f"Locust {source}",
        interval_s=interval_s,
        counts=counts,
        quantiles_s=quantiles or None,
        mean_service_s=mean,
        attempts=attempts,
        failed=failed,
        # Each request Locust counted is one attempt (a retry in the user class is another
        # request), and its time is the response time, any wait inside the service included.
        max_attempts=1,
        response_times=True,
        notes=tuple(notes),
    )
