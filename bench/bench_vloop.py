"""Benchmark: plain asyncio on VirtualEventLoop versus SimPy on one M/M/4 model.

Both run M/M/4 at rho = 0.8 (arrival rate 3.2/s, mean service 1 s) for the
same pre-drawn samples (numpy, seed 1): a producer that sleeps until each
arrival and puts the customer into an unbounded FIFO queue, and four workers
that take customers in order and sleep for their service time. Each records
wait = start of service - arrival. Both are checked against the exact FCFS
recursion (a heap of server-free times): fed the same samples, all three must
give the same per-customer waits.

Usage: ``python bench/bench_vloop.py [--customers 100000] [--repeats 3]``.
Prints CPU seconds (``time.process_time()``, user + sys of this process) and
wall seconds, medians of interleaved repeats, customers per second and the
ratios; the headline is the median over repeats of the per-repeat CPU-time
ratio. Single runs on shared machines vary by up to 1.6x in wall time; CPU
time drifts far less. Set ``OPENBLAS_NUM_THREADS=1`` when timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

from pipeline.sim.running.reference import simpy_fcfs_waits
from pipeline.sim.vloop import run_virtual
from pipeline.sim.workloads.traces.replay import exact_fcfs_waits

SERVERS = 4
RHO = 0.8
MEAN_SERVICE_S = 1.0


def draw_samples(n: int, seed: int = 1) -> tuple[list[float], list[float], list[float]]:
    """Return (interarrival gaps, arrival times, service times), all in seconds."""
    rng = np.random.default_rng(seed)
    rate = RHO * SERVERS / MEAN_SERVICE_S
    gaps = rng.exponential(1.0 / rate, n).tolist()
    services = rng.exponential(MEAN_SERVICE_S, n).tolist()
    arrivals = []
    now = 0.0
    for gap in gaps:
        # Accumulate one gap at a time, as a process sleeping `gap` does.
        now += gap
        arrivals.append(now)
    return gaps, arrivals, services


async def mmc_asyncio(gaps: list[float], arrivals: list[float], services: list[float]):
    """The model in plain asyncio; returns per-customer waits in seconds."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[int | None] = asyncio.Queue()
    waits = [0.0] * len(gaps)

    async def producer() -> None:
        for i, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            await queue.put(i)
        for _ in range(SERVERS):
            await queue.put(None)

    async def worker() -> None:
        while (i := await queue.get()) is not None:
            waits[i] = loop.time() - arrivals[i]
            await asyncio.sleep(services[i])

    await asyncio.gather(producer(), *(worker() for _ in range(SERVERS)))
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = args.customers
    gaps, arrivals, services = draw_samples(n)

    started = time.perf_counter()
    exact = exact_fcfs_waits(arrivals, services, SERVERS).tolist()
    recursion_s = time.perf_counter() - started

    runs: dict[str, list[float]] = {"VirtualEventLoop": [], "SimPy": []}
    cpus: dict[str, list[float]] = {"VirtualEventLoop": [], "SimPy": []}
    results = {}
    models = {
        "VirtualEventLoop": lambda: run_virtual(mmc_asyncio(gaps, arrivals, services)),
        "SimPy": lambda: simpy_fcfs_waits(gaps, services, SERVERS),
    }
    for _ in range(args.repeats):  # interleaved, so machine load hits both alike
        for name, model in models.items():
            started, started_cpu = time.perf_counter(), time.process_time()
            results[name] = model()
            cpus[name].append(time.process_time() - started_cpu)
            runs[name].append(time.perf_counter() - started)

    print(f"M/M/{SERVERS}, rho={RHO}, {n:,} customers, seed 1, median of {args.repeats}")
    print(
        f"{'implementation':<18} {'CPU s':>8} {'wall s':>8} {'customers/s':>12} "
        f"{'mean wait s':>12} {'max |wait - exact|':>19}"
    )
    for name, times in runs.items():
        cpu = statistics.median(cpus[name])
        waits = results[name]
        diff = max(abs(w - e) for w, e in zip(waits, exact, strict=True))
        print(
            f"{name:<18} {cpu:8.3f} {statistics.median(times):8.3f} {n / cpu:12,.0f} "
            f"{statistics.fmean(waits):12.6f} {diff:19.3g}"
        )
    print(
        f"{'exact recursion':<18} {'':>8} {recursion_s:8.3f} {n / recursion_s:12,.0f} "
        f"{statistics.fmean(exact):12.6f}"
    )
    cpu_ratio = statistics.median(
        mine / peer for mine, peer in zip(cpus["VirtualEventLoop"], cpus["SimPy"], strict=True)
    )
    wall_ratio = statistics.median(runs["VirtualEventLoop"]) / statistics.median(runs["SimPy"])
    print(f"VirtualEventLoop / SimPy: CPU time {cpu_ratio:.2f}x, wall time {wall_ratio:.2f}x")


if __name__ == "__main__":
    main()
