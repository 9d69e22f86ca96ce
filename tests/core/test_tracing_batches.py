"""A batching stage's spans link to the creation context of every payload in the batch.

Through the real OpenTelemetry SDK and its in-memory exporter. Which upstream span made
which payload is read from the engine's own events: a span ends inside the event that
ends its attempt, so the k-th span a stage exports belongs to the k-th attempt-ending
event its ``on_event`` saw.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import random
from collections import Counter

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode, format_span_id, format_trace_id

import pipeline.tracing
from pipeline import Backoff, Chain, Pipeline, PipelineConfig, Stage
from pipeline.chain.handoff import BatchFormer
from pipeline.chain.stage import Batch
from pipeline.events import EventKind

FAST = Backoff(kind="constant", base_s=0.001)
ENDS = {EventKind.COMPLETED, EventKind.RETRY_SCHEDULED, EventKind.DEAD_LETTERED}


@pytest.fixture
def exporter():
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield spans, provider
    provider.shutdown()


def provider_with(spans, **limits):
    provider = TracerProvider(span_limits=SpanLimits(**limits))
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return provider


class Attempts:
    """An ``on_event`` that lists each ended attempt's payload, in the order attempts end."""

    def __init__(self):
        self.ended = []  # (kind, payload as a tuple or value, attempt number)
        self._open = set()

    def __call__(self, kind, now_s, item):
        if kind is EventKind.STARTED:
            self._open.add(item)
        elif (kind in ENDS or kind is EventKind.UNFINISHED) and item in self._open:
            self._open.discard(item)
            payload = tuple(item.payload) if isinstance(item.payload, Batch) else item.payload
            self.ended.append((kind, payload, item.attempts))


def ids(contexts):
    """Trace and span ids: a context read back from a traceparent is remote, else the same."""
    return [(c.trace_id, c.span_id) for c in contexts]


def stage_spans(spans, name):
    return [s for s in spans.get_finished_spans() if s.name == f"process {name}"]


def flaky(rng, fail):
    async def handle(payload):
        await asyncio.sleep(rng.random() * 0.002)
        if rng.random() < fail:
            raise ValueError("boom")
        return payload

    return handle


@pytest.mark.parametrize("seed", range(4))
def test_each_link_is_the_span_of_the_attempt_that_made_its_payload(exporter, seed):
    spans, provider = exporter
    rng = random.Random(seed)
    upstream, batches = Attempts(), Attempts()
    chain = Chain(
        [
            Stage(
                "parse",
                flaky(rng, 0.3),
                PipelineConfig(concurrency=3, max_attempts=3, backoff=FAST),
                on_event=upstream,
            ),
            Stage(
                "write",
                flaky(rng, 0.4),
                PipelineConfig(concurrency=2, max_attempts=3, backoff=FAST),
                batch_size=rng.choice([2, 5, 8]),
                batch_window_s=0.003,
                on_event=batches,
            ),
        ],
        name="ingest",
    )

    async def run():
        with pipeline.tracing.instrument(chain, tracer_provider=provider):
            return await chain.run(range(60))

    report = asyncio.run(run())
    parse, write = stage_spans(spans, "parse"), stage_spans(spans, "write")
    assert len(parse) == len(upstream.ended) == report.stages["parse"].attempts
    assert len(write) == len(batches.ended) == report.stages["write"].attempts
    # The span of the attempt that completed each upstream payload.
    made = {
        payload: span.context
        for (kind, payload, _), span in zip(upstream.ended, parse, strict=True)
        if kind is EventKind.COMPLETED
    }
    assert len(made) == report.stages["parse"].completed
    firsts = {}
    for (kind, payload, attempt), span in zip(batches.ended, write, strict=True):
        assert span.attributes["messaging.batch.message_count"] == len(payload)
        assert span.attributes["pipeline.attempt"] == attempt
        assert "pipeline.batch.links_dropped" not in span.attributes
        links = [link.context for link in span.links]
        if attempt == 1:
            firsts[payload] = span.context
            assert links == [made[each] for each in payload]
        else:
            # A retry links to the same payloads, then to the batch's first attempt (last).
            assert links == [made[each] for each in payload] + [firsts[payload]]
        if kind is EventKind.COMPLETED:
            assert span.status.status_code is StatusCode.OK
            assert "error.type" not in span.attributes
        else:
            assert span.status.status_code is StatusCode.ERROR
            assert span.attributes["error.type"] == "ValueError"
    # Every completed upstream payload is linked from its batch's first attempt, once.
    linked = Counter(
        link.context.span_id
        for span in write
        if span.attributes["pipeline.attempt"] == 1
        for link in span.links
    )
    assert sorted(linked) == sorted(context.span_id for context in made.values())
    assert set(linked.values()) == {1}
    # A plain stage's spans are not batch spans.
    assert all("messaging.batch.message_count" not in s.attributes for s in parse)


def test_a_fan_out_links_every_child_to_its_parent_and_a_batch_of_one_is_still_a_batch(
    exporter,
):
    spans, provider = exporter
    chain = Chain(
        [
            Stage("split", lambda x: [x, x + 100], fan_out=True),
            Stage("write", lambda batch: None, batch_size=10),
        ],
        name="fan",
    )

    async def run():
        with pipeline.tracing.instrument(chain, tracer_provider=provider):
            return await chain.run([7])  # two children: one batch of 2 at the drain

    asyncio.run(run())
    (split,) = stage_spans(spans, "split")
    (write,) = stage_spans(spans, "write")
    assert [link.context for link in write.links] == [split.context, split.context]
    assert write.attributes["messaging.batch.message_count"] == 2

    spans.clear()
    single = Chain(
        [Stage("one", lambda x: x), Stage("write", lambda batch: None, batch_size=4)], name="s"
    )

    async def run_one():
        with pipeline.tracing.instrument(single, tracer_provider=provider):
            return await single.run([1])

    asyncio.run(run_one())
    (one,) = stage_spans(spans, "one")
    (write,) = stage_spans(spans, "write")
    # The conventions: a batching API sets the count, whatever the size; one link.
    assert write.attributes["messaging.batch.message_count"] == 1
    assert [link.context for link in write.links] == [one.context]


class Carrying:
    """A payload carrying its own creation context (W3C trace context), as a message would."""

    def __init__(self, traceparent):
        self.traceparent = traceparent


def traceparent(span) -> str:
    context = span.get_span_context()
    return f"00-{format_trace_id(context.trace_id)}-{format_span_id(context.span_id)}-01"


def test_a_payload_that_carries_a_traceparent_is_linked_to_it(exporter):
    spans, provider = exporter
    producer = provider.get_tracer("producer")
    created = [producer.start_span(f"create {i}") for i in range(6)]
    for span in created:
        span.end()
    carriers = [
        Carrying(traceparent(created[0])),
        {"traceparent": traceparent(created[1])},
        Carrying("not a traceparent"),  # unreadable: falls back to the upstream span
        Carrying(traceparent(created[3])),
    ]
    chain = Chain(
        [Stage("pass", lambda x: x), Stage("write", lambda batch: None, batch_size=4)],
        name="carry",
    )

    async def run():
        with pipeline.tracing.instrument(chain, tracer_provider=provider):
            return await chain.run(carriers)

    asyncio.run(run())
    upstream = stage_spans(spans, "pass")
    (write,) = stage_spans(spans, "write")
    # Each upstream span links to what its own payload carries (the malformed one: nothing).
    origin = [span.get_span_context() for span in created]
    assert [ids(link.context for link in s.links) for s in upstream] == [
        ids([origin[0]]),
        ids([origin[1]]),
        [],
        ids([origin[3]]),
    ]
    assert ids(link.context for link in write.links) == ids(
        [origin[0], origin[1], upstream[2].context, origin[3]]
    )


def test_a_plain_pipeline_links_a_carried_context_and_the_first_attempt(exporter):
    spans, provider = exporter
    producer = provider.get_tracer("producer")
    origin = producer.start_span("create")
    origin.end()
    calls = []

    async def fail_once(payload):
        calls.append(payload)
        if len(calls) == 1:
            raise ValueError("once")

    pipe = Pipeline(fail_once, PipelineConfig(backoff=FAST), name="p")

    async def run():
        with pipeline.tracing.instrument(pipe, tracer_provider=provider):
            return await pipe.run([Carrying(traceparent(origin))])

    asyncio.run(run())
    first, retry = stage_spans(spans, "p")
    assert ids(link.context for link in first.links) == ids([origin.get_span_context()])
    assert ids(link.context for link in retry.links) == ids(
        [origin.get_span_context(), first.context]
    )
    assert "messaging.batch.message_count" not in first.attributes


def huge_chain(fail_first: bool):
    calls = []

    def write(batch):
        calls.append(len(batch))
        if fail_first and len(calls) == 1:
            raise ValueError("first call")

    return Chain(
        [
            Stage("pass", lambda x: x, PipelineConfig(concurrency=4)),
            Stage("write", write, PipelineConfig(backoff=FAST), batch_size=1000),
        ],
        name="huge",
    )


def run_chain(chain, source, **instrument):
    async def run():
        with pipeline.tracing.instrument(chain, **instrument):
            return await chain.run(source)

    return asyncio.run(run())


def test_a_batch_past_the_link_limit_links_its_first_payloads_and_counts_the_rest(exporter):
    spans, provider = exporter
    run_chain(huge_chain(fail_first=True), range(300), tracer_provider=provider)
    made = [s.context for s in stage_spans(spans, "pass")]
    first, retry = stage_spans(spans, "write")
    assert first.attributes["messaging.batch.message_count"] == 300
    assert [link.context for link in first.links] == made[:128]
    assert first.attributes["pipeline.batch.links_dropped"] == 172
    # The retry keeps room for its first attempt's link, the last one.
    assert [link.context for link in retry.links] == [*made[:127], first.context]
    assert retry.attributes["pipeline.batch.links_dropped"] == 173
    assert first.dropped_links == retry.dropped_links == 0  # the SDK dropped nothing


def test_a_raised_limit_links_every_payload(exporter):
    spans, _ = exporter
    provider = provider_with(spans, max_links=1000)
    try:
        run_chain(
            huge_chain(fail_first=False), range(300), tracer_provider=provider, max_links=1000
        )
    finally:
        provider.shutdown()
    made = [s.context for s in stage_spans(spans, "pass")]
    (write,) = stage_spans(spans, "write")
    assert [link.context for link in write.links] == made
    assert "pipeline.batch.links_dropped" not in write.attributes


def test_an_sdk_limit_below_ours_keeps_the_last_links_and_so_the_first_attempt(exporter):
    spans, _ = exporter
    provider = provider_with(spans, max_links=10)
    try:
        run_chain(huge_chain(fail_first=True), range(30), tracer_provider=provider)
    finally:
        provider.shutdown()
    made = [s.context for s in stage_spans(spans, "pass")]
    first, retry = stage_spans(spans, "write")
    # The SDK keeps the newest links: the retry's first-attempt link, last, survives.
    assert [link.context for link in retry.links] == [*made[21:30], first.context]
    assert retry.dropped_links == 21
    assert [link.context for link in first.links] == made[20:30]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "128"])
def test_max_links_is_checked(bad):
    error = ValueError if isinstance(bad, int) and not isinstance(bad, bool) else TypeError
    with pytest.raises(error, match=r"^max_links must be (>= 1|an integer >= 1), got "):
        pipeline.tracing.instrument(Pipeline(lambda x: x), max_links=bad)


def test_a_batch_that_always_fails_is_dead_lettered_with_its_links_on_every_attempt(exporter):
    spans, provider = exporter

    def broken(batch):
        raise KeyError("no table")

    chain = Chain(
        [
            Stage("pass", lambda x: x),
            Stage("write", broken, PipelineConfig(max_attempts=3, backoff=FAST), batch_size=3),
        ],
        name="dead",
    )
    report = run_chain(chain, range(3), tracer_provider=provider)
    assert len(report.stages["write"].dead_letters) == 3  # counted per payload
    made = [s.context for s in stage_spans(spans, "pass")]
    first, *retries = stage_spans(spans, "write")
    assert len(retries) == 2
    for span in (first, *retries):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "KeyError"
    assert [link.context for link in first.links] == made
    for span in retries:
        assert [link.context for link in span.links] == [*made, first.context]


@pytest.mark.parametrize("cancels", [1, 2])
def test_cancelled_mid_batch_the_open_span_ends_unfinished_with_its_links(exporter, cancels):
    spans, provider = exporter
    started = asyncio.Event()

    async def slow(batch):
        started.set()
        await asyncio.sleep(3600)

    chain = Chain(
        [Stage("pass", lambda x: x), Stage("write", slow, batch_size=4)],
        drain_timeout_s=0.0,
        name="cut",
    )

    async def source():
        for i in range(4):
            yield i
        # The source stays open: an ended source would drain, and the drain may seal a
        # partial batch before the fourth payload has passed the first stage.
        await asyncio.Event().wait()

    async def run():
        with pipeline.tracing.instrument(chain, tracer_provider=provider):
            task = asyncio.create_task(chain.run(source()))
            await started.wait()
            for _ in range(cancels):
                task.cancel()
                await asyncio.sleep(0)
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run())
    assert chain.report.balanced
    made = [s.context for s in stage_spans(spans, "pass")]
    (write,) = stage_spans(spans, "write")
    assert write.attributes["error.type"] == "unfinished"
    assert [link.context for link in write.links] == made


def test_a_drain_sends_the_partial_batch_with_its_links(exporter):
    spans, provider = exporter
    chain = Chain(
        [Stage("pass", lambda x: x), Stage("write", lambda batch: None, batch_size=4)],
        name="drain",
    )

    async def source():
        for i in range(6):
            yield i
            if i == 4:
                chain.stop()  # intake stops: the partial batch [4] goes at the drain

    report = run_chain(chain, source(), tracer_provider=provider)
    made = [s.context for s in stage_spans(spans, "pass")]
    sizes = sorted(
        s.attributes["messaging.batch.message_count"] for s in stage_spans(spans, "write")
    )
    assert sizes == [1, 4]
    assert report.stages["write"].completed == 5
    linked = [link.context for s in stage_spans(spans, "write") for link in s.links]
    assert sorted(c.span_id for c in linked) == sorted(c.span_id for c in made)


def test_a_lineage_hook_that_raises_costs_only_its_link_and_close_detaches_it(exporter):
    spans, provider = exporter
    chain = Chain(
        [Stage("pass", lambda x: x), Stage("write", lambda batch: None, batch_size=2)],
        name="hooks",
    )

    def broken():
        raise RuntimeError("hook")

    async def run():
        handle = pipeline.tracing.instrument(chain, tracer_provider=provider)
        chain.add_lineage("broken", broken)
        report = await chain.run(range(4))
        handle.close()
        handle.close()
        return report

    report = asyncio.run(run())
    assert report.balanced and report.stages["write"].completed == 4
    assert len(stage_spans(spans, "write")) == 2
    assert list(chain._lineages) == ["broken"]  # the tracing hook is gone
    assert all(list(former.lineages) == ["broken"] for former in chain._formers if former)


def test_origins_pad_for_a_hook_attached_mid_batch_and_are_not_the_batch_s_value():
    async def run():
        sent = []

        class Sink:
            state = __import__("pipeline").state.State.OPEN

            async def put(self, batch):
                sent.append(batch)
                return True

        former = BatchFormer(Sink(), 3, None, None)
        former.start("t")
        await former.put("a")
        former.lineages["k"] = iter(["B", "C"]).__next__
        await former.put("b")
        await former.put("c")
        await former.drain(1.0)
        return sent

    (batch,) = asyncio.run(run())
    assert batch == ("a", "b", "c")
    assert batch.origins == {"k": (None, "B", "C")}
    for other in (copy.copy(batch), copy.deepcopy(batch), pickle.loads(pickle.dumps(batch))):
        assert other == batch and type(other) is Batch and other.origins == {}
    assert Batch((1,)).origins == {}
