"""The simulator against the exact chain of the timeout-and-retry loop (small queue).

The engine (the real Pipeline on the virtual clock) runs clients whose handler calls a
Downstream and draws its own Erlang-k timeout; a cut attempt leaves its request,
orphaned, at the server, and the engine retries at once (no backoff). Ten replications
of 4,000 s each; the chain's stationary means must lie in the replications' 99.9%
Student t interval (t = 4.781 at 9 degrees of freedom), for each metric and k, and the
mean at the server's 95% interval must be narrower than 3% of its value (so the
agreement is within 3%)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from pipeline import Backoff, Pipeline, PipelineConfig
from pipeline.sim import Downstream, Exponential, run_virtual
from pipeline.sim.analysis.retry_chain import retry_chain
from pipeline.sim.running.downstream import DownstreamRun, downstream_rng
from pipeline.sim.workloads.faults import SpeedProfile

LAMBDA, MU, TIMEOUT_S, ATTEMPTS, CAPACITY = 0.8, 1.0, 2.0, 2, 4
REPLICATIONS, DURATION_S = 10, 4000.0
T_9995_9 = 4.781
T_975_9 = 2.262


async def _one_run(seed: int, k: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    rng = np.random.default_rng([seed, 1])
    servers = DownstreamRun(
        Downstream(concurrency=1, service=Exponential(mean=1 / MU), queue_maxsize=CAPACITY - 1),
        SpeedProfile([]),
        downstream_rng(seed, 0),
        loop,
    )

    async def handler(item: int) -> None:
        limit = float(rng.gamma(k, TIMEOUT_S / k))  # Erlang-k, mean TIMEOUT_S
        done = servers.call()
        async with asyncio.timeout(limit):
            await done  # a cut leaves the request at the server: DownstreamRun counts it

    arrivals = np.cumsum(np.random.default_rng([seed, 2]).exponential(1 / LAMBDA, 10**6))
    arrivals = arrivals[arrivals < DURATION_S].tolist()

    async def source():
        for item, at in enumerate(arrivals):
            await asyncio.sleep(at - loop.time())
            yield item

    config = PipelineConfig(concurrency=10_000, queue_maxsize=None, max_attempts=ATTEMPTS,
                            backoff=Backoff(kind="constant", base_s=0.0),
                            drain_timeout_s=None)  # fmt: skip
    pipe = Pipeline(handler, config, name="chain-check")
    report = await pipe.run(source())
    stats = servers.stats(DURATION_S)
    return stats.in_system_mean, report.completed / DURATION_S


@pytest.mark.slow  # two long runs against the chain, about 12 s each
@pytest.mark.parametrize("k", [1, 2])
def test_the_simulator_matches_the_exact_chain(k):
    exact = retry_chain(arrival_rate=LAMBDA, mu=MU, timeout_s=TIMEOUT_S, attempts=ATTEMPTS,
                        capacity=CAPACITY, k=k)  # fmt: skip
    runs = np.array([run_virtual(_one_run(seed, k)) for seed in range(REPLICATIONS)])
    means = runs.mean(axis=0)
    spread = runs.std(axis=0, ddof=1) / math.sqrt(REPLICATIONS)
    wanted = (exact.in_system_mean, exact.goodput_per_s)
    names = ("in_system", "goodput")
    for name, mean, error, want in zip(names, means, spread, wanted, strict=True):
        # The chain's value inside the replications' 99.9% interval.
        assert abs(mean - want) <= T_9995_9 * error, (name, mean, error, want)
    # The mean at the server within 3%: its 95% interval is narrower than 3% of the value.
    # (The goodput's is about 3.5%: its check above is the containment only.)
    assert T_975_9 * spread[0] < 0.03 * exact.in_system_mean, (spread[0], exact)


def test_the_chain_by_hand_at_one_place_and_one_attempt():
    # States (), (live), (orphan): pi_live = 0.8/1.5 pi_0, pi_orphan = 0.5 pi_live, so
    # pi_0 = 1/1.8; at the server 0.8/1.8 on average; goodput mu x pi_live = 0.8/2.7.
    chain = retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=2.0, attempts=1, capacity=1)
    assert chain.states == 3
    assert chain.in_system_mean == pytest.approx(0.8 / 1.8, rel=1e-12)
    assert chain.orphaned_mean == pytest.approx(0.8 / 5.4, rel=1e-12)
    assert chain.goodput_per_s == pytest.approx(0.8 / 2.7, rel=1e-12)


def test_the_chain_refuses_a_size_beyond_a_dense_solve():
    with pytest.raises(ValueError, match=r"^the chain would have .* states; allowed: at most"):
        retry_chain(arrival_rate=9.5, mu=10.0, timeout_s=3.0, attempts=4, capacity=100, k=4)
