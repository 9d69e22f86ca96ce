"""A finite queue between two stages against an independent model: Ciw, blocking after service.

Two M/M/c stages in tandem: the first with an unbounded queue, the second
with room for only ``K`` waiting items. A first-stage worker that finishes
while that room is full keeps the item, and its slot, until room frees
(blocking after service, Ciw's type I blocking). Blocking has no closed form
here, so the chain's means are compared with Ciw's: independent replications
of each, and a two-sample (Welch) t test at a 99.9% level per metric, so a
correct engine fails about once in a thousand seeds per metric, while a
chain without blocking, or with room for one more item than it was given, is
outside: the last test shows the blocked time moves by more than the
half-width then.

The benchmarks' 3-stage tandem (``bench/ciw_tandem.py``: two bounded hand-offs)
is checked the same way against its Ciw model, on the mean sojourn.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import ciw
import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, simulate
from pipeline.sim.stats.tdist import t_quantile

RATE = 1.2  # arrivals per second
FIRST = (2, 1.0)  # workers, mean service s: 60% busy before blocking
SECOND = (1, 0.55)  # 66% busy
ROOM = 1  # items that may wait for the second stage
N = 2500  # customers per replication
REPLICATIONS = 8
LEVEL = 0.999


def chain_metrics(seed: int, room: int | None) -> dict[str, float]:
    """Our chain: mean wait at the first stage, blocked time per item, mean latency end to end."""
    result = simulate(
        Scenario(
            arrivals=Poisson(rate=RATE),
            stages=[
                StageSpec(
                    name="first",
                    service=Exponential(mean=FIRST[1]),
                    config=PipelineConfig(
                        concurrency=FIRST[0], queue_maxsize=None, drain_timeout_s=None
                    ),
                ),
                StageSpec(
                    name="second",
                    service=Exponential(mean=SECOND[1]),
                    config=PipelineConfig(
                        concurrency=SECOND[0], queue_maxsize=room, drain_timeout_s=None
                    ),
                ),
            ],
            n_items=N,
            seed=seed,
        )
    )
    first = result.stages["first"].summary
    return {
        "wait_first_s": first["wait_mean_s"],
        "blocked_per_item_s": result.report.stages["first"].hand_off_blocked_s / N,
        "latency_s": result.summary["latency_mean_s"],
    }


def ciw_metrics(seed: int, room: float) -> dict[str, float]:
    """The same model in Ciw: the first ``N`` customers to arrive, each to the end."""
    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=RATE), None],
        service_distributions=[
            ciw.dists.Exponential(rate=1 / FIRST[1]),
            ciw.dists.Exponential(rate=1 / SECOND[1]),
        ],
        routing=[[0.0, 1.0], [0.0, 0.0]],
        number_of_servers=[FIRST[0], SECOND[0]],
        queue_capacities=[float("inf"), room],
    )
    ciw.seed(seed)
    sim = ciw.Simulation(network)
    # Long enough for the first N arrivals to leave: N / RATE plus a generous tail.
    sim.simulate_until_max_time(N / RATE * 1.5 + 500)
    records = [r for r in sim.get_all_records() if r.id_number <= N]
    first = [r for r in records if r.node == 1]
    second = {r.id_number: r for r in records if r.node == 2}
    assert len(first) == N and len(second) == N, "Ciw's run was too short for N customers"
    latency = [second[r.id_number].exit_date - r.arrival_date for r in first]
    return {
        "wait_first_s": float(np.mean([r.waiting_time for r in first])),
        "blocked_per_item_s": float(np.mean([r.time_blocked for r in first])),
        "latency_s": float(np.mean(latency)),
    }


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """(difference of means, its half-width at LEVEL) by Welch's two-sample t interval."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return float(np.mean(a) - np.mean(b)), t_quantile(0.5 + LEVEL / 2, dof) * math.sqrt(va + vb)


@pytest.fixture(scope="module")
def samples():
    ours = [chain_metrics(seed, ROOM) for seed in range(REPLICATIONS)]
    theirs = [ciw_metrics(1000 + seed, ROOM) for seed in range(REPLICATIONS)]
    return ours, theirs


@pytest.mark.parametrize("metric", ["wait_first_s", "blocked_per_item_s", "latency_s"])
def test_blocking_after_service_agrees_with_ciw(samples, metric):
    ours, theirs = samples
    difference, half = welch([m[metric] for m in ours], [m[metric] for m in theirs])
    assert abs(difference) <= half, (metric, difference, half)


def test_the_comparison_can_fail(samples):
    """Room for one item too many, or no bound at all, is outside the test's half-width."""
    _, theirs = samples
    blocked = [m["blocked_per_item_s"] for m in theirs]
    for room in (ROOM + 1, None):
        wrong = [chain_metrics(seed, room)["blocked_per_item_s"] for seed in range(REPLICATIONS)]
        difference, half = welch(wrong, blocked)
        assert abs(difference) > half, (room, difference, half)


# -- the benchmarks' 3-stage tandem (bench/ciw_tandem.py) against its Ciw model -----------


def _bench_tandem():
    """``bench/ciw_tandem.py``, the model the chain benchmark times (bench/ is no package)."""
    path = Path(__file__).resolve().parents[3] / "bench" / "ciw_tandem.py"
    spec = importlib.util.spec_from_file_location("ciw_tandem", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TANDEM_N = 2500  # customers per replication


def test_the_benchmarks_tandem_has_ciws_mean_sojourn():
    # The kernel runs it (engine="auto"); its mean latency is the mean sojourn.
    tandem = _bench_tandem()
    ours, theirs = [], []
    for seed in range(REPLICATIONS):
        result = simulate(tandem.scenario(TANDEM_N, seed))
        assert result.summary["engine"] == "kernel"
        ours.append(result.summary["latency_mean_s"])
        theirs.append(float(tandem.ciw_sojourns(TANDEM_N, 1000 + seed).mean()))
    difference, half = welch(ours, theirs)
    assert abs(difference) <= half, (difference, half)
