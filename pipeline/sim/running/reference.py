"""Independent reference models for cross-checks: the same FCFS queue in SimPy.

Tests and benchmarks compare the engine against models that share none of
its code. :func:`~pipeline.sim.workloads.traces.replay.exact_fcfs_waits` is the exact
recursion; :func:`simpy_fcfs_waits` is the textbook discrete-event model
(an unbounded ``Store`` and long-lived worker processes). SimPy is a test
extra (``pip install pipeline-lab[test]``), imported only when called.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["simpy_fcfs_waits"]


def simpy_fcfs_waits(
    gaps_s: Sequence[float], services_s: Sequence[float], servers: int
) -> list[float]:
    """Per-customer waits (start of service - arrival, seconds) of an FCFS M/G/c in SimPy.

    Args:
        gaps_s: inter-arrival gaps; customer *i* arrives at ``sum(gaps_s[:i+1])``,
            summed one gap at a time as SimPy's clock does.
        services_s: service time of each customer, seconds.
        servers: worker processes (>= 1).

    Raises:
        ModuleNotFoundError: SimPy is not installed.
    """
    import simpy

    if len(gaps_s) != len(services_s):
        raise ValueError(
            f"gaps_s and services_s must have the same length, got {len(gaps_s)} "
            f"and {len(services_s)}"
        )
    env = simpy.Environment()
    store = simpy.Store(env)
    arrived = [0.0] * len(gaps_s)
    waits = [0.0] * len(gaps_s)

    def producer():
        for index, gap in enumerate(gaps_s):
            yield env.timeout(gap)
            arrived[index] = env.now
            yield store.put(index)

    def worker():
        while True:
            index = yield store.get()
            waits[index] = env.now - arrived[index]
            yield env.timeout(services_s[index])

    env.process(producer())
    for _ in range(servers):
        env.process(worker())
    env.run()
    return waits
