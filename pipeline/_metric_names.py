"""The one table of metric names, help texts, label sets and histogram buckets.

Both directions use it: :mod:`pipeline.metrics` serves a real-time run's
metrics over HTTP, and a simulated run is written as OpenMetrics text under
the same names, so a dashboard built for one shows the other. Standard library
only: the simulation side imports it without ``prometheus-client``.

The names follow Prometheus's conventions: base units (seconds), counters end
in ``_total``; every series carries the label ``pipeline`` (the pipeline's or
chain's name) and, in a chain, ``stage`` (the stage's name). Label values are
names chosen in code, never payloads, so cardinality stays low.

Example:
    >>> SPECS["pipeline_items_total"].labels
    ('outcome',)
    >>> [spec.name for spec in METRICS if spec.kind == "histogram"]
    ['pipeline_wait_seconds', 'pipeline_attempt_duration_seconds', 'pipeline_latency_seconds']
"""

from __future__ import annotations

from dataclasses import dataclass

from .overload.breaker import STATES

__all__ = [
    "ATTEMPT_RESULTS",
    "BREAKER_STATES",
    "BUCKETS_S",
    "METRICS",
    "OUTCOMES",
    "SPECS",
    "MetricSpec",
    "target_labels",
]

OUTCOMES: tuple[str, ...] = ("completed", "dead_lettered", "shed", "unfinished", "expired")
"""Values of ``pipeline_items_total{outcome}``: where each offered item ended up."""

ATTEMPT_RESULTS: tuple[str, ...] = ("ok", "failed", "timeout")
"""Values of ``pipeline_attempts_total{result}``: how each finished attempt ended."""

BREAKER_STATES: tuple[str, ...] = STATES
"""Values of ``pipeline_breaker_state{state}``: 1 for the breaker's state now, 0 for the
others (all 0 without a breaker), as Resilience4j's ``circuitbreaker_state`` gauge does."""

BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
"""Upper bounds (``le``, seconds) of every histogram's buckets; ``+Inf`` comes after.

From a millisecond to ten minutes: a handler's call and an item's wait in a
backlog both fall inside, and 19 buckets keep each histogram small.
"""


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric family.

    Attributes:
        name: the full name, as scraped (a counter's ends in ``_total``).
        kind: ``"counter"``, ``"gauge"`` or ``"histogram"``.
        help: the ``# HELP`` text, with its unit.
        labels: labels beyond ``pipeline`` and ``stage`` (``("outcome",)``).
        values: the values each of ``labels`` takes, every one exported from
            the start (a rate over a series that appears late is wrong).
    """

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()
    values: tuple[tuple[str, ...], ...] = ()


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "pipeline_items_offered_total",
        "counter",
        "Items offered to the pipeline (admitted or shed).",
    ),
    MetricSpec(
        "pipeline_items_total",
        "counter",
        "Items that reached an outcome, by outcome.",
        ("outcome",),
        (OUTCOMES,),
    ),
    MetricSpec(
        "pipeline_attempts_total",
        "counter",
        "Handler attempts that finished, by result (timeout: the attempt timeout hit).",
        ("result",),
        (ATTEMPT_RESULTS,),
    ),
    MetricSpec("pipeline_retries_total", "counter", "Retries scheduled after a failed attempt."),
    MetricSpec(
        "pipeline_producer_blocked_seconds_total",
        "counter",
        "Seconds producers spent waiting for a free queue slot, summed over producers.",
    ),
    MetricSpec(
        "pipeline_retries_denied_total",
        "counter",
        "Retries the retry budget refused (each item dead-lettered, reason retry_budget).",
    ),
    MetricSpec(
        "pipeline_breaker_calls_refused_total",
        "counter",
        "Attempts the circuit breaker held back while open (each counted once).",
    ),
    MetricSpec("pipeline_queue_depth", "gauge", "Items waiting in the queue now."),
    MetricSpec("pipeline_queue_capacity", "gauge", "The queue's bound in items (+Inf: unbounded)."),
    MetricSpec("pipeline_workers", "gauge", "Worker tasks."),
    MetricSpec("pipeline_workers_busy", "gauge", "Items being worked on now."),
    MetricSpec(
        "pipeline_workers_starting",
        "gauge",
        "Workers in their cold start (an autoscaler's), counted in pipeline_workers.",
    ),
    MetricSpec(
        "pipeline_workers_desired",
        "gauge",
        "Workers the autoscaler's metric asked for at its last sync (absent: no autoscaler).",
    ),
    MetricSpec(
        "pipeline_scale_events_total", "counter", "Autoscaler syncs that changed the pool's size."
    ),
    MetricSpec(
        "pipeline_worker_seconds_total",
        "counter",
        "Seconds worked by every worker, summed over workers (busy, idle or starting).",
    ),
    MetricSpec(
        "pipeline_oldest_item_age_seconds",
        "gauge",
        "Seconds since the oldest unfinished item was admitted (0: none inside).",
    ),
    MetricSpec(
        "pipeline_breaker_state",
        "gauge",
        "The circuit breaker's state: 1 for the current one (all 0 without a breaker).",
        ("state",),
        (BREAKER_STATES,),
    ),
    MetricSpec(
        "pipeline_concurrency_limit",
        "gauge",
        "Attempts that may be in flight now: the adaptive concurrency limit, or the workers "
        "without one.",
    ),
    MetricSpec(
        "pipeline_codel_shed_total",
        "counter",
        "Items CoDel shed from the queue (also counted in pipeline_items_total{outcome=shed}).",
    ),
    MetricSpec(
        "pipeline_wait_seconds",
        "histogram",
        "Seconds from admission to the start of an item's first attempt.",
    ),
    MetricSpec(
        "pipeline_attempt_duration_seconds",
        "histogram",
        "Seconds one handler attempt took, whatever its result.",
    ),
    MetricSpec(
        "pipeline_latency_seconds",
        "histogram",
        "Seconds from admission to completion, for completed items.",
    ),
)
"""Every family, in the order an exporter writes them."""

SPECS: dict[str, MetricSpec] = {spec.name: spec for spec in METRICS}
""":data:`METRICS` by name."""


def target_labels(pipeline: str, stage: str | None = None) -> dict[str, str]:
    """The labels every series of one pipeline (or one chain's stage) carries.

    >>> target_labels("ingest", "write")
    {'pipeline': 'ingest', 'stage': 'write'}
    """
    return {"pipeline": pipeline} if stage is None else {"pipeline": pipeline, "stage": stage}
