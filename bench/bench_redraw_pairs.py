"""Benchmark: widget redraws of this checkout against another one, in paired processes.

On a loaded machine a redraw's CPU time moves with the load (the explorer
measured 131 ms at a load average of 1 and 358 ms at 3), so an absolute
figure taken now says little. This runs, alternately (this, other, other,
this, ...), fresh processes of each checkout with ``PYTHONPATH`` naming it:

- the explorer: ``explore(n_items=5000)`` and the 32 control changes of
  ``bench_explorer.py``, the median CPU ms of a change (``time.process_time``);
- the lesson widgets: that checkout's ``bench/bench_widgets.py``, each widget's median.

It prints each round's medians and the median over rounds of this/other per
widget. Scaled by a figure recorded at a known load for the other checkout
(``bench/RESULTS.md``), the ratio gives this checkout's figure at that load.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_redraw_pairs.py --against DIR [--rounds 3]``
(``DIR``: another checkout's root, e.g. ``git archive <commit> | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXPLORER = """
import statistics, sys, time
import matplotlib
matplotlib.use("Agg")
sys.path.insert(0, sys.argv[1] + "/bench")
from bench_explorer import CHANGES
from pipeline.viz.widgets.explorer import explore
explorer = explore(n_items=5000)
took = []
for name, value in CHANGES:
    began = time.process_time()
    explorer.controls[name].value = value
    took.append(time.process_time() - began)
print(statistics.median(took) * 1000)
"""


def measure(tree: Path) -> dict[str, float]:
    """Median CPU ms per change of the explorer and of each lesson widget, for ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", EXPLORER, str(tree)],
        capture_output=True, text=True, env=env, cwd=tree, check=True,
    )  # fmt: skip
    medians = {"explorer": float(done.stdout.strip().splitlines()[-1])}
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / "bench_widgets.py")],
        capture_output=True, text=True, env=env, cwd=tree, check=True,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        row = re.match(r"\| (0\d [a-z]+) \| \d+ \| (\d+) \|", line)
        if row:
            medians[row.group(1)] = float(row.group(2))
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = {"this": ROOT, "other": args.against.resolve()}
    runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
    load = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        order = ["this", "other"] if round_ % 2 == 0 else ["other", "this"]
        for name in order:
            runs[name].append(measure(trees[name]))
            print(f"  round {round_ + 1} {name}: {runs[name][-1]}", file=sys.stderr)
        load.append(os.getloadavg()[0])
    print(f"\nthis: {ROOT}\nother: {trees['other']}")
    print(f"load average {min(load):.1f}-{max(load):.1f}, {args.rounds} paired rounds\n")
    print("| widget | this, median ms | other, median ms | this / other (median of rounds) |")
    print("|---|---:|---:|---:|")
    for widget in runs["this"][0]:
        mine = [r[widget] for r in runs["this"]]
        theirs = [r[widget] for r in runs["other"]]
        ratio = statistics.median(a / b for a, b in zip(mine, theirs, strict=True))
        print(
            f"| {widget} | {statistics.median(mine):.0f} | {statistics.median(theirs):.0f} "
            f"| {ratio:.2f} |"
        )


if __name__ == "__main__":
    main()
