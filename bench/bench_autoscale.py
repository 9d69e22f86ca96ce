"""Benchmark: an autoscaled burst on the kernel against the asyncio engine, in CPU time.

Notebook 13's burst: ten minutes of Poisson arrivals at 2 per second, 20 per second
from 60 s to 120 s, exponential service of mean 1 s, an unbounded queue, a pool of 3
to 60 workers under the HPA's defaults (15 s syncs, a 300 s scale-down window) with a
30 s cold start; its scale-up on the queue per worker, and on the oldest item's age
(``target=5``). The notebook writes the burst as a ``LoadSpike`` fault, which the
kernel leaves to the engine; here it is the same rate as a ``TimeVarying`` profile
(a step at 60 s and at 120 s, each a millisecond wide), which the kernel runs.

One replication per seed, the seeds interleaved across the engine, the kernel's plain
replay and its compiled one (``simulate_once``, ``time.process_time`` around each); the
first run of each is untimed (imports, numba's cached machine code). Ratios are the
medians over seeds of the engine's CPU over the kernel's.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_autoscale.py [--seeds 7]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's pipeline

from pipeline import Autoscaler, PipelineConfig  # noqa: E402 - after the path above
from pipeline.sim import Exponential, Scenario, TimeVarying  # noqa: E402
from pipeline.sim.running.kernel.paths import kernel_path  # noqa: E402
from pipeline.sim.running.single import simulate_once  # noqa: E402

RUNS = ("asyncio", "plain", "compiled")
METRICS = {"queue_per_worker": {}, "oldest_age_s": {"metric": "oldest_age_s", "target": 5.0}}


def burst(seed: int, **settings: object) -> Scenario:
    """Notebook 13's burst and autoscaler (``settings`` change the autoscaler)."""
    scaler = Autoscaler(**{"min_workers": 3, "max_workers": 60, "cold_start_s": 30.0, **settings})
    rate = TimeVarying.from_profile(
        [0.0, 60.0, 60.001, 120.0, 120.001, 600.0], [2.0, 2.0, 20.0, 20.0, 2.0, 2.0]
    )
    config = PipelineConfig(
        concurrency=3, queue_maxsize=None, drain_timeout_s=None, autoscale=scaler
    )
    return Scenario(
        arrivals=rate, service=Exponential(mean=1.0), duration_s=600.0, seed=seed, config=config
    )


def cpu_s(scenario: Scenario, run: str) -> tuple[float, dict]:
    began = time.process_time()
    if run == "asyncio":
        summary = simulate_once(scenario, 0, "asyncio").summary
    else:
        with kernel_path(run):
            summary = simulate_once(scenario, 0, "kernel").summary
    return time.process_time() - began, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=7)
    seeds = parser.parse_args().seeds
    print(f"load {os.getloadavg()[0]:.2f}, {seeds} seeds\n")
    print("| metric | run | CPU ms (median) | min | max | engine / run | items | scale events |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for metric, settings in METRICS.items():
        for run in RUNS:
            cpu_s(burst(0, **settings), run)  # untimed: imports, compiled code loaded
        times: dict[str, list[float]] = {run: [] for run in RUNS}
        summaries = {}
        for seed in range(1, seeds + 1):
            for run in RUNS:
                spent, summaries[run] = cpu_s(burst(seed, **settings), run)
                times[run].append(spent)
            paid = [summaries[run]["worker_seconds"] for run in RUNS]  # the same run, each time
            assert max(paid) - min(paid) <= 1e-9 * max(paid), paid
        for run in RUNS:
            each = times[run]
            ratio = statistics.median(a / b for a, b in zip(times["asyncio"], each, strict=True))
            print(
                f"| {metric} | {run} | {1000 * statistics.median(each):.1f} | "
                f"{1000 * min(each):.1f} | {1000 * max(each):.1f} | {ratio:.1f}x | "
                f"{summaries[run]['items_admitted']} | {summaries[run]['scale_events']} |"
            )


if __name__ == "__main__":
    main()
