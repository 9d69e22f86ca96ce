"""The ingestion as a chain: fetch pages, fan out into records, write them.

::

    CursorFeed --> [fetch: 1 worker] --fan-out--> [write: N workers] --> database
      next cursor     one page per attempt          one upsert per attempt
      once known      retries honour Retry-After    poison records: dead letters

A cursor-paginated listing is sequential: page *k+1*'s cursor is in page
*k*'s answer. :class:`CursorFeed` is the chain's source: it offers page *k+1*
once page *k* has been fetched, and ends after the last page, when a page
is dead-lettered (the listing cannot go on), at ``max_pages`` or when a
cursor comes back twice (a request loop is bounded in count). Stopping
(:meth:`~pipeline.Chain.stop`, SIGTERM, the ``deadline_s``) stops intake: the
pages in hand are finished and their records written, within the drain
timeout; the rest of the listing is reported as not fetched.

Every record the partner listed ends as exactly one of: written, dead-lettered
(at the write stage, or with its page at the fetch stage: then it is among
the not fetched), unfinished or stranded (the drain timed out), or not
fetched. :meth:`IngestRun.accounting` adds them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ...chain.chain import Chain
from ...chain.report import ChainReport
from ...chain.stage import Stage
from ...config import PipelineConfig
from ...events import EventKind, fan_out
from ...retry import Backoff
from .client import PartnerClient

__all__ = [
    "SERVER_S_KEPT",
    "CursorFeed",
    "IngestConfig",
    "IngestRun",
    "PageRequest",
    "ingest",
    "keep_sample",
]

SERVER_S_KEPT = 10_000
"""Pages whose ``Server-Timing`` an :class:`IngestRun` keeps one by one (the mean counts all)."""


def _default_fetch() -> PipelineConfig:
    return PipelineConfig(
        concurrency=1,
        queue_maxsize=1,
        max_attempts=6,
        backoff=Backoff(base_s=0.02, factor=2.0, cap_s=1.0),
        drain_timeout_s=30.0,
    )


def _default_write() -> PipelineConfig:
    return PipelineConfig(
        concurrency=1,
        queue_maxsize=100,
        max_attempts=3,
        backoff=Backoff(base_s=0.01, factor=2.0, cap_s=0.5),
        drain_timeout_s=30.0,
    )


@dataclass(frozen=True, kw_only=True)
class IngestConfig:
    """How the ingestion runs.

    Args:
        fetch: the fetch stage's config. Its ``concurrency`` must be 1: a
            cursor listing has one page in flight at a time.
        write: the write stage's config (workers, queue, retries).
        page_size: records asked for per page.
        request_timeout_s: most seconds one request may take.
        max_retry_after_s: the longest ``Retry-After`` worth waiting for.
        max_pages: most pages requested (None: the partner's total, plus 10).
        deadline_s: seconds after which intake stops (the drain follows), or None.
    """

    fetch: PipelineConfig = field(default_factory=_default_fetch)
    write: PipelineConfig = field(default_factory=_default_write)
    page_size: int = 20
    request_timeout_s: float = 5.0
    max_retry_after_s: float = 30.0
    max_pages: int | None = None
    deadline_s: float | None = 600.0

    def __post_init__(self) -> None:
        for name in ("fetch", "write"):
            if not isinstance(getattr(self, name), PipelineConfig):
                raise TypeError(f"{name} must be a PipelineConfig, got {getattr(self, name)!r}")
        if self.fetch.concurrency != 1:
            raise ValueError(
                f"fetch.concurrency must be 1 (a cursor listing has one page in flight), "
                f"got {self.fetch.concurrency}"
            )
        if (
            isinstance(self.page_size, bool)
            or not isinstance(self.page_size, int)
            or not (1 <= self.page_size <= 10_000)
        ):
            raise ValueError(f"page_size must be an integer 1..10000, got {self.page_size!r}")
        for name in ("request_timeout_s", "max_retry_after_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < math.inf):
                raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        if self.max_pages is not None and (
            isinstance(self.max_pages, bool)
            or not isinstance(self.max_pages, int)
            or self.max_pages < 1
        ):
            raise ValueError(f"max_pages must be an integer >= 1 or None, got {self.max_pages!r}")
        if self.deadline_s is not None and not (
            isinstance(self.deadline_s, int | float) and 0 < self.deadline_s < math.inf
        ):
            raise ValueError(
                "deadline_s must be a finite number of seconds > 0 or None, "
                f"got {self.deadline_s!r}"
            )


@dataclass(frozen=True)
class PageRequest:
    """Page number ``index`` (from 0), at ``cursor`` (None: the first page)."""

    index: int
    cursor: str | None


_END = object()


class CursorFeed:
    """The fetch stage's source: the next page's cursor, once it is known.

    Args:
        max_pages: most pages to offer (a bound on the request loop).
    """

    def __init__(self, max_pages: int) -> None:
        self.max_pages = max_pages
        self.offered = 0
        self.ended: str | None = None  # why the listing ended, once it has
        self._next: asyncio.Future[Any] | None = None
        self._seen: set[str] = set()

    def __aiter__(self) -> AsyncIterator[PageRequest]:
        return self._requests()

    async def _requests(self) -> AsyncIterator[PageRequest]:
        loop = asyncio.get_running_loop()
        cursor: str | None = None
        while True:
            if self.offered >= self.max_pages:
                self._end(f"stopped at max_pages={self.max_pages}")
                return
            self._next = loop.create_future()
            request = PageRequest(self.offered, cursor)
            self.offered += 1
            yield request
            following = await self._next
            if following is _END:
                return
            if following in self._seen:
                self._end(f"the partner sent cursor {following[:40]!r} twice (a loop)")
                return
            self._seen.add(following)
            cursor = following

    def _end(self, why: str) -> None:
        if self.ended is None:
            self.ended = why

    def advance(self, next_cursor: str | None) -> None:
        """Page fetched: offer the page at ``next_cursor`` (None: that was the last)."""
        if next_cursor is None:
            self._end("done")
        self._resolve(_END if next_cursor is None else next_cursor)

    def abandon(self, why: str) -> None:
        """The listing cannot go on (a page failed for good): end the feed."""
        self._end(why)
        self._resolve(_END)

    def _resolve(self, value: Any) -> None:
        if self._next is not None and not self._next.done():
            self._next.set_result(value)


@dataclass
class IngestRun:
    """One ingestion's outcome.

    Attributes:
        report: the chain's report (stages ``fetch`` and ``write``).
        total: records the partner listed (its ``total``; 0 if no page came).
        fetched: records fetched.
        ended: why the listing ended (``"done"``, ``"stopped"``, a failure).
        elapsed_s: seconds from the start to the end of the drain.
        origin_s: loop time of the start.
        samples: live samples (``every_s``), oldest first: at most
            ``max_samples`` evenly spaced ones and the newest (see :func:`ingest`).
        server_s: for the first :data:`SERVER_S_KEPT` pages fetched, the seconds
            the partner said it spent (``Server-Timing``; NaN when it did not say).
        server_s_mean: the mean of those seconds over every page that said
            (NaN if none did).
    """

    report: ChainReport
    total: int
    fetched: int
    ended: str
    elapsed_s: float
    origin_s: float
    samples: list[dict[str, Any]] = field(default_factory=list)
    server_s: list[float] = field(default_factory=list)
    server_s_mean: float = math.nan

    @property
    def written(self) -> int:
        return self.report.stages["write"].completed

    def accounting(self) -> dict[str, int]:
        """Where each listed record went; ``balanced`` when they add up to ``total``."""
        fetch, write = self.report.stages["fetch"], self.report.stages["write"]
        parts = {
            "written": write.completed,
            "dead_lettered": len(write.dead_letters),
            "unfinished": len(write.unfinished) + len(write.shed),
            "stranded": len(fetch.stranded),
            "not_fetched": max(0, self.total - self.fetched),
        }
        parts["total"] = self.total
        parts["balanced"] = int(
            sum(v for k, v in parts.items() if k != "total") == self.total and self.report.balanced
        )
        return parts


def keep_sample(samples: list[Any], row: Any, state: dict[str, Any], most: int | None) -> None:
    """Append ``row`` to ``samples``, keeping at most ``most`` evenly spaced ones and the newest.

    When the kept ones pass ``most``, every second one goes and later ones are
    kept at twice the period, so they always span the whole run evenly; the
    newest sample is always last (it is replaced by the next unless it falls on
    the period). ``state`` is an empty dict the caller keeps for the run.
    """
    if state.get("provisional"):
        samples.pop()
    taken, stride = state.get("taken", 0), state.get("stride", 1)
    keep = taken % stride == 0
    state["taken"] = taken + 1
    samples.append(row)
    state["provisional"] = not keep
    if keep and most is not None and len(samples) > most:
        samples[:] = samples[::2]
        state["stride"] = 2 * stride


def _sample(chain: Chain, origin: float) -> dict[str, Any]:
    stats = chain.statistics().stages
    fetch, write = stats["fetch"].pipeline, stats["write"].pipeline
    return {
        "time_s": asyncio.get_running_loop().time() - origin,
        "pages_fetched": fetch.completed,
        "write_queue": write.queue_size,
        "writers_busy": write.workers_busy,
        "written": write.completed,
        "dead_lettered": write.dead_lettered,
        "retries": fetch.retried + write.retried,
    }


async def ingest(
    client: PartnerClient,
    sink: Any,
    config: IngestConfig | None = None,
    *,
    recorder: Any = None,
    meter: Any = None,
    on_sample: Callable[[list[dict[str, Any]]], None] | None = None,
    every_s: float = 0.1,
    stop_on_sigterm: bool = False,
    stop_event: asyncio.Event | None = None,
    max_samples: int | None = 10_000,
    serve_metrics: Callable[[Chain], Any] | None = None,
) -> IngestRun:
    """Ingest the partner's listing into ``sink`` through a fetch -> write chain.

    Args:
        client: an open :class:`~pipeline.examples.ingest.client.PartnerClient`.
        sink: an open sink (``upsert(record)``, ``writers``).
        config: the :class:`IngestConfig` (defaults if None).
        recorder: a :class:`~pipeline.sim.TraceRecorder` to record the run, or None.
        meter: a :class:`~pipeline.examples.ingest.meter.WriteMeter` for the
            write stage, or None.
        on_sample: called with the samples so far every ``every_s`` seconds
            (a live plot); it must be quick.
        stop_on_sigterm: SIGTERM stops intake and drains (main thread only).
        stop_event: setting it stops intake and drains.
        max_samples: most live samples kept (None: all); see :func:`keep_sample`.
        serve_metrics: called with the chain before it runs (for example
            ``lambda chain: pipeline.metrics.serve(chain, port=9464)``); what
            it returns is closed (``.close()``) once the run has ended, even
            when it fails.

    Returns:
        The :class:`IngestRun`.
    """
    config = config or IngestConfig()
    loop = asyncio.get_running_loop()
    feed = CursorFeed(config.max_pages or 10**9)
    seen = {"total": 0, "fetched": 0, "timed": 0, "server_s": 0.0}
    server_s: list[float] = []

    async def fetch(request: PageRequest) -> tuple[dict[str, Any], ...]:
        page = await client.fetch_page(request.cursor)
        seen["total"] = page.total
        seen["fetched"] += len(page.records)
        if len(server_s) < SERVER_S_KEPT:
            server_s.append(page.server_s)
        if math.isfinite(page.server_s):
            seen["timed"] += 1
            seen["server_s"] += page.server_s
        if config.max_pages is None and request.index == 0:
            feed.max_pages = math.ceil(page.total / max(1, config.page_size)) + 10
        feed.advance(page.next_cursor)
        return page.records

    def on_fetch_event(kind: EventKind, _now: float, item: Any) -> None:
        if kind is EventKind.DEAD_LETTERED:
            feed.abandon(f"page {item.payload.index} was dead-lettered")

    fetch_listener: Any = on_fetch_event
    write_listeners = [] if meter is None else [meter.listener]
    if recorder is not None:
        fetch_listener = fan_out(recorder.listener("fetch"), on_fetch_event)
        write_listeners.append(recorder.listener("write", capacity=getattr(sink, "writers", None)))
    write_listener = fan_out(*write_listeners) if write_listeners else None
    chain = Chain(
        [
            Stage("fetch", fetch, config.fetch, fan_out=True, on_event=fetch_listener),
            Stage("write", sink.upsert, config.write, on_event=write_listener),
        ],
        drain_timeout_s=config.fetch.drain_timeout_s,
        name="ingest",
    )
    stopped = {"why": None}

    def stop(why: str) -> None:
        if stopped["why"] is None:
            stopped["why"] = why
        chain.stop()

    samples: list[dict[str, Any]] = []
    kept: dict[str, Any] = {}
    origin = loop.time()
    if recorder is not None:
        recorder.start(origin)
    if meter is not None:
        meter.start(origin)
    timers = []
    if config.deadline_s is not None:
        timers.append(loop.call_later(config.deadline_s, stop, f"deadline {config.deadline_s:g} s"))
    if stop_on_sigterm:
        loop.add_signal_handler(signal.SIGTERM, stop, "SIGTERM")
    watcher = None
    if stop_event is not None:
        watcher = loop.create_task(_stop_when(stop_event, stop))

    async def sample_forever() -> None:
        while True:
            await asyncio.sleep(every_s)
            keep_sample(samples, _sample(chain, origin), kept, max_samples)
            if on_sample is not None:
                on_sample(samples)

    sampler = loop.create_task(sample_forever()) if (on_sample or every_s) else None
    served = None
    try:
        # Inside the try: a port in use raises here, and the timers and signal
        # handler set above are still undone below.
        served = serve_metrics(chain) if serve_metrics is not None else None
        report = await chain.run(feed)
    finally:
        if served is not None:
            await loop.run_in_executor(None, served.close)
        for timer in timers:
            timer.cancel()
        if stop_on_sigterm:
            loop.remove_signal_handler(signal.SIGTERM)
        for task in (sampler, watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    end = loop.time()
    if recorder is not None:
        recorder.stop(end)
    if meter is not None:
        meter.stop(end)
    if sampler is not None:
        samples.append({**(samples[-1] if samples else {}), **_final(report, end - origin)})
        if on_sample is not None:
            on_sample(samples)
    ended = stopped["why"] or feed.ended or "stopped"
    mean = seen["server_s"] / seen["timed"] if seen["timed"] else math.nan
    return IngestRun(
        report, seen["total"], seen["fetched"], ended, end - origin, origin, samples, server_s, mean
    )


def _final(report: ChainReport, at_s: float) -> dict[str, Any]:
    write = report.stages["write"]
    return {
        "time_s": at_s,
        "pages_fetched": report.stages["fetch"].completed,
        "write_queue": 0,
        "writers_busy": 0,
        "written": write.completed,
        "dead_lettered": len(write.dead_letters),
    }


async def _stop_when(event: asyncio.Event, stop: Callable[[str], None]) -> None:
    await event.wait()
    stop("stopped")
