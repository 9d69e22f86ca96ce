"""Benchmark: the kernel's chain paths against the engine and Ciw, in CPU time, on 3-stage chains.

Two chains, each run in this process by the kernel's compiled replay
(``simulate(scenario, engine="kernel")`` with numba loaded), the same replay
as plain Python (``kernel_path("plain")``: the kernel without numba), and the
asyncio engine (the real
``Chain`` on the virtual loop); the tandem also by Ciw
(``bench/ciw_tandem.py``). ``time.process_time`` (user + sys of this process)
around each call, interleaved (kernel, plain, engine, Ciw, kernel, ...);
each ratio is the median over repeats of the ratio within a repeat. CPU time
drifts far less than wall time on a busy machine.

- **tandem** (``bench/ciw_tandem.py``): Poisson arrivals at 3 per second
  through fetch (2 workers, mean 0.5 s, unbounded queue), transform (4
  workers, mean 1.0 s, queue 10) and write (2 workers, mean 0.5 s, queue 5):
  bounded queues between the stages, so hand-offs block after service.
- **fan-out with failures**: pages at 0.5 per second, each fanned out into 5
  records, a record stage failing 10% of attempts (3 attempts, jittered
  backoff), then a write stage.

The kernel's paths and the engine must print the same numbers (the kernel is
the engine's exact fast path): the script checks the end-to-end latency and
every stage's mean wait before timing, and the kernel's two paths item by
item on every timed run. Ciw draws its own numbers: its mean sojourn is
printed beside ours (``tests/sim/running/test_chain_crosscheck.py`` checks
that the two agree within a confidence interval).

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
sys.path.insert(0, os.path.join(ROOT, "bench"))

import ciw_tandem  # noqa: E402  (bench/ is on the path now)


def chains(items: int) -> dict:
    from pipeline import Backoff, PipelineConfig
    from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, StageSpec

    def config(concurrency: int, maxsize: int, **more) -> PipelineConfig:
        return PipelineConfig(concurrency=concurrency, queue_maxsize=maxsize, **more)

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
    return {"tandem": ciw_tandem.scenario(items, seed=1), "fan-out with failures": fan_out}


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


def same_items(a, b) -> None:
    """Two kernel paths give the same per-item columns at every stage."""
    for name in a.stages:
        if not a.stages[name].items.equals(b.stages[name].items):
            raise AssertionError(f"stage {name!r}: the kernel's paths differ")


def measure(name: str, scenario, repeats: int) -> None:
    from pipeline.sim import simulate
    from pipeline.sim.running.kernel import driver
    from pipeline.sim.running.kernel.paths import kernel_path

    def kernel(path: str):
        with kernel_path(path):
            return simulate(scenario, engine="kernel")

    small = scenario.replace(n_items=200)
    same_numbers(simulate(small, engine="kernel"), simulate(small, engine="asyncio"))
    contenders = {
        "kernel (compiled)": lambda: kernel("compiled"),
        "kernel (plain)": lambda: kernel("plain"),
        "asyncio engine": lambda: simulate(scenario, engine="asyncio"),
    }
    if driver.compiled() is None:
        del contenders["kernel (compiled)"]
    ours = next(iter(contenders))
    if name == "tandem":
        contenders["Ciw"] = lambda: ciw_tandem.ciw_sojourns(scenario.n_items, seed=1)
    cpu: dict[str, list[float]] = {contender: [] for contender in contenders}
    results = {}
    for repeat in range(repeats):
        for contender, run in contenders.items():
            began = time.process_time()
            results[contender] = run()
            cpu[contender].append(time.process_time() - began)
            print(f"  {name} {repeat + 1}/{repeats} {contender}: {cpu[contender][-1]:.3f} s",
                  file=sys.stderr)  # fmt: skip
        same_items(results[ours], results["kernel (plain)"])
    best = results[ours]
    same_numbers(best, results["asyncio engine"])
    items = sum(len(stage.items) for stage in best.stages.values())
    print(f"\n### {name}: {scenario.n_items:,} source items ({items:,} stage items)\n")
    print(f"| run by | CPU s (median) | min | max | us per stage item | its CPU / {ours}'s |")
    print("|---|---|---|---|---|---|")
    for contender, values in cpu.items():
        median = statistics.median(values)
        ratios = [v / k for k, v in zip(cpu[ours], values, strict=True)]
        print(
            f"| {contender} | {median:.3f} | {min(values):.3f} | {max(values):.3f} "
            f"| {median / items * 1e6:.2f} | {statistics.median(ratios):.1f}x "
            f"({min(ratios):.1f}-{max(ratios):.1f}x) |"
        )
    print(f"\nmean end-to-end latency {best.summary['latency_mean_s']:.4f} s (every kernel path "
          "and the engine)", end="")  # fmt: skip
    if "Ciw" in results:
        print(f"; Ciw's mean sojourn {results['Ciw'].mean():.4f} s (its own draws)", end="")
    print()


def load_numba() -> None:
    """Load numba and the compiled replay before timing; print what that costs once."""
    from pipeline.sim import simulate
    from pipeline.sim.running.kernel import driver
    from pipeline.sim.running.kernel.paths import kernel_path

    if driver.compiled() is None:
        print("\nnumba is not installed (pip install 'pipeline-lab[fast]'): no compiled replay")
        return
    began = time.process_time()
    with kernel_path("compiled"):
        simulate(chains(200)["tandem"], engine="kernel")
    print(
        f"\nLoading numba and the compiled replay (once per process, from the on-disk cache "
        f"if it is warm): {time.process_time() - began:.2f} s of CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("## Chains: the kernel against the engine and Ciw, CPU time in process\n")
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    load_numba()
    for name, scenario in chains(args.items).items():
        measure(name, scenario, args.repeats)


if __name__ == "__main__":
    main()
