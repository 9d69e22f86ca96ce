"""Benchmark: items per second through ``Pipeline`` versus a bare ``asyncio.Queue`` pool.

Both sides run on the standard asyncio event loop, in real time, with the same
queue bound and worker count:

- **Pipeline**: ``Pipeline(handler, PipelineConfig(concurrency, queue_maxsize)).run(range(n))``;
- **bare**: ``asyncio.Queue(maxsize)``, a producer that ``await q.put(i)``s every
  item, ``concurrency`` workers looping ``get`` / handler / ``task_done``, then
  ``q.join()``.

Two handlers: one that awaits ``asyncio.sleep(0)`` (one real suspension per
item, the issue's case; target ratio Pipeline/bare >= 0.5) and one that never
awaits (pure per-item overhead). Runs are interleaved (A B A B ...), each on a
fresh loop, after one short warm-up of each; the table gives medians of CPU time
(``time.process_time``: the run is single-threaded, and CPU time drifts far less
than wall time on a busy machine). Single
runs on shared machines vary by up to 1.6x, so compare medians of several.

Usage: ``python bench/bench_engine.py [--items 200000] [--repeats 5]
[--concurrency 4] [--maxsize 100]``. Prints a markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from pipeline import Pipeline, PipelineConfig

Handler = Callable[[int], Awaitable[None]]


async def sleep_zero(item: int) -> None:
    """Yield to the loop once per item."""
    await asyncio.sleep(0)


async def no_await(item: int) -> None:
    """Never suspend: what is left is the machinery's own per-item cost."""


async def through_pipeline(handler: Handler, items: int, concurrency: int, maxsize: int) -> float:
    """Wall seconds to push ``items`` through a Pipeline (source read to end of drain)."""
    config = PipelineConfig(concurrency=concurrency, queue_maxsize=maxsize)
    started = time.process_time()
    report = await Pipeline(handler, config).run(range(items))
    elapsed = time.process_time() - started
    if report.completed != items:
        raise RuntimeError(f"Pipeline completed {report.completed} of {items} items")
    return elapsed


async def through_bare_queue(handler: Handler, items: int, concurrency: int, maxsize: int) -> float:
    """Wall seconds to push ``items`` through asyncio.Queue plus a worker pool."""
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize)
    done = 0

    async def worker() -> None:
        nonlocal done
        while True:
            item = await queue.get()
            try:
                await handler(item)
                done += 1
            finally:
                queue.task_done()

    started = time.process_time()
    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    for item in range(items):
        await queue.put(item)
    await queue.join()
    for task in workers:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    elapsed = time.process_time() - started
    if done != items:
        raise RuntimeError(f"bare queue completed {done} of {items} items")
    return elapsed


RUNNERS = {"Pipeline": through_pipeline, "bare asyncio.Queue": through_bare_queue}
HANDLERS = {"await asyncio.sleep(0)": sleep_zero, "no await": no_await}


def measure(args: argparse.Namespace) -> dict[tuple[str, str], list[float]]:
    """Seconds per run for each (handler, implementation), interleaved A B A B ..."""
    times: dict[tuple[str, str], list[float]] = {(h, r): [] for h in HANDLERS for r in RUNNERS}
    for handler_name, handler in HANDLERS.items():
        for runner in RUNNERS.values():  # warm-up: imports, caches, allocator
            asyncio.run(runner(handler, min(args.items, 5_000), args.concurrency, args.maxsize))
        for _ in range(args.repeats):
            for runner_name, runner in RUNNERS.items():
                seconds = asyncio.run(runner(handler, args.items, args.concurrency, args.maxsize))
                times[handler_name, runner_name].append(seconds)
    return times


def render(args: argparse.Namespace, times: dict[tuple[str, str], list[float]]) -> str:
    """A markdown report: setup, one row per (handler, implementation), the ratios."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    loop = asyncio.new_event_loop()
    loop_name = type(loop).__name__
    loop.close()
    lines = [
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}, nproc={affinity or os.cpu_count()}, "
        f"loop={loop_name}",
        f"items={args.items}, repeats={args.repeats} (interleaved, medians), "
        f"concurrency={args.concurrency}, maxsize={args.maxsize}",
        "",
        "| handler | implementation | median CPU s | items per CPU s (median) | (min-max) |",
        "|---|---|---:|---:|---:|",
    ]
    ratios = []
    for handler_name in HANDLERS:
        rates = {}
        for runner_name in RUNNERS:
            runs = times[handler_name, runner_name]
            median = statistics.median(runs)
            rates[runner_name] = args.items / median
            lines.append(
                f"| {handler_name} | {runner_name} | {median:.3f} | {args.items / median:,.0f} "
                f"| {args.items / max(runs):,.0f}-{args.items / min(runs):,.0f} |"
            )
        ratio = rates["Pipeline"] / rates["bare asyncio.Queue"]
        ratios.append(f"- {handler_name}: Pipeline/bare = **{ratio:.2f}**")
    lines += ["", "Ratio of median items per CPU second (target for `sleep(0)`: >= 0.5):", *ratios]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000, help="items per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each implementation")
    parser.add_argument("--concurrency", type=int, default=4, help="workers")
    parser.add_argument("--maxsize", type=int, default=100, help="queue bound")
    args = parser.parse_args(argv)
    for name in ("items", "repeats", "concurrency", "maxsize"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    command = shlex.join(["python", *sys.argv]) if argv is None else shlex.join(argv)
    print(f"Command: `{command}`\n")
    print(render(args, measure(args)))


if __name__ == "__main__":
    main()
