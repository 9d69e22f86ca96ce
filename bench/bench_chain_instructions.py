"""Benchmark: instructions per stage item on the 3-stage tandem, counted by valgrind's callgrind.

The second measure beside ``bench_chain.py``'s CPU-time ratios (instruction
counts do not drift with the machine's load). Each contender runs the
tandem of ``bench/ciw_tandem.py`` twice under ``valgrind --tool=callgrind``,
with a small and a large number of items; the difference divided by the
difference in stage items is the cost per stage item, free of start-up
(imports, and for the compiled kernel loading numba and its cached replay).

- **kernel (compiled)**: ``simulate(engine="kernel")`` with the array replay compiled;
- **kernel (plain)**: the same with ``kernel_path("plain")``;
- **asyncio engine**: ``simulate(engine="asyncio")``;
- **Ciw**: ``ciw_tandem.ciw_sojourns``.

Children run with ``OPENBLAS_NUM_THREADS=1``, ``PYTHONHASHSEED=0`` and
``NUMBA_CPU_NAME=generic`` (see ``ENV``), after a warm-up run that writes
bytecode and numba caches. Needs ``valgrind``.

Usage: ``python bench/bench_chain_instructions.py [--small 2000] [--large 8000]``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys

import bench_instructions
from bench_instructions import instructions

# numba keys its on-disk cache by the CPU it compiles for, and valgrind's simulated CPU is not
# the host's: compile for a generic x86-64 so that the warm-up's cache, written natively, is
# the one the counted runs load (they would otherwise compile under valgrind, for minutes).
ENV = {**bench_instructions.ENV, "NUMBA_CPU_NAME": "generic"}
bench_instructions.ENV = ENV

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STAGES = 3  # the tandem's stages: every source item is one item at each

CHILD = f"""
import sys
sys.path[:0] = [{ROOT!r}, {HERE!r}]
import ciw_tandem
path, n = sys.argv[1], int(sys.argv[2])
if path == "ciw":
    ciw_tandem.ciw_sojourns(n, seed=1)
else:
    from pipeline.sim import simulate
    from pipeline.sim.running.kernel.paths import kernel_path
    engine = "asyncio" if path == "asyncio" else "kernel"
    with kernel_path(path if engine == "kernel" else "auto"):
        simulate(ciw_tandem.scenario(n, seed=1), engine=engine)
"""

CONTENDERS = {
    "kernel (compiled)": "compiled",
    "kernel (plain)": "plain",
    "asyncio engine": "asyncio",
    "Ciw": "ciw",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000, help="source items, small run")
    parser.add_argument("--large", type=int, default=8000, help="source items, large run")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed")
    rows = {}
    for name, path in CONTENDERS.items():
        command = [sys.executable, "-c", CHILD, path]
        subprocess.run([*command, "50"], capture_output=True, env=ENV, check=True)  # caches
        small = instructions([*command, str(args.small)])
        large = instructions([*command, str(args.large)])
        rows[name] = (small, (large - small) / ((args.large - args.small) * STAGES))
        print(f"  {name}: {rows[name][1]:,.0f} per stage item", file=sys.stderr)
    print(f"command: `{shlex.join(['python', *sys.argv])}`\n")
    print(f"| run by | instructions, {args.small:,} items | per stage item | / compiled kernel |")
    print("|---|---:|---:|---:|")
    ours = rows["kernel (compiled)"][1]
    for name, (small, per_item) in rows.items():
        print(f"| {name} | {small:,} | {per_item:,.0f} | {per_item / ours:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
