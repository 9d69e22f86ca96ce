"""Benchmark: the metastable scenario on the kernel against a lean SimPy model, in CPU time.

The scenario (``metastable_scenario``): 100,000 Poisson arrivals at 100/s to a
downstream of 10 servers (exponential service, mean 80 ms: 80% busy), a client
that cuts each attempt after 1 s and tries 4 times, 0.1 s apart, with 10,000
workers (never short), and an 80% capacity drop at 20 s for 3 s. The drop
leaves the system stuck: every attempt times out behind its own orphans, each
item sends 4 requests, and the servers work on orphaned requests to the end.
Its SimPy peer is ``bench/simpy_metastable.py``.

Timed, in this process and interleaved (kernel, SimPy, kernel, ...): one
``simulate()`` call with the default ``engine="auto"`` (draws, run, per-item
columns, step series, downstream log, summary) and one SimPy run (draws
included), ``time.process_time`` around each, a garbage collection untimed
before each. The ratio is the median of the ratios within a round. The issue's
target: the kernel at most 0.5x SimPy's CPU. ``--engine`` once runs the asyncio
engine too (informational: the same scenario, the reference semantics).

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_metastable.py [--items 100000]
[--repeats 5] [--engine]``. Prints a markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shlex
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's pipeline
sys.path.insert(0, HERE)

from simpy_metastable import (  # noqa: E402
    BACKOFF_S,
    DROP_AT_S,
    DROP_FACTOR,
    DROP_FOR_S,
    MAX_ATTEMPTS,
    MEAN_SERVICE_S,
    RATE,
    SERVERS,
    TIMEOUT_S,
    simpy_metastable_model,
)

TARGET = 0.5


def metastable_scenario(items: int):
    """The scenario of the module docstring, with ``items`` arrivals."""
    from pipeline import Backoff, PipelineConfig
    from pipeline.sim import CapacityDrop, Downstream, Exponential, Poisson, Scenario

    config = PipelineConfig(concurrency=10_000, queue_maxsize=None, max_attempts=MAX_ATTEMPTS,
                            attempt_timeout_s=TIMEOUT_S, drain_timeout_s=None,
                            backoff=Backoff(kind="constant", base_s=BACKOFF_S))  # fmt: skip
    return Scenario(
        arrivals=Poisson(rate=RATE), config=config, n_items=items, seed=3,
        downstream=Downstream(concurrency=SERVERS, service=Exponential(mean=MEAN_SERVICE_S)),
        faults=[CapacityDrop(at_s=DROP_AT_S, for_s=DROP_FOR_S, factor=DROP_FACTOR)],
    )  # fmt: skip


def _timed(call):
    gc.collect()
    began = time.process_time()
    value = call()
    return time.process_time() - began, value


def measure(items: int, repeats: int, engine: bool) -> dict:
    """CPU seconds of each side per round, and what each run counted."""
    from pipeline.sim import simulate

    scenario = metastable_scenario(items)
    simulate(metastable_scenario(min(items, 2000)))  # first-call costs (imports, numba's load)
    simpy_metastable_model(min(items, 2000))
    kernel, simpy = [], []
    for repeat in range(repeats):
        seconds, result = _timed(lambda: simulate(scenario))
        kernel.append(seconds)
        seconds, counts = _timed(lambda: simpy_metastable_model(items))
        simpy.append(seconds)
        print(f"  round {repeat + 1}/{repeats} done", file=sys.stderr)
    out = {"kernel": kernel, "simpy": simpy, "summary": result.summary, "counts": counts}
    if engine:
        out["engine"] = _timed(lambda: simulate(scenario, engine="asyncio"))[0]
    return out


def render(items: int, m: dict) -> str:
    """A markdown table: each side's median CPU, the ratio, and what each run counted."""
    ratios = [k / s for k, s in zip(m["kernel"], m["simpy"], strict=True)]
    summary, counts = m["summary"], m["counts"]
    lines = [
        f"{items:,} arrivals, {len(ratios)} interleaved rounds; Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{tuple(round(x, 1) for x in os.getloadavg())}",
        "",
        "| run | CPU s (median) | completed | requests | orphaned |",
        "|---|---:|---:|---:|---:|",
        f'| kernel (`engine="{summary["engine"]}"`) | {statistics.median(m["kernel"]):.3f} '
        f"| {summary['items_completed']:,} | {summary['downstream_requests']:,} "
        f"| {summary['downstream_orphaned']:,} |",
        f"| SimPy | {statistics.median(m['simpy']):.3f} | {counts['completed']:,} "
        f"| {counts['requests']:,} | {counts['orphaned']:,} |",
    ]
    if "engine" in m:
        lines.append(f"| asyncio engine (once) | {m['engine']:.3f} | | | |")
    lines += ["", f"Kernel / SimPy CPU: {statistics.median(ratios):.3f}x (median of rounds; "
              f"range {min(ratios):.3f}-{max(ratios):.3f}; target <= {TARGET}x)."]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="arrivals per run")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--engine", action="store_true", help="time the asyncio engine once")
    args = parser.parse_args(argv)
    for name in ("items", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: set OPENBLAS_NUM_THREADS=1 for steadier figures", file=sys.stderr)
    called = sys.argv if argv is None else ["bench_metastable.py", *argv]
    print(f"Command: `{shlex.join(['python', *called])}`\n")
    print(render(args.items, measure(args.items, args.repeats, args.engine)))


if __name__ == "__main__":
    main()
