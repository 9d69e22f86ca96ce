"""pipeline.tracing through the real OpenTelemetry SDK and its in-memory exporters."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import pipeline.tracing
from pipeline import Backoff, Chain, Pipeline, PipelineConfig, Stage
from tests.core.test_metrics import faulty

FAST = Backoff(kind="constant", base_s=0.001)


@pytest.fixture
def otel():
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield spans, reader, {"tracer_provider": tracer_provider, "meter_provider": meter_provider}
    tracer_provider.shutdown()
    meter_provider.shutdown()


def histogram_counts(reader) -> dict[tuple[str, frozenset], int]:
    counts = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    counts[(metric.name, frozenset(point.attributes.items()))] = point.count
    return counts


@pytest.mark.parametrize("seed", range(3))
def test_one_span_per_attempt_with_messaging_conventions(otel, seed):
    spans, reader, providers = otel
    rng = random.Random(seed)
    pipe = Pipeline(
        faulty(rng, fail=0.35, slow=0.05),
        PipelineConfig(concurrency=3, backoff=FAST, attempt_timeout_s=0.02),
        name="orders",
        rng=random.Random(seed),
    )

    async def run():
        with pipeline.tracing.instrument(pipe, **providers):
            return await pipe.run(range(30))

    report = asyncio.run(run())
    finished = spans.get_finished_spans()
    assert len(finished) == report.attempts
    assert {span.name for span in finished} == {"process orders"}
    assert {span.kind for span in finished} == {SpanKind.CONSUMER}
    for span in finished:
        assert span.attributes["messaging.operation.type"] == "process"
        assert span.attributes["messaging.destination.name"] == "orders"
        assert span.start_time <= span.end_time
    ok = [s for s in finished if s.status.status_code is StatusCode.OK]
    failed = [s for s in finished if s.status.status_code is StatusCode.ERROR]
    assert len(ok) == report.completed
    assert len(ok) + len(failed) == report.attempts
    assert all(s.attributes["error.type"] in {"ValueError", "TimeoutError"} for s in failed)
    # A retry links to its item's first attempt; a first attempt links to nothing.
    by_id = {s.context.span_id: s for s in finished}
    for span in finished:
        if span.attributes["pipeline.attempt"] == 1:
            assert not span.links
            # The item's time in the queue, so that its arrival is the start minus it.
            assert 0 <= span.attributes["pipeline.wait_seconds"] < 60
        else:
            (link,) = span.links
            assert by_id[link.context.span_id].attributes["pipeline.attempt"] == 1
            assert "pipeline.wait_seconds" not in span.attributes
    retries = sum(1 for s in finished if s.attributes["pipeline.attempt"] > 1)
    assert retries == report.statistics.retried
    counts = histogram_counts(reader)
    labels = frozenset({("pipeline", "orders")})
    assert counts[("pipeline_latency_seconds", labels)] == report.completed
    assert counts[("pipeline_attempt_duration_seconds", labels)] == report.attempts
    assert counts[("pipeline_wait_seconds", labels)] == report.admitted


def test_a_chain_names_each_stage(otel):
    spans, reader, providers = otel
    chain = Chain(
        [Stage("split", lambda x: [x, x], fan_out=True), Stage("write", lambda x: x)],
        name="ingest",
    )

    async def run():
        with pipeline.tracing.instrument(chain, **providers):
            return await chain.run(range(5))

    report = asyncio.run(run())
    names = [s.attributes["messaging.destination.name"] for s in spans.get_finished_spans()]
    assert names.count("split") == report.stages["split"].attempts == 5
    assert names.count("write") == report.stages["write"].attempts == 10
    counts = histogram_counts(reader)
    assert (
        counts[
            ("pipeline_latency_seconds", frozenset({("pipeline", "ingest"), ("stage", "write")}))
        ]
        == 10
    )


def test_close_stops_the_spans(otel):
    spans, _, providers = otel
    pipe = Pipeline(lambda x: x, name="p")
    handle = pipeline.tracing.instrument(pipe, **providers)
    handle.close()
    handle.close()
    asyncio.run(pipe.run(range(4)))
    assert spans.get_finished_spans() == ()
    assert pipe._attached == ()


def test_bad_target():
    with pytest.raises(TypeError, match=r"^target must be a Pipeline or a Chain, got 'x'$"):
        pipeline.tracing.instrument("x")


def test_without_opentelemetry_it_is_one_missing_extra_naming_metrics():
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "try:\n"
        "    import pipeline.tracing\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "MissingExtra pipeline.tracing needs opentelemetry: pip install 'pipeline-lab[metrics]'"
    )


def test_the_first_attempt_carries_the_wait_the_histogram_records(otel):
    spans, reader, providers = otel

    async def slow(x):
        await asyncio.sleep(0.005)
        return x

    pipe = Pipeline(slow, PipelineConfig(concurrency=1), name="queued")

    async def run():
        with pipeline.tracing.instrument(pipe, **providers):
            return await pipe.run(range(6))

    asyncio.run(run())
    waits = [s.attributes["pipeline.wait_seconds"] for s in spans.get_finished_spans()]
    assert len(waits) == 6
    assert max(waits) > 0.01  # one worker: the last items waited for the others
    (point,) = [
        p
        for r in reader.get_metrics_data().resource_metrics
        for sm in r.scope_metrics
        for m in sm.metrics
        if m.name == "pipeline_wait_seconds"
        for p in m.data.data_points
    ]
    assert point.sum == pytest.approx(sum(waits), rel=1e-12)


def test_a_retried_item_that_expires_leaves_no_span_state_behind(otel):
    spans, _, providers = otel
    failed = set()

    async def handle(x):
        await asyncio.sleep(0.001)
        if x not in failed:
            failed.add(x)
            raise ValueError("once")

    # Each item fails once; its retry (after an hour) could only start past its deadline.
    config = PipelineConfig(concurrency=2, backoff=Backoff.constant(3600.0), max_wait_s=60.0)
    pipe = Pipeline(handle, config, name="late")

    async def run():
        with pipeline.tracing.instrument(pipe, **providers) as handle_:
            report = await pipe.run(range(6))
            ((tracer,),) = [{each.__self__ for each in kinds.values()} for kinds in pipe._attached]
            return report, tracer, handle_

    report, tracer, _ = asyncio.run(run())
    assert len(report.expired) == 6 and report.attempts == 6
    assert len(spans.get_finished_spans()) == 6
    assert tracer._spans == {} and tracer._firsts == {}
