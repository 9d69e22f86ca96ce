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
name) and an error status. A retry's span links to the item's first
attempt's span. The first attempt's span also carries
``pipeline.wait_seconds``, the item's time in the queue (seconds, as the
wait histogram records it), so the item's admission is the span's start
minus it: what :mod:`pipeline.sim.workloads.telemetry.otlp` reads back as
the arrival. Attributes carry names and
counts, never payloads. The histograms of :mod:`pipeline._metric_names`
(wait, attempt duration, latency, in seconds) are recorded as OpenTelemetry
histograms under the same names, with attributes ``pipeline`` and ``stage``.

Span times are wall-clock nanoseconds: the loop's times, shifted by the
difference between the wall clock and the loop's clock at the first event.
The listener is attached beside ``on_event`` and isolated like it.
"""

from __future__ import annotations

from ._extras import require

require("pipeline.tracing", "metrics", "opentelemetry")

import time  # noqa: E402 - after the extra's check, so a missing extra is one line
from typing import Any  # noqa: E402

from opentelemetry import metrics as otel_metrics  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.trace import Link, SpanKind, Status, StatusCode  # noqa: E402

from ._metric_names import SPECS, target_labels  # noqa: E402
from .chain.chain import Chain  # noqa: E402
from .engine import Pipeline  # noqa: E402
from .events import EventKind  # noqa: E402

__all__ = ["Instrumentation", "instrument"]

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
) -> Instrumentation:
    """Make a span per attempt and record the histograms of ``target``'s runs.

    Args:
        target: a :class:`~pipeline.Pipeline` or :class:`~pipeline.Chain` (each
            stage's spans and histograms named by the stage). Instrument before the run.
        tracer_provider: an OpenTelemetry ``TracerProvider``; None: the global one.
        meter_provider: an OpenTelemetry ``MeterProvider``; None: the global one.

    Raises:
        TypeError: ``target`` is not a Pipeline or a Chain.
    """
    if not isinstance(target, Pipeline | Chain):
        raise TypeError(f"target must be a Pipeline or a Chain, got {target!r}")
    tracer = trace.get_tracer("pipeline", tracer_provider=tracer_provider)
    meter = otel_metrics.get_meter("pipeline", meter_provider=meter_provider)
    histograms = {
        name: meter.create_histogram(name, unit="s", description=SPECS[name].help)
        for name in _HISTOGRAMS
    }
    if isinstance(target, Pipeline):
        listener = _Tracer(tracer, histograms, target.name, target_labels(target.name))
        return Instrumentation([target._attach(listener)])

    def make(stage: str) -> Any:
        return _Tracer(tracer, histograms, stage, target_labels(target.name, stage))

    return Instrumentation([target._attach(make)])


class _Tracer:
    """The listener: opens a span at each attempt's start, ends it at the attempt's end."""

    def __init__(self, tracer: Any, histograms: dict[str, Any], destination: str, labels: dict):
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
        self._spans: dict[Any, tuple[Any, float]] = {}  # item -> (open span, start loop time)
        self._firsts: dict[Any, Any] = {}  # item -> its first attempt's span context
        self._offset_ns: int | None = None

    def _wall_ns(self, now_s: float) -> int:
        if self._offset_ns is None:
            self._offset_ns = time.time_ns() - int(now_s * 1e9)
        return self._offset_ns + int(now_s * 1e9)

    def __call__(self, kind: EventKind, now_s: float, item: Any) -> None:
        if kind is EventKind.STARTED:
            first = self._firsts.get(item)
            attributes = {**self._attributes, "pipeline.attempt": item.attempts}
            if first is None:
                wait_s = now_s - item.admitted_s
                # The item's time in the queue: its arrival is this span's start minus it.
                attributes["pipeline.wait_seconds"] = wait_s
            span = self._tracer.start_span(
                self._name,
                kind=SpanKind.CONSUMER,
                attributes=attributes,
                links=[Link(first)] if first is not None else None,
                start_time=self._wall_ns(now_s),
            )
            if first is None:
                self._firsts[item] = span.get_span_context()
                self._wait.record(wait_s, self._labels)
            self._spans[item] = (span, now_s)
        elif kind is EventKind.COMPLETED:
            self._end(item, now_s, None)
            self._firsts.pop(item, None)
            self._latency.record(now_s - item.admitted_s, self._labels)
        elif kind is EventKind.RETRY_SCHEDULED or kind is EventKind.DEAD_LETTERED:
            error = item.errors[-1].type if item.errors else "Exception"
            self._end(item, now_s, error)
            if kind is EventKind.DEAD_LETTERED:
                self._firsts.pop(item, None)
        elif kind is EventKind.UNFINISHED:
            self._end(item, now_s, "unfinished")
            self._firsts.pop(item, None)
        elif kind is EventKind.EXPIRED:
            self._firsts.pop(item, None)  # no attempt is open: it left the queue

    def _end(self, item: Any, now_s: float, error: str | None) -> None:
        opened = self._spans.pop(item, None)
        if opened is None:
            return
        span, started_s = opened
        self._attempt.record(now_s - started_s, self._labels)
        if error is None:
            span.set_status(Status(StatusCode.OK))
        else:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=self._wall_ns(now_s))


def __dir__() -> list[str]:
    # What the module offers, not the names it imports for itself.
    return sorted(__all__)
