"""Benchmark: ``python -m pipeline simulate`` against SimPy, whole process, M/M/4 at rho 0.8.

What is timed is what a user waits for: a fresh interpreter that imports what
it needs, draws the samples, simulates and prints a JSON summary.

- **ours**: ``python -m pipeline simulate --arrivals poisson:rate=3.2 --service
  exponential:mean=1.0 --concurrency 4 --maxsize 100 --items N --seed 1 --json``
  -- the real engine (bounded queue, retry machinery, drain) on the virtual
  clock, with every event recorded and turned into per-item records and
  exact time series. If the command line is missing or fails, the same
  ``simulate(Scenario(...))`` call is run with ``python -c`` instead (the
  table says which).
- **SimPy**: the textbook-fast SimPy model of the same system -- ``Store(capacity=100)``,
  one producer that waits until each (absolute) arrival time, four long-lived
  worker processes -- recording every wait in a list.
- **asyncio** (optional): the same model as plain asyncio (``asyncio.Queue(100)``,
  four worker tasks) on :class:`pipeline.sim.vloop.VirtualEventLoop`.

Runs are interleaved (ours, SimPy, asyncio, ours, ...) so machine load hits all
alike; the table gives medians. Each process is measured by its CPU time (user +
sys, ``resource.getrusage(RUSAGE_CHILDREN)`` around it) as well as wall time:
on a loaded shared machine wall-time ratios do not reproduce, CPU-time ratios
do. The headline ratio is the median, over the interleaved rounds, of ours'
CPU time over SimPy's in the same round. ``OPENBLAS_NUM_THREADS=1`` is set for
every child (numpy's thread pool would otherwise burn CPU at import), and
children may write bytecode caches, as an installed package has them. Each
mean wait is compared with Erlang C (one 100,000-item run is typically within
4-8% of it: waits are autocorrelated).
Then peak RSS of a 1,000,000-item run of ours, measured from a wrapper process
(``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` only sees its own children).
With ``--profile``, cProfile of one in-process 100,000-item ``simulate`` call.

Usage: ``python bench/bench_sim.py [--items 100000] [--repeats 5]
[--memory-items 1000000] [--no-memory] [--no-asyncio] [--profile]
[--ours-args "--engine asyncio"]`` (``--ours-args``: extra flags for our command line).
Issue targets: the engine (``--engine asyncio``) <= 1.5x SimPy CPU time; peak
RSS at 1M items <= 2 GB.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from pipeline.sim.analysis.theory import mmc

RATE = 3.2
MEAN_SERVICE_S = 1.0
CONCURRENCY = 4
MAXSIZE = 100
SEED = 1
RATIO_TARGET = 1.5  # CPU time, the engine path against SimPy's Store
RSS_TARGET_BYTES = 2 * 1024**3

FALLBACK = f"""
import json, sys
from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, simulate
result = simulate(Scenario(
    arrivals=Poisson(rate={RATE}), service=Exponential(mean={MEAN_SERVICE_S}),
    config=PipelineConfig(concurrency={CONCURRENCY}, queue_maxsize={MAXSIZE}),
    n_items=int(sys.argv[1]), seed={SEED}))
print(json.dumps(result.summary))
"""

SIMPY_MODEL = f"""
def simpy_model(n):
    import numpy as np
    import simpy

    rng = np.random.default_rng({SEED})
    arrivals = np.cumsum(rng.exponential(1.0 / {RATE}, n)).tolist()
    services = rng.exponential({MEAN_SERVICE_S}, n).tolist()
    env = simpy.Environment()
    store = simpy.Store(env, capacity={MAXSIZE})
    waits = []

    def producer():
        for i, arrival in enumerate(arrivals):
            if arrival > env.now:
                yield env.timeout(arrival - env.now)
            yield store.put(i)

    def worker():
        while True:
            i = yield store.get()
            waits.append(env.now - arrivals[i])
            yield env.timeout(services[i])

    env.process(producer())
    for _ in range({CONCURRENCY}):
        env.process(worker())
    env.run()
    return {{"items_completed": len(waits), "wait_mean_s": sum(waits) / len(waits),
             "sim_time_s": env.now}}
"""
"""The SimPy peer: Store(capacity) with long-lived workers, as a function's source."""

SIMPY = (
    "import json, sys, time\n"
    "began = time.perf_counter()\n"
    + SIMPY_MODEL
    + "summary = simpy_model(int(sys.argv[1]))\n"
    "summary['wall_time_s'] = time.perf_counter() - began\n"
    "print(json.dumps(summary))\n"
)  # fmt: skip

ASYNCIO = f"""
import asyncio, json, sys, time
began = time.perf_counter()
import numpy as np
from pipeline.sim.vloop import run_virtual
n = int(sys.argv[1])
rng = np.random.default_rng({SEED})
arrivals = np.cumsum(rng.exponential(1.0 / {RATE}, n)).tolist()
services = rng.exponential({MEAN_SERVICE_S}, n).tolist()

async def main():
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue({MAXSIZE})
    waits = []

    async def producer():
        for i, arrival in enumerate(arrivals):
            if arrival > loop.time():
                wake = loop.create_future()
                loop.call_at(arrival, wake.set_result, None)
                await wake
            await queue.put(i)
        for _ in range({CONCURRENCY}):
            await queue.put(None)

    async def worker():
        while (i := await queue.get()) is not None:
            waits.append(loop.time() - arrivals[i])
            await asyncio.sleep(services[i])

    await asyncio.gather(producer(), *(worker() for _ in range({CONCURRENCY})))
    return waits, loop.time()

waits, end = run_virtual(main())
print(json.dumps({{"items_completed": len(waits), "wait_mean_s": sum(waits) / len(waits),
                  "sim_time_s": end, "wall_time_s": time.perf_counter() - began}}))
"""

MEASURE_RSS = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"returncode": done.returncode, "stdout": done.stdout,
                  "stderr": done.stderr[-2000:], "maxrss_kib": usage.ru_maxrss,
                  "cpu_s": usage.ru_utime + usage.ru_stime}))
"""


def measure_rss(command: list[str], env: dict[str, str], cwd: str | None = None) -> dict:
    """Run ``command`` under a wrapper process; its peak RSS (bytes), CPU s and last JSON line.

    The wrapper reads ``getrusage(RUSAGE_CHILDREN)``: the child's own peak,
    not the benchmark's. Shared by the memory runs of bench_sim and bench_kernel.

    Raises:
        RuntimeError: the command failed (its stderr is in the message).
    """
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE_RSS, *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    record = json.loads(measured.stdout)
    if record["returncode"] != 0:
        raise RuntimeError(f"memory run failed:\n{record['stderr']}")
    return {
        "peak_bytes": record["maxrss_kib"] * 1024,  # Linux reports KiB
        "cpu_s": record["cpu_s"],
        "summary": json.loads(record["stdout"].strip().splitlines()[-1]),
    }


# Children run as an installed package does: from cached bytecode (.pyc). With
# PYTHONDONTWRITEBYTECODE set (as on some CI machines) every run of ours would
# recompile this package from source, about 0.1 s of CPU that SimPy, installed
# with its .pyc files, never pays. The first (warm-up) run writes the caches.
CHILD_ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "OPENBLAS_NUM_THREADS": "1",
}


def cli_command(items: int, extra: Sequence[str] = ()) -> list[str]:
    """The command line from the issue (plus ``extra`` flags)."""
    return [
        sys.executable, "-m", "pipeline", "simulate",
        "--arrivals", f"poisson:rate={RATE}",
        "--service", f"exponential:mean={MEAN_SERVICE_S}",
        "--concurrency", str(CONCURRENCY), "--maxsize", str(MAXSIZE),
        "--items", str(items), "--seed", str(SEED), "--json", *extra,
    ]  # fmt: skip


def fallback_command(items: int) -> list[str]:
    """The same simulate() call without the command line."""
    return [sys.executable, "-c", FALLBACK, str(items)]


def children_cpu_s() -> float:
    """CPU seconds (user + sys) of every finished child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_json(command: list[str]) -> tuple[float, float, dict]:
    """Run a command; return (whole-process wall s, its CPU s, its JSON output)."""
    cpu_before = children_cpu_s()
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=CHILD_ENV)
    wall = time.perf_counter() - began
    cpu = children_cpu_s() - cpu_before
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command[:4])} ... failed:\n{done.stderr[-2000:]}")
    return wall, cpu, json.loads(done.stdout.strip().splitlines()[-1])


def choose_ours(extra: Sequence[str] = ()) -> tuple[str, Callable[[int], list[str]]]:
    """The command line if it works on a small run, else the python -c fallback."""
    try:
        _, _, summary = run_json(cli_command(200, extra))
        if summary.get("items_completed") == 200:
            label = " ".join(["python -m pipeline simulate", *extra])
            return f"ours ({label})", lambda items: cli_command(items, extra)
    except (RuntimeError, ValueError, json.JSONDecodeError) as error:
        print(f"command line unavailable ({str(error).splitlines()[0]}); using python -c")
    return "ours (python -c simulate(...))", fallback_command


def show(command: list[str]) -> str:
    """A command as it would be typed (long inline programs elided)."""
    shown = [("'<program, see bench/bench_sim.py>'" if "\n" in part else part) for part in command]
    if shown and shown[0] == sys.executable:
        shown[0] = "python"  # no machine-specific paths in what gets pasted into RESULTS.md
    return shlex.join(shown).replace(shlex.quote("'<program, see bench/bench_sim.py>'"), "<code>")


def profile_in_process(items: int) -> str:
    """cProfile of one in-process simulate() call: top 15 functions by own time."""
    from pipeline import PipelineConfig
    from pipeline.sim import Exponential, Poisson, Scenario, simulate

    scenario = Scenario(
        arrivals=Poisson(rate=RATE),
        service=Exponential(mean=MEAN_SERVICE_S),
        config=PipelineConfig(concurrency=CONCURRENCY, queue_maxsize=MAXSIZE),
        n_items=items,
        seed=SEED,
    )
    simulate(scenario.replace(n_items=1000))  # imports and first-call costs out of the way
    profiler = cProfile.Profile()
    began = time.perf_counter()
    profiler.enable()
    simulate(scenario)
    profiler.disable()
    wall = time.perf_counter() - began
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(15)
    return (
        f"in-process simulate() of {items:,} items under cProfile: {wall:.2f} s\n{out.getvalue()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-items", type=int, default=1_000_000)
    parser.add_argument("--no-memory", action="store_true", help="skip the 1M-item RSS run")
    parser.add_argument("--no-asyncio", action="store_true", help="skip the plain-asyncio model")
    parser.add_argument("--profile", action="store_true", help="cProfile one in-process run")
    parser.add_argument(
        "--ours-args", default="", help="extra flags for our command line, e.g. '--engine asyncio'"
    )
    args = parser.parse_args()
    n = args.items
    theory = mmc(RATE, MEAN_SERVICE_S, CONCURRENCY)

    ours_name, ours_command = choose_ours(shlex.split(args.ours_args))
    commands = {
        ours_name: ours_command(n),
        "SimPy 4 (Store + 4 workers)": [sys.executable, "-c", SIMPY, str(n)],
    }
    if not args.no_asyncio:
        commands["plain asyncio on VirtualEventLoop"] = [sys.executable, "-c", ASYNCIO, str(n)]

    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    inner: dict[str, list[float]] = {name: [] for name in commands}
    summaries: dict[str, dict] = {}
    for repeat in range(args.repeats):  # interleaved: A B C A B C ...
        for name, command in commands.items():
            wall, cpu, summary = run_json(command)
            walls[name].append(wall)
            cpus[name].append(cpu)
            inner[name].append(float(summary["wall_time_s"]))
            summaries[name] = summary
            print(
                f"  run {repeat + 1}/{args.repeats} {name}: {wall:.2f} s wall, {cpu:.2f} s CPU",
                file=sys.stderr,
            )

    simpy_name = "SimPy 4 (Store + 4 workers)"
    print(
        f"\n## M/M/{CONCURRENCY}, rho = {RATE * MEAN_SERVICE_S / CONCURRENCY:.1f}, "
        f"{n:,} items, maxsize {MAXSIZE}, seed {SEED}: median of {args.repeats} interleaved runs\n"
    )
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    print(f"Erlang C mean wait: {theory.wait_mean_s:.4f} s\n")
    print(
        "| implementation | process CPU s (median) | CPU vs SimPy (median of rounds) "
        "| process wall s | in-process wall s | mean wait s | vs Erlang C |"
    )
    print("|---|---|---|---|---|---|---|")
    ratios = {}
    for name in commands:
        ratios[name] = statistics.median(
            mine / peer for mine, peer in zip(cpus[name], cpus[simpy_name], strict=True)
        )
        wait = float(summaries[name]["wait_mean_s"])
        print(
            f"| {name} | {statistics.median(cpus[name]):.2f} | {ratios[name]:.2f}x "
            f"| {statistics.median(walls[name]):.2f} | {statistics.median(inner[name]):.2f} "
            f"| {wait:.4f} | {wait / theory.wait_mean_s - 1:+.1%} |"
        )
    ratio = ratios[ours_name]
    wall_ratio = statistics.median(walls[ours_name]) / statistics.median(walls[simpy_name])
    verdict = "meets" if ratio <= RATIO_TARGET else "MISSES"
    print(
        f"\nours / SimPy, whole process, CPU time: {ratio:.2f}x ({verdict} the engine path's "
        f"<= {RATIO_TARGET}x target); wall time: {wall_ratio:.2f}x"
    )
    print("\nCommands:\n")
    for name, command in commands.items():
        print(f"- {name}: `{show(command)}`")

    if not args.no_memory:
        command = ours_command(args.memory_items)
        record = measure_rss(command, CHILD_ENV)
        peak, summary = record["peak_bytes"], record["summary"]
        verdict = "meets" if peak <= RSS_TARGET_BYTES else "MISSES"
        print(f"\n## Memory: {args.memory_items:,} items\n")
        print("| run | peak RSS | process CPU s | items/s CPU | mean wait s | vs Erlang C |")
        print("|---|---|---|---|---|---|")
        wait = float(summary["wait_mean_s"])
        print(
            f"| {ours_name} | {peak / 1024**2:,.0f} MiB | {record['cpu_s']:.1f} "
            f"| {args.memory_items / record['cpu_s']:,.0f} | {wait:.4f} "
            f"| {wait / theory.wait_mean_s - 1:+.1%} |"
        )
        print(f"\nPeak RSS {peak / 1024**3:.2f} GiB ({verdict} the <= 2 GB target)")
        print(f"Command: `{show(command)}` (RSS from a wrapper: getrusage(RUSAGE_CHILDREN))")

    if args.profile:
        print("\n## Profile\n")
        print("```")
        print(profile_in_process(n))
        print("```")


if __name__ == "__main__":
    main()
