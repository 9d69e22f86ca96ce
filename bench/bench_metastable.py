"""Benchmark: a metastable retry storm in the exact kernel against a lean SimPy model, in CPU time.

The system (Metafor's example, arXiv 2510.03551, with a trigger): Poisson arrivals
at 9.5/s, one downstream server (exponential service, mean 0.1 s) behind a FIFO
queue of 100, a client that cuts each attempt after 3 s and makes 4 attempts,
backing off 0.1 s with full jitter between them; a cut request stays in the queue
or on the server and is served for nobody (orphaned work); an attempt that finds
the queue full fails at once, and a capacity drop cuts 80% for 30 s at 600 s. At
9.5/s the system tips into the storm on its own within the first minute (a queue
of 30 is 3 s of work: every attempt behind it is cut, and retried), and the servers
then work almost only for callers who gave up (``--rate`` sets another load: at
8/s it tips over on its own after about 430 s, at 7/s the drop tips it over).

- **kernel**: one ``simulate(scenario)`` call (draws, the replay, per-item columns,
  step series, summary and the downstream's account) with the default
  ``engine="auto"`` (the compiled replay when numba is installed), and the same
  call with ``kernel_path("plain")``.
- **SimPy**: the same system as a SimPy user would write it: a process per item
  that makes its attempts (``env.any_of`` of the answer and the timeout), a process
  per request on a ``Resource`` that serves it to its end whatever its caller did,
  the capacity drop's finish time computed as the kernel does. Its random numbers
  are its own (numpy, drawn in bulk), so it agrees in distribution, not item by item.

Each is run interleaved in this process, ``time.process_time`` around it, a garbage
collection (untimed) before each; ratios are medians of the ratios within a repeat.
Usage: ``OPENBLAS_NUM_THREADS=1 python bench/bench_metastable.py [--items 100000]
[--repeats 3] [--rate 9.5]``. Target (issue): the kernel at most 0.5x SimPy's CPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import numpy as np

RATE, MEAN_SERVICE_S, SERVERS, QUEUE = 9.5, 0.1, 1, 100
TIMEOUT_S, ATTEMPTS, BACKOFF_S = 3.0, 4, 0.1
DROP_AT_S, DROP_FOR_S, DROP_FACTOR = 600.0, 30.0, 0.2


def scenario(n: int, rate: float = RATE):
    from pipeline import Backoff, PipelineConfig
    from pipeline.sim import CapacityDrop, Downstream, Exponential, Poisson, Scenario

    return Scenario(
        arrivals=Poisson(rate=rate),
        service=None,
        n_items=n,
        seed=1,
        downstream=Downstream(
            concurrency=SERVERS, service=Exponential(mean=MEAN_SERVICE_S), queue_maxsize=QUEUE
        ),
        faults=(CapacityDrop(at_s=DROP_AT_S, for_s=DROP_FOR_S, factor=DROP_FACTOR),),
        config=PipelineConfig(
            concurrency=10_000,  # the clients: never the bottleneck
            attempt_timeout_s=TIMEOUT_S,
            max_attempts=ATTEMPTS,
            backoff=Backoff(kind="constant", base_s=BACKOFF_S, jitter=True),
            drain_timeout_s=None,
        ),
    )


def simpy_model(n: int, seed: int = 1, rate: float = RATE) -> dict:
    """The lean SimPy model of the same system; its counts."""
    import simpy

    from pipeline.sim import CapacityDrop
    from pipeline.sim.workloads.faults import SpeedProfile

    finish_s = SpeedProfile(
        [CapacityDrop(at_s=DROP_AT_S, for_s=DROP_FOR_S, factor=DROP_FACTOR)]
    ).finish_s
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, n).tolist()
    work = iter(rng.exponential(MEAN_SERVICE_S, n * ATTEMPTS).tolist())
    jitter = iter(rng.random(n * ATTEMPTS).tolist())
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=SERVERS)
    counts = {"completed": 0, "dead_lettered": 0, "requests": 0, "orphaned": 0, "rejected": 0}

    def serve(answer, gave_up, w):
        with server.request() as turn:
            yield turn
            yield env.timeout(finish_s(env.now, w) - env.now)
        if gave_up[0]:  # served for nobody
            counts["orphaned"] += 1
        else:
            answer.succeed()

    def client():
        for attempt in range(1, ATTEMPTS + 1):
            if server.count == SERVERS and len(server.queue) >= QUEUE:
                counts["rejected"] += 1  # the queue is full: the attempt fails at once
            else:
                counts["requests"] += 1
                answer, gave_up = env.event(), [False]
                env.process(serve(answer, gave_up, next(work)))
                ended = yield answer | env.timeout(TIMEOUT_S)
                if answer in ended:
                    counts["completed"] += 1
                    return
                gave_up[0] = True  # cut: the request stays where it is
            if attempt < ATTEMPTS:
                yield env.timeout(BACKOFF_S * next(jitter))
        counts["dead_lettered"] += 1

    def producer():
        for gap in gaps:
            yield env.timeout(gap)
            env.process(client())

    env.process(producer())
    env.run()
    return counts


def kernel_run(n: int, path: str, rate: float = RATE) -> dict:
    from pipeline.sim import simulate
    from pipeline.sim.running.kernel.paths import kernel_path

    with kernel_path(path):
        return simulate(scenario(n, rate)).summary


def timed(call) -> tuple[float, object]:
    gc.collect()
    began = time.process_time()
    value = call()
    return time.process_time() - began, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=RATE, help="arrivals per second")
    args = parser.parse_args()
    n, rate = args.items, args.rate
    kernel_run(2_000, "auto")  # numba's load and the caches, untimed
    kernel_run(2_000, "plain")
    rows = []
    for _ in range(args.repeats):
        auto_s, summary = timed(lambda: kernel_run(n, "auto", rate))
        plain_s, _ = timed(lambda: kernel_run(n, "plain", rate))
        simpy_s, counts = timed(lambda: simpy_model(n, rate=rate))
        rows.append((auto_s, plain_s, simpy_s))
    keys = ("items_completed", "items_dead_lettered", "downstream_requests",
            "downstream_orphaned", "downstream_rejected", "recovered", "engine")  # fmt: skip
    print(json.dumps({
        "items": n,
        "rate": rate,
        "kernel_auto_cpu_s": [round(r[0], 3) for r in rows],
        "kernel_plain_cpu_s": [round(r[1], 3) for r in rows],
        "simpy_cpu_s": [round(r[2], 3) for r in rows],
        "auto_over_simpy": round(statistics.median(r[0] / r[2] for r in rows), 3),
        "plain_over_simpy": round(statistics.median(r[1] / r[2] for r in rows), 3),
        "kernel": {key: summary[key] for key in keys},
        "simpy": counts,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
