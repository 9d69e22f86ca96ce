"""The SimPy peer of the metastable scenario: clients that time out and retry, a downstream
that keeps working for the clients who left.

The same system as ``metastable_scenario()`` in ``bench/bench_metastable.py``
(``Scenario(arrivals=Poisson(100), downstream=Downstream(concurrency=10,
service=Exponential(mean=0.08)), config=PipelineConfig(concurrency=10_000,
queue_maxsize=None, max_attempts=4, attempt_timeout_s=1.0,
backoff=Backoff(kind="constant", base_s=0.1)),
faults=[CapacityDrop(at_s=20, for_s=3, factor=0.2)])``), written the way a SimPy
user would, leanly:

- one process per item (the pipeline's 10,000 workers never run short, so an item
  is taken the instant it arrives): it sends a request, waits for its answer or
  its 1 s timeout (``done | timeout``), and on a timeout waits the 0.1 s backoff
  and sends again, up to 4 attempts;
- one process per request at the downstream: a FIFO ``Resource`` of 10 servers;
  once a server is its own the request holds it until its work is done, whether
  or not its client still waits (orphaned work). The work is an exponential
  draw at full speed; while the drop lasts the servers run at 20% of their
  speed, work in progress included (the end is computed at the start from the
  known drop, as the pipeline's downstream does).

Its random numbers are its own (numpy, drawn in bulk), so it agrees with the
pipeline in distribution, not request by request: both stick after the drop.
The run ends when its last item completes or is dead-lettered, as the
pipeline's does (requests still queued downstream then are never served).
``simpy_metastable_model(n)`` returns the completed and dead-lettered items, the
requests sent and the orphaned ones (served after their client gave up).
"""

from __future__ import annotations

import numpy as np

RATE = 100.0
SERVERS = 10
MEAN_SERVICE_S = 0.08
TIMEOUT_S = 1.0
MAX_ATTEMPTS = 4
BACKOFF_S = 0.1
DROP_AT_S, DROP_FOR_S, DROP_FACTOR = 20.0, 3.0, 0.2


def finish_s(start_s: float, work_s: float) -> float:
    """When ``work_s`` seconds of full-speed work started at ``start_s`` ends, across the drop."""
    low, high = DROP_AT_S, DROP_AT_S + DROP_FOR_S
    t, rest = start_s, work_s
    if t < low:  # full speed until the drop
        if t + rest <= low:
            return t + rest
        rest -= low - t
        t = low
    if t < high:  # the drop: DROP_FACTOR of the speed
        room = (high - t) * DROP_FACTOR
        if rest <= room:
            return t + rest / DROP_FACTOR
        rest -= room
        t = high
    return t + rest


def simpy_metastable_model(n: int, seed: int = 1) -> dict[str, int]:
    """Run ``n`` arrivals to their end; the counts of what happened."""
    import simpy

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / RATE, n).tolist()
    work = rng.exponential(MEAN_SERVICE_S, MAX_ATTEMPTS * n).tolist()[::-1]
    env = simpy.Environment()
    servers = simpy.Resource(env, capacity=SERVERS)
    counts = {"completed": 0, "dead_lettered": 0, "requests": 0, "orphaned": 0}
    settled, end = [0], env.event()

    def request(done):
        with servers.request() as turn:
            yield turn
            now = env.now
            yield env.timeout(finish_s(now, work.pop()) - now)
        if done.triggered:  # the client gave up on it: work for nobody
            counts["orphaned"] += 1
        else:
            done.succeed()

    def client():
        for attempt in range(1, MAX_ATTEMPTS + 1):
            done = env.event()
            counts["requests"] += 1
            env.process(request(done))
            timer = env.timeout(TIMEOUT_S)
            yield done | timer
            if done.triggered:
                counts["completed"] += 1
                break
            done.succeed()  # marks it abandoned: the request's end sees it triggered
            if attempt < MAX_ATTEMPTS:
                yield env.timeout(BACKOFF_S)
        else:
            counts["dead_lettered"] += 1
        settled[0] += 1
        if settled[0] == n:  # the run ends with its last item, as the pipeline's does
            end.succeed()

    def source():
        for gap in gaps:
            yield env.timeout(gap)
            env.process(client())

    env.process(source())
    env.run(until=end)
    return counts
