"""Benchmark: a whole recovery map, the size a capacity review asks for, in wall and CPU time.

The map is ``recovery_map()`` over 10 drop depths x 10 drop lengths, 20
replications a cell (2,000 runs), each run 10 minutes of traffic at 100
requests/s (60,000 arrivals, and the retries of those that time out). The
system is the OSDI artefact's shape that ``tests/sim/analysis/test_recovery_map.py``
holds (``osdi_tuned`` there): a client sending at a fixed rate to 20 servers of
10/s each (50% busy, Gamma service of cv 0.5), cutting an attempt after 4.3 s
and trying 4 times, 0.1 s apart; each cell's ``CapacityDrop`` starts at 60 s.
Stuck cells are the expensive ones: every attempt times out, each item sends
4 requests, and the servers work on orphans to the end of the run.

What is timed: wall time around the one ``recovery_map`` call; with
``--processes 1``, also this process's CPU time (user + sys). Worker processes
are started by multiprocessing's forkserver (or a Dask cluster's nanny, with
``--scheduler``), not by this process, so their CPU time is not this process's
to read: with more processes only the wall time is shown. The target: the whole
map within 10 minutes on 2 cores.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_recovery_map.py [--factors 10]
[--durations 10] [--replications 20] [--minutes 10] [--processes 2] [--engine auto]
[--scheduler local]``. A smaller map (``--factors 2 --durations 2 --replications 2``)
shows the per-run cost in a minute. Prints a markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's pipeline

from pipeline import Backoff, PipelineConfig  # noqa: E402 - after the path above
from pipeline.sim import CapacityDrop, Downstream, Gamma, Scenario, recovery_map  # noqa: E402
from pipeline.sim.workloads.arrivals import Deterministic  # noqa: E402

RATE = 100.0
FAULT_AT_S = 60.0
WALL_TARGET_S = 600.0


def scenario(minutes: float) -> Scenario:
    """The OSDI-shaped system with ``minutes`` of traffic (see the module docstring)."""
    config = PipelineConfig(concurrency=10_000, queue_maxsize=None, max_attempts=4,
                            attempt_timeout_s=4.3, drain_timeout_s=None,
                            backoff=Backoff(kind="constant", base_s=0.1))  # fmt: skip
    return Scenario(arrivals=Deterministic(rate=RATE), config=config, duration_s=60.0 * minutes,
                    seed=3, downstream=Downstream(concurrency=20,
                                                  service=Gamma(mean=0.1, cv=0.5)))  # fmt: skip


def grid(factors: int, durations: int) -> tuple[list[float], list[float]]:
    """Drop depths from a 90% cut to a 45% one, and lengths from 2 s up, 2 s apart."""
    depth = [round(0.10 + 0.05 * i, 2) for i in range(factors)]
    length = [2.0 * (i + 1) for i in range(durations)]
    return depth, length


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def measure(args: argparse.Namespace) -> dict:
    """One map: its wall and CPU seconds, and how many cells stuck."""
    factors, durations = grid(args.factors, args.durations)
    options = dict(
        fault=CapacityDrop(at_s=FAULT_AT_S, for_s=durations[0], factor=factors[0]),
        factors=factors,
        durations=durations,
        replications=args.replications,
        engine=args.engine,
    )
    base = scenario(args.minutes)
    began_wall, began_cpu = time.perf_counter(), _cpu_s()
    if args.scheduler:
        from pipeline.sim.executors.cluster import scheduler_executor

        with scheduler_executor(args.scheduler, workers=args.processes) as executor:
            frame = recovery_map(base, executor=executor, **options)
        cpu = None
    else:
        frame = recovery_map(base, processes=args.processes, **options)
        cpu = _cpu_s() - began_cpu if args.processes == 1 else None  # (see the docstring)
    wall = time.perf_counter() - began_wall
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "runs": len(factors) * len(durations) * args.replications,
        "stuck_cells": int((frame.stuck_fraction > 0.5).sum()),
        "cells": len(frame),
    }


def render(args: argparse.Namespace, result: dict) -> str:
    """A markdown table row with its header."""
    where = f"Dask ({args.scheduler})" if args.scheduler else f"{args.processes} processes"
    cpu = "n/a" if result["cpu_s"] is None else f"{result['cpu_s']:.0f}"
    return "\n".join([
        f"{args.factors} x {args.durations} cells, {args.replications} replications, "
        f"{args.minutes:g} min at {RATE:g}/s a run, engine {args.engine}, {where}; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load {tuple(round(x, 1) for x in os.getloadavg())}",
        "",
        "| runs | stuck cells | wall s | CPU s | wall / target (600 s) |",
        "|---:|---:|---:|---:|---:|",
        f"| {result['runs']:,} | {result['stuck_cells']} of {result['cells']} "
        f"| {result['wall_s']:.0f} | {cpu} | {result['wall_s'] / WALL_TARGET_S:.2f} |",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factors", type=int, default=10, help="drop depths")
    parser.add_argument("--durations", type=int, default=10, help="drop lengths")
    parser.add_argument("--replications", type=int, default=20, help="runs a cell")
    parser.add_argument("--minutes", type=float, default=10.0, help="traffic a run, minutes")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--engine", default="auto", choices=("auto", "asyncio", "kernel"))
    parser.add_argument("--scheduler", default=None, help="'local' or a Dask scheduler address")
    args = parser.parse_args(argv)
    for name in ("factors", "durations", "replications", "processes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 1.5 <= args.minutes < 1e6:
        parser.error(
            f"--minutes must be at least 1.5 (the drop starts at 60 s), got {args.minutes}"
        )
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: set OPENBLAS_NUM_THREADS=1 for steadier figures", file=sys.stderr)
    command = shlex.join(
        ["python", *(sys.argv if argv is None else ["bench_recovery_map.py", *argv])]
    )
    print(f"Command: `{command}`\n")
    print(render(args, measure(args)))


if __name__ == "__main__":
    main()
