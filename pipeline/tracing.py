"""OpenTelemetry spans and histograms of real-time runs: ``instrument(pipe)``.

Needs OpenTelemetry (``opentelemetry-api``; the ``[metrics]`` extra brings it
with the SDK)::

    handle = pipeline.tracing.instrument(pipe)     # the global providers, or pass yours
    report = await pipe.run(items)
    handle.close()

One span per attempt, following OpenTelemetry's messaging semantic
conventions: named ``process NAME``, kind ``CONSUMER``, with
``messaging.operation.type = "process"``, ``messaging.destination.name`` the
pipeline's name (a chain's stage: the stage's name), ``pipeline.attempt``
(1 for the first) and, on failure, ``error.type`` (the exception's class
name) and an error status. The first attempt's span also carries
``pipeline.wait_seconds``, the item's time in the queue (seconds, as the wait
histogram records it), so the item's admission is the span's start minus it:
what :mod:`pipeline.sim.workloads.telemetry.otlp` reads back as the arrival.
Attributes carry names and counts, never payloads.

Links, as the conventions ask of a process span, to each message's creation
context, then, on a retry, to the item's first attempt (the last link):

- a payload that carries a W3C ``traceparent`` (an attribute, or a key of a
  mapping) is linked to that context;
- a batching stage's span (``Stage(batch_size > 1)``) is a batch operation:
  ``messaging.batch.message_count`` is the batch's size (1 included), and each
  payload without a context of its own links to the span of the upstream
  attempt that made it (the batch former records it as the payload arrives);
- at most ``max_links`` links per span (the SDK's default limit, 128): a batch
  larger than that links its first payloads and counts the rest in
  ``pipeline.batch.links_dropped``. Under a lower SDK limit the SDK keeps the
  newest links, so a retry's first-attempt link survives.

A plain stage after another in a chain is not linked to the upstream span
(its items enter the engine's own queue, which records no lineage).

The histograms of :mod:`pipeline._metric_names` (wait, attempt duration,
latency, in seconds) are recorded as OpenTelemetry histograms under the same
names, with attributes ``pipeline`` and ``stage``.

Span times are wall-clock nanoseconds: the loop's times, shifted by the
difference between the wall clock and the loop's clock at the first event.
The listeners are added beside ``on_event`` (``add_listener``) and isolated like it.
"""

from __future__ import annotations

from ._extras import require

require("pipeline.tracing", "metrics", "opentelemetry")

import time  # noqa: E402 - after the extra's check, so a missing extra is one line
from collections.abc import Mapping  # noqa: E402
from contextvars import ContextVar  # noqa: E402
from functools import partial  # noqa: E402
from itertools import pairwise  # noqa: E402
from typing import Any  # noqa: E402

from opentelemetry import metrics as otel_metrics  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.trace import Link, SpanKind, Status, StatusCode  # noqa: E402
from opentelemetry.trace.propagation.tracecontext import (  # noqa: E402
    TraceContextTextMapPropagator,
)

from ._metric_names import SPECS, target_labels  # noqa: E402
from .chain.chain import Chain  # noqa: E402
from .chain.stage import Batch  # noqa: E402
from .engine import Pipeline  # noqa: E402
from .events import EventKind  # noqa: E402

__all__ = ["Instrumentation", "instrument"]

DEFAULT_MAX_LINKS = 128
"""The OpenTelemetry SDK's default limit of links per span (``OTEL_SPAN_LINK_COUNT_LIMIT``)."""

# Looked up once: on Python 3.11 every ``Enum.MEMBER`` goes through ``EnumType.__getattr__``.
_CONSUMER = SpanKind.CONSUMER
_OK = Status(StatusCode.OK)
_ERROR = Status(StatusCode.ERROR)

_HISTOGRAMS = (
    "pipeline_wait_seconds",
    "pipeline_attempt_duration_seconds",
    "pipeline_latency_seconds",
)


class Instrumentation:
    """What :func:`instrument` attached; ``close()`` detaches it (a second call does nothing)."""

    def __init__(self, detach: list[Any]) -> None:
        self._detach = detach

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop making spans and recording histograms; spans still open stay open."""
        while self._detach:
            self._detach.pop()()


def instrument(
    target: Pipeline | Chain,
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    max_links: int = DEFAULT_MAX_LINKS,
) -> Instrumentation:
    """Make a span per attempt and record the histograms of ``target``'s runs.

    Args:
        target: a :class:`~pipeline.Pipeline` or :class:`~pipeline.Chain` (each
            stage's spans and histograms named by the stage). Instrument before the run.
        tracer_provider: an OpenTelemetry ``TracerProvider``; None: the global one.
        meter_provider: an OpenTelemetry ``MeterProvider``; None: the global one.
        max_links: the most links one span gets (>= 1): the SDK's own limit
            (``OTEL_SPAN_LINK_COUNT_LIMIT``, 128 by default); pass yours if you
            changed it. A batch with more payloads links the first ones and says
            how many it did not in ``pipeline.batch.links_dropped``.

    Raises:
        TypeError: ``target`` is not a Pipeline or a Chain, ``max_links`` not an integer.
        ValueError: ``max_links`` < 1.
    """
    if not isinstance(target, Pipeline | Chain):
        raise TypeError(f"target must be a Pipeline or a Chain, got {target!r}")
    if isinstance(max_links, bool) or not isinstance(max_links, int):
        raise TypeError(f"max_links must be an integer >= 1, got {max_links!r}")
    if max_links < 1:
        raise ValueError(f"max_links must be >= 1, got {max_links!r}")
    tracer = trace.get_tracer("pipeline", tracer_provider=tracer_provider)
    meter = otel_metrics.get_meter("pipeline", meter_provider=meter_provider)
    histograms = {
        name: meter.create_histogram(name, unit="s", description=SPECS[name].help)
        for name in _HISTOGRAMS
    }
    if isinstance(target, Pipeline):
        listener = _Tracer(
            tracer, histograms, target.name, target_labels(target.name), max_links=max_links
        )
        return Instrumentation([target.add_listener(listener.listeners())])
    # A stage's finished item marks its span as the creation context of its outputs, in the
    # worker's own context; a batching stage's former reads it as each payload arrives.
    creation: ContextVar[Any] = ContextVar(f"pipeline.tracing.creation.{target.name}")
    stages = target.stages
    feeds_batches = {stage.name for stage, after in pairwise(stages) if after.batching}
    batching = {stage.name for stage in stages if stage.batching}

    def make(stage: str) -> Any:
        return _Tracer(
            tracer,
            histograms,
            stage,
            target_labels(target.name, stage),
            max_links=max_links,
            creation=creation if stage in feeds_batches else None,
            lineage=creation if stage in batching else None,
        ).listeners()

    detach = [target.add_listener(make)]
    if batching:
        detach.append(target.add_lineage(creation, partial(creation.get, None)))
    return Instrumentation(detach)


class _Tracer:
    """The listener: opens a span at each attempt's start, ends it at the attempt's end.

    Links, by the messaging conventions: an attempt's span links to the creation context
    of the message(s) it processes, and a retry's to its item's first attempt (the last
    link). A payload's creation context is the one it carries (a W3C ``traceparent``,
    attribute or key), else, for a batch's payload, the span of the upstream attempt that
    made it (its former's lineage, keyed by ``lineage``).
    """

    def __init__(
        self,
        tracer: Any,
        histograms: dict[str, Any],
        destination: str,
        labels: dict,
        *,
        max_links: int,
        creation: ContextVar[Any] | None = None,
        lineage: ContextVar[Any] | None = None,
    ):
        self._tracer = tracer
        self._wait = histograms["pipeline_wait_seconds"]
        self._attempt = histograms["pipeline_attempt_duration_seconds"]
        self._latency = histograms["pipeline_latency_seconds"]
        self._labels = labels
        self._name = f"process {destination}"
        self._attributes = {
            "messaging.operation.type": "process",
            "messaging.destination.name": destination,
        }
        self._max_links = max_links
        self._creation = creation
        self._lineage = lineage
        self._spans: dict[Any, tuple[Any, float]] = {}  # item -> (open span, start loop time)
        # item -> (its first attempt's span context, its messages' creation contexts)
        self._firsts: dict[Any, tuple[Any, tuple[Any, ...]]] = {}
        self._offset_ns: int | None = None

    def _wall_ns(self, now_s: float) -> int:
        if self._offset_ns is None:
            self._offset_ns = time.time_ns() - int(now_s * 1e9)
        return self._offset_ns + int(now_s * 1e9)

    def listeners(self) -> dict[EventKind, Any]:
        """What to attach: one method per event kind it needs (the engine calls no other)."""
        return {
            EventKind.STARTED: self._started,
            EventKind.COMPLETED: self._completed,
            EventKind.RETRY_SCHEDULED: self._retried,
            EventKind.DEAD_LETTERED: self._dead,
            EventKind.UNFINISHED: self._unfinished,
            EventKind.EXPIRED: self._expired,
            EventKind.QUEUE_SHED: self._expired,  # CoDel shed it: it left the queue, too
        }

    def _started(self, kind: EventKind, now_s: float, item: Any) -> None:
        known = self._firsts.get(item)
        attributes = {**self._attributes, "pipeline.attempt": item.attempts}
        payload = item.payload
        if self._lineage is not None and isinstance(payload, Batch):
            # A batching stage's handler takes a list: a batch operation, whatever its size.
            attributes["messaging.batch.message_count"] = len(payload)
        if known is None:
            first = None
            sources = self._sources(payload)
            wait_s = now_s - item.admitted_s
            # The item's time in the queue: its arrival is this span's start minus it.
            attributes["pipeline.wait_seconds"] = wait_s
        else:
            first, sources = known
        room = self._max_links - (first is not None)
        links = [Link(each) for each in sources[:room]]
        if first is not None:
            links.append(Link(first))
        if len(sources) > room:
            attributes["pipeline.batch.links_dropped"] = len(sources) - room
        span = self._tracer.start_span(
            self._name,
            kind=_CONSUMER,
            attributes=attributes,
            links=links or None,
            start_time=self._wall_ns(now_s),
        )
        if known is None:
            self._firsts[item] = (span.get_span_context(), sources)
            self._wait.record(wait_s, self._labels)
        self._spans[item] = (span, now_s)

    def _completed(self, kind: EventKind, now_s: float, item: Any) -> None:
        span = self._end(item, now_s, None)
        if self._creation is not None and span is not None:
            # This attempt made the item's outputs: their creation context, for the
            # batching stage after this one (read in this same worker's context).
            self._creation.set(span.get_span_context())
        self._firsts.pop(item, None)
        self._latency.record(now_s - item.admitted_s, self._labels)

    def _retried(self, kind: EventKind, now_s: float, item: Any) -> None:
        self._end(item, now_s, item.errors[-1].type if item.errors else "Exception")

    def _dead(self, kind: EventKind, now_s: float, item: Any) -> None:
        self._retried(kind, now_s, item)
        self._firsts.pop(item, None)

    def _unfinished(self, kind: EventKind, now_s: float, item: Any) -> None:
        self._end(item, now_s, "unfinished")
        self._firsts.pop(item, None)

    def _expired(self, kind: EventKind, now_s: float, item: Any) -> None:
        self._firsts.pop(item, None)  # no attempt is open: it left the queue

    def _sources(self, payload: Any) -> tuple[Any, ...]:
        """The valid creation contexts of the message(s) in ``payload``, in order."""
        if self._lineage is None or not isinstance(payload, Batch):
            carried = _carried(payload)
            return () if carried is None else (carried,)
        made = payload.origins.get(self._lineage, ())
        contexts = []
        for index, each in enumerate(payload):
            context = _carried(each)
            if context is None and index < len(made):
                context = made[index]
            if context is not None and context.is_valid:
                contexts.append(context)
        return tuple(contexts)

    def _end(self, item: Any, now_s: float, error: str | None) -> Any:
        opened = self._spans.pop(item, None)
        if opened is None:
            return None
        span, started_s = opened
        self._attempt.record(now_s - started_s, self._labels)
        if error is None:
            span.set_status(_OK)
        else:
            span.set_attribute("error.type", error)
            span.set_status(_ERROR)
        span.end(end_time=self._wall_ns(now_s))
        return span


# Payload types that cannot carry a trace context: no attribute look-up for them.
_PLAIN = frozenset({int, float, str, bytes, bool, complex, tuple, list, type(None)})
_PROPAGATOR = TraceContextTextMapPropagator()


def _carried(payload: Any) -> Any:
    """The span context a payload carries as a W3C ``traceparent``, or None; never raises."""
    if type(payload) in _PLAIN:
        return None
    try:
        if isinstance(payload, Mapping):
            header = payload.get("traceparent")
        else:
            header = getattr(payload, "traceparent", None)
        if not isinstance(header, str):
            return None
        context = trace.get_current_span(_PROPAGATOR.extract({"traceparent": header}))
        span_context = context.get_span_context()
    except Exception:
        return None  # a payload's odd attribute must not cost its span
    return span_context if span_context.is_valid else None


def __dir__() -> list[str]:
    # What the module offers, not the names it imports for itself.
    return sorted(__all__)
