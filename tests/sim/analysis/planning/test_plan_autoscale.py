"""A plan over an autoscaled pool: ``autoscale.NAME`` search fields, and a cost that
charges what the pool was paid for (``worker_hour x workers_mean``, its worker-seconds
over the run), with bad input refused in one line before any run."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from pipeline import Autoscaler, PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.analysis.diagnostics.stability import unstable_note
from pipeline.sim.analysis.planning import rounds
from pipeline.sim.analysis.planning.slo import parse_slos
from pipeline.sim.running.single import summary_once

SCALER = Autoscaler(max_workers=30, target=2.0, sync_s=15.0, scale_down_stabilization_s=60.0)
BASE = Scenario(
    arrivals=Poisson(rate=10.0),
    service=Exponential(mean=0.5),
    duration_s=240.0,
    seed=5,
    config=PipelineConfig(
        concurrency=2, queue_maxsize=None, drain_timeout_s=None, autoscale=SCALER
    ),
)
FIXED = BASE.replace(autoscale=None)


def test_a_scenario_changes_one_autoscaler_setting_at_a_time():
    changed = BASE.replace(**{"autoscale.target": 5, "autoscale.max_scale_up_pods": 8})
    assert changed.config.autoscale == Autoscaler(
        max_workers=30,
        target=5.0,
        sync_s=15.0,
        scale_down_stabilization_s=60.0,
        max_scale_up=(8, 1.0),
    )
    assert changed.config.concurrency == 2 and BASE.config.autoscale is SCALER
    # numpy and Decimal numbers are plain ones, as at construction
    numbers = BASE.replace(
        **{"autoscale.cold_start_s": np.float32(3), "autoscale.target": Decimal("1.5")}
    )
    assert numbers.config.autoscale.cold_start_s == 3.0 and numbers.config.autoscale.target == 1.5
    # an autoscaler given in the same call is the one changed
    given = FIXED.replace(autoscale=Autoscaler(), **{"autoscale.max_workers": 7})
    assert given.config.autoscale.max_workers == 7


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"autoscale.target": math.nan}, r"^target must be finite and > 0 .*got nan$"),
        ({"autoscale.target": -1.0}, r"^target must be > 0 .*got -1\.0$"),
        ({"autoscale.cold_start_s": math.inf}, r"^cold_start_s must be .*got inf$"),
        ({"autoscale.sync_s": 0}, r"^sync_s must be > 0"),
        ({"autoscale.bogus": 1}, r"^unknown autoscaler parameter 'bogus'; allowed: min_workers,"),
        ({"autoscale.max_workers": 1}, r"^concurrency must be within the autoscaler's"),
        (
            {"autoscale.max_scale_up": (4, 1.0), "autoscale.max_scale_up_pods": 2},
            r"^give max_scale_up or its parts",
        ),
    ],
)
def test_bad_autoscaler_settings_are_refused_naming_them(changes, message):
    with pytest.raises(ValueError, match=message):
        BASE.replace(**changes)


def test_an_autoscaler_setting_needs_an_autoscaler():
    with pytest.raises(ValueError, match=r"^'autoscale.target' changes the autoscaler, but this"):
        FIXED.replace(**{"autoscale.target": 2.0})


@pytest.fixture
def no_runs(monkeypatch):
    """Fail the test if the plan runs anything."""

    def refuse(*args, **kwargs):
        raise AssertionError("a run was made before the arguments were checked")

    monkeypatch.setattr(rounds, "summary_once", refuse)


@pytest.mark.parametrize(
    ("base", "search", "message"),
    [
        (
            BASE,
            {"autoscale.target": [2.0, math.nan]},
            r"search\['autoscale.target'\] = nan: target",
        ),
        (BASE, {"autoscale.target": [-2.0]}, r"search\['autoscale.target'\] = -2.0: target must"),
        (BASE, {"autoscale.max_workers": [30, 0]}, r"= 0: max_workers must be"),
        (BASE, {"autoscale.cold_start_s": [-1.0]}, r"= -1.0: cold_start_s must be"),
        (BASE, {"autoscale.nope": [1]}, r"unknown autoscaler parameter 'nope'"),
        (FIXED, {"autoscale.target": [1.0, 2.0]}, r"but this scenario does not autoscale"),
    ],
)
def test_a_bad_autoscaler_search_is_refused_before_any_run(no_runs, base, search, message):
    with pytest.raises(ValueError, match=message):
        plan(base, search, ["latency_p95_s<=5"], progress=False, processes=1)


def test_the_kernel_plans_an_autoscaled_search_as_the_engine_does():
    found = {
        engine: plan(
            BASE,
            {"autoscale.target": [1.0, 2.0]},
            ["latency_p95_s<=5"],
            cost={"worker_hour": 1.0},
            replications=2,
            engine=engine,
            progress=False,
            processes=1,
        )
        for engine in ("kernel", "asyncio")
    }
    kernel, engine = found["kernel"], found["asyncio"]
    assert kernel.status == engine.status and kernel.chosen == engine.chosen
    for mine, theirs in zip(kernel.examined, engine.examined, strict=True):
        assert mine.point == theirs.point
        total = kernel.cost_estimate(mine).total
        assert total == pytest.approx(engine.cost_estimate(theirs).total, rel=1e-9)


def test_an_autoscaled_pool_is_unstable_only_beyond_its_max_workers():
    slos = parse_slos(["latency_p95_s<=5"])
    # a load of 5 busy workers: 2 to start with, up to 30
    assert unstable_note(BASE, slos) is None
    small = BASE.replace(concurrency=2, **{"autoscale.max_workers": 4})
    note = unstable_note(small, slos)
    assert note is not None and "the autoscaler's max_workers 4" in note
    assert "concurrency 2" in unstable_note(FIXED.replace(concurrency=2), slos)


def test_the_cost_charges_what_each_run_paid_its_pool():
    price = 0.75
    found = plan(
        BASE,
        {"autoscale.target": [1.0, 20.0]},
        ["latency_p95_s<=60"],
        cost={"worker_hour": price},
        replications=3,
        progress=False,
        processes=1,
    )
    assert found.status == "chosen"
    by_target = {c.point["autoscale.target"]: c for c in found.examined}
    assert set(by_target) == {1.0, 20.0}
    for target, candidate in by_target.items():
        scenario = BASE.replace(**{"autoscale.target": target})
        paid = []
        for r in range(3):  # replication r of the plan is the run of (seed, r)
            summary = summary_once(scenario, r, "asyncio")
            paid.append(price * summary["worker_seconds"] / summary["sim_time_s"])
        estimate = found.cost_estimate(candidate)
        assert estimate.workers == pytest.approx(float(np.mean(paid)), rel=1e-12)
        assert estimate.waiting == 0.0
        # measured: its bounds are a spread, not the mean itself
        assert estimate.low < estimate.total < estimate.high
    # a higher target keeps fewer workers: the least total cost is chosen
    cheaper = min(by_target, key=lambda t: found.cost_estimate(by_target[t]).total)
    assert found.chosen["autoscale.target"] == cheaper == 20.0
    assert found.to_dict()["cost_breakdown"]["workers_per_hour"] == pytest.approx(
        found.cost_estimate(by_target[20.0]).workers
    )


def test_fixed_and_autoscaled_pools_side_by_side():
    found = plan(
        BASE.replace(concurrency=6),
        {"autoscale": [None, SCALER]},
        ["latency_p95_s<=60"],
        cost={"worker_hour": 1.0},
        replications=3,
        progress=False,
        processes=1,
    )
    fixed, scaled = (
        next(c for c in found.examined if c.point["autoscale"] is s) for s in (None, SCALER)
    )
    assert found.cost_estimate(fixed).workers == 6.0  # exact: six workers for the hour
    assert found.cost_estimate(fixed).low == found.cost_estimate(fixed).high == 6.0
    assert found.cost_estimate(scaled).workers != 6.0
    assert "autoscale=none" in found.report()
