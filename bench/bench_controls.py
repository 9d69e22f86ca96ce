"""Benchmark: what each overload control costs the engine when it is on, in CPU time.

The run is the M/M/4 run of ``bench_kernel.py`` (Poisson arrivals at 3.2 per
second, exponential service of mean 1 s, four workers, a queue of 100, seed 1)
on the asyncio engine in virtual time (``simulate(scenario, engine="asyncio")``,
in process), once with every control off and once with each of them on in turn:

- ``RetryBudget()``: counts every first attempt; nothing fails, so it never denies;
- ``CircuitBreaker()``: judges every call's outcome over its window; it stays closed;
- ``AIMD(min_limit=4, timeout_s=60)`` and ``Gradient2(min_limit=4)``: sample every
  attempt and recompute the limit; with the lowest limit at ``concurrency`` the
  limit cannot fall, so the same work is done;
- ``CoDel(target_s=60, interval_s=120)``: times every item's sojourn; no queue
  stands that long here, so it sheds nothing;
- ``Autoscaler(min_workers=4, max_workers=4)``: syncs every 15 s of virtual time
  (reads the queue, recommends, stabilises); the pool's size cannot change.

Each control runs its bookkeeping on every item while the work stays that of
the run with all off: the table shows the completed items and the mean wait of
each, so a control that changed the work would show. The runs are interleaved
(off, budget, breaker, ..., off, budget, ...); CPU time is ``time.process_time``
around one ``simulate`` call, and each control's ratio is the median over rounds
of its CPU time over the all-off run's in the same round.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_controls.py [--items 100000]
[--repeats 5]``. Prints a markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's pipeline

from pipeline import (  # noqa: E402 - after the path above
    AIMD,
    Autoscaler,
    CircuitBreaker,
    CoDel,
    Gradient2,
    PipelineConfig,
    RetryBudget,
)
from pipeline.sim import Exponential, Poisson, Scenario, simulate  # noqa: E402

CONCURRENCY = 4
CONTROLS = {
    "RetryBudget()": {"retry_budget": RetryBudget()},
    "CircuitBreaker()": {"breaker": CircuitBreaker()},
    "AIMD(min_limit=4, timeout_s=60)": {
        "concurrency_limit": AIMD(min_limit=CONCURRENCY, timeout_s=60.0)
    },
    "Gradient2(min_limit=4)": {"concurrency_limit": Gradient2(min_limit=CONCURRENCY)},
    "CoDel(target_s=60, interval_s=120)": {"codel": CoDel(target_s=60.0, interval_s=120.0)},
    "Autoscaler(min_workers=4, max_workers=4)": {
        "autoscale": Autoscaler(min_workers=CONCURRENCY, max_workers=CONCURRENCY)
    },
}
"""Each control's settings: on, active on every item, and unable to change the work."""


def scenarios(items: int) -> dict[str, Scenario]:
    """The all-off M/M/4 scenario, and one with each control of :data:`CONTROLS` on."""
    base = Scenario(
        arrivals=Poisson(rate=3.2),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=CONCURRENCY, queue_maxsize=100),
        n_items=items,
        seed=1,
    )
    runs = {"all off": base}
    for name, change in CONTROLS.items():
        runs[name] = base.replace(config=dataclasses.replace(base.config, **change))
    return runs


def measure(items: int, repeats: int) -> tuple[dict[str, list[float]], dict[str, dict]]:
    """CPU seconds of each run, interleaved, and each run's last summary."""
    runs = scenarios(items)
    for scenario in runs.values():  # first-call costs (imports, caches) out of the way
        simulate(scenario.replace(n_items=min(items, 1000)), engine="asyncio")
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    summaries: dict[str, dict] = {}
    for repeat in range(repeats):
        for name, scenario in runs.items():
            began = time.process_time()
            result = simulate(scenario, engine="asyncio")
            cpu[name].append(time.process_time() - began)
            summaries[name] = result.summary
        print(f"  round {repeat + 1}/{repeats} done", file=sys.stderr)
    return cpu, summaries


def render(items: int, cpu: dict[str, list[float]], summaries: dict[str, dict]) -> str:
    """A markdown table: each run's CPU time, its ratio to all off, and its work."""
    off = cpu["all off"]
    lines = [
        f"M/M/{CONCURRENCY}, rho 0.8, {items:,} items, the asyncio engine in virtual time, "
        f"{len(off)} interleaved rounds; Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load {tuple(round(x, 1) for x in os.getloadavg())}",
        "",
        "| run | CPU s (median) | / all off (median of rounds) | completed | mean wait s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in cpu.items():
        ratio = statistics.median(ours / base for ours, base in zip(values, off, strict=True))
        summary = summaries[name]
        lines.append(
            f"| {name} | {statistics.median(values):.3f} | {ratio:.2f}x "
            f"| {summary['items_completed']:,} | {float(summary['wait_mean_s']):.4f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="items per run")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args(argv)
    for name in ("items", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: set OPENBLAS_NUM_THREADS=1 for steadier figures", file=sys.stderr)
    command = shlex.join(["python", *(sys.argv if argv is None else ["bench_controls.py", *argv])])
    print(f"Command: `{command}`\n")
    print(render(args.items, *measure(args.items, args.repeats)))


if __name__ == "__main__":
    main()
