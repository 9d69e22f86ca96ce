"""pipeline.sim.workloads.telemetry.otlp: OTLP/JSON span exports read back to what went in."""

from __future__ import annotations

import asyncio
import json
import random
import tracemalloc

import numpy as np
import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import pipeline.tracing
from pipeline import Backoff, Chain, EventKind, Pipeline, PipelineConfig, Stage
from pipeline.sim.workloads.telemetry import otlp
from tests.core.test_metrics import faulty
from tests.sim.workloads.telemetry import known


def attribute(key, value):
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"doubleValue": value}}


def pipeline_spans(run: known.Run, *, destination: str = "orders", seed: int = 0) -> list[dict]:
    """pipeline.tracing's spans for these attempts, in the OTLP JSON encoding."""
    rng = random.Random(seed)
    spans, firsts = [], {}
    attempt_no = 0
    for i in range(run.item.size):
        attempt_no = 1 if run.first[i] else attempt_no + 1
        attributes = [
            attribute("messaging.operation.type", "process"),
            attribute("messaging.destination.name", destination),
            attribute("pipeline.attempt", attempt_no),
        ]
        span = {
            "traceId": f"{rng.getrandbits(128):032x}",
            "spanId": f"{rng.getrandbits(64):016x}",
            "flags": 256,
            "name": f"process {destination}",
            "kind": 5,
            "startTimeUnixNano": str(int(run.start_ns[i])),
            "endTimeUnixNano": str(int(run.end_ns[i])),
        }
        if run.first[i]:
            wait_ns = int(run.start_ns[i] - run.arrival_ns[run.item[i]])
            attributes.append(attribute("pipeline.wait_seconds", wait_ns / 1e9))
            firsts[run.item[i]] = span
        else:
            first = firsts[run.item[i]]
            span["links"] = [{"traceId": first["traceId"], "spanId": first["spanId"], "flags": 256}]
        if run.failed[i]:
            attributes.append(attribute("error.type", "SimulatedFailure"))
        span["attributes"] = attributes
        span["status"] = {"code": 2} if run.failed[i] else {"code": 1}
        spans.append(span)
    return spans


def export_lines(spans: list[dict], end_ns: list[int], *, service="orders-svc", batch=512):
    """One ExportTraceServiceRequest per line, spans batched in the order they ended."""
    order = np.argsort(end_ns, kind="stable")
    lines = []
    for lo in range(0, len(order), batch):
        request = {
            "resourceSpans": [
                {
                    "resource": {"attributes": [attribute("service.name", service)]},
                    "scopeSpans": [
                        {
                            "scope": {"name": "pipeline"},
                            "spans": [spans[i] for i in order[lo : lo + batch]],
                        }
                    ],
                }
            ]
        }
        lines.append(json.dumps(request, separators=(",", ":")))
    return lines


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_pipeline_spans_read_back_exactly(tmp_path):
    run = known.run(concurrency=1, n_items=2000, seed=3)
    spans = pipeline_spans(run)
    observed = otlp.read(write(tmp_path / "spans.json", export_lines(spans, run.end_ns)))
    # An item arrived at its first attempt's start minus its wait: to the nanosecond.
    arrivals = np.sort(run.arrival_ns)
    assert np.array_equal(observed.arrivals_s, (arrivals - arrivals[0]) / 1e9)
    assert (run.start_ns[run.first] > run.arrival_ns).mean() > 0.2  # items did wait
    order = np.argsort(run.start_ns, kind="stable")
    assert np.array_equal(observed.service_s, run.duration_ns[order] / 1e9)
    assert observed.attempts == run.item.size
    assert observed.failed == int(run.failed.sum())
    assert observed.source.startswith("OTLP ")


def test_pipeline_spans_give_the_scenario_within_sampling_error(tmp_path):
    run = known.run(concurrency=1, n_items=3000, seed=11)
    observed = otlp.read(write(tmp_path / "s.json", export_lines(pipeline_spans(run), run.end_ns)))
    span_s = observed.arrivals_s[-1] - observed.arrivals_s[0]
    known.check_truth(
        n_attempts=observed.attempts,
        rate_per_s=(observed.arrivals_s.size - 1) / span_s,
        n_arrivals=observed.arrivals_s.size,
        mean_s=float(observed.service_s.mean()),
        p95_s=float(np.quantile(observed.service_s, 0.95)),
        failed=observed.failed,
        rate_truth=known.RATE,
    )


def test_without_attempt_numbers_links_tell_retries_and_without_waits_a_note_says_so(tmp_path):
    run = known.run(concurrency=1, n_items=500, seed=5)
    spans = pipeline_spans(run)
    for span in spans:
        span["attributes"] = [
            a
            for a in span["attributes"]
            if a["key"] not in ("pipeline.attempt", otlp.WAIT_ATTRIBUTE)
        ]
    observed = otlp.read(write(tmp_path / "s.json", export_lines(spans, run.end_ns)))
    starts = np.sort(run.start_ns[run.first])
    assert np.array_equal(observed.arrivals_s, (starts - starts[0]) / 1e9)
    assert observed.attempts == run.item.size
    assert any("equal arrivals only while nothing waits" in note for note in observed.notes)


def server_spans(run: known.Run, name="GET /orders") -> list[dict]:
    return [
        {
            "traceId": f"{i + 1:032x}",
            "spanId": f"{i + 1:016x}",
            "name": name,
            "kind": 2,
            "startTimeUnixNano": int(run.start_ns[i]),  # a number, as protobuf JSON also allows
            "endTimeUnixNano": str(int(run.end_ns[i])),
            "status": {"code": 2, "message": "HTTP 500"} if run.failed[i] else {},
        }
        for i in range(run.item.size)
    ]


def test_server_spans_of_any_service_by_name(tmp_path):
    run = known.run(n_items=400, seed=2)
    lines = export_lines(server_spans(run), run.end_ns, service="shop")
    lines += export_lines(server_spans(run, "GET /health"), run.end_ns, service="shop")
    path = write(tmp_path / "server.json", lines)
    observed = otlp.read(path, span_name="GET /orders", service="shop")
    starts = np.sort(run.start_ns)
    assert np.array_equal(observed.arrivals_s, (starts - starts[0]) / 1e9)
    assert observed.attempts == run.item.size and observed.failed == int(run.failed.sum())
    with pytest.raises(
        ValueError,
        match=r"no SERVER span named 'GET /x'; SERVER span names seen: "
        r"'GET /health', 'GET /orders'$",
    ):
        otlp.read(path, span_name="GET /x")
    with pytest.raises(
        ValueError,
        match=r"no resource with service.name 'other'; services seen: "
        r"'shop'$",
    ):
        otlp.read(path, span_name="GET /orders", service="other")
    with pytest.raises(
        ValueError,
        match=r"no span with messaging.operation.type = 'process' .*"
        r"give span_name= \(SERVER span names seen: 'GET /health', 'GET /orders'\)",
    ):
        otlp.read(path)


def test_one_pretty_printed_request_is_read_too(tmp_path):
    run = known.run(n_items=20, seed=2)
    (line,) = export_lines(server_spans(run), run.end_ns)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(json.loads(line), indent=2))
    assert otlp.read(path, span_name="GET /orders").attempts == run.item.size


def test_spans_from_the_real_tracing_through_the_sdk_file_exporter(tmp_path):
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    rng = random.Random(4)
    admitted = []

    def on_event(kind, now_s, item):
        if kind is EventKind.ADMITTED:
            admitted.append(now_s)

    pipe = Pipeline(
        faulty(rng, fail=0.3, slow=0.05),
        PipelineConfig(
            concurrency=2, backoff=Backoff(kind="constant", base_s=0.001), attempt_timeout_s=0.02
        ),
        name="orders",
        rng=random.Random(4),
        on_event=on_event,
    )

    async def go():
        with pipeline.tracing.instrument(pipe, tracer_provider=provider):
            return await pipe.run(range(40))

    report = asyncio.run(go())
    provider.shutdown()
    observed = otlp.read(path)
    assert observed.attempts == report.attempts
    assert observed.failed == report.attempts - report.completed
    assert observed.arrivals_s.size == report.admitted
    assert observed.service_s.size == report.attempts
    assert not any("carry no" in note for note in observed.notes)
    # Arrivals are the admissions (first attempts' starts minus pipeline.wait_seconds), to
    # the nanoseconds that the span times are truncated to.
    admitted = np.sort(admitted)
    assert np.allclose(observed.arrivals_s, admitted - admitted[0], rtol=0, atol=3e-9)
    # Each retry's gap runs from its item's attempt before to it: at least the backoff.
    assert observed.retry_gaps_s.size == report.attempts - report.admitted > 0
    assert observed.retry_gaps_s.min() >= 0.001 - 3e-9
    most = max((d.attempts for d in report.dead_letters), default=2)
    assert most <= observed.max_attempts <= pipe.config.max_attempts


def test_a_retry_links_to_its_first_attempt_after_its_message_s_creation(tmp_path):
    """pipeline.tracing puts the link to an item's first attempt last: that one is read."""
    run = known.run(n_items=400, seed=2)
    spans = pipeline_spans(run)
    for span in spans:
        creation = {"traceId": "1" * 32, "spanId": "2" * 16}
        span["links"] = [creation, *span.get("links", [])]
    observed = otlp.read(write(tmp_path / "spans.json", export_lines(spans, run.end_ns)))
    assert observed.arrivals_s.size == run.arrival_ns.size
    retries = int((~run.first).sum())
    assert observed.retry_gaps_s.size == retries > 0
    counts = np.bincount(run.item)
    assert observed.max_attempts == counts.max()
    assert np.array_equal(np.sort(observed.retry_numbers), np.sort(np.concatenate(
        [np.arange(1, c) for c in counts])))  # fmt: skip


def test_a_chain_s_stages_are_destinations(tmp_path):
    path = tmp_path / "chain.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    chain = Chain(
        [Stage("split", lambda x: [x, x], fan_out=True), Stage("write", lambda x: x)], name="ingest"
    )

    async def go():
        with pipeline.tracing.instrument(chain, tracer_provider=provider):
            return await chain.run(range(5))

    asyncio.run(go())
    provider.shutdown()
    with pytest.raises(
        ValueError,
        match=r"spans of several messaging destinations; choose one "
        r"with destination=: 'split', 'write'$",
    ):
        otlp.read(path)
    assert otlp.read(path, destination="write").attempts == 10
    assert otlp.read(path, destination="split").arrivals_s.size == 5
    with pytest.raises(ValueError, match=r"destinations seen: 'split', 'write'$"):
        otlp.read(path, destination="nope")
    with pytest.raises(ValueError, match=r"^give destination .* or span_name .*, not both$"):
        otlp.read(path, destination="write", span_name="x")


def one_span(**changes):
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "process q",
        "kind": 5,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000500000000",
        "attributes": [
            attribute("messaging.operation.type", "process"),
            attribute("messaging.destination.name", "q"),
        ],
    }
    span.update(changes)
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


SPAN = r"spans\.json line 1: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"spans\.json: no spans; expected"),
        ('{"resourceSpans": []}\n', r"spans\.json: no spans; expected"),
        ('{"resourceMetrics": []}\n', r"line 1: no resourceSpans; expected .* \(metrics or logs"),
        ("[]\n", r"line 1: expected an OTLP/JSON ExportTraceServiceRequest .*, got an array$"),
        ('{"resourceSpans": {}}\n', r"line 1: resourceSpans must be an array"),
        (one_span(kind="SPAN_KIND_CONSUMER"), SPAN + r"\.kind must be an integer 0-5 \(OTLP/JSON"),
        (one_span(endTimeUnixNano="1"), SPAN + r": ends \(1\) before it starts"),
        (
            one_span(startTimeUnixNano="1", endTimeUnixNano="9000000000000000000"),
            SPAN + r": endTimeUnixNano - startTimeUnixNano is 9e\+09 seconds; allowed: a finite "
            r"number from 0 to 1,000,000,000 \(a service time at most\)$",
        ),
        (
            one_span(startTimeUnixNano="99999999999999999999"),
            SPAN + r"\.startTimeUnixNano must be >= 0 and < 9223372036854775808",
        ),
        (
            one_span(startTimeUnixNano="1.5e18"),
            SPAN + r"\.startTimeUnixNano must be a whole number",
        ),
        (one_span(startTimeUnixNano=None), SPAN + r"\.startTimeUnixNano must be a whole number"),
        (one_span(spanId="xyz"), SPAN + r"\.spanId must be 16 hex digits"),
        (one_span(status={"code": 7}), SPAN + r"\.status\.code must be 0, 1 or 2"),
        (
            one_span(attributes=[{"key": "messaging.operation.type", "value": {"stringValue": 3}}]),
            SPAN + r"\.attributes\[0\] \(messaging.operation.type\)\.value\.stringValue must be",
        ),
        (
            one_span(attributes=[attribute("messaging.operation.type", "process")]),
            SPAN + r": a process span needs messaging.destination.name, got None",
        ),
        (
            one_span(
                attributes=[
                    attribute("messaging.operation.type", "process"),
                    attribute("messaging.destination.name", "q"),
                    attribute("pipeline.wait_seconds", -1.0),
                ]
            ),
            SPAN + r": pipeline.wait_seconds must be seconds >= 0",
        ),
        ('{"resourceSpans": [' * 5000 + "\n", r"line 1: nested too deeply to read"),
        ('{"resourceSpans": NaN}\n', r"line 1: NaN is not a JSON number"),
        (
            "{\n  broken",
            r"spans\.json: not valid JSON \(Expecting property name enclosed in double",
        ),
    ],
)
def test_a_malformed_export_is_one_line_naming_file_line_and_field(tmp_path, text, message):
    path = tmp_path / "spans.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        otlp.read(path)
    assert "\n" not in str(info.value)


def test_only_unfinished_attempts_and_orphan_retries(tmp_path):
    cut = one_span(
        attributes=[
            attribute("messaging.operation.type", "process"),
            attribute("messaging.destination.name", "q"),
            attribute("error.type", "unfinished"),
        ]
    )
    path = write(tmp_path / "cut.json", [cut])
    with pytest.raises(ValueError, match=r"has only attempts cut short by the end of a run"):
        otlp.read(path)
    retry = one_span(
        attributes=[
            attribute("messaging.operation.type", "process"),
            attribute("messaging.destination.name", "q"),
            attribute("pipeline.attempt", 2),
        ]
    )
    with pytest.raises(ValueError, match=r"has retries but no first attempt"):
        otlp.read(write(tmp_path / "retry.json", [retry]))


def test_memory_stays_bounded_on_a_large_export(tmp_path):
    # 2 MB of spans the reader passes over (a web service's) around a few of the pipeline's:
    # what is kept is the selected spans (50 bytes each), whatever the file's size.
    run = known.run(n_items=20, seed=2)
    filler = export_lines(server_spans(run, "GET /other"), run.end_ns)[0]
    path = tmp_path / "big.json"
    with path.open("w") as f:
        f.write(export_lines(pipeline_spans(run), run.end_ns)[0] + "\n")
        for _ in range(2_000_000 // len(filler)):
            f.write(filler + "\n")
    tracemalloc.start()
    try:
        observed = otlp.read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert observed.arrivals_s.size == 20
    assert peak < 200_000  # a tenth of the file: held as Python objects it would be ten times it
