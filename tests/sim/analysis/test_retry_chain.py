"""The exact chain of the timeout-and-retry loop: closed forms, and the simulator against it.

The engine (the real Pipeline on the virtual clock) runs clients whose handler calls a
Downstream of one server and draws its own Erlang-k timeout; a cut attempt leaves its
request, orphaned, at the server, and the engine retries at once (no backoff). The
harness shields each request from the cut (the server serves it to its end either way)
so that it sees every service end: the orphaned requests' time at the server and the
first instant the server is empty.

Levels, stated once: each simulated mean must contain the chain's value in its 99.9%
Student t interval over the replications (a correct simulator fails one metric in a
thousand), and for the mean at the server that 95% interval's half-width must be at
most 1% of the chain's value, so a 3% gap is three half-widths away: seen with
probability above 99.9%. The drain time (from a server full of orphaned requests to an
empty one) is checked against its 95% interval, as the expected hitting time it is.
"""

from __future__ import annotations

import asyncio
import decimal
import itertools
import math
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

from pipeline import Backoff, Pipeline, PipelineConfig
from pipeline.sim import Downstream, Exponential, run_virtual
from pipeline.sim.analysis import theory
from pipeline.sim.analysis.retry_chain import MAX_CHAIN_STATES, retry_chain
from pipeline.sim.analysis.retry_loop import metafor_chain
from pipeline.sim.running.downstream import DownstreamRun, downstream_rng
from pipeline.sim.workloads.faults import SpeedProfile
from tests.docs.figures import quoted

# Student t quantiles at 9 degrees of freedom (ten replications).
T_9995_9, T_975_9 = 4.781, 2.262
REPLICATIONS, DURATION_S, DRAIN_RUNS = 10, 2000.0, 400
# Workers: many more than items ever in flight (the harness checks), few enough to start fast.
CLIENTS = 200

# Metafor's example (mu = 10/s, lambda = 9.5/s, 4 attempts) scaled to a server that holds
# 4 requests: the timeout keeps Metafor's ratio to a full server's drain, 3 s of 10.1 s.
METAFOR_SMALL = {"arrival_rate": 9.5, "mu": 10.0, "timeout_s": 0.12, "attempts": 4,
                 "capacity": 4}  # fmt: skip


async def _harness(
    seed: int, spec: dict, k: int, duration_s: float, *, preload: int = 0
) -> tuple[float, float, float, float]:
    """One replication: ``(mean at the server, mean orphaned there, goodput per s,
    first second the server is empty)``, each measured over ``[0, duration_s]``.

    ``preload`` requests nobody waits for are at the server at time 0."""
    loop = asyncio.get_running_loop()
    rng = np.random.default_rng([seed, 1])
    mu, timeout_s = spec["mu"], spec["timeout_s"]
    servers = DownstreamRun(
        Downstream(concurrency=1, service=Exponential(mean=1 / mu),
                   queue_maxsize=spec["capacity"] - 1),
        SpeedProfile([]), downstream_rng(seed, 0), loop,
    )  # fmt: skip
    seen = {"orphaned_area": 0.0, "completed": 0, "empty_at": math.nan, "busy": 0, "peak": 0}

    def served(_: object) -> None:
        if math.isnan(seen["empty_at"]) and servers.served == servers.requests:
            seen["empty_at"] = loop.time()

    def call() -> asyncio.Future[None]:
        done = servers.call()
        done.add_done_callback(served)
        return done

    def orphaned(cut: float) -> None:
        end = min(loop.time(), duration_s)
        seen["orphaned_area"] += max(end - cut, 0.0)

    for _ in range(preload):
        call().add_done_callback(lambda _: orphaned(0.0))

    async def handler(item: int) -> None:
        seen["busy"] += 1
        seen["peak"] = max(seen["peak"], seen["busy"])
        try:
            await attempt()
        finally:
            seen["busy"] -= 1

    async def attempt() -> None:
        limit = float(rng.gamma(k, timeout_s / k))  # Erlang-k, mean timeout_s
        done = call()
        try:
            await asyncio.wait_for(asyncio.shield(done), limit)
        except TimeoutError:
            cut = loop.time()
            done.add_done_callback(lambda _: orphaned(cut))
            raise
        if loop.time() <= duration_s:
            seen["completed"] += 1

    arrivals = np.random.default_rng([seed, 2]).exponential(
        1 / spec["arrival_rate"], int(spec["arrival_rate"] * duration_s * 1.5) + 100
    )
    arrivals = np.cumsum(arrivals)
    arrivals = arrivals[arrivals < duration_s].tolist()

    async def source():
        for item, at in enumerate(arrivals):
            if preload and not math.isnan(seen["empty_at"]):
                return  # the drain is measured: the rest of the run is not needed
            await asyncio.sleep(at - loop.time())
            yield item

    snapshot = []
    loop.call_at(duration_s, lambda: snapshot.append(servers.stats(duration_s)))
    config = PipelineConfig(concurrency=CLIENTS, queue_maxsize=None,
                            max_attempts=spec["attempts"],
                            backoff=Backoff(kind="constant", base_s=0.0),
                            drain_timeout_s=None)  # fmt: skip
    await Pipeline(handler, config, name="chain-check").run(source())
    stats = snapshot[0] if snapshot else servers.stats(duration_s)
    # Every client had a worker at once: no item waited in the pipeline's own queue.
    assert seen["peak"] < CLIENTS, seen
    return (stats.in_system_mean, seen["orphaned_area"] / duration_s,
            seen["completed"] / duration_s, seen["empty_at"])  # fmt: skip


def _replications(spec: dict, k: int, duration_s: float, count: int = REPLICATIONS) -> np.ndarray:
    return np.array([run_virtual(_harness(seed, spec, k, duration_s))[:3]
                     for seed in range(count)])  # fmt: skip


def _check_against_the_chain(runs: np.ndarray, exact) -> None:
    means = runs.mean(axis=0)
    spread = runs.std(axis=0, ddof=1) / math.sqrt(len(runs))
    wanted = (exact.in_system_mean, exact.orphaned_mean, exact.goodput_per_s)
    names = ("in_system", "orphaned", "goodput")
    for name, mean, error, want in zip(names, means, spread, wanted, strict=True):
        assert abs(mean - want) <= T_9995_9 * error, (name, mean, error, want)
    # The mean at the server within 3%: its 95% half-width is at most 1% of the value.
    assert T_975_9 * spread[0] <= 0.01 * exact.in_system_mean, (spread[0], exact)


# -- the chain alone -------------------------------------------------------------------


def test_the_chain_by_hand_at_one_place_and_one_attempt():
    # States (), (live), (orphan): pi_live = 0.8/1.5 pi_0, pi_orphan = 0.5 pi_live, so
    # pi_0 = 1/1.8; at the server 0.8/1.8 on average; goodput mu x pi_live = 0.8/2.7.
    chain = retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=2.0, attempts=1, capacity=1)
    assert chain.states == 3
    assert chain.in_system_mean == pytest.approx(0.8 / 1.8, rel=1e-12)
    assert chain.orphaned_mean == pytest.approx(0.8 / 5.4, rel=1e-12)
    assert chain.goodput_per_s == pytest.approx(0.8 / 2.7, rel=1e-12)
    # Timeouts: rate 1/2 from the live state; every item completes or is lost.
    assert chain.timeouts_per_s == pytest.approx(0.5 * 0.8 / 2.7, rel=1e-12)
    assert chain.lost_per_s == pytest.approx(0.8 - 0.8 / 2.7, rel=1e-12)
    assert chain.drain_s == pytest.approx(1.0, rel=1e-12)  # one service, rate 1


@pytest.mark.parametrize(("lam", "mu", "capacity"), [(0.8, 1.0, 4), (9.5, 10.0, 12),
                                                     (3.0, 2.0, 6)])  # fmt: skip
def test_without_a_timeout_the_chain_is_mm1k(lam, mu, capacity):
    # Retries then only follow a full server, which fails them all at once: M/M/1/K.
    chain = retry_chain(arrival_rate=lam, mu=mu, timeout_s=None, attempts=3, capacity=capacity)
    closed = theory.mmck(lam, 1 / mu, 1, capacity)
    assert chain.states == capacity + 1
    assert chain.in_system_mean == pytest.approx(closed.in_system_mean, rel=1e-10)
    assert chain.goodput_per_s == pytest.approx(closed.throughput, rel=1e-10)
    assert chain.orphaned_mean == chain.timeouts_per_s == 0.0
    # The birth-death passage from K to 0: sum over levels n = 1..K of the expected time
    # to step from n to n - 1, t_n = (1 + lam t_{n+1}) / mu with t_{K+1} = 0.
    step, total = 0.0, 0.0
    for _ in range(capacity):
        step = (1 + lam * step) / mu
        total += step
    assert chain.drain_s == pytest.approx(total, rel=1e-10)


def test_a_long_timeout_with_one_phase_tends_to_mm1k():
    # An exponential timeout of mean 1e6 s almost never fires: M/M/1/K to about 1e-5.
    chain = retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=1e6, attempts=2, capacity=3)
    closed = theory.mmck(0.8, 1.0, 1, 3)
    assert chain.in_system_mean == pytest.approx(closed.in_system_mean, rel=1e-4)


def test_the_erlang_timeout_converges_in_k():
    # More phases, a less variable timeout: the means move less and less (the gap to
    # the deterministic timeout shrinks as 1/k).
    means = [retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=2.0, attempts=2, capacity=2,
                         k=k).in_system_mean for k in (1, 2, 4, 8, 16)]  # fmt: skip
    steps = np.abs(np.diff(means))
    assert all(later < earlier for earlier, later in itertools.pairwise(steps))


def test_the_scaled_metafor_example_is_conservative():
    chain = retry_chain(**METAFOR_SMALL, k=1)
    # Every item completes or is lost, and every service is of a live or orphaned request.
    assert chain.goodput_per_s + chain.lost_per_s == pytest.approx(9.5, rel=1e-12)
    assert 0 < chain.orphaned_mean < chain.in_system_mean < chain.capacity
    assert chain.timeouts_per_s > chain.goodput_per_s  # the loop works mostly for nobody


def test_the_result_is_a_frozen_snapshot():
    chain = retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=2.0, attempts=1, capacity=1)
    with pytest.raises(FrozenInstanceError):
        chain.states = 4
    assert theory.retry_chain is retry_chain and theory.RetryChain is type(chain)


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [("arrival_rate", 0, ValueError), ("arrival_rate", math.nan, ValueError),
     ("mu", -1.0, ValueError), ("mu", math.inf, ValueError),
     ("timeout_s", 0.0, ValueError), ("timeout_s", math.nan, ValueError),
     ("timeout_s", "3", TypeError), ("attempts", 0, ValueError), ("attempts", 1.5, TypeError),
     ("capacity", 0, ValueError), ("capacity", True, TypeError), ("k", 0, ValueError)],
)  # fmt: skip
def test_bad_arguments_name_themselves(name, value, error):
    kwargs = {"arrival_rate": 0.8, "mu": 1.0, "timeout_s": 2.0, "attempts": 2, "capacity": 2}
    kwargs[name] = value
    with pytest.raises(error, match=rf"^{name} must be"):
        retry_chain(**kwargs)


def test_numpy_and_decimal_numbers_are_numbers():
    plain = retry_chain(arrival_rate=0.8, mu=1.0, timeout_s=2.0, attempts=2, capacity=2)
    other = retry_chain(arrival_rate=np.float32(0.8), mu=decimal.Decimal("1.0"),
                        timeout_s=np.int64(2), attempts=np.int64(2), capacity=2)  # fmt: skip
    assert other.in_system_mean == pytest.approx(plain.in_system_mean, rel=1e-6)


def test_the_chain_refuses_a_size_beyond_a_dense_solve():
    # Metafor's own size: 101 places, 4 attempts; the refusal comes while building.
    with pytest.raises(ValueError, match=r"^the chain has more than .* states; allowed: at most"):
        retry_chain(arrival_rate=9.5, mu=10.0, timeout_s=3.0, attempts=4, capacity=101, k=4)
    assert MAX_CHAIN_STATES == 5_000


# -- the simulator against it ------------------------------------------------------------


@pytest.mark.slow  # ten runs of 4,000 s per k
@pytest.mark.parametrize("k", [1, 2])
def test_the_simulator_matches_the_exact_chain(k):
    spec = {"arrival_rate": 0.8, "mu": 1.0, "timeout_s": 2.0, "attempts": 2, "capacity": 4}
    exact = retry_chain(**spec, k=k)
    runs = _replications(spec, k, 4000.0)
    means = runs.mean(axis=0)
    spread = runs.std(axis=0, ddof=1) / math.sqrt(len(runs))
    wanted = (exact.in_system_mean, exact.orphaned_mean, exact.goodput_per_s)
    for mean, error, want in zip(means, spread, wanted, strict=True):
        assert abs(mean - want) <= T_9995_9 * error, (mean, error, want)


@pytest.mark.slow  # ten runs of 2,000 s per k
@pytest.mark.parametrize("k", [1, 2])
def test_the_simulator_matches_the_chain_on_metafors_example_scaled(k):
    runs = _replications(METAFOR_SMALL, k, DURATION_S)
    _check_against_the_chain(runs, retry_chain(**METAFOR_SMALL, k=k))


async def _drain(seed: int, spec: dict) -> float:
    return (await _harness(seed, spec, 1, 60.0, preload=spec["capacity"]))[3]


@pytest.mark.slow  # 400 short runs, a few seconds of CPU
def test_the_drain_time_is_inside_the_replications_interval():
    exact = retry_chain(**METAFOR_SMALL, k=1)
    times = np.array([run_virtual(_drain(seed, METAFOR_SMALL)) for seed in range(DRAIN_RUNS)])
    assert not np.isnan(times).any()
    half = 1.96 * times.std(ddof=1) / math.sqrt(len(times))
    assert abs(times.mean() - exact.drain_s) <= half, (times.mean(), half, exact.drain_s)


def test_the_overload_guide_quotes_these_checks():
    found = quoted(
        "docs/guide/overload.md",
        r"(\w+) replications of ([\d,]+) s to the chain, each mean inside its ([\d.]+)% interval,"
        r" with the mean at the server's (\d+)% interval narrower than (\d+)% of its value \(a"
        r" (\d+)% gap would show\), and (\d+) runs from a full server of orphans to their drain"
        r" time's (\d+)% interval",
    )
    # 99.9% and 95% are T_9995_9's and T_975_9's (9 = REPLICATIONS - 1 degrees of freedom);
    # a 3% gap is three of the 1% half-widths; the drain's interval is 1.96 standard errors.
    assert found.groups() == ("ten", "2,000", "99.9", "95", "1", "3", "400", "95")
    assert (REPLICATIONS, DURATION_S, DRAIN_RUNS) == (10, 2000.0, 400)


def test_the_overload_guide_quotes_metafors_chain_against_the_exact_one():
    exact = retry_chain(**METAFOR_SMALL, k=1)
    # Metafor's (n, r) chain on the scaled example: n in 0 .. capacity, 4 attempts are
    # 3 retries; with its Chebyshev bound, then with the exact tail.
    scaled = {
        tail: metafor_chain(arrival_rate=9.5, mu=10.0, timeout_s=0.12, retries=3,
                            queue_size=METAFOR_SMALL["capacity"] + 1, tail=tail).queue_mean
        for tail in ("chebyshev", "exact")
    }  # fmt: skip
    found = quoted(
        "docs/guide/overload.md",
        r"puts ([\d.]+) requests at the server \((\d+)% fewer than the exact ([\d.]+)\), and"
        r" ([\d.]+) once its Chebyshev bound is replaced by the exact tail",
    )
    gap = 100 * (1 - scaled["chebyshev"] / exact.in_system_mean)
    assert found.groups() == (f"{scaled['chebyshev']:.3f}", f"{gap:.0f}",
                              f"{exact.in_system_mean:.3f}", f"{scaled['exact']:.3f}")  # fmt: skip
    # Metafor's full example (its README: a queue of 100, an orbit of 20, 4 retries).
    full = {tail: metafor_chain(arrival_rate=9.5, mu=10.0, timeout_s=3.0, retries=4, tail=tail)
            for tail in ("chebyshev", "exact")}  # fmt: skip
    found = quoted(
        "docs/guide/overload.md",
        r"the same with either \(([\d.]+) requests at the server, ([\d.]+) clients in the orbit\)",
    )
    for means in full.values():
        assert found.groups() == (f"{means.queue_mean:.3f}", f"{means.orbit_mean:.3f}")
