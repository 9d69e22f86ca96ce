"""Benchmark: instructions per item, ours against SimPy, counted by valgrind's callgrind.

CPU time on a shared machine still drifts by several percent between runs;
instruction counts do not, so they judge small optimisations. Each contender
runs twice under ``valgrind --tool=callgrind``, with a small and a large
number of items; the difference divided by the difference in items is the
cost per item, free of start-up. Start-up is reported as the count of the
small run.

- **ours**: ``python -m pipeline simulate`` on M/M/4 at rho 0.8 (as ``bench_sim.py``),
  with any ``--ours-args``;
- **SimPy**: the ``Store`` model of ``bench_sim.py``.

Children run with ``OPENBLAS_NUM_THREADS=1`` and ``PYTHONHASHSEED=0``, after a
warm-up run that writes bytecode caches. Needs ``valgrind`` on the PATH; each
run takes some seconds (callgrind runs code about 50 times slower).

Usage: ``python bench/bench_instructions.py [--small 2000] [--large 12000]
[--ours-args "--engine asyncio"]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from bench_sim import CHILD_ENV, SIMPY, cli_command

ENV = {**CHILD_ENV, "PYTHONHASHSEED": "0"}


def instructions(command: list[str], env: dict[str, str] | None = None) -> int:
    """Instructions the command executes (every thread), as callgrind counts them.

    ``env``: the child's environment; by default this benchmark's (one BLAS thread,
    a fixed hash seed).
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
            capture_output=True,
            text=True,
            env=ENV if env is None else env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(command[:4])} ... failed:\n{done.stderr[-2000:]}")
        with open(out, encoding="utf-8") as f:
            match = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    if match is None:
        raise RuntimeError("no instruction count in callgrind's output")
    return int(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000, help="items in the small run")
    parser.add_argument("--large", type=int, default=12000, help="items in the large run")
    parser.add_argument("--ours-args", default="", help="extra flags for our command line")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed")
    extra = shlex.split(args.ours_args)
    contenders = {
        "ours (python -m pipeline simulate)": lambda n: cli_command(n, extra),
        "SimPy 4 (Store + 4 workers)": lambda n: [sys.executable, "-c", SIMPY, str(n)],
    }
    rows = {}
    for name, command in contenders.items():
        subprocess.run(command(10), capture_output=True, env=ENV, check=True)  # .pyc caches
        small, large = instructions(command(args.small)), instructions(command(args.large))
        rows[name] = (small, (large - small) / (args.large - args.small))
    print(f"command: `{shlex.join(['python', *sys.argv])}`\n")
    print(f"| contender | instructions, {args.small:,} items | per item |")
    print("|---|---:|---:|")
    for name, (small, per_item) in rows.items():
        print(f"| {name} | {small:,} | {per_item:,.0f} |")
    ours, simpy = rows.values()
    print(f"\nper item, ours / SimPy: {ours[1] / simpy[1]:.2f}x")
    total = 100_000
    estimate = (ours[0] + (total - args.small) * ours[1]) / (
        simpy[0] + (total - args.small) * simpy[1]
    )
    print(f"whole process at {total:,} items (extrapolated): {estimate:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
