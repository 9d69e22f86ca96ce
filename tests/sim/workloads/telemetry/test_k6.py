"""pipeline.sim.workloads.telemetry.k6: k6 --out json files read back to what went in."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import tracemalloc

import numpy as np
import pytest

from pipeline.sim.workloads.telemetry import k6
from tests.sim.workloads.telemetry import known

ZONE = dt.timezone(dt.timedelta(hours=2))
HTTP = (
    "http_req_duration",
    "http_req_blocked",
    "http_req_connecting",
    "http_req_sending",
    "http_req_waiting",
    "http_req_receiving",
)


def rfc3339(ns: int, zone: dt.tzinfo = ZONE) -> str:
    """Go's time.RFC3339Nano: nanoseconds with trailing zeros dropped, the zone as +hh:mm."""
    stamp = dt.datetime.fromtimestamp(ns // 1_000_000_000, zone).isoformat()
    fraction = f"{ns % 1_000_000_000:09d}".rstrip("0")
    date, zone_text = stamp[:19], stamp[19:]
    return (
        date + (f".{fraction}" if fraction else "") + ("Z" if zone_text == "+00:00" else zone_text)
    )


def k6_lines(run: known.Run, *, name: str = "http://127.0.0.1/orders") -> list[str]:
    """The lines k6 writes for these requests: declarations at first use, then each
    request's points at its end time (the response's end), in end order, as k6 does."""
    lines = [
        json.dumps(
            {
                "type": "Metric",
                "data": {
                    "name": "vus",
                    "type": "gauge",
                    "contains": "default",
                    "thresholds": [],
                    "submetrics": None,
                },
                "metric": "vus",
            }
        )
    ]
    declared = set()
    for i in np.argsort(run.end_ns, kind="stable"):
        time = rfc3339(int(run.end_ns[i]))
        tags = {
            "name": name,
            "url": name,
            "method": "GET",
            "proto": "HTTP/1.1",
            "scenario": "default",
            "status": "500" if run.failed[i] else "200",
            "expected_response": "false" if run.failed[i] else "true",
        }
        # k6 writes float64(duration) / float64(time.Millisecond).
        duration_ms = int(run.duration_ns[i]) / 1e6
        points = (
            [("http_reqs", 1)]
            + [(m, duration_ms if m == "http_req_duration" else 0.0) for m in HTTP]
            + [("http_req_failed", int(run.failed[i]))]
        )
        for metric, value in points:
            if metric not in declared:
                declared.add(metric)
                kind = (
                    "counter"
                    if metric == "http_reqs"
                    else "rate"
                    if metric.endswith("failed")
                    else "trend"
                )
                lines.append(
                    json.dumps(
                        {
                            "type": "Metric",
                            "data": {
                                "name": metric,
                                "type": kind,
                                "contains": "time" if kind == "trend" else "default",
                                "thresholds": [],
                                "submetrics": None,
                            },
                            "metric": metric,
                        }
                    )
                )
            lines.append(
                json.dumps(
                    {
                        "metric": metric,
                        "type": "Point",
                        "data": {"time": time, "value": value, "tags": tags},
                    }
                )
            )
        if i % 100 == 0:
            lines.append(
                json.dumps(
                    {
                        "metric": "vus",
                        "type": "Point",
                        "data": {"time": time, "value": 10, "tags": None},
                    }
                )
            )
    return lines


def write(path, lines, *, compress: bool = False):
    text = "\n".join(lines) + "\n"
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_run_reads_back_exactly(tmp_path, compress):
    run = known.run()
    observed = k6.read(write(tmp_path / "run.json", k6_lines(run), compress=compress))
    start = np.sort(run.start_ns)
    # The time stamp is the response's end; minus the duration, the request's start, to the ns.
    assert np.array_equal(observed.arrivals_s, (start - start[0]) / 1e9)
    order = np.argsort(run.start_ns, kind="stable")
    assert np.allclose(observed.service_s, run.duration_ns[order] / 1e9, rtol=0, atol=1e-15)
    assert observed.attempts == run.start_ns.size
    assert observed.failed == int(run.failed.sum())
    assert observed.source.startswith("k6 ")
    assert any("milliseconds to seconds" in note for note in observed.notes)


@pytest.mark.parametrize("engine", ["kernel", "asyncio"])
def test_a_run_gives_the_scenario_within_sampling_error(tmp_path, engine):
    run = known.run(engine=engine, n_items=3000 if engine == "kernel" else 1000, seed=7)
    observed = k6.read(write(tmp_path / "run.json", k6_lines(run)))
    span_s = observed.arrivals_s[-1] - observed.arrivals_s[0]
    known.check_truth(
        n_attempts=observed.service_s.size,
        rate_per_s=(observed.arrivals_s.size - 1) / span_s,
        n_arrivals=observed.arrivals_s.size,
        mean_s=float(observed.service_s.mean()),
        p95_s=float(np.quantile(observed.service_s, 0.95)),
        failed=observed.failed,
        rate_truth=known.RATE * known.attempts_per_item(),
    )


def test_name_and_url_filters(tmp_path):
    run = known.run(n_items=200)
    lines = k6_lines(run, name="a") + k6_lines(run, name="b")[1:]
    path = write(tmp_path / "two.json", lines)
    assert k6.read(path, name="a").attempts == run.start_ns.size
    assert k6.read(path, url="b", name="b").service_s.size == run.start_ns.size
    assert k6.read(path).service_s.size == 2 * run.start_ns.size
    with pytest.raises(
        ValueError,
        match=r"no http_req_duration point with the name tag 'c'; "
        r"names seen: 'a', 'b'$",
    ):
        k6.read(path, name="c")


def test_utc_and_whole_seconds_time_stamps(tmp_path):
    lines = [
        json.dumps(
            {
                "type": "Point",
                "metric": "http_req_duration",
                "data": {"time": t, "value": 250.0, "tags": {}},
            }
        )
        for t in (
            "2026-01-01T00:00:01Z",
            "2026-01-01T01:00:00.5+01:00",
            "2025-12-31T19:00:02-05:00",
        )
    ]
    observed = k6.read(write(tmp_path / "utc.json", lines))
    # Each starts 250 ms before its time stamp: 00:00:00.75Z, 00:00:00.25Z, 00:00:01.75Z.
    assert observed.arrivals_s.tolist() == [0.0, 0.5, 1.5]
    assert observed.attempts is None and any("failures unknown" in n for n in observed.notes)


def point(value=100.0, time="2026-01-01T00:00:00Z", metric="http_req_duration", tags=None):
    return json.dumps(
        {"type": "Point", "metric": metric, "data": {"time": time, "value": value, "tags": tags}}
    )


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], r"run\.json: empty; expected k6 --out json lines$"),
        (
            ['{"type":"Metric","data":{"type":"trend"},"metric":"http_req_duration"}'],
            r"run\.json: no http_req_duration point \(1 metric declarations, 0 other points\)",
        ),
        (["[1, 2]"], r"run\.json line 1: expected a k6 --out json line .*, got an array$"),
        (
            ['{"resourceSpans": []}'],
            r"run\.json line 1: type must be 'Metric' or 'Point', got None",
        ),
        ([point(value="NaN")], r"line 1: data\.value of http_req_duration must be a number"),
        (
            ['{"type":"Point","metric":"http_req_duration","data":{"time":"x","value":NaN}}'],
            r"run\.json line 1: NaN is not a JSON number; expected",
        ),
        (
            [point(value=1).replace("1,", "1e999,")],
            r"line 1: the number 1e999 is too large for a float; expected",
        ),
        (
            [point(value=-1.0)],
            r"line 1: data\.value of http_req_duration is -1 milliseconds; "
            r"allowed: a finite number from 0 to 1,000,000,000,000 \(a service time at most\)$",
        ),
        ([point(value=1e300)], r"line 1: .* would start the request before 1970$"),
        (
            [point(value=1.5e12, time="2026-01-01T00:00:00Z")],
            r"line 1: data\.value of http_req_duration is 1\.5e\+12 milliseconds; allowed: a "
            r"finite number from 0 to 1,000,000,000,000",
        ),
        ([point(time="2026-01-01 00:00:00")], r"line 1: data\.time must be an RFC 3339 time"),
        ([point(time="2026-02-30T00:00:00Z")], r"line 1: data\.time has no such date"),
        ([point(time="2026-01-01T24:00:00Z")], r"line 1: data\.time has no such time of day"),
        ([point(time="9999-01-01T00:00:00Z")], r"line 1: data\.time must be between 1970 and 2262"),
        ([point(tags=[1])], r"line 1: data\.tags must be an object or null"),
        (
            [point(value=0.5, metric="http_req_failed")],
            r"line 1: data\.value of http_req_failed must be 0 or 1, got 0\.5$",
        ),
        (["[" * 100_000], r"run\.json line 1: nested too deeply to read"),
        (["{" + '"a":' * 1 + "1" * 5000 + "}"], r"run\.json line 1: .*; expected a k6"),
        ([point(), "{not json"], r"run\.json line 2: not valid JSON \(Expecting property name"),
    ],
)
def test_a_malformed_file_is_one_line_naming_file_and_line(tmp_path, lines, message):
    path = tmp_path / "run.json"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        k6.read(path)
    assert "\n" not in str(info.value)


def test_bad_bytes_long_lines_and_broken_gzip(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(point().encode() + b"\n" + b'{"type": "Po\xffint"}\n')
    with pytest.raises(
        ValueError, match=r"run\.json line 2: not UTF-8 text \(invalid start byte at byte 13 of"
    ):
        k6.read(path)
    path.write_text(point() + "\n" + " " * (k6.MAX_LINE_CHARS + 5) + "\n")
    with pytest.raises(ValueError, match=r"run\.json line 2: longer than 1,048,576 bytes"):
        k6.read(path)
    whole = gzip.compress(((point() + "\n") * 1000).encode())
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"run\.json line \d+: not a complete gzip file"):
        k6.read(path)
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 20)
    with pytest.raises(ValueError, match=r"run\.json: compressed with zstd; decompress it first"):
        k6.read(path)


def test_memory_stays_bounded_on_a_large_file(tmp_path):
    # 2 MB of points the reader passes over, around a few requests: what is kept is the
    # requests (16 bytes each), whatever the file's size.
    filler = point(metric="iteration_duration") + "\n"
    path = tmp_path / "big.json"
    with path.open("w") as f:
        f.write(point() + "\n")
        for _ in range(2_000_000 // len(filler)):
            f.write(filler)
        f.write(point(time="2026-01-01T00:00:01Z") + "\n")
    tracemalloc.start()
    try:
        observed = k6.read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert observed.arrivals_s.size == 2
    assert peak < 200_000  # a tenth of the file: held as Python objects it would be ten times it
