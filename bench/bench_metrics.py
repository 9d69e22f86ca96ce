"""Benchmark: a real-time run's CPU time without and with ``pipeline.metrics.serve``.

Three variants of the same run, interleaved (A B C A B C ...) in one process,
each on a fresh loop after one warm-up of each:

- **plain**: ``Pipeline(handler, config).run(range(n))``, no exporter (the engine's
  per-item paths test one ``None`` listener, as they did before the exporter
  existed: they are unchanged);
- **served**: the same pipeline served by ``pipeline.metrics.serve`` (its listener
  attached), nobody scraping;
- **scraped**: served and scraped over HTTP on 127.0.0.1 every 100 ms by a
  thread of this process, as Prometheus would (the scrape's CPU counts too).

The handler awaits ``asyncio.sleep(0)`` once per item. Figures are CPU time
(``time.process_time``, every thread of the process), medians over rounds,
and ratios are medians of the per-round ratios against plain.

Usage: ``python bench/bench_metrics.py [--items 100000] [--repeats 5]``. Prints a
markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import pipeline.metrics
from pipeline import Pipeline, PipelineConfig

CONFIG = PipelineConfig(concurrency=4, queue_maxsize=100)


async def sleep_zero(item: int) -> None:
    await asyncio.sleep(0)


def scraper(url: str, stop: threading.Event) -> None:
    while not stop.wait(0.1):
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()


def one(variant: str, items: int) -> float:
    """CPU seconds of one run of ``variant``."""
    pipe = Pipeline(sleep_zero, CONFIG, name="bench")
    server = None if variant == "plain" else pipeline.metrics.serve(pipe)
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
    if report.completed != items:
        raise RuntimeError(f"{variant}: completed {report.completed} of {items}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    variants = ("plain", "served", "scraped")
    for variant in variants:
        one(variant, min(args.items, 5_000))  # warm-up
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for variant in variants:
            times[variant].append(one(variant, args.items))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"`python {shlex.join(sys.argv)}` at `{commit}`, {time.strftime('%Y-%m-%d')}")
    print()
    print("| variant | CPU s (median) | CPU µs per item | vs plain (median of rounds) |")
    print("|---|---:|---:|---:|")
    for variant in variants:
        median = statistics.median(times[variant])
        ratio = statistics.median(
            t / p for t, p in zip(times[variant], times["plain"], strict=True)
        )
        print(f"| {variant} | {median:.3f} | {median / args.items * 1e6:.2f} | {ratio:.3f}x |")


if __name__ == "__main__":
    main()
