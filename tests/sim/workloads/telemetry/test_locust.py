"""pipeline.sim.workloads.telemetry.locust: Locust's --csv history read back to what went in."""

from __future__ import annotations

import csv
import math
from collections import Counter

import numpy as np
import pytest

from pipeline.sim.workloads.telemetry import locust
from tests.sim.workloads.telemetry import known

PERCENTILES = (0.50, 0.66, 0.75, 0.80, 0.90, 0.95, 0.98, 0.99, 0.999, 0.9999, 1.0)
HEADER = [
    "Timestamp",
    "User Count",
    "Type",
    "Name",
    "Requests/s",
    "Failures/s",
    *[f"{int(p * 100) if (p * 100).is_integer() else round(100 * p, 6)}%" for p in PERCENTILES],
    "Total Request Count",
    "Total Failure Count",
    "Total Median Response Time",
    "Total Average Response Time",
    "Total Min Response Time",
    "Total Max Response Time",
    "Total Average Content Size",
]


def bucket(ms: float) -> int:
    """Locust's bucket_response_time: about two significant digits."""
    if ms < 100:
        return round(ms)
    if ms < 1000:
        return int(round(ms, -1))
    if ms < 10000:
        return int(round(ms, -2))
    return int(round(ms, -3))


def percentile(times: Counter, n: int, p: float) -> int:
    """Locust's calculate_response_time_percentile."""
    wanted, done = int(n * p), 0
    for key in sorted(times, reverse=True):
        done += times[key]
        if n - done <= wanted:
            return key
    return 0


def median(times: Counter, n: int) -> int:
    """Locust's median_from_dict."""
    pos = (n - 1) / 2
    for key in sorted(times):
        if pos < times[key]:
            return key
        pos -= times[key]
    return key


class Entry:
    """One StatsEntry's totals since the start, and its bucket counts a second at a time."""

    def __init__(self, method: str, name: str) -> None:
        self.method, self.name = method, name
        self.times: Counter = Counter()
        self.n = self.failures = 0
        self.total_ms = 0.0
        self.min_ms, self.max_ms = None, 0.0
        self.history: list[tuple[Counter, int]] = []

    def log(self, ms: float, failed: bool) -> None:
        self.n += 1
        self.failures += failed
        self.total_ms += ms
        self.min_ms = ms if self.min_ms is None else min(self.min_ms, ms)
        self.max_ms = max(self.max_ms, ms)
        self.times[bucket(ms)] += 1

    def row(self, timestamp: int, *, current: bool) -> list:
        self.history.append((self.times.copy(), self.n))
        if not self.n:
            shown = ["N/A"] * len(PERCENTILES)
        elif current:  # the last ten seconds: today's buckets less those of ten rows ago
            old, old_n = self.history[max(0, len(self.history) - 11)]
            window = self.times - old
            shown = [percentile(window, self.n - old_n, p) for p in PERCENTILES]
        else:
            shown = [percentile(self.times, self.n, p) for p in PERCENTILES]
        middle = median(self.times, self.n) if self.n else 0
        middle = min(max(middle, self.min_ms or 0), self.max_ms)
        average = self.total_ms / self.n if self.n else 0.0
        return [
            timestamp,
            10,
            self.method,
            self.name,
            "12.000000",
            "0.500000",
            *shown,
            self.n,
            self.failures,
            middle,
            average,
            self.min_ms or 0,
            self.max_ms,
            123.0,
        ]


def history(run: known.Run, *, full: bool = False, names=("/orders",), drop=()) -> list[list]:
    """Locust's StatsCSVFileWriter rows for these requests: one a second, counted at their end."""
    t0 = int(run.start_ns.min() // 1_000_000_000)
    end_s = run.end_ns / 1e9
    order = np.argsort(run.end_ns, kind="stable")
    entries = {n: Entry("GET", n) for n in names}
    total = Entry("", "Aggregated")
    rows, k, j = [HEADER], 0, 0
    while j < order.size or k == 0:
        now = t0 + k + 0.5  # the writer wakes every second, somewhere inside it
        while j < order.size and end_s[order[j]] <= now:
            i = order[j]
            ms = int(run.duration_ns[i]) / 1e6
            entries[names[i % len(names)]].log(ms, bool(run.failed[i]))
            total.log(ms, bool(run.failed[i]))
            j += 1
        written = [e.row(int(now), current=True) for e in entries.values()] if full else []
        written.append(total.row(int(now), current=full))
        if k not in drop:
            rows.extend(written)
        k += 1
    return rows


def write(path, rows):
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def ends_per_second(run: known.Run) -> np.ndarray:
    t0 = int(run.start_ns.min() // 1_000_000_000)
    edges = t0 + 0.5 + np.arange(0, 10_000)
    counts = np.histogram(run.end_ns / 1e9, bins=edges)[0]
    return counts[: math.ceil(run.end_ns.max() / 1e9 - t0 - 0.5)]


def test_a_run_reads_back_exactly(tmp_path):
    run = known.run()
    rows = history(run)
    observed = locust.read(write(tmp_path / "x_stats_history.csv", rows))
    assert observed.interval_s == 1.0
    assert np.array_equal(observed.counts, ends_per_second(run))
    assert observed.attempts == run.item.size and observed.failed == int(run.failed.sum())
    last = dict(zip(HEADER, rows[-1], strict=True))
    # Every percentile column but 100% (a level must be below 1).
    levels = zip(PERCENTILES[:-1], HEADER[6:16], strict=True)
    assert observed.quantiles_s == {p: last[h] / 1e3 for p, h in levels}
    assert observed.mean_service_s == last["Total Average Response Time"] / 1e3
    assert observed.source.startswith("Locust ")


def test_a_run_gives_the_scenario_within_sampling_error(tmp_path):
    run = known.run(n_items=3000, seed=9)
    observed = locust.read(write(tmp_path / "x_stats_history.csv", history(run)))
    n = int(observed.counts.sum())
    known.check_truth(
        n_attempts=observed.attempts,
        rate_per_s=n / (observed.counts.size * observed.interval_s),
        n_arrivals=n,
        mean_s=observed.mean_service_s,
        p95_s=observed.quantiles_s[0.95],
        failed=observed.failed,
        rate_truth=known.RATE * known.attempts_per_item(),
        p95_slack_s=0.001,  # Locust's 1 ms rounding below 100 ms, and its percentile's rank
    )


def test_a_missing_row_spreads_its_count_over_the_gap(tmp_path):
    run = known.run(n_items=300)
    observed = locust.read(write(tmp_path / "h.csv", history(run, drop={5})))
    expected = ends_per_second(run).astype(float)
    expected[4:6] = expected[4:6].sum() / 2
    assert np.array_equal(observed.counts, expected)


def test_a_full_history_reads_a_name_and_only_the_total_median(tmp_path):
    run = known.run(n_items=600)
    rows = history(run, full=True, names=("/orders", "/cart"))
    path = write(tmp_path / "h.csv", rows)
    whole = locust.read(path)
    orders = locust.read(path, name="/orders")
    cart = locust.read(path, name="/cart", method="GET")
    assert np.array_equal(orders.counts + cart.counts, whole.counts)
    assert orders.attempts + cart.attempts == whole.attempts == run.item.size
    assert set(orders.quantiles_s) == {0.5}
    assert any("ten-second windows" in note for note in orders.notes)
    with pytest.raises(
        ValueError,
        match=r"no rows named '/x'; names seen: Aggregated, GET /cart, "
        r"GET /orders$",
    ):
        locust.read(path, name="/x")


def test_a_name_of_two_types_needs_a_method(tmp_path):
    rows = [HEADER]
    for t in (100, 101):
        for method in ("GET", "POST"):
            rows.append([t, 1, method, "/a", 0, 0, *["N/A"] * 11, t - 100, 0, 5, 5, 0, 0, 0])
    path = write(tmp_path / "h.csv", rows)
    with pytest.raises(
        ValueError,
        match=r"row 2: requests of several types are named '/a' "
        r"\('GET', 'POST'\); choose one with method=$",
    ):
        locust.read(path, name="/a")
    # A full history: of its percentiles only the totals' median is taken.
    assert locust.read(path, name="/a", method="POST").quantiles_s == {0.5: 0.005}


def table(*rows, header=HEADER):
    return [header, *rows]


def row(t=100, total=10, failures=1, pct="20", median="20", average="21.5"):
    return [
        t,
        5,
        "",
        "Aggregated",
        "1.0",
        "0.1",
        *[pct] * 11,
        total,
        failures,
        median,
        average,
        1,
        90,
        0,
    ]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [],
            r"h\.csv: not a Locust stats history \(PREFIX_stats_history.csv\): no column "
            r"Timestamp, Type, Name, .*; the header has nothing$",
        ),
        (
            table(header=["Type", "Name", "Request Count"]),
            r"no column Timestamp, Total Request Count, .*; "
            r"the header has Type, Name, Request Count",
        ),
        (table(), r"h\.csv: no data rows after the header$"),
        (table(row()), r"h\.csv: one row of 'Aggregated'; counting requests per interval needs"),
        (table(row(), row(t=100)), r"every row has the same Timestamp"),
        (table(row(), row(t=99, total=11)), r"h\.csv row 2: Timestamp goes back from 100 to 99"),
        (
            table(row(), row(t=101, total=3)),
            r"row 2: Total Request Count falls from 10 to 3 \(the stats were reset, --reset-stats",
        ),
        (table(row(), row(t=101, failures=0)), r"row 2: Total Failure Count falls"),
        (table(row(failures=11)), r"row 1: Total Failure Count \(11\) exceeds Total Request"),
        (
            table(row(total="-1")),
            r"row 1: Total Request Count must be a whole number >= 0, "
            r"got '-1'$",
        ),
        (table(row(total="1e3")), r"row 1: Total Request Count must be a whole number"),
        (table(row(t="soon")), r"row 1: Timestamp must be a whole number >= 0, got 'soon'$"),
        (
            table(row(pct="NaN")),
            r"row 1: 50% must be milliseconds, a number from 0 to 1e12 or "
            r"N/A, got 'NaN'$",
        ),
        (table(row(pct="-3")), r"row 1: 50% must be milliseconds"),
        (table(row(average="1e999")), r"row 1: Total Average Response Time must be milliseconds"),
        (table(row(median="")), r"row 1: Total Median Response Time is missing$"),
        (table(row(), row(t=101, total=20, pct="10")), None),
        (
            table(row(), row(t=10**9, total=20)),
            r"h\.csv: 999,999,900 s between the rows at 100 and 1000000000 \(Locust writes "
            r"one a second\); rows of several runs\?$",
        ),
        (
            table(row(total=123456789012345678), row(t=101, total=123456789012345679)),
            r"h\.csv row 1: Total Request Count is 1\.23457e\+17 requests; allowed: a finite "
            r"number from 0 to 1,000,000,000 \(the most a scenario runs\)$",
        ),
        (
            table(row(), row(t=101), row(t=102)),
            r"h\.csv row 3: Total Request Count of 'Aggregated' stays at 10 over its 3 rows: no "
            r"request in the window",
        ),
        (
            table(row(t=0), *[row(t=1 + 3600 * k, total=10 + k) for k in range(1200)]),
            r"the rows span 4,316,401 s in steps of 1 s, more than 4,194,304 intervals",
        ),
    ],
)
def test_a_malformed_history_is_one_line_naming_file_row_and_column(tmp_path, rows, message):
    path = write(tmp_path / "h.csv", rows)
    if message is None:  # well formed: the totals' percentiles, in seconds
        assert locust.read(path).quantiles_s[0.99] == 0.01
        return
    with pytest.raises(ValueError, match=message) as info:
        locust.read(path)
    assert "\n" not in str(info.value)


def test_fields_padded_with_spaces_are_read(tmp_path):
    # A history written with ", " (or padded by hand): the same numbers and names.
    rows = table(row(), row(t=101, total=20, pct="10"))
    plain = locust.read(write(tmp_path / "plain.csv", rows))
    path = tmp_path / "padded.csv"
    path.write_text("\n".join(", ".join(f" {cell} " for cell in r) for r in rows) + "\n")
    padded = locust.read(path)
    assert padded.counts.tolist() == plain.counts.tolist() == [10.0]
    assert padded.quantiles_s == plain.quantiles_s
    assert (padded.attempts, padded.failed) == (plain.attempts, plain.failed)
    rows = [HEADER, *([t, 1, "GET", "/a", 0, 0, *["N/A"] * 11, t - 99, 0, 5, 5, 0, 0, 0]
                      for t in (100, 101))]  # fmt: skip
    path.write_text("\n".join(", ".join(map(str, r)) for r in rows) + "\n")
    assert locust.read(path, name="/a", method="GET").attempts == 2


def test_decreasing_percentiles_bad_bytes_and_long_lines(tmp_path):
    bad = row(t=101, total=20)
    bad[6], bad[7] = "50", "40"
    with pytest.raises(ValueError, match=r"h\.csv row 2: the percentile columns decrease"):
        locust.read(write(tmp_path / "h.csv", table(row(), bad)))
    path = tmp_path / "h.csv"
    path.write_bytes(",".join(HEADER).encode() + b"\n100,\xff\n")
    with pytest.raises(ValueError, match=r"h\.csv: not a UTF-8 text file"):
        locust.read(path)
    path.write_text(",".join(HEADER) + "\n" + "1" * (2 << 20) + "\n")
    with pytest.raises(ValueError, match=r"h\.csv line 2: longer than 1,048,576 characters"):
        locust.read(path)
