"""A reject stage inside a chain sheds as M/M/c/K says, with K = queue_maxsize + concurrency.

A hand-off admits as a source does: an idle worker of the next stage takes each
output before the next one is judged. So a ``reject`` stage behind another
stage is an M/M/c/K queue at its joint, like a single pipeline fed by a
source, also when the stage before it fans out (its children then arrive as a
batch, one batch per parent).

The set-up: ``fetch`` is an M/M/8 queue with an unbounded queue, so its
departures are Poisson at the source's rate (Burke's theorem) and, since a
``reject`` stage never makes a hand-off wait, nothing from ``write`` reaches
back. ``write`` has ``c = 2`` workers, ``queue_maxsize = 2`` (K = 4),
exponential service of mean 1 s, and ``on_full="reject"``.

- Without fan-out its arrivals are Poisson: the shed share is M/M/c/K's
  blocking probability (:func:`~pipeline.sim.analysis.theory.mmck`).
- With a fan-out of F, batches of F arrive as a Poisson process (M^X/M/c/K
  with fixed batches, partial acceptance). Its stationary law comes from the
  generator of the number in system (n -> min(n + F, K) at the batch rate,
  n -> n - 1 at ``min(n, c) / E[S]``); a batch finding n sheds
  ``max(0, n + F - K)`` of its F children (PASTA), so the children's shed
  share is ``sum_n p_n max(0, n + F - K) / F``. With F = 1 that is M/M/c/K
  again, which the test checks first.

Tolerance (nothing tuned): one run's shed share is one observation (sheds come
in busy periods, not independently), so the R = 10 replications' shares give a
Student t 99.9% interval (t = 4.78 with 9 degrees of freedom), which must
cover the theory, and its half-width must stay under a power bound: a third of
the expected share, about twice what a correct simulator gives (the sample
standard deviation of 10 runs exceeds twice its true value with probability
below 1e-4). A joint that sheds while workers sit idle (the bug this guards
against: 1 of F children admitted into a queue of one) misses the interval by
far more than that. Each case has its own seed; the warm-up (50 s, 50 mean
service times at ``write``, of a chain with 5 states) leaves a negligible bias.
The same runs are made on both engines.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, simulate
from pipeline.sim.analysis.theory import mmck
from pipeline.sim.stats.intervals import mean_ci

LEVEL = 0.999
REPLICATIONS = 10
C, MAXSIZE, SERVICE_S = 2, 2, 1.0
K = MAXSIZE + C
WARMUP_S = 50.0
SHED = 2  # ItemColumns outcome code


def batch_mmck_shed_share(rate: float, batch: int, service_mean_s: float, c: int, k: int) -> float:
    """Share of items shed at an M^X/M/c/K queue: batches of ``batch`` at ``rate`` per second."""
    q = np.zeros((k + 1, k + 1))
    for n in range(k + 1):
        if n < k:
            q[n, min(n + batch, k)] += rate
        if n > 0:
            q[n, n - 1] += min(n, c) / service_mean_s
    q -= np.diag(q.sum(axis=1))
    # p Q = 0 with sum(p) = 1: the stationary law of the number in system.
    system = np.vstack([q.T, np.ones(k + 1)])
    p = np.linalg.lstsq(system, np.append(np.zeros(k + 1), 1.0), rcond=None)[0]
    shed = sum(p[n] * max(0, n + batch - k) for n in range(k + 1))
    return float(shed / batch)


def test_the_batch_model_with_batches_of_one_is_mmck():
    for rate in (0.5, 1.6, 3.0):
        assert batch_mmck_shed_share(rate, 1, SERVICE_S, C, K) == pytest.approx(
            mmck(rate, SERVICE_S, C, K).blocking_probability, rel=1e-9
        )


def joint(fan_out: int, child_rate: float, n_children: int, seed: int) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=child_rate / fan_out),
        stages=[
            StageSpec(
                name="fetch",
                service=Exponential(mean=0.5),
                config=PipelineConfig(concurrency=8, queue_maxsize=None, drain_timeout_s=None),
                fan_out=fan_out,
            ),
            StageSpec(
                name="write",
                service=Exponential(mean=SERVICE_S),
                config=PipelineConfig(concurrency=C, queue_maxsize=MAXSIZE, on_full="reject"),
            ),
        ],
        n_items=n_children // fan_out,
        seed=seed,
        warmup_s=WARMUP_S,
    )


# (fan-out, children per second at write): rho = 0.8 and 1.5 without fan-out, 0.9 with.
CASES = [(1, 1.6, 2026), (1, 3.0, 2027), (3, 1.8, 2028), (4, 1.2, 2029)]


# The asyncio engine's replications: 3.5 s of a core (the kernel equals it item by item).
@pytest.mark.parametrize("engine", ["kernel", pytest.param("asyncio", marks=pytest.mark.slow)])
@pytest.mark.parametrize(("fan_out", "child_rate", "seed"), CASES)
def test_a_reject_joint_sheds_the_mmck_share(fan_out, child_rate, seed, engine):
    expected = batch_mmck_shed_share(child_rate / fan_out, fan_out, SERVICE_S, C, K)
    shares = []
    for replication in simulate(
        joint(fan_out, child_rate, 3_000, seed), replications=REPLICATIONS, engine=engine
    ).results:
        write = replication.stages["write"].columns
        counted = write.arrival_s >= WARMUP_S  # NaN (never reached write) compares False
        shares.append(float(np.mean(write.outcome[counted] == SHED)))
    ci = mean_ci(np.array(shares), level=LEVEL)
    detail = (
        f"fan-out {fan_out}, {child_rate}/s: expected {expected:.4f}, "
        f"simulated {ci.mean:.4f} +- {ci.half_width:.3g}"
    )
    assert ci.contains(expected), detail
    assert ci.half_width <= expected / 3, f"too little power; {detail}"
