"""The SimPy peer of the kernel's event path: an M/M/c queue whose attempts fail and retry.

The same model as ``Scenario(arrivals=Poisson(rate), service=Exponential(mean),
config=PipelineConfig(concurrency=c, queue_maxsize=None, max_attempts=3,
backoff=Backoff(kind="exponential", base_s=0.1, factor=2.0, cap_s=30.0,
jitter=True)), failures=IndependentFailures(p))``, written the way a SimPy
user would: one producer process, ``c`` long-lived worker processes taking
items from a ``PriorityStore``, and one process per retry that sleeps out its
backoff. The retry rule is the pipeline's: an attempt fails with probability
``p`` after its service time; a failed attempt that has not used the budget
waits ``uniform(0, min(cap, base * factor**(attempt - 1)))`` seconds ("full
jitter") and then joins the retry lane, which workers take before new items
(FIFO within each lane); otherwise the item is dead-lettered. A retry draws a
fresh service time. Its random numbers are its own (numpy for arrivals,
service and failures, drawn in bulk as the kernel does; ``random.Random`` for
the jitter), so it agrees with the kernel in distribution, not item by item.

``simpy_retry_model(n)`` returns each item's wait (first start minus arrival,
the summary's ``wait_mean_s`` definition), in arrival order, and counts.
"""

from __future__ import annotations

import random

import numpy as np

RATE = 3.2
MEAN_SERVICE_S = 1.0
CONCURRENCY = 4
P_FAIL = 0.1
MAX_ATTEMPTS = 3
BASE_S, FACTOR, CAP_S = 0.1, 2.0, 30.0


def simpy_retry_model(
    n: int,
    seed: int = 1,
    *,
    rate: float = RATE,
    mean_service_s: float = MEAN_SERVICE_S,
    concurrency: int = CONCURRENCY,
    p: float = P_FAIL,
    max_attempts: int = MAX_ATTEMPTS,
) -> dict:
    """Run the model for ``n`` items; {"waits": array (s), "completed", "dead_lettered", ...}."""
    import simpy

    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n)).tolist()
    first = rng.exponential(mean_service_s, n).tolist()
    retry_s = rng.exponential(mean_service_s, n * (max_attempts - 1)).tolist()
    fail_u = rng.random(n * max_attempts).tolist()
    jitter = random.Random(seed)
    env = simpy.Environment()
    store = simpy.PriorityStore(env)
    item_of = simpy.PriorityItem
    waits = [0.0] * n
    attempts = [0] * n
    counts = {"completed": 0, "dead_lettered": 0, "retried": 0, "attempts": 0}
    retries_started = [0]
    order = iter(range(10**18))  # FIFO within a lane

    def producer():
        for i, arrival in enumerate(arrivals):
            if arrival > env.now:
                yield env.timeout(arrival - env.now)
            store.put(item_of((1, next(order)), i))

    def backoff(i: int, attempt: int):
        delay = min(CAP_S, BASE_S * FACTOR ** (attempt - 1))
        yield env.timeout(jitter.uniform(0.0, delay))
        store.put(item_of((0, next(order)), i))  # the retry lane first

    def worker():
        while True:
            entry = yield store.get()
            i = entry.item
            attempt = attempts[i] = attempts[i] + 1
            k = counts["attempts"]
            counts["attempts"] = k + 1
            if attempt == 1:
                waits[i] = env.now - arrivals[i]
                yield env.timeout(first[i])
            else:
                r = retries_started[0]
                retries_started[0] = r + 1
                yield env.timeout(retry_s[r])
            if fail_u[k] >= p:
                counts["completed"] += 1
            elif attempt < max_attempts:
                counts["retried"] += 1
                env.process(backoff(i, attempt))
            else:
                counts["dead_lettered"] += 1

    env.process(producer())
    for _ in range(concurrency):
        env.process(worker())
    env.run()
    return {"waits": np.array(waits), "sim_time_s": env.now, **counts}
