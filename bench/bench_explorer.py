"""Benchmark: time from moving an explorer control to its new figure.

Builds ``explore(n_items=...)`` (M/M/4 at rho = 0.8 by default), then sets
about 30 control values from Python -- ``explorer.controls[name].value = v``,
exactly what a slider's ``change`` does in the kernel -- cycling through
``concurrency``, ``maxsize``, ``max_attempts``, ``unbounded``, ``on_full``,
``failure_rate``, ``service_cv``, ``arrival_rate`` and ``backoff_base_s``.
Each assignment re-simulates and re-renders synchronously, so the wall time of
the assignment is the change-to-new-PNG time (the browser then only decodes
an image). Reports median and p90 overall, split into simulation and
rendering, and compares the explorer's renderer (one reused figure, PNG
bytes) with a fresh figure per change saved like ``display(fig)`` does under
the inline backend (``bbox_inches="tight"``).

CPU time of this process is shown too: on a loaded shared machine it is the
better guide to what an idle one would see.

Usage: ``python bench/bench_explorer.py [--items 5000] [--changes 30]``.
Single runs on shared machines vary by up to 1.6x; compare medians.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import shlex
import statistics
import sys
import time

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

from pipeline.viz.explorer import explore
from pipeline.viz.plots import plot_depth, plot_lag, plot_memory

CHANGES = [
    ("concurrency", 5),
    ("concurrency", 3),
    ("concurrency", 6),
    ("maxsize", 50.0),
    ("maxsize", 1000.0),
    ("max_attempts", 5),
    ("failure_rate", 0.2),
    ("max_attempts", 2),
    ("drain_timeout_s", 10),
    ("unbounded", True),
    ("concurrency", 4),
    ("unbounded", False),
    ("on_full", "reject"),
    ("maxsize", 20.0),
    ("on_full", "block"),
    ("service_cv", 2.0),
    ("service_cv", 0.5),
    ("arrival_rate", 2.5),
    ("arrival_rate", 3.6),
    ("failure_rate", 0.5),
    ("max_attempts", 8),
    ("backoff_base_s", 1.0),
    ("backoff_base_s", 0.1),
    ("failure_rate", 0.0),
    ("service_cv", 1.0),
    ("concurrency", 8),
    ("concurrency", 2),
    ("maxsize", 100.0),
    ("arrival_rate", 3.2),
    ("concurrency", 4),
    ("max_attempts", 3),
    ("drain_timeout_s", 30),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def inline_style_render(explorer) -> float:
    """Seconds for a fresh figure saved as the inline backend's display(fig) would."""
    began = time.perf_counter()
    fig = Figure(figsize=(13.5, 3.6), dpi=72)
    axes = fig.subplots(1, 3)
    result, previous = explorer.last_result, explorer.previous_result
    plot_depth(result, axes[0], compare=previous)
    plot_lag(result, axes[1], compare=previous, panels=("distribution",))
    plot_memory(result, axes[2], compare=previous)
    fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000, help="items simulated per change")
    parser.add_argument("--changes", type=int, default=len(CHANGES), help="control changes")
    args = parser.parse_args(argv)

    explorer = explore(n_items=args.items)
    explorer.update()  # warm-up: fonts, caches
    totals, cpus, sims, renders, inline = [], [], [], [], []
    for i in range(args.changes):
        name, value = CHANGES[i % len(CHANGES)]
        control = explorer.controls[name]
        if control.value == value:
            continue
        began, began_cpu = time.perf_counter(), time.process_time()
        control.value = value
        totals.append(time.perf_counter() - began)
        cpus.append(time.process_time() - began_cpu)
        sims.append(explorer.last_breakdown["simulate_s"])
        renders.append(explorer.last_breakdown["render_s"])
        if explorer.error:
            print(f"warning: {name}={value!r} failed: {explorer.error}", file=sys.stderr)
        inline.append(inline_style_render(explorer))

    def row(label: str, values: list[float]) -> str:
        return (
            f"| {label} | {len(values)} | {statistics.median(values) * 1000:.0f} | "
            f"{percentile(values, 90) * 1000:.0f} |"
        )

    print(f"command: `{shlex.join([os.path.basename(sys.executable), *sys.argv])}`")
    print(
        f"machine: {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"{args.items} items per change\n"
    )
    print("| step | changes | median ms | p90 ms |")
    print("|---|---|---|---|")
    print(row("control change -> new figure (total, wall)", totals))
    print(row("  the same, CPU time of this process", cpus))
    print(row("  of which simulate", sims))
    print(row("  of which render + summary", renders))
    print(row("alternative render only: fresh figure, bbox_inches='tight'", inline))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
