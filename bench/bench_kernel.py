"""Benchmark: the exact kernel and the asyncio engine against SimPy, in CPU time, M/M/4 at rho 0.8.

What is timed is CPU time (user + sys), which drifts far less than wall time
on a busy machine.

- **whole process**: ``python -m pipeline simulate --arrivals poisson:rate=3.2
  --service exponential:mean=1.0 --concurrency 4 --maxsize 100 --items N
  --seed 1 --json``, once with the default ``--engine auto`` (the kernel runs
  this scenario) and once with ``--engine asyncio``, each against the SimPy
  ``Store(capacity=100)`` model of the same system (one producer, four
  long-lived workers, every wait recorded) as a fresh process. CPU time of a
  child is ``resource.getrusage(RUSAGE_CHILDREN)`` around ``subprocess.run``.
  The three run interleaved (auto, asyncio, SimPy, auto, ...), and each ratio
  is the median over repeats of the ratio within a repeat.
- **in process**: one ``simulate(scenario)`` call (kernel: draws, recursion,
  per-item columns, exact step series, summary) against the same SimPy model
  run in this process (draws included), ``time.process_time`` around each,
  interleaved.
- **event path** (informational): with attempts failing (p = 0.1) the kernel
  replays the engine's steps instead of the FCFS recursion; its CPU time in
  process against the asyncio engine's.
- **memory**: peak RSS of a 10,000,000-item run of the command line (auto,
  the kernel), measured from a wrapper process.

Children get ``OPENBLAS_NUM_THREADS=1`` (numpy's thread pool burns CPU on other
cores at import); set it for this process too.

Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_kernel.py [--items 100000]
[--repeats 7] [--memory-items 10000000] [--no-memory]``.
Issue targets: whole process, auto <= 0.5x SimPy CPU; in process, the kernel
>= 10x faster than SimPy; 10,000,000 items within 2 GB peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time

from bench_sim import (
    CONCURRENCY,
    MAXSIZE,
    MEAN_SERVICE_S,
    RATE,
    SEED,
    SIMPY,
    SIMPY_MODEL,
    measure_rss,
)

WHOLE_TARGET = 0.5
IN_PROCESS_TARGET = 10.0
RSS_TARGET_BYTES = 2 * 1024**3


ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's pipeline, in process as in the children (cwd=ROOT)


def cli_command(items: int, engine: str = "auto") -> list[str]:
    """The command line from the issue (``--engine`` only when not the default)."""
    command = [
        sys.executable, "-m", "pipeline", "simulate",
        "--arrivals", f"poisson:rate={RATE}",
        "--service", f"exponential:mean={MEAN_SERVICE_S}",
        "--concurrency", str(CONCURRENCY), "--maxsize", str(MAXSIZE),
        "--items", str(items), "--seed", str(SEED), "--json",
    ]  # fmt: skip
    return command if engine == "auto" else [*command, "--engine", engine]


def run_cpu(command: list[str]) -> tuple[float, dict]:
    """Run a command; return (its CPU seconds, user + sys, and its JSON output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, env=ENV, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command[:5])} ... failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(done.stdout.strip().splitlines()[-1])


def show(command: list[str]) -> str:
    """A command as it would be typed (the inline SimPy program elided)."""
    shown = ["<simpy program>" if "\n" in part else part for part in command]
    return shlex.join(shown).replace("'<simpy program>'", "<code>")


def whole_process(items: int, repeats: int) -> None:
    commands = {
        "auto (kernel)": cli_command(items),
        "--engine asyncio": cli_command(items, "asyncio"),
        "SimPy Store": [sys.executable, "-c", SIMPY, str(items)],
    }
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    outputs: dict[str, dict] = {}
    for repeat in range(repeats):  # interleaved: A B C A B C ...
        for name, command in commands.items():
            seconds, output = run_cpu(command)
            cpu[name].append(seconds)
            outputs[name] = output
            print(f"  run {repeat + 1}/{repeats} {name}: {seconds:.3f} s CPU", file=sys.stderr)
    print(
        f"\n## Whole process: M/M/{CONCURRENCY}, rho = {RATE * MEAN_SERVICE_S / CONCURRENCY:.1f}, "
        f"{items:,} items, maxsize {MAXSIZE}, seed {SEED}: {repeats} interleaved repeats\n"
    )
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()}\n")
    print("| command | engine | CPU s (median) | min | max | vs SimPy CPU (median of pairs) |")
    print("|---|---|---|---|---|---|")
    simpy = cpu["SimPy Store"]
    for name in commands:
        ratios = [ours / peer for ours, peer in zip(cpu[name], simpy, strict=True)]
        engine = outputs[name].get("engine", "-")
        print(
            f"| {name} | {engine} | {statistics.median(cpu[name]):.3f} | {min(cpu[name]):.3f} "
            f"| {max(cpu[name]):.3f} | {statistics.median(ratios):.3f}x |"
        )
    auto = statistics.median(
        ours / peer for ours, peer in zip(cpu["auto (kernel)"], simpy, strict=True)
    )
    verdict = "meets" if auto <= WHOLE_TARGET else "MISSES"
    print(
        f"\nauto / SimPy, whole process CPU: {auto:.2f}x ({verdict} the <= {WHOLE_TARGET}x target)"
    )
    print(
        "mean waits: "
        + ", ".join(f"{name} {float(out['wait_mean_s']):.4f} s" for name, out in outputs.items())
    )
    print("\nCommands:\n")
    for name, command in commands.items():
        print(f"- {name}: `{show(command)}`")


def in_process(items: int, repeats: int) -> None:
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario, simulate

    namespace: dict = {}
    exec(SIMPY_MODEL, namespace)
    simpy_model = namespace["simpy_model"]
    scenario = Scenario(
        arrivals=Poisson(rate=RATE),
        service=Exponential(mean=MEAN_SERVICE_S),
        config=PipelineConfig(concurrency=CONCURRENCY, queue_maxsize=MAXSIZE),
        n_items=items,
        seed=SEED,
    )
    simulate(scenario.replace(n_items=1000))  # first-call costs out of the way
    simpy_model(1000)
    kernel: list[float] = []
    peer: list[float] = []
    for _ in range(repeats):
        began = time.process_time()
        result = simulate(scenario)
        kernel.append(time.process_time() - began)
        began = time.process_time()
        simpy_model(items)
        peer.append(time.process_time() - began)
    assert result.summary["engine"] == "kernel"
    speedups = [p / k for k, p in zip(kernel, peer, strict=True)]
    speedup = statistics.median(speedups)
    print(f"\n## In process: one simulate() call vs the SimPy model, {items:,} items\n")
    print("| run | CPU s (median) | min | max |")
    print("|---|---|---|---|")
    for name, values in (("simulate() (kernel)", kernel), ("SimPy Store model", peer)):
        print(
            f"| {name} | {statistics.median(values):.4f} | {min(values):.4f} | {max(values):.4f} |"
        )
    verdict = "meets" if speedup >= IN_PROCESS_TARGET else "MISSES"
    print(
        f"\nSimPy / kernel CPU, in process: {speedup:.1f}x faster (median of {repeats} pairs; "
        f"{verdict} the >= {IN_PROCESS_TARGET:g}x target)"
    )


def event_path(items: int, repeats: int) -> None:
    """The kernel's event path (attempts fail, so no FCFS recursion) against the engine."""
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, IndependentFailures, Poisson, Scenario, simulate

    scenario = Scenario(
        arrivals=Poisson(rate=RATE),
        service=Exponential(mean=MEAN_SERVICE_S),
        config=PipelineConfig(concurrency=CONCURRENCY, queue_maxsize=MAXSIZE),
        failures=IndependentFailures(0.1),
        n_items=items,
        seed=SEED,
    )
    cpu: dict[str, list[float]] = {"kernel": [], "asyncio": []}
    for _ in range(repeats):
        for engine, values in cpu.items():
            began = time.process_time()
            result = simulate(scenario, engine=engine)
            values.append(time.process_time() - began)
            assert result.summary["engine"] == engine
    ratio = statistics.median(a / k for k, a in zip(cpu["kernel"], cpu["asyncio"], strict=True))
    print(f"\n## In process, failures p = 0.1 (the kernel's event path), {items:,} items\n")
    print("| engine | CPU s (median) | min | max |")
    print("|---|---|---|---|")
    for engine, values in cpu.items():
        median = statistics.median(values)
        print(f"| {engine} | {median:.3f} | {min(values):.3f} | {max(values):.3f} |")
    print(f"\nasyncio / kernel CPU: {ratio:.1f}x (median of {repeats} pairs; informational)")


def memory(items: int) -> None:
    command = cli_command(items)
    record = measure_rss(command, ENV, cwd=ROOT)
    peak, summary = record["peak_bytes"], record["summary"]
    verdict = "meets" if peak <= RSS_TARGET_BYTES else "MISSES"
    print(f"\n## Memory: {items:,} items through the kernel\n")
    print("| run | engine | peak RSS | CPU s | items/s CPU |")
    print("|---|---|---|---|---|")
    print(
        f"| auto | {summary['engine']} | {peak / 1024**2:,.0f} MiB | {record['cpu_s']:.1f} "
        f"| {items / record['cpu_s']:,.0f} |"
    )
    print(f"\nPeak RSS {peak / 1024**3:.2f} GiB ({verdict} the <= 2 GiB target)")
    print(f"Command: `{show(command)}` (RSS from a wrapper: getrusage(RUSAGE_CHILDREN))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--memory-items", type=int, default=10_000_000)
    parser.add_argument("--no-memory", action="store_true", help="skip the 10M-item RSS run")
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: set OPENBLAS_NUM_THREADS=1 for steadier in-process figures", file=sys.stderr)
    whole_process(args.items, args.repeats)
    in_process(args.items, args.repeats)
    event_path(args.items, min(args.repeats, 3))
    if not args.no_memory:
        memory(args.memory_items)


if __name__ == "__main__":
    main()
