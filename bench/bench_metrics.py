"""Benchmark: a real-time run's CPU time without and with an exporter attached.

Variants of the same run, interleaved (A B C D A B C D ...) in one process,
each on a fresh loop after one warm-up of each:

- **plain**: ``Pipeline(handler, config).run(range(n))``, no exporter (the engine's
  per-item paths test one ``None`` listener);
- **served**: the same pipeline served by ``pipeline.metrics.serve`` (its listener
  attached), nobody scraping;
- **scraped**: served and scraped over HTTP on 127.0.0.1 every 100 ms by a
  thread of this process, as Prometheus would (the scrape's CPU counts too);
- **listener**, **buffer**, **recorder** (not run unless named in ``--variants``): the
  served cost cut at its causes, through the engine's public hook
  (``Pipeline.add_listener``): a listener for a kind that never happens (what adding
  anything costs), the exporter's buffer of completed attempts alone with a fold that
  only empties it (``metrics.AttemptEnds``: one listener call an attempt), and the
  exporter's recorder with its numpy fold but no HTTP server;
- **traced**: instrumented by ``pipeline.tracing.instrument`` with the real
  OpenTelemetry SDK (a ``TracerProvider`` with no span processor, so spans are
  made and ended but sent nowhere, and a ``MeterProvider`` whose reader is
  never collected): a span per attempt and three histogram records per item.

Two handlers (``--handler``): **noop** awaits ``asyncio.sleep(0)`` once, so what is
timed is the machinery's own per-item cost; **work** does a little real work
first (``json.dumps`` of a 20-field record and a SHA-256 of it, about 10-20 µs of
CPU here), as a handler that formats and checks a message would.

Figures are CPU time (``time.process_time``, every thread of the process),
medians over rounds; ratios are medians of the per-round ratios against plain,
with their lowest and highest round.

Usage: ``python bench/bench_metrics.py [--items 100000] [--repeats 5]
[--handler noop|work|both] [--variants plain,served,scraped,traced]`` (any of the
seven variants; these four by default). Prints a markdown table for bench/RESULTS.md.
``--child VARIANT`` runs one variant once and prints nothing (for ``valgrind
--tool=callgrind``: see bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import pipeline.metrics
import pipeline.tracing
from pipeline import Pipeline, PipelineConfig
from pipeline.events import EventKind
from pipeline.metrics import AttemptEnds

CONFIG = PipelineConfig(concurrency=4, queue_maxsize=100)
RECORD = {f"field_{i}": i * 1.5 for i in range(20)}


async def noop(item: int) -> None:
    await asyncio.sleep(0)


async def work(item: int) -> str:
    body = json.dumps({**RECORD, "id": item}, sort_keys=True).encode()
    digest = hashlib.sha256(body).hexdigest()
    await asyncio.sleep(0)
    return digest


HANDLERS = {"noop": noop, "work": work}
VARIANTS = ("plain", "served", "scraped", "traced", "listener", "buffer", "recorder")
DEFAULT_VARIANTS = ("plain", "served", "scraped", "traced")


SCRAPES: list[int] = []  # scrapes made by each scraped run, in order


def scraper(url: str, stop: threading.Event) -> None:
    count = 0
    while not stop.wait(0.1):
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
        count += 1
    SCRAPES.append(count)


def otel_providers() -> dict:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    return {
        "tracer_provider": TracerProvider(),
        "meter_provider": MeterProvider(metric_readers=[InMemoryMetricReader()]),
    }


def one(variant: str, items: int, handler: str = "noop") -> float:
    """CPU seconds of one run of ``variant``."""
    pipe = Pipeline(HANDLERS[handler], CONFIG, name="bench")
    server = pipeline.metrics.serve(pipe) if variant in ("served", "scraped") else None
    if variant == "listener":
        pipe.add_listener({EventKind.DRAIN_TIMEOUT: lambda kind, now_s, item: None})
    elif variant == "buffer":
        rows: list = []
        ends = AttemptEnds(rows, pipeline.metrics.FOLD_AT, rows.clear)
        pipe.add_listener({EventKind.COMPLETED: ends.listener()})
    elif variant == "recorder":
        pipe.add_listener(pipeline.metrics._Recorder().listener())
    providers = otel_providers() if variant == "traced" else None
    handle = pipeline.tracing.instrument(pipe, **providers) if providers else None
    stop = threading.Event()
    thread = None
    if variant == "scraped":
        thread = threading.Thread(target=scraper, args=(server.url, stop), daemon=True)
    started = time.process_time()
    if thread is not None:
        thread.start()
    report = asyncio.run(pipe.run(range(items)))
    stop.set()
    if thread is not None:
        thread.join()
    elapsed = time.process_time() - started
    if server is not None:
        server.close()
    if handle is not None:
        handle.close()
        providers["tracer_provider"].shutdown()
        providers["meter_provider"].shutdown()
    if report.completed != items:
        raise RuntimeError(f"{variant}: completed {report.completed} of {items}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--handler", choices=[*HANDLERS, "both"], default="both")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--child", choices=VARIANTS)
    args = parser.parse_args()
    if args.child:
        one(args.child, args.items, "noop" if args.handler == "both" else args.handler)
        return
    variants = tuple(args.variants.split(","))
    if "plain" not in variants or not set(variants) <= set(VARIANTS):
        parser.error(f"--variants must name plain and any of {', '.join(VARIANTS)}")
    handlers = list(HANDLERS) if args.handler == "both" else [args.handler]
    runs = [(h, v) for h in handlers for v in variants]
    for handler, variant in runs:
        one(variant, min(args.items, 5_000), handler)  # warm-up
    SCRAPES.clear()
    times: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    for _ in range(args.repeats):
        for run in runs:
            times[run].append(one(run[1], args.items, run[0]))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"`python {shlex.join(sys.argv)}` at `{commit}`, {time.strftime('%Y-%m-%d %H:%M')}")
    print()
    print(
        "| handler | variant | CPU s (median) | CPU µs per item | vs plain (median of rounds) "
        "| lowest-highest round |"
    )
    print("|---|---|---:|---:|---:|---|")
    for handler, variant in runs:
        median = statistics.median(times[handler, variant])
        ratios = [
            t / p for t, p in zip(times[handler, variant], times[handler, "plain"], strict=True)
        ]
        print(
            f"| {handler} | {variant} | {median:.3f} | {median / args.items * 1e6:.2f} "
            f"| {statistics.median(ratios):.3f}x | {min(ratios):.3f}-{max(ratios):.3f}x |"
        )
    if "scraped" in variants and "served" in variants and SCRAPES:
        # The scraper's rounds in run order: per handler, one per repeat.
        extra = [
            times[h, "scraped"][r] - times[h, "served"][r]
            for r in range(args.repeats)
            for h in handlers
        ]
        per_scrape = [cpu / max(n, 1) for cpu, n in zip(extra, SCRAPES, strict=True)]
        print()
        print(
            f"A scrape every 100 ms: {statistics.median(SCRAPES):.0f} scrapes per run "
            f"(median); scraped minus served, per scrape: "
            f"{statistics.median(per_scrape) * 1e3:.2f} ms CPU (median)"
        )


if __name__ == "__main__":
    main()
