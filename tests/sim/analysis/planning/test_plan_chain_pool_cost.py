"""A priced plan of a chain with an autoscaled stage charges that stage what its pool was
paid for (its worker-seconds over the chain's run, at the stage's price), not its
starting ``concurrency``; fixed stages stay exact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, StageSpec, plan, simulate_replication
from pipeline.sim.analysis.planning.cost import Cost

SCALER = Autoscaler(target=2.0, min_workers=1, max_workers=20, scale_down_stabilization_s=60.0)
CHAIN = Scenario(
    arrivals=Poisson(rate=5.0),
    duration_s=300.0,
    seed=3,
    stages=[
        StageSpec(
            name="parse",
            service=Exponential(mean=1.0),
            config=PipelineConfig(
                concurrency=8, queue_maxsize=100, drain_timeout_s=None, autoscale=SCALER
            ),
        ),
        StageSpec(
            name="write",
            service=Exponential(mean=0.5),
            config=PipelineConfig(concurrency=4, queue_maxsize=100, drain_timeout_s=None),
        ),
    ],
)
PRICES = {"parse.worker_hour": 0.5, "write.worker_hour": 2.0}


def test_a_chain_run_reports_each_autoscaled_stage_pool_over_the_chain_run():
    result = simulate_replication(CHAIN, 0)
    summary, stage = result.summary, result.stages["parse"].summary
    mean = summary["parse.workers_mean"]
    assert mean == stage["worker_seconds"] / summary["sim_time_s"]
    assert 1.0 <= mean <= 20.0 and mean != 8.0  # it scaled, within its bounds
    assert "write.workers_mean" not in summary  # a fixed stage's pool is its concurrency


def test_the_autoscaled_stage_is_charged_what_its_runs_paid():
    found = plan(
        CHAIN,
        {"write.concurrency": [3, 4]},
        ["latency_p95_s<=120"],
        cost=PRICES,
        replications=3,
        progress=False,
        processes=1,
    )
    assert found.status == "chosen"
    for candidate in found.examined:
        scenario = CHAIN.replace(**candidate.point)
        paid = [  # replication r of the plan is the run of (seed, r)
            0.5 * simulate_replication(scenario, r).summary["parse.workers_mean"]
            for r in range(candidate.replications)
        ]
        estimate = found.cost_estimate(candidate)
        fixed = 2.0 * candidate.point["write.concurrency"]
        assert estimate.workers == pytest.approx(fixed + float(np.mean(paid)), rel=1e-12)
        assert estimate.low < estimate.total < estimate.high  # measured, so a spread


def test_the_cost_metrics_do_not_depend_on_the_prices():
    # A plan's runs report the same keys priced or not (a RunCache shares them).
    assert Cost().metrics(CHAIN) == Cost.parse(PRICES).metrics(CHAIN)
    assert Cost().metrics(CHAIN)[-1] == "parse.workers_mean"
    stages = [
        StageSpec(
            name=s.name, service=s.service, config=dataclasses.replace(s.config, autoscale=None)
        )
        for s in CHAIN.stages
    ]
    fixed = Scenario(arrivals=CHAIN.arrivals, duration_s=300.0, seed=3, stages=stages)
    assert Cost().metrics(fixed) == ("items_offered", "items_completed")
