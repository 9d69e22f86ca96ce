"""Benchmark: the planning guide's plan as one whole command, CPU time of the process.

The command of ``docs/guide/planning.md`` (72 runs of 100,000 items with 2%
failures, ``--processes 1 --json``) is run as a fresh ``python -m pipeline``
process from each tree given, interleaved, and its user + system CPU seconds
are read from the kernel's accounting of the finished child
(``os.wait4``): start-up, imports, numba's load of its cached machine code,
the 72 runs and the report, all of it. Each tree runs with its own working
directory and ``PYTHONPATH``; every answer must be byte for byte the first
tree's (``--json`` output). Before timing, each tree runs the command once
untimed, so that numba's on-disk cache (and, unless ``PYTHONDONTWRITEBYTECODE``
is set, Python's) is filled in: a first run compiles for tens of seconds.

Usage: ``python bench/bench_plan_process.py [--rounds 5] [--headroom] TREE [TREE ...]``,
e.g. a copy of an earlier commit (``git archive COMMIT | tar -x -C /tmp/before``)
and this checkout: ``python bench/bench_plan_process.py /tmp/before .``.
Target (issue): about 2 s of CPU for the whole command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMAND = [
    "-m", "pipeline", "plan",
    "--arrivals", "poisson:rate=50",
    "--service", "lognormal:p50=0.05,p99=1.2",
    "--search", "concurrency=1..64",
    "--search", "maxsize=100,1000",
    "--slo", "latency_p95_s<=0.5",
    "--slo", "memory_peak_bytes<=200e6",
    "--item-size", "20000",
    "--failure-rate", "0.02",
    "--max-attempts", "3",
    "--items", "100000",
    "--confidence", "0.95",
    "--seed", "1",
    "--processes", "1",
    "--json",
]  # fmt: skip
HEADROOM = [
    "-m", "pipeline", "plan",
    "--arrivals", "poisson:rate=8",
    "--service", "exponential:mean=1",
    "--items", "20000",
    "--seed", "1",
    "--search", "concurrency=1..30",
    "--slo", "wait_mean_s<=0.5",
    "--cost", "worker_hour=1.20,wait_hour=12",
    "--headroom",
    "--processes", "1",
    "--json",
]  # fmt: skip
"""``--headroom``: the guide's plan with costs and headroom, where nothing fails: hundreds of
runs of 20,000 items on the FCFS recursion."""


def run(tree: str, command: list[str] = COMMAND) -> tuple[float, bytes]:
    """One run of ``command`` from ``tree``: (user + system CPU seconds, its stdout)."""
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(
            [sys.executable, *command], cwd=tree, env=env, stdout=out, stderr=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"{tree}: the command exited with status {child.returncode}")
        out.seek(0)
        return usage.ru_utime + usage.ru_stime, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="source trees (each holds a pipeline/ package)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--headroom", action="store_true", help="the plan with costs and headroom")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be an integer >= 1, got {args.rounds}")
    command = HEADROOM if args.headroom else COMMAND
    trees = [os.path.abspath(tree) for tree in args.trees]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, python {sys.version.split()[0]}")
    answers = {}
    for tree in trees:  # fill the caches (numba's, and Python's bytecode if it may)
        answers[tree] = run(tree, command)[1]
    cpu: dict[str, list[float]] = {tree: [] for tree in trees}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for tree in trees:
            seconds, answer = run(tree, command)
            cpu[tree].append(seconds)
            if answer != answers[trees[0]]:
                raise SystemExit(f"{tree}: the answer differs from {trees[0]}'s")
        loads.append(os.getloadavg()[0])
    print(f"load average (1 min) from {min(loads):.1f} to {max(loads):.1f}; the same JSON: yes\n")
    print("| tree | CPU s user + sys (median) | min | max | first tree / this (median of rounds) |")
    print("|---|---:|---:|---:|---:|")
    first = cpu[trees[0]]
    for tree, values in cpu.items():
        ratio = statistics.median(a / b for a, b in zip(first, values, strict=True))
        print(
            f"| {tree} | {statistics.median(values):.2f} | {min(values):.2f} "
            f"| {max(values):.2f} | {ratio:.2f}x |"
        )


if __name__ == "__main__":
    main()
