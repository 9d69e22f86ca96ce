"""Benchmark: peak RSS of ``python -m pipeline simulate`` at 1, 3 and 10 million items.

The default command of ``bench_kernel.py`` (M/M/4 at rho 0.8, a queue of 100,
seed 1; the kernel's FCFS path runs it) with ``--items N``, each run a fresh
process under a wrapper that reads its peak RSS with
``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (see ``bench_sim.measure_rss``); also
``python -c "import pipeline.sim"`` for what the imports alone hold. Memory is
not timing: it does not depend on the machine's load.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_memory.py [--items 1000000,3000000,10000000]``.
Issue target: 10,000,000 items within 1 GB (10^9 bytes) of peak RSS.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys

from bench_kernel import ENV, ROOT, cli_command
from bench_sim import measure_rss, show

TARGET_BYTES = 10**9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="1000000,3000000,10000000")
    args = parser.parse_args()
    sizes = [int(part) for part in args.items.split(",")]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    imports = measure_rss([sys.executable, "-c", "import pipeline.sim; print('{}')"], ENV, ROOT)
    print(f"\n## Peak RSS of `simulate` (commit {commit or '?'})\n")
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs\n")
    print("| items | peak RSS | bytes per item above the imports | CPU s | mean wait s |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| imports only | {imports['peak_bytes'] / 2**20:,.0f} MiB | | | |")
    for n in sizes:
        record = measure_rss(cli_command(n), ENV, cwd=ROOT)
        peak = record["peak_bytes"]
        per_item = (peak - imports["peak_bytes"]) / n
        print(
            f"| {n:,} | {peak / 2**20:,.0f} MiB ({peak / 1e9:.3f} GB) | {per_item:.0f} "
            f"| {record['cpu_s']:.1f} | {float(record['summary']['wait_mean_s']):.6f} |"
        )
        if n == 10_000_000:
            verdict = "meets" if peak <= TARGET_BYTES else "MISSES"
            print(f"\n10,000,000 items: {peak / 1e9:.3f} GB ({verdict} the <= 1 GB target)\n")
    print(f"Command: `{show(cli_command(sizes[-1]))}`")


if __name__ == "__main__":
    main()
