"""Prometheus metrics of real-time runs, served over HTTP: ``serve(pipe)``.

Needs the ``[metrics]`` extra (``prometheus-client``)::

    server = pipeline.metrics.serve(pipe)          # http://127.0.0.1:PORT/metrics
    report = await pipe.run(items)
    server.close()

The names, help texts and buckets are those of :mod:`pipeline._metric_names`
(the contract in DESIGN.md): counters of items offered and by outcome,
attempts by result, retries, retries denied by the retry budget, attempts the
circuit breaker refused and producer-blocked seconds; gauges of queue depth and
capacity, workers and busy workers, the age of the oldest unfinished item and
the breaker's state (``pipeline_breaker_state{state}``, 1 for the current
one); histograms of wait, attempt duration and latency, in seconds. Every
series is labelled ``pipeline`` (the name) and, for a :class:`~pipeline.Chain`,
``stage``; a batching stage counts in batches, as its pipeline's own
``statistics()`` does.

Where the numbers come from, and what they cost:

- every counter (items by outcome, attempts by result, retries, blocked
  seconds) and the gauges are read from the engine (``statistics()``, and the
  oldest item's admission time) when Prometheus scrapes, so they are the
  engine's own counts: they equal the run report whenever the server was
  attached, before, during or after the run, and cost nothing between scrapes;
- the histograms come from listeners added beside ``on_event``
  (:meth:`Pipeline.add_listener <pipeline.listeners.Listeners.add_listener>`):
  a completed attempt's listener adds four values to a bounded buffer,
  bucketed in numpy at a scrape or every ``FOLD_AT`` attempts; a failed one's
  appends to the histograms (the figures are in ``bench/RESULTS.md``). A pipeline never
  served runs exactly as before (``bench/bench_metrics.py`` measures both).
  Serve before the run starts: events before ``serve`` are not in the
  histograms.

The listener is isolated like ``on_event``: if it (or the user's listener)
raises, the engine counts and logs it and carries on; no item is lost. Each
``serve`` has its own registry (never the process-global one), so several
pipelines, or several servers, live in one process.
"""

from __future__ import annotations

from ._extras import require

require("pipeline.metrics", "metrics", "numpy", "prometheus_client")

import contextlib  # noqa: E402 - after the extra's check, so a missing extra is one line
import math  # noqa: E402
import struct  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable, Iterable, Iterator  # noqa: E402
from functools import partial  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from prometheus_client.exposition import start_http_server  # noqa: E402
from prometheus_client.metrics_core import Metric  # noqa: E402

from ._metric_names import BREAKER_STATES, BUCKETS_S, METRICS, OUTCOMES, target_labels  # noqa: E402
from .chain.chain import Chain  # noqa: E402
from .engine import Pipeline  # noqa: E402
from .errors import PipelineClosed  # noqa: E402
from .events import EventKind, Listener  # noqa: E402
from .statistics import Statistics  # noqa: E402

__all__ = ["MetricsServer", "serve"]

_COMPLETED = EventKind.COMPLETED
_RETRY = EventKind.RETRY_SCHEDULED
_DEAD = EventKind.DEAD_LETTERED
_UNFINISHED = EventKind.UNFINISHED


_BOUNDS = np.array(BUCKETS_S, dtype=np.float64)

FOLD_AT = 1024
"""Observations a histogram holds unbucketed, at most (plus the items in flight); likewise
completed attempts in an :class:`AttemptEnds` buffer (rows)."""


class AttemptEnds:
    """A bounded buffer of completed attempts, filled by a listener of ``COMPLETED``.

    :meth:`listener` extends the list ``values`` by one row of :attr:`WIDTH` values at the
    end of every completed attempt: the item's admission time, the attempt's start and its
    end (loop seconds) and the item's attempts so far (1 for a first attempt). A row is
    added whole (one C call under the GIL), so another thread may take whole rows out at
    any time. Once ``values`` holds ``limit`` rows, the listener calls :meth:`flush`, which
    calls ``full()`` (it must take the rows out, on the event loop's thread) and empties
    what ``full()`` left should it fail: the buffer holds at most ``limit`` rows whatever
    the exporter does.
    """

    WIDTH = 4
    """Values per completed attempt: admitted_s, started_s, ended_s, attempts."""

    __slots__ = ("full", "limit", "values")

    def __init__(self, values: list[Any], limit: int, full: Callable[[], None]) -> None:
        if not isinstance(values, list):
            raise TypeError(f"values must be a list, got {type(values).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1 (rows), got {limit!r}")
        self.values = values
        self.limit = limit
        self.full = full

    def flush(self) -> None:
        """Call ``full()``; whatever it leaves at or above ``limit`` is dropped (bounded memory)."""
        try:
            self.full()
        finally:
            if len(self.values) >= self.limit * self.WIDTH:
                del self.values[:]

    def listener(self) -> Listener:
        """The ``COMPLETED`` listener that adds the rows (a failing ``full`` is its failure)."""

        def completed(
            kind: EventKind,
            now_s: float,
            item: Any,
            # Bound once, read as locals: this runs once per completed attempt.
            extend: Callable[[tuple], None] = self.values.extend,
            size: Callable[[], int] = self.values.__len__,
            at: int = self.limit * self.WIDTH,
            flush: Callable[[], None] = self.flush,
        ) -> None:
            extend((item.admitted_s, item.started_s, now_s, item.attempts))
            if size() >= at:
                flush()

        return completed


_WIDTH = AttemptEnds.WIDTH


class _Histogram:
    """Bucket counts (not cumulative) and the sum, with the latest observations not yet bucketed.

    The failure listener appends each value to ``pending`` (one C call on the event loop's
    thread); :meth:`fold` counts what is pending into the buckets, in numpy, when a scrape
    reads the histogram or when ``FOLD_AT`` values are waiting. A value equal to a bound
    is in that bound's bucket (Prometheus's ``le``). Completed attempts reach it through
    :meth:`add`, from the recorder's fold of the engine's buffer.
    """

    __slots__ = ("_fold", "_lock", "_shown", "counts", "pending", "total")

    def __init__(self, lock: Any, fold: Callable[[], None] | None = None) -> None:
        # len(BUCKETS_S) bounded buckets, then the +Inf bucket.
        self.counts: list[int] = [0] * (len(BUCKETS_S) + 1)
        self.total = 0.0
        self.pending: list[float] = []
        self._lock = lock
        self._fold = self.fold if fold is None else fold  # what a snapshot folds first
        self._shown: tuple[list[int], float] = ([0] * (len(BUCKETS_S) + 1), 0.0)

    def fold(self) -> None:
        """Count the pending values into the buckets; safe from either thread.

        The listener appends while this runs (on the other thread): the first ``n`` values
        are taken and deleted as one slice each, and appends land after them.
        """
        with self._lock:
            pending = self.pending
            n = len(pending)
            if n == 0:
                return
            chunk = pending[:n]
            del pending[:n]
            self.add(np.fromiter(chunk, np.float64, n))

    def add(self, values: np.ndarray) -> None:
        """Count an array of values into the buckets and the sum (the caller holds the lock)."""
        if len(values):
            self.total += _count_into(self.counts, values)

    def snapshot(
        self, due: Callable[[], list[float]] | None = None
    ) -> tuple[list[tuple[str, int]], float]:
        """The cumulative buckets (``le`` label, count) and the sum, of one and the same fold.

        Args:
            due: gives the values due but not observed yet (the waits of first attempts
                still running), counted in this answer only: the listener observes them
                later. Called after the fold, so a value the listener appends meanwhile is
                never counted twice (the pipeline forgets an item before it is observed).

        What a scrape is shown never goes down: a value moving from ``due`` to ``pending``
        while the scrape reads may be missing from one answer, so each bucket and the sum
        shown are at least the last ones shown.
        """
        with self._lock:
            self._fold()  # the lock is reentrant: this fold and the read are one step
            counts = list(self.counts)
            total = self.total
            also = [] if due is None else due()
            if also:
                total += _count_into(counts, np.fromiter(also, np.float64, len(also)))
            running = 0
            cumulative = []
            for count in counts:
                running += count
                cumulative.append(running)
            shown, shown_total = self._shown
            cumulative = [max(a, b) for a, b in zip(cumulative, shown, strict=True)]
            total = max(total, shown_total)
            self._shown = (cumulative, total)
        bounds = [*map(repr, map(float, BUCKETS_S)), "+Inf"]
        return list(zip(bounds, cumulative, strict=True)), total


def _count_into(counts: list[int], array: np.ndarray) -> float:
    """Add the values of ``array`` to the per-bucket ``counts`` (not cumulative); return their sum.

    numpy buckets them in C: the values sorted (vectorised), then one bisection per bound
    for how many are at or below it (v == bound: that bound's bucket, Prometheus's
    ``le``), cheaper than a bisection per value. NaN sorts last: the +Inf bucket.
    """
    at_or_below = np.searchsorted(np.sort(array), _BOUNDS, side="right").tolist()
    previous = 0
    for bucket, below in enumerate(at_or_below):
        counts[bucket] += below - previous
        previous = below
    counts[-1] += len(array) - previous
    return float(array.sum())


def _rows(values: list[Any]) -> np.ndarray:
    """The engine's flat buffer of completed attempts as an (n, WIDTH) array of float64.

    ``struct`` converts the Python floats (and the attempt counts) at about half the cost
    of ``np.array`` or ``np.fromiter`` a value (``bench/RESULTS.md``); ``values`` holds
    whole rows only.
    """
    return np.frombuffer(struct.pack(f"{len(values)}d", *values)).reshape(-1, _WIDTH)


class _Recorder:
    """What ``statistics()`` does not hold, for one pipeline (or stage), and its listeners.

    A completed attempt's listener adds its admission, start and end times and the
    item's attempt count to ``ends`` (the list of an :class:`AttemptEnds` buffer) and
    :meth:`fold` turns the rows into
    the three histograms in numpy, at a scrape or when ``FOLD_AT`` rows wait: an
    attempt's duration runs from its start, the latency from the admission, and an
    item's wait, from its admission to its first start, is observed when its first
    attempt ends (then its start is the first start; a scrape meanwhile counts the waits
    of first attempts still running, from the pipeline). Failed attempts and unfinished
    items, rare, are heard by plain functions that append to the histograms' ``pending``.
    Nothing is kept per item, and nothing is counted here: the counters are the engine's.
    """

    __slots__ = ("_lock", "attempt", "ends", "latency", "wait")

    def __init__(self) -> None:
        lock = threading.RLock()
        self._lock = lock
        self.ends: list[Any] = []  # the engine's buffer: WIDTH values a completed attempt
        self.wait = _Histogram(lock, self.fold)
        self.attempt = _Histogram(lock, self.fold)
        self.latency = _Histogram(lock, self.fold)

    def fold(self) -> None:
        """Bucket every completed attempt in ``ends`` and every pending observation.

        From either thread: the engine adds a row whole; only whole rows are taken, should
        a part of one ever be there (it stays, at the front).
        """
        with self._lock:
            ends = self.ends
            n = len(ends)
            n -= n % _WIDTH
            if n:
                chunk = ends[:n]
                del ends[:n]
                rows = _rows(chunk)
                admitted, started, ended, attempts = rows.T
                first = attempts == 1
                self.wait.add(started[first] - admitted[first])
                self.attempt.add(ended - started)
                self.latency.add(ended - admitted)
            self.wait.fold()
            self.attempt.fold()
            self.latency.fold()

    def listener(self) -> dict[EventKind, Any]:
        """What to add: the buffer's listener for completed attempts, plain functions for the rest.

        The engine calls none of them for the other kinds (admissions, starts, producer
        waits, re-admissions), and none tests the kind it is called for. What a start
        would tell, the item holds (``first_start_s``, ``started_s``).
        """
        wait = self.wait.pending.append
        attempts = self.attempt.pending
        attempt = attempts.append
        fold = self.fold

        def failed(kind: EventKind, now_s: float, item: Any) -> None:
            if item.attempts > 0:  # an attempt ended (not an item refused before one)
                if item.attempts == 1:
                    wait(item.first_start_s - item.admitted_s)
                attempt(now_s - item.started_s)
            if len(attempts) >= FOLD_AT:
                fold()

        def unfinished(kind: EventKind, now_s: float, item: Any) -> None:
            if item.in_first_attempt:
                wait(item.first_start_s - item.admitted_s)  # its first attempt was cut

        return {
            _COMPLETED: AttemptEnds(self.ends, FOLD_AT, fold).listener(),
            _RETRY: failed,
            _DEAD: failed,
            _UNFINISHED: unfinished,
        }


class _Source:
    """One labelled pipeline: a Pipeline, or one stage of a Chain (built when it runs)."""

    def __init__(
        self,
        labels: dict[str, str],
        recorder: _Recorder,
        statistics: Callable[[], Statistics | None],
        config: Any,
    ):
        self.labels = labels
        self.recorder = recorder
        self._statistics = statistics  # None while a chain has not built its stages
        self._config = config

    def running_waits(self) -> tuple[float, ...]:
        """The waits of first attempts running now: due in the wait histogram, not yet in it."""
        stats = self._statistics()
        return () if stats is None else stats.first_attempt_waits_s

    def samples(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Every family's samples for this source, by family name (counters with _total)."""
        stats = self._statistics()
        labels = self.labels
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        if stats is None:
            capacity = self._config.queue_maxsize
            workers = self._config.concurrency
        else:
            capacity = stats.queue_maxsize
            workers = stats.workers

        def get(field: str) -> float:
            return 0 if stats is None else getattr(stats, field, 0)

        outcome = {
            "completed": get("completed"),
            "dead_lettered": get("dead_lettered"),
            "shed": get("shed"),
            "unfinished": get("unfinished"),
            "expired": get("expired"),
        }
        result = {
            "ok": get("completed"),
            "failed": get("attempts_failed"),
            "timeout": get("attempts_timed_out"),
        }
        out["pipeline_items_offered_total"] = [(labels, get("offered"))]
        out["pipeline_items_total"] = [({**labels, "outcome": k}, outcome[k]) for k in OUTCOMES]
        out["pipeline_attempts_total"] = [({**labels, "result": k}, v) for k, v in result.items()]
        out["pipeline_retries_total"] = [(labels, get("retried"))]
        out["pipeline_producer_blocked_seconds_total"] = [(labels, get("producer_blocked_s"))]
        out["pipeline_retries_denied_total"] = [(labels, get("retries_denied"))]
        out["pipeline_breaker_calls_refused_total"] = [(labels, get("breaker_calls_refused"))]
        state = None if stats is None else stats.breaker_state
        out["pipeline_breaker_state"] = [
            ({**labels, "state": k}, 1 if k == state else 0) for k in BREAKER_STATES
        ]
        out["pipeline_queue_depth"] = [(labels, get("queue_size"))]
        out["pipeline_queue_capacity"] = [(labels, math.inf if capacity is None else capacity)]
        out["pipeline_workers"] = [(labels, workers)]
        out["pipeline_workers_busy"] = [(labels, get("workers_busy"))]
        out["pipeline_workers_starting"] = [(labels, get("workers_starting"))]
        desired = None if stats is None else stats.workers_desired
        out["pipeline_workers_desired"] = [] if desired is None else [(labels, desired)]
        out["pipeline_scale_events_total"] = [(labels, get("scale_events"))]
        out["pipeline_worker_seconds_total"] = [(labels, get("worker_seconds"))]
        out["pipeline_oldest_item_age_seconds"] = [(labels, get("oldest_age_s"))]
        limit = None if stats is None else stats.concurrency_limit
        out["pipeline_concurrency_limit"] = [(labels, workers if limit is None else limit)]
        out["pipeline_codel_shed_total"] = [(labels, get("codel_shed"))]
        return out


class _Collector:
    """A prometheus-client collector over the sources of one server."""

    def __init__(self, sources: list[_Source]) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        per_source = [source.samples() for source in self._sources]
        histograms = {
            "pipeline_wait_seconds": lambda rec: rec.wait,
            "pipeline_attempt_duration_seconds": lambda rec: rec.attempt,
            "pipeline_latency_seconds": lambda rec: rec.latency,
        }
        for spec in METRICS:
            if spec.kind == "counter":
                family = Metric(spec.name.removesuffix("_total"), spec.help, "counter")
                for samples in per_source:
                    for labels, value in samples[spec.name]:
                        family.add_sample(spec.name, labels, float(value))
            elif spec.kind == "gauge":
                family = Metric(spec.name, spec.help, "gauge")
                for samples in per_source:
                    for labels, value in samples[spec.name]:
                        family.add_sample(spec.name, labels, float(value))
            else:
                family = Metric(spec.name, spec.help, "histogram")
                for source in self._sources:
                    histogram = histograms[spec.name](source.recorder)
                    due = source.running_waits if spec.name == "pipeline_wait_seconds" else None
                    buckets, total = histogram.snapshot(due)
                    for bound, count in buckets:
                        family.add_sample(
                            f"{spec.name}_bucket", {**source.labels, "le": bound}, float(count)
                        )
                    family.add_sample(f"{spec.name}_count", source.labels, float(buckets[-1][1]))
                    family.add_sample(f"{spec.name}_sum", source.labels, float(total))
            yield family


class MetricsServer:
    """An HTTP endpoint serving one registry's metrics; made by :func:`serve`.

    Attributes:
        url: ``http://HOST:PORT/metrics``, the port the system chose for ``port=0``.
        host: the address bound. port: the port bound.
        registry: the server's own ``prometheus_client.CollectorRegistry``.
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int, detach: list) -> None:
        self.registry = registry
        try:
            self._httpd, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            for each in detach:
                each()
            reason = error.strerror or str(error)
            failure = OSError(f"metrics server cannot listen on {_hostport(host, port)}: {reason}")
            failure.errno = error.errno  # still errno.EADDRINUSE for a caller who checks
            raise failure from None
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self.url = f"http://{_hostport(host, self.port)}/metrics"
        self._detach = detach
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"<MetricsServer {self.url} {'closed' if self._closed else 'serving'}>"

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, free the port and detach from the pipelines; a second call does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for each in self._detach:
            each()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def serve(
    target: Pipeline | Chain | Iterable[Pipeline | Chain],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
) -> MetricsServer:
    """Serve the metrics of ``target`` over HTTP until ``.close()``.

    Args:
        target: a :class:`~pipeline.Pipeline`, a :class:`~pipeline.Chain`
            (each stage labelled ``stage``), or a list of them (names unique:
            the ``pipeline`` label tells them apart). Serve before the run.
        host: the address to bind; loopback unless told otherwise (``"0.0.0.0"``
            exposes the metrics to the network).
        port: the TCP port, or 0 for a free one (read it from ``.url``).

    Returns:
        a :class:`MetricsServer` (``.url``, ``.close()``; also a context manager).

    Raises:
        TypeError: ``target`` is not a Pipeline, a Chain or a list of them.
        ValueError: a bad ``host`` or ``port``, or two targets with one name.
        OSError: the address cannot be bound (in use, not local), naming ``host:port``.
    """
    targets = [target] if isinstance(target, Pipeline | Chain) else _targets(target)
    if not isinstance(host, str) or not host:
        raise ValueError(f"host must be a non-empty address string, got {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an integer from 0 to 65535, got {port!r}")
    names = [each.name for each in targets]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"targets must have unique names (the pipeline label), got {twice}")
    sources: list[_Source] = []
    detach: list[Any] = []
    for each in targets:
        if isinstance(each, Pipeline):
            recorder = _Recorder()
            sources.append(
                _Source(target_labels(each.name), recorder, each.statistics, each.config)
            )
            detach.append(each.add_listener(recorder.listener()))
        else:
            recorders = {stage.name: _Recorder() for stage in each.stages}
            for stage in each.stages:
                sources.append(
                    _Source(
                        target_labels(each.name, stage.name),
                        recorders[stage.name],
                        partial(_stage_statistics, each, stage.name),
                        stage.config,
                    )
                )
            detach.append(each.add_listener(lambda name, own=recorders: own[name].listener()))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(sources))
    return MetricsServer(registry, host, port, detach)


def _stage_statistics(chain: Chain, name: str) -> Statistics | None:
    """The statistics of ``chain``'s stage ``name``, or None before the chain built it."""
    try:
        return chain.statistics().stages[name].pipeline
    except (PipelineClosed, ValueError):  # not started, or read while it builds the stages
        return None


def _targets(target: Any) -> list[Pipeline | Chain]:
    with contextlib.suppress(TypeError):
        if not isinstance(target, str | bytes):
            targets = list(target)
            if targets and all(isinstance(each, Pipeline | Chain) for each in targets):
                return targets
    raise TypeError(f"target must be a Pipeline, a Chain or a list of them, got {target!r}")


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def __dir__() -> list[str]:
    # What the module offers, not the names it imports for itself.
    return sorted(__all__)
