"""Benchmark: the whole ``simulate`` command against SimPy, in the environment a user has.

Every other benchmark here sets ``OPENBLAS_NUM_THREADS=1`` for its children.
This one does not: it strips every ``*_NUM_THREADS`` variable, as a fresh
shell has none, so what is timed includes whatever numpy's BLAS does at
import. The command line sets single-threaded BLAS itself before numpy loads
(``pipeline.cli.run_as_command``); SimPy's script, which imports numpy for its
draws, does not, so it is timed both ways.

Interleaved fresh processes per round (CPU time, user + sys, of each finished
child from ``getrusage(RUSAGE_CHILDREN)``):

- ``python -m pipeline simulate ...`` (M/M/4 at rho 0.8, 100,000 items, seed 1);
- the ``pipeline-lab`` console script as ``pyproject.toml`` declares it (a
  script written the way pip writes one: import the entry point, call it);
- SimPy's ``Store(capacity=100)`` model of ``bench_sim.py``, default environment;
- the same with ``OPENBLAS_NUM_THREADS=1``;
- ``python -c pass`` (the interpreter's own start-up, for scale).

Each ratio is the median over rounds of ours over SimPy's in the same round.
Issue target: ``python -m pipeline simulate`` <= 0.3x SimPy (default environment).

Usage: ``python bench/bench_startup.py [--items 100000] [--repeats 9] [--importtime]
[--instructions]`` (``--importtime``: also the ten modules with the largest own
import time in ``python -X importtime`` of the command, summed over five runs;
``--instructions``: also each whole process's instructions, every thread, under
valgrind's callgrind in the same default environment, which a loaded machine
does not move as it moves CPU time).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path

from bench_instructions import instructions
from bench_sim import SIMPY, cli_command, show

TARGET = 0.3
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")},
    "PYTHONPATH": str(ROOT),
}
DEFAULT_ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: from cached bytecode


def console_script(directory: str) -> list[str]:
    """A ``pipeline-lab`` script written from pyproject.toml's entry point, as pip writes one."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["pipeline-lab"].split(":")
    path = Path(directory) / "pipeline-lab"
    path.write_text(
        f"import sys\nfrom {module} import {function}\n"
        f"if __name__ == '__main__':\n    sys.exit({function}())\n"
    )
    return [sys.executable, str(path)]


def cpu_of(command: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + sys) of one finished run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir()
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{show(command)} failed:\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def importtime(command: list[str], runs: int = 5) -> list[tuple[str, float]]:
    """The ten modules with the largest own import time (ms, summed over ``runs``)."""
    own: Counter[str] = Counter()
    for _ in range(runs):
        done = subprocess.run(
            [command[0], "-X", "importtime", *command[1:]],
            capture_output=True, text=True, env=DEFAULT_ENV, cwd=tempfile.gettempdir(),
        )  # fmt: skip
        for line in done.stderr.splitlines():
            match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
            if match:
                own[match.group(2)] += int(match.group(1)) / 1000 / runs
    return own.most_common(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--instructions", action="store_true")
    args = parser.parse_args()
    simpy = [sys.executable, "-c", SIMPY, str(args.items)]
    with tempfile.TemporaryDirectory() as directory:
        runs = {
            "python -m pipeline simulate": (cli_command(args.items), DEFAULT_ENV),
            "pipeline-lab simulate (console script)": (
                [*console_script(directory), *cli_command(args.items)[3:]],
                DEFAULT_ENV,
            ),
            "SimPy Store, default environment": (simpy, DEFAULT_ENV),
            "SimPy Store, OPENBLAS_NUM_THREADS=1": (
                simpy,
                {**DEFAULT_ENV, "OPENBLAS_NUM_THREADS": "1"},
            ),
            "python -c pass": ([sys.executable, "-c", "pass"], DEFAULT_ENV),
        }
        for command, env in runs.values():  # warm-up: bytecode caches, page cache
            cpu_of(command, env)
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        load = [os.getloadavg()[0]]
        for repeat in range(args.repeats):  # interleaved, the order rotated each round
            names = list(runs)
            names = names[repeat % len(names) :] + names[: repeat % len(names)]
            for name in names:
                cpu[name].append(cpu_of(*runs[name]))
            load.append(os.getloadavg()[0])
            print(f"  round {repeat + 1}/{args.repeats} done", file=sys.stderr)
    peer = cpu["SimPy Store, default environment"]
    peer_one = cpu["SimPy Store, OPENBLAS_NUM_THREADS=1"]
    print(
        f"\n## Whole process, default environment: M/M/4, rho 0.8, {args.items:,} items, "
        f"{args.repeats} interleaved rounds\n"
    )
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {min(load):.1f}-{max(load):.1f} during the rounds\n"
    )
    print("| run | CPU s (median) | min | vs SimPy (default env) | vs SimPy (1 BLAS thread) |")
    print("|---|---:|---:|---:|---:|")
    for name, values in cpu.items():
        ratio = statistics.median(a / b for a, b in zip(values, peer, strict=True))
        ratio_one = statistics.median(a / b for a, b in zip(values, peer_one, strict=True))
        print(
            f"| {name} | {statistics.median(values):.3f} | {min(values):.3f} "
            f"| {ratio:.2f}x | {ratio_one:.2f}x |"
        )
    ours = statistics.median(
        a / b for a, b in zip(cpu["python -m pipeline simulate"], peer, strict=True)
    )
    verdict = "meets" if ours <= TARGET else "MISSES"
    print(f"\nours / SimPy, default environment: {ours:.2f}x ({verdict} the <= {TARGET}x target)")
    print(f"\nCommand: `{show(cli_command(args.items))}` (no *_NUM_THREADS variable set)")
    if args.instructions:
        env = {**DEFAULT_ENV, "PYTHONHASHSEED": "0"}
        ours_i = instructions(cli_command(args.items), env)
        simpy_i = instructions(simpy, env)
        verdict = "meets" if ours_i <= TARGET * simpy_i else "MISSES"
        print(
            f"\nInstructions, whole process, default environment (callgrind): ours "
            f"{ours_i / 1e9:.2f} billion, SimPy {simpy_i / 1e9:.2f} billion: "
            f"{ours_i / simpy_i:.3f}x ({verdict} the <= {TARGET}x target)"
        )
    if args.importtime:
        print("\nLargest own import times of the command (ms, mean of 5 runs, -X importtime):\n")
        for module, ms in importtime(cli_command(args.items)):
            print(f"- {module}: {ms:.1f}")


if __name__ == "__main__":
    main()
