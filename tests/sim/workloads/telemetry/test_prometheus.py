"""The Prometheus reader: query_range answers into an Observed, and every bad answer refused.

A simulated run's metrics, as Prometheus would answer a range query for them
(``scraped.py``), give back the run's own counts; hand-made answers pin the
counter arithmetic (resets, gaps, several instances), the label choices and
the series named for a service not built on this engine; each malformed
answer is one ``ValueError`` naming the file and the field.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, simulate
from pipeline.sim.calibration.telemetry import calibrate_observed
from pipeline.sim.running.scrape import query_range_answer
from pipeline.sim.workloads.telemetry import FORMATS, reader
from pipeline.sim.workloads.telemetry.prometheus import read
from pipeline.sim.workloads.telemetry.query_range import Selector
from tests.sim.workloads.telemetry.scraped import save

T0 = 1_700_000_000.0


def _series(name: str, values, step: float = 15.0, times=None, **labels):
    times = [T0 + step * i for i in range(len(values))] if times is None else times
    return {
        "metric": {"__name__": name, **labels},
        "values": [[t, v if isinstance(v, str) else repr(float(v))]
                   for t, v in zip(times, values, strict=True)],
    }  # fmt: skip


def _histogram(name: str, rows: dict[str, list[float]], **labels):
    """``rows``: ``le`` -> cumulative counts over time; plus _sum growing by 0.1 per observation."""
    out = [_series(f"{name}_bucket", values, le=le, **labels) for le, values in rows.items()]
    out.append(_series(f"{name}_sum", [0.1 * v for v in rows["+Inf"]], **labels))
    return out


def _answer(*series):
    return {"status": "success", "data": {"resultType": "matrix", "result": list(series)}}


def _engine_answer(**labels):
    return _answer(
        _series("pipeline_items_offered_total", [0, 10, 20, 30, 40], **labels),
        *_histogram("pipeline_attempt_duration_seconds",
                    {"0.1": [0, 5, 10, 15, 20], "1.0": [0, 9, 19, 29, 39],
                     "+Inf": [0, 10, 20, 30, 42]},
                    **labels),
        _series("pipeline_attempts_total", [0, 9, 18, 27, 36], result="ok", **labels),
        _series("pipeline_attempts_total", [0, 1, 2, 3, 6], result="failed", **labels),
        _series("pipeline_queue_depth", [0, 3, 1, 4, 7], **labels),
        _series("pipeline_workers", [4, 4, 4, 4, 4], **labels),
    )  # fmt: skip


def _write(tmp_path, data, name="range.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_the_registry_names_the_prometheus_reader():
    assert reader("prometheus").read is read
    assert set(FORMATS) >= {"prometheus"}
    with pytest.raises(ValueError, match="format must be one of prometheus"):
        reader("nagios")


def test_a_simulated_run_reads_back_as_its_own_counts(tmp_path):
    scenario = Scenario(
        arrivals=Poisson(rate=3.0), service=Exponential(mean=0.5),
        config=PipelineConfig(concurrency=3, queue_maxsize=50),
        failures=IndependentFailures(0.1), n_items=1500, seed=2,
    )  # fmt: skip
    result = simulate(scenario)
    answer = query_range_answer(result, start_s=T0, step_s=10.0)
    observed = read(str(save(answer, tmp_path / "run.json")))
    s = result.summary
    assert observed.counts.sum() == s["items_offered"]
    assert observed.interval_s == 10.0
    assert observed.attempts == s["attempts_total"] == observed.histogram.n
    assert observed.failed == s["attempts_total"] - s["items_completed"]
    assert observed.workers == 3 and observed.backlog == 0
    durations = result.columns.attempt_log
    assert observed.histogram.sum_s == pytest.approx(
        float(np.sum(durations.end_s - durations.start_s))
    )


def test_the_engine_s_names_by_default(tmp_path):
    observed = read(_write(tmp_path, _engine_answer(pipeline="orders")))
    assert observed.counts.tolist() == [10, 10, 10, 10]
    assert observed.interval_s == 15.0
    assert observed.histogram.cumulative_counts.tolist() == [20, 39, 42]
    assert observed.histogram.upper_bounds_s.tolist() == [0.1, 1.0, math.inf]
    assert observed.histogram.sum_s == pytest.approx(4.2)
    assert (observed.attempts, observed.failed) == (42, 6)
    assert (observed.backlog, observed.workers) == (7, 4)
    assert any("pipeline_items_offered_total" in note for note in observed.notes)


def test_a_list_of_answers_is_one_data_set(tmp_path):
    whole = _engine_answer()
    series = whole["data"]["result"]
    parts = [_answer(*series[:2]), _answer(*series[2:])]
    assert (
        read(_write(tmp_path, parts)).counts.tolist()
        == read(_write(tmp_path, whole, "b.json")).counts.tolist()
    )


def test_a_counter_reset_and_a_gap_and_two_instances(tmp_path):
    base = _engine_answer()["data"]["result"][1:]
    arrivals = [
        # A restart after 20: the next value (5) is the increase.
        _series("pipeline_items_offered_total", [0, 10, 20, 5, 15], instance="a"),
        # A missing point: 30 over two steps is 15 in each.
        _series("pipeline_items_offered_total", [0, 30, 36], instance="b",
                times=[T0, T0 + 30, T0 + 45]),
    ]  # fmt: skip
    observed = read(_write(tmp_path, _answer(*arrivals, *base)))
    assert observed.counts.tolist() == [10 + 15, 10 + 15, 5 + 6, 10]
    assert any("reset" in note for note in observed.notes)
    assert any("gap" in note for note in observed.notes)


def test_several_pipelines_need_a_choice(tmp_path):
    data = _engine_answer(pipeline="orders")
    data["data"]["result"] += _engine_answer(pipeline="refunds")["data"]["result"]
    path = _write(tmp_path, data)
    with pytest.raises(
        ValueError, match=r"holds 2 pipelines \(orders, refunds\); choose one with --pipeline"
    ):
        read(path)
    assert read(path, pipeline="refunds").workers == 4
    with pytest.raises(
        ValueError, match=r'no series pipeline_items_offered_total\{pipeline="nope"\}'
    ):
        read(path, pipeline="nope")


def test_a_service_not_built_on_this_engine_names_its_series(tmp_path):
    data = _answer(
        _series("http_requests_total", [0, 50, 100], job="api", code="200"),
        _series("http_requests_total", [0, 2, 5], job="api", code="503"),
        _series("http_requests_total", [0, 999, 1999], job="other", code="200"),
        *_histogram("http_request_duration_seconds", {"0.25": [0, 40, 80], "+Inf": [0, 52, 105]},
                    job="api"),
    )  # fmt: skip
    observed = read(
        _write(tmp_path, data),
        arrivals_series='http_requests_total{job="api"}',
        duration_series='http_request_duration_seconds{job="api"}',
        errors_series='http_requests_total{job="api",code=~"5.."}',
    )
    assert observed.counts.tolist() == [52, 53]
    assert (observed.attempts, observed.failed) == (105, 5)
    assert observed.workers is None and observed.backlog is None
    assert observed.max_attempts == 1  # a request counter: each request is one attempt


def test_a_selector_reads_as_promql_and_matches_as_prometheus():
    s = Selector.parse('http_requests_total{job="api", code!~"2..",path!="/health"}', "x")
    assert s.promql() == 'http_requests_total{job="api",code!~"2..",path!="/health"}'
    labels = {"__name__": "http_requests_total", "job": "api", "code": "503", "path": "/"}
    assert s.matches(labels)
    assert not s.matches({**labels, "code": "200"})
    assert not s.matches({**labels, "__name__": "other"})
    for bad, message in (
        ("1abc", "must be a metric name"),
        ("a{b=c}", "cannot read the label matcher"),
        ('a{b="c"', "missing closing"),
        ('a{b=~"("}', "not a regular expression"),
    ):
        with pytest.raises(ValueError, match=message):
            Selector.parse(bad, "--errors-series")  # fmt: skip


def _engine_with(tmp_path, change):
    data = _engine_answer()
    change(data["data"]["result"])
    return _write(tmp_path, data)


def _bucket(result, le):
    return next(s for s in result if s["metric"].get("le") == le)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t: _write(t, '{"status": "success", "data": '),
         r"range\.json: not valid JSON: .* line 1"),
        (lambda t: _write(t, b"\xff\xfe".decode("latin-1")), "not valid JSON|not UTF-8"),
        (lambda t: _write(t, {"status": "success", "data": {"resultType": "vector", "result": []}}),
         r'data\.resultType: expected "matrix".*instant query'),
        (lambda t: _write(t, {"status": "error", "errorType": "bad_data", "error": "parse error"}),
         "status: the query failed: bad_data: parse error"),
        (lambda t: _write(t, []), "an empty list"),
        (lambda t: _write(t, [_engine_answer(), 3]), r"\[1\]: expected a query_range answer"),
        (lambda t: _write(t, _answer()), "no series pipeline_items_offered_total for the arrivals"),
        (lambda t: _engine_with(t, lambda r: r.pop(0)), "no series pipeline_items_offered_total"),
        (lambda t: _engine_with(t, lambda r: [r.remove(s) for s in list(r) if "le" in s["metric"]]),
         "no series pipeline_attempt_duration_seconds_bucket for the service"),
        (lambda t: _engine_with(t, lambda r: _bucket(r, "1.0")["values"][2].__setitem__(1, "NaN")),
         r'data\.result\[2\]\.values\[2\]: pipeline_attempt_duration_seconds_bucket\{le="1.0"\} '
         "is nan"),
        (lambda t: _engine_with(t, lambda r: r[0]["values"][1].__setitem__(1, "-3")),
         r"data\.result\[0\]\.values\[1\]: .* is -3.0; a counter must be a finite number >= 0"),
        (lambda t: _engine_with(t, lambda r: _bucket(r, "1.0")["values"][3].__setitem__(1, "2")),
         r'bucket le="1" holds 2, less than le="0.1" \(15\).*buckets are cumulative'),
        (lambda t: _engine_with(t, lambda r: r.remove(_bucket(r, "+Inf"))),
         r'no le="\+Inf" bucket'),
        (lambda t: _engine_with(t, lambda r: _bucket(r, "1.0")["metric"].__setitem__("le", "soon")),
         r"metric\.le: expected a bucket bound > 0"),
        (lambda t: _engine_with(t, lambda r: r[0]["values"][2].__setitem__(0, T0)),
         r"values\[2\]: times must increase"),
        (lambda t: _engine_with(t, lambda r: r[0]["values"][2].__setitem__(1, 20)),
         r'values\[2\]: expected a number as text \("1.5", "NaN"\), got 20'),
        (lambda t: _engine_with(t, lambda r: r[0]["values"].__setitem__(2, [T0 + 30])),
         r"values\[2\]: expected \[unix_seconds, \"value\"\]"),
        (lambda t: _engine_with(t, lambda r: r[0]["values"][2].__setitem__(1, "x")),
         r"values\[2\]: expected a number as text, got 'x'"),
        (lambda t: _engine_with(t, lambda r: r[0]["metric"].__setitem__("pipeline", 3)),
         r"metric\.pipeline: expected a label value"),
        (lambda t: _engine_with(t, lambda r: r[0]["values"][2].__setitem__(0, T0 + 37)),
         "not on one step"),
        (lambda t: _engine_with(t, lambda r: r[-1]["values"][-1].__setitem__(1, "-1")),
         r"pipeline_workers is -1 workers; allowed: a finite number from 0 to 1,000,000"),
    ],
)  # fmt: skip
def test_a_bad_answer_is_one_line_naming_the_file_and_the_field(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(ValueError, match=message) as caught:
        read(path)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"prometheus {path}")


def test_a_window_is_for_a_server_not_a_file(tmp_path):
    with pytest.raises(
        ValueError, match="start, step: a window and step are for a Prometheus server"
    ):
        read(_write(tmp_path, _engine_answer()), start_s=T0, step_s=15.0)


def test_more_errors_than_requests_is_refused(tmp_path):
    data = _answer(
        _series("reqs_total", [0, 10]),
        _series("errs_total", [0, 30]),
        *_histogram("dur_seconds", {"+Inf": [0, 10]}),
    )
    with pytest.raises(ValueError, match="counts 30 errors, more than the 10 requests"):
        read(_write(tmp_path, data), arrivals_series="reqs_total",
             duration_series="dur_seconds", errors_series="errs_total")  # fmt: skip


def test_a_server_that_refuses_is_one_line():
    import socket

    with socket.socket() as probe:  # a port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        with pytest.raises(ValueError, match=rf"prometheus {url}: cannot connect \(.*refused"):
            read(url, start_s=T0, end_s=T0 + 600, step_s=15.0)


def test_a_server_window_is_checked_before_any_query():
    with pytest.raises(ValueError, match="Prometheus returns at most 11,000"):
        read("http://127.0.0.1:1", start_s=T0, end_s=T0 + 86_400, step_s=1.0)
    with pytest.raises(ValueError, match="end must be after start"):
        read("http://127.0.0.1:1", start_s=T0, end_s=T0, step_s=1.0)


def test_answers_that_overlap_count_each_series_once(tmp_path):
    whole = _engine_answer()
    again = _answer(whole["data"]["result"][0])  # the arrivals counter saved a second time
    observed = read(_write(tmp_path, [whole, again]))
    assert observed.counts.tolist() == [10, 10, 10, 10]
    assert any("1 series given again" in note for note in observed.notes)


def test_a_chain_s_stages_need_a_choice(tmp_path):
    data = _engine_answer(pipeline="ingest", stage="fetch")
    data["data"]["result"] += _engine_answer(pipeline="ingest", stage="write")["data"]["result"]
    path = _write(tmp_path, data)
    with pytest.raises(
        ValueError, match=r"holds 2 stages \(fetch, write\); choose one with --stage"
    ):
        read(path)
    assert read(path, stage="write").counts.sum() == 40


def test_numbers_beyond_floating_point_are_refused(tmp_path):
    data = _engine_answer()
    data["data"]["result"][0]["values"][1][1] = "1e308"
    data["data"]["result"][0]["values"][3][1] = "-0"
    data["data"]["result"][0]["values"][4][1] = "1.7e308"
    data["data"]["result"].append(
        _series("pipeline_items_offered_total", [0, 1e308, 1.7e308, 1.7e308, 1.7e308], instance="b")
    )
    _refused(
        tmp_path, data,
        r"range\.json: data\.result\[0\]\.values\[1\]: pipeline_items_offered_total \(at "
        r"1e\+308\) has increased by 1e\+308 arrivals in the window; allowed: a finite number "
        r"from 0 to 1,000,000,000 \(the most a scenario runs\)$",
    )  # fmt: skip


def _refused(tmp_path, data, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read(_write(tmp_path, data))


def _with_last(name: str, value: str):
    data = _engine_answer()
    for series in data["data"]["result"]:
        if series["metric"]["__name__"] == name:
            series["values"][-1][1] = value
    return data


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("pipeline_items_offered_total", "1e308",
         r"values\[4\]: pipeline_items_offered_total \(at 1e\+308\) has increased by 1e\+308 "
         r"arrivals in the window; allowed: a finite number from 0 to 1,000,000,000"),
        ("pipeline_items_offered_total", "2000000000",
         r"values\[4\]: pipeline_items_offered_total \(at 2e\+09\) has increased by 2e\+09 "
         r"arrivals in the window; allowed: a finite number from 0 to "
         r"1,000,000,000 \(the most a scenario runs\)"),
        ("pipeline_workers", "1e30",
         r"values\[4\]: pipeline_workers is 1e\+30 workers; allowed: a finite number from 0 to "
         r"1,000,000 \(a pipeline's concurrency at most\)"),
        ("pipeline_queue_depth", "1e20",
         r"values\[4\]: pipeline_queue_depth is 1e\+20 items waiting; allowed: a finite number "
         r"from 0 to 1,000,000,000"),
        ("pipeline_attempts_total", "1e300",
         r"values\[4\]: pipeline_attempts_total\{result=\"ok\"\} \(at 1e\+300\) has increased by "
         r"1e\+300 attempts; allowed: a finite number from 0 to "
         r"9,007,199,254,740,992 \(whole numbers a float holds exactly\)"),
        ("pipeline_attempt_duration_seconds_sum", "1e300",
         r"values\[4\]: pipeline_attempt_duration_seconds_sum \(at 1e\+300\) has increased by "
         r"1e\+300 seconds; allowed: a finite number from 0 to 42,000,000,000"),
    ],
)  # fmt: skip
def test_a_number_beyond_what_a_scenario_runs_names_its_series(tmp_path, name, value, message):
    # Each is refused by the reader, naming the file, the point and the series, before
    # any fit: not later by Scenario ("concurrency must be >= 1") or by numpy's Poisson.
    with pytest.raises(ValueError, match=r"range\.json: data\.result\[\d+\]\." + message):
        read(_write(tmp_path, _with_last(name, value)))


def test_an_arrivals_counter_that_never_moves_is_named(tmp_path):
    data = _engine_answer()
    data["data"]["result"][0]["values"] = [[t, "7"] for t, _ in data["data"]["result"][0]["values"]]
    with pytest.raises(
        ValueError,
        match=r"range\.json: pipeline_items_offered_total does not increase in the window \(4 "
        r"steps of 15 s from UNIX time 1700000000\.000\): no arrivals",
    ):
        read(_write(tmp_path, data))


def test_a_byte_order_mark_is_read_as_the_other_readers_read_it(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_engine_answer()).encode())
    assert read(str(path)).counts.tolist() == [10, 10, 10, 10]


def _windows(split: int, overlap: int = 0):
    """The engine's answer saved as two query_range windows: points [:split+overlap], [split:]."""
    whole = _engine_answer()
    first, second = json.loads(json.dumps(whole)), json.loads(json.dumps(whole))
    for a, b in zip(first["data"]["result"], second["data"]["result"], strict=True):
        a["values"] = a["values"][: split + overlap]
        b["values"] = b["values"][split:]
    return whole, [first, second]


@pytest.mark.parametrize("overlap", [0, 1, 2])
def test_windows_of_one_range_are_joined(tmp_path, overlap):
    # A range past 11,000 points is saved as adjacent windows: read as the whole range.
    whole, parts = _windows(3, overlap)
    joined = read(_write(tmp_path, parts))
    one = read(_write(tmp_path, whole, "whole.json"))
    assert joined.counts.tolist() == one.counts.tolist() == [10, 10, 10, 10]
    assert joined.histogram.cumulative_counts.tolist() == one.histogram.cumulative_counts.tolist()
    assert joined.histogram.sum_s == one.histogram.sum_s
    assert (joined.attempts, joined.failed, joined.backlog) == (one.attempts, one.failed, 7)
    assert any("joined in time order" in note for note in joined.notes)


def test_windows_that_disagree_are_refused_in_one_line(tmp_path):
    _, parts = _windows(3, 1)
    parts[1]["data"]["result"][0]["values"][0][1] = "31"  # the shared point: 30 in the first
    _refused(
        tmp_path, parts,
        r"pipeline_items_offered_total has two values at UNIX time 1700000045\.0: 30\.0 "
        r"\(\[0\]\.data\.result\[0\]\.values\[3\]\) and 31\.0 \(\[1\]\.data\.result\[0\]"
        r"\.values\[0\]\); windows of one series must agree where they overlap",
    )  # fmt: skip


def _http_answer(codes: dict[str, list[float]]):
    """A service not built on this engine: requests by code, and a duration histogram."""
    return _answer(
        *(_series("http_requests_total", v, code=c, job="api") for c, v in codes.items()),
        *_histogram("http_request_duration_seconds",
                    {"0.1": [0, 5, 10, 15, 20], "1.0": [0, 9, 19, 29, 39],
                     "+Inf": [0, 10, 20, 30, 42]}, job="api"),
    )  # fmt: skip


def test_a_request_counter_by_status_splits_its_failures(tmp_path):
    path = _write(tmp_path, _http_answer(
        {"200": [0, 8, 16, 24, 30], "404": [0, 1, 2, 3, 4], "503": [0, 1, 2, 3, 8]}))  # fmt: skip
    observed = read(
        path, arrivals_series="http_requests_total",
        duration_series="http_request_duration_seconds_bucket",  # the name a UI lists
    )  # fmt: skip
    assert observed.counts.tolist() == [10, 10, 10, 12]
    # 5xx failed; a 404 is the client's error, served.
    assert (observed.attempts, observed.failed) == (42, 8)
    assert any("by its code label" in note and "503" in note for note in observed.notes)
    assert observed.histogram.n == 42


def test_a_request_counter_without_status_says_no_failure_was_counted(tmp_path):
    data = _http_answer({"200": [0, 10, 20, 30, 42]})
    for series in data["data"]["result"]:
        series["metric"].pop("code", None)
    observed = read(_write(tmp_path, data), arrivals_series="http_requests_total",
                    duration_series="http_request_duration_seconds")  # fmt: skip
    assert observed.attempts is None and observed.failed is None
    assert any("no status label" in n and "--errors-series" in n for n in observed.notes)
    # The printout's failures line says so, not only the notes.
    how = calibrate_observed(observed, concurrency=2).how["failures"]
    assert how.startswith("none counted, so none assumed") and "--errors-series" in how


def test_an_enormous_file_is_not_read_to_its_end(tmp_path, monkeypatch):
    from pipeline.sim.workloads.telemetry import query_range

    monkeypatch.setattr(query_range, "MAX_ANSWER_BYTES", 1000)
    path = _write(tmp_path, _engine_answer())
    with pytest.raises(ValueError, match="more than 1,000 bytes"):
        read(path)


class _Answering:
    """A real HTTP server on a loopback port that answers every request with one reply."""

    def __init__(self, status: int, body: bytes, kind: str) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Answering:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.mark.parametrize(
    ("status", "body", "kind", "message"),
    [
        (200, b"<html>Grafana</html>", "text/html", "not valid JSON"),
        (400, b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}',
         "application/json", "the query failed: bad_data: parse error at char 3"),
        (502, b"Bad Gateway", "text/plain", "HTTP 502"),
        (200, json.dumps(_engine_answer()).encode(), "application/json", None),
    ],
)  # fmt: skip
def test_a_server_s_answer_is_read_or_refused_in_one_line(status, body, kind, message):
    with _Answering(status, body, kind) as server:
        window = {"start_s": T0, "end_s": T0 + 60, "step_s": 15.0}
        if message is None:  # every query gets the same whole answer: each series read once
            assert read(server.url, **window).counts.tolist() == [10, 10, 10, 10]
            return
        with pytest.raises(ValueError, match=message) as caught:
            read(server.url, **window)
        assert str(caught.value).startswith(f"prometheus {server.url}")


def test_points_too_far_apart_for_one_window_are_refused(tmp_path):
    # One point ten years on: the step grid would be 21 million steps of 15 s.
    data = _engine_answer()
    for series in data["data"]["result"]:
        series["values"][-1][0] = T0 + 15 * 21_000_000
    _refused(
        tmp_path, data,
        r"range\.json: pipeline_items_offered_total's points span 3\.15e\+08 s in steps of 15 s, "
        r"21,000,000 steps; allowed: at most 4,194,304",
    )  # fmt: skip
