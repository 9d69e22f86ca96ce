"""Benchmark: the kernel's chain path against the asyncio engine, in CPU time, on 3-stage chains.

Two chains, each run by both engines in this process (``simulate(scenario,
engine="kernel")`` against ``engine="asyncio"``: the real ``Chain`` on the
virtual loop), ``time.process_time`` (user + sys of this process) around each
call, interleaved (kernel, engine, kernel, ...); the ratio is the median over
repeats of the ratio within a repeat. CPU time drifts far less than wall time
on a busy machine.

- **tandem**: Poisson arrivals at 3 per second through fetch (2 workers,
  mean 0.5 s, queue 20), transform (4 workers, mean 1.0 s, queue 10) and
  write (2 workers, mean 0.5 s, queue 5): bounded queues, so hand-offs block
  after service.
- **fan-out with failures**: pages at 0.5 per second, each fanned out into 5
  records, a record stage failing 10% of attempts (3 attempts, jittered
  backoff), then a write stage.

Both engines must print the same numbers (the kernel is the engine's exact
fast path): the script checks the end-to-end latency and every stage's mean
wait before timing.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_chain.py [--items 20000] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's pipeline


def chains(items: int) -> dict:
    from pipeline import Backoff, PipelineConfig
    from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, StageSpec

    def config(concurrency: int, maxsize: int, **more) -> PipelineConfig:
        return PipelineConfig(concurrency=concurrency, queue_maxsize=maxsize, **more)

    tandem = Scenario(
        arrivals=Poisson(rate=3.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.5), config=config(2, 20)),
            StageSpec(name="transform", service=Exponential(mean=1.0), config=config(4, 10)),
            StageSpec(name="write", service=Exponential(mean=0.5), config=config(2, 5)),
        ],
        n_items=items,
        seed=1,
    )
    retrying = config(4, 50, max_attempts=3, backoff=Backoff(base_s=0.5, jitter=True))
    fan_out = Scenario(
        arrivals=Poisson(rate=0.5),
        stages=[
            StageSpec(name="page", service=Exponential(mean=1.0), config=config(1, 10), fan_out=5),
            StageSpec(
                name="record",
                service=Exponential(mean=0.5),
                config=retrying,
                failures=IndependentFailures(0.1),
            ),
            StageSpec(name="write", service=Exponential(mean=0.3), config=config(2, 20)),
        ],
        n_items=max(1, items // 5),  # about as many records as the tandem has items
        seed=1,
    )
    return {"tandem": tandem, "fan-out with failures": fan_out}


def same_numbers(kernel, engine) -> None:
    """The two engines' headline numbers agree (the kernel is exact, not an approximation)."""
    pairs = [(kernel.summary["latency_mean_s"], engine.summary["latency_mean_s"])]
    pairs += [
        (kernel.stages[name].summary["wait_mean_s"], engine.stages[name].summary["wait_mean_s"])
        for name in kernel.stages
    ]
    for ours, reference in pairs:
        if not math.isclose(ours, reference, rel_tol=1e-9, abs_tol=1e-9):
            raise AssertionError(f"kernel {ours!r} != engine {reference!r}")


def measure(name: str, scenario, repeats: int) -> None:
    from pipeline.sim import simulate

    small = scenario.replace(n_items=200)
    same_numbers(simulate(small, engine="kernel"), simulate(small, engine="asyncio"))
    cpu: dict[str, list[float]] = {"kernel": [], "asyncio": []}
    results = {}
    for repeat in range(repeats):
        for engine, values in cpu.items():
            began = time.process_time()
            results[engine] = simulate(scenario, engine=engine)
            values.append(time.process_time() - began)
            print(f"  {name} {repeat + 1}/{repeats} {engine}: {values[-1]:.3f} s", file=sys.stderr)
    same_numbers(results["kernel"], results["asyncio"])
    ratios = [e / k for k, e in zip(cpu["kernel"], cpu["asyncio"], strict=True)]
    items = sum(len(stage.items) for stage in results["kernel"].stages.values())
    print(f"\n### {name}: {scenario.n_items:,} source items ({items:,} stage items)\n")
    print("| engine | CPU s (median) | min | max | us per stage item |")
    print("|---|---|---|---|---|")
    for engine, values in cpu.items():
        median = statistics.median(values)
        print(
            f"| {engine} | {median:.3f} | {min(values):.3f} | {max(values):.3f} "
            f"| {median / items * 1e6:.1f} |"
        )
    print(
        f"\nengine / kernel CPU: the kernel is {statistics.median(ratios):.1f}x faster "
        f"(median of {repeats} pairs; range {min(ratios):.1f}-{max(ratios):.1f}x); "
        f"end-to-end mean latency {results['kernel'].summary['latency_mean_s']:.4f} s from both"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("## Chains: the kernel against the engine, CPU time in process\n")
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    for name, scenario in chains(args.items).items():
        measure(name, scenario, args.repeats)


if __name__ == "__main__":
    main()
