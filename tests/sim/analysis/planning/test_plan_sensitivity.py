"""A plan's sensitivity: each input moved by ±change on common random numbers.

Checked against what is exact: with common random numbers a higher arrival
rate never shortens a wait (arrival times are the same gaps, compressed), the
item size moves memory and nothing else, and over many seeds the paired
interval of the change in the M/M/c mean wait covers Erlang C's change at its
level. Inputs that do not apply are skipped with the reason.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import (
    Constant,
    Exponential,
    Gamma,
    IndependentFailures,
    LogNormal,
    PermanentFailures,
    Poisson,
    Scenario,
    StageSpec,
    Trace,
    simulate,
)
from pipeline.sim.analysis.planning.perturb import NotApplicable, inputs_of, perturbed
from pipeline.sim.analysis.planning.plan import plan
from pipeline.sim.analysis.planning.sensitivity import sensitivity
from pipeline.sim.analysis.theory import mmc
from pipeline.sim.workloads.arrivals import Deterministic, MarkovModulated, OnOff


def mm(rate=2.0, c=4, n=3000, seed=1, **fields):
    return Scenario(
        arrivals=Poisson(rate=rate),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=c, queue_maxsize=None),
        n_items=n,
        seed=seed,
        **fields,
    )


def chosen_plan(base, slos=("wait_mean_s<=100",), replications=5, **options):
    """A plan of one configuration that surely meets: the sensitivity's starting point."""
    p = plan(
        base,
        {"concurrency": [base.config.concurrency]},
        list(slos),
        replications=replications,
        progress=False,
        processes=1,
        **options,
    )
    assert p.status == "chosen"
    return p


def _binomial_quantile(q: float, n: int, p: float) -> int:
    """The smallest k with P(Binomial(n, p) <= k) >= q."""
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        if total >= q:
            return k
    return n


# -- moving one input -----------------------------------------------------------------------


def test_arrival_rate_scales_every_rate_of_the_process():
    s = mm()
    assert perturbed(s, "arrival_rate", 1.2).arrivals == Poisson(rate=2.4)
    d = s.replace(arrivals=Deterministic(rate=5.0))
    assert perturbed(d, "arrival_rate", 0.8).arrivals.rate == pytest.approx(4.0)
    m = s.replace(arrivals=MarkovModulated(rates=(1.0, 3.0), mean_durations_s=(10.0, 5.0)))
    moved = perturbed(m, "arrival_rate", 1.5).arrivals
    assert moved.rates == pytest.approx((1.5, 4.5)) and moved.mean_durations_s == (10.0, 5.0)
    o = s.replace(arrivals=OnOff(rate_on=4.0, rate_off=1.0, mean_on_s=2.0, mean_off_s=3.0))
    assert perturbed(o, "arrival_rate", 0.5).arrivals.rate == pytest.approx(0.5 * o.arrivals.rate)


def test_a_time_varying_rate_scales_at_every_moment_and_keeps_its_shape():
    import pickle

    from pipeline.sim.workloads.arrivals import TimeVarying, daily_curve

    morning = mm(n=200).replace(arrivals=daily_curve(0.1, 1.2, 9.0, width_h=2.0))
    moved = perturbed(morning, "arrival_rate", 1.2).arrivals
    assert isinstance(moved, TimeVarying) and moved.max_rate == pytest.approx(
        1.2 * morning.arrivals.max_rate
    )
    hours = np.linspace(0, 86_400, 97)
    assert np.allclose(moved.rate_fn(hours), 1.2 * morning.arrivals.rate_fn(hours))
    assert moved.rate == pytest.approx(1.2 * morning.arrivals.rate)  # the period is kept
    assert pickle.loads(pickle.dumps(moved)).rate_fn(hours[:3]) == pytest.approx(
        moved.rate_fn(hours[:3])
    )
    # On common random numbers, 20% more traffic is at least as many arrivals.
    runs = [
        simulate(morning.replace(arrivals=a, duration_s=3600 * 12, n_items=None))
        for a in (morning.arrivals, moved)
    ]
    assert runs[1].summary["items_offered"] >= runs[0].summary["items_offered"]


def test_numpy_and_decimal_factors_are_numbers():
    assert perturbed(mm(), "arrival_rate", np.float32(1.5)).arrivals.rate == 3.0
    assert perturbed(mm(), "arrival_rate", Decimal("1.5")).arrivals.rate == 3.0


def test_service_mean_keeps_the_shape_and_spread_keeps_the_mean():
    s = mm().replace(service=LogNormal(mean=0.08, cv=2.0))
    assert perturbed(s, "service_mean", 1.2).service == LogNormal(mean=0.08 * 1.2, cv=2.0)
    assert perturbed(s, "service_spread", 0.8).service == LogNormal(mean=0.08, cv=1.6)
    # An exponential time (cv 1) moves as the gamma of the same mean: cv 1 x factor.
    e = perturbed(mm(), "service_spread", 1.2).service
    assert isinstance(e, Gamma) and e.mean == 1.0 and e.cv == pytest.approx(1.2)
    assert perturbed(mm(), "service_mean", 0.8).service == Exponential(mean=0.8)


def test_failures_and_item_size_move():
    s = mm(failures=IndependentFailures(p=0.1), item_size_bytes=1000)
    assert perturbed(s, "failure_rate", 1.2).failures.p == pytest.approx(0.12)
    assert perturbed(s, "item_size", 1.2).item_size_bytes == 1200
    p = s.replace(failures=PermanentFailures(fraction=0.05))
    assert perturbed(p, "failure_rate", 0.8).failures.fraction == pytest.approx(0.04)


@pytest.mark.parametrize(
    ("scenario", "name", "reason"),
    [
        (mm(), "failure_rate", "no failures"),
        (mm(item_size_bytes=0), "item_size", "item_size_bytes is 0"),
        (mm().replace(service=Constant(value=1.0)), "service_spread", "constant"),
        (mm(failures=IndependentFailures(p=0.9)), "failure_rate", "above 1"),
        (
            mm().replace(arrivals=Trace(times=np.arange(100) * 0.5), n_items=100),
            "arrival_rate",
            "trace",
        ),
    ],
)
def test_an_input_that_does_not_apply_says_why(scenario, name, reason):
    with pytest.raises(NotApplicable, match=reason):
        perturbed(scenario, name, 1.2)


@pytest.mark.parametrize(
    "factor", [0, -1, math.nan, math.inf, 1e300, True, "1.2", None, Decimal("NaN")]
)
def test_a_bad_factor_is_refused(factor):
    with pytest.raises(ValueError, match="factor must be a number > 0"):
        perturbed(mm(), "arrival_rate", factor)


def test_a_chain_moves_each_stage_on_its_own():
    chain = Scenario(
        arrivals=Poisson(rate=1.0),
        stages=[
            StageSpec(name="fetch", service=Exponential(mean=0.5)),
            StageSpec(
                name="write",
                service=LogNormal(mean=0.3, cv=1.5),
                failures=IndependentFailures(p=0.1),
            ),
        ],
        n_items=100,
    )
    names = inputs_of(chain)
    assert names[0] == "arrival_rate" and names[-1] == "item_size"
    assert "write.service_mean" in names and "fetch.failure_rate" in names
    moved = perturbed(chain, "write.service_mean", 1.2)
    assert moved.stages[1].service == LogNormal(mean=0.36, cv=1.5)
    assert moved.stages[0] == chain.stages[0]
    with pytest.raises(NotApplicable, match="no failures"):
        perturbed(chain, "fetch.failure_rate", 1.2)
    with pytest.raises(ValueError, match="input must be one of"):
        perturbed(chain, "service_mean", 1.2)


# -- the analysis ---------------------------------------------------------------------------


def test_a_higher_arrival_rate_never_shortens_a_wait_on_common_random_numbers():
    # Scaling a Poisson rate compresses the same gaps, so with the same service times
    # every replication's mean wait moves the same way (the Lindley recursion is monotone).
    p = chosen_plan(mm())
    s = sensitivity(p, inputs=["arrival_rate", "service_mean"])
    assert s.replications == 5 and s.change == 0.2
    for row in s.rows:
        assert row.low < row.base < row.high
        assert row.factor_low == 0.8 and row.factor_high == 1.2
    # Erlang C's direction and rough size: the wait rises more than it falls.
    exact = [mmc(2.0 * f, 1.0, 4).wait_mean_s for f in (0.8, 1.0, 1.2)]
    arrival = next(r for r in s.rows if r.input == "arrival_rate")
    assert (arrival.change_high > -arrival.change_low) == (
        exact[2] - exact[1] > exact[1] - exact[0]
    )


def test_the_item_size_moves_memory_only():
    p = chosen_plan(mm(item_size_bytes=10_000), slos=("wait_mean_s<=100", "memory_peak_bytes<=1e9"))
    s = sensitivity(p, inputs=["item_size"])
    by_slo = {str(row.slo): row for row in s.rows}
    wait, memory = by_slo["wait_mean_s<=100"], by_slo["memory_peak_bytes<=1000000000"]
    assert wait.change_low == wait.change_high == 0 and wait.effect == 0
    assert wait.half_width_low == 0  # every pair moved alike: not at all
    assert memory.change_low < 0 < memory.change_high
    assert s.rows[0] is memory  # sorted by effect


def test_inputs_that_do_not_apply_are_skipped_with_the_reason():
    p = chosen_plan(mm().replace(service=Constant(value=1.0)))
    s = sensitivity(p)
    skipped = dict(s.skipped)
    assert set(skipped) == {"service_spread", "failure_rate"}
    assert "no failures" in skipped["failure_rate"]
    assert {row.input for row in s.rows} == {"arrival_rate", "service_mean", "item_size"}
    assert s.to_dict()["skipped"][0].keys() == {"input", "reason"}
    assert "skipped" in s.report()


def test_the_verdict_at_each_end_and_the_fragile_input():
    # At 5 workers and lambda = 3.2 the mean wait is 0.16 s; 20% more traffic makes it 0.54 s.
    limit = 0.3
    assert mmc(3.2, 1.0, 5).wait_mean_s < limit < mmc(3.84, 1.0, 5).wait_mean_s
    p = chosen_plan(mm(rate=3.2, c=5, n=20_000), slos=(f"wait_mean_s<={limit}",), replications=6)
    s = sensitivity(p, inputs=["arrival_rate", "item_size"])
    arrival = next(r for r in s.rows if r.input == "arrival_rate")
    assert arrival.verdict_low == "meets" and arrival.verdict_high == "fails"
    assert arrival.breaks and s.fragile == "arrival_rate"
    table = s.table
    assert list(table["input"]) == ["arrival_rate", "item_size"]
    assert table.loc[0, "verdict_high"] == "fails"


def test_the_same_numbers_on_an_executor_and_on_both_engines():
    base = mm(n=600, failures=IndependentFailures(p=0.1))
    local = sensitivity(chosen_plan(base, replications=3))
    with ThreadPoolExecutor(2) as pool:
        threaded = sensitivity(chosen_plan(base, replications=3), executor=pool)
    assert local == threaded
    engine = sensitivity(chosen_plan(base, replications=3, engine="asyncio"))
    assert [r.input for r in engine.rows] == [r.input for r in local.rows]
    for a, b in zip(engine.rows, local.rows, strict=True):
        for name in ("base", "low", "high", "change_low", "change_high"):
            assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-9, abs=1e-12)


def test_each_move_is_measured_as_the_plan_measures_its_runs_without_a_bar(monkeypatch, capsys):
    # One measurement for the plan's runs and the moved ones (the sensitivity's rows are
    # differences against the plan's replications), and the plan's progress bar, unshown.
    from pipeline.sim.analysis.planning import rounds
    from pipeline.sim.analysis.planning import sensitivity as module

    p = chosen_plan(mm(n=300), replications=3)
    seen = []
    real = module.run_tasks

    def spy(function, tasks, **options):
        seen.append((function, options["bar"]))
        return real(function, tasks, **options)

    monkeypatch.setattr(module, "run_tasks", spy)
    sensitivity(p, inputs=["arrival_rate"])
    ((function, bar),) = seen
    assert function is rounds.measure
    assert isinstance(bar, rounds.RunBar)
    assert capsys.readouterr().err == ""


def test_bad_arguments_are_refused():
    p = chosen_plan(mm())
    for change in (0, 1, -0.2, math.nan, True, "0.2", Decimal("Infinity"), np.float64(1.5)):
        with pytest.raises(ValueError, match="change must be a number > 0 and < 1"):
            sensitivity(p, change=change)
    assert sensitivity(p, change=Decimal("0.1"), inputs=["item_size"]).change == 0.1
    with pytest.raises(ValueError, match="not inputs of this scenario"):
        sensitivity(p, inputs=["arrival"])
    with pytest.raises(ValueError, match="processes must be"):
        sensitivity(p, processes=0)
    infeasible = plan(mm(), {"concurrency": [4]}, ["wait_mean_s<=0"], progress=False)
    assert infeasible.status == "infeasible"
    with pytest.raises(ValueError, match="needs a plan that chose"):
        infeasible.sensitivity()


@pytest.mark.slow
def test_the_change_interval_covers_erlang_c_at_its_level():
    # 95% two-sided paired t intervals of the change in the mean wait, on M/M/4 at
    # rho = 0.5, against Erlang C's change; misses must stay within what a 95% level
    # allows (binomial, one-sided at 0.001), both ends counted.
    seeds, level = 120, 0.95
    exact = [mmc(2.0 * f, 1.0, 4).wait_mean_s for f in (0.8, 1.0, 1.2)]
    misses = 0
    for seed in range(seeds):
        p = chosen_plan(mm(n=10_000, seed=seed))
        (row,) = sensitivity(p, inputs=["arrival_rate"]).rows
        misses += abs(row.change_low - (exact[0] - exact[1])) > row.half_width_low
        misses += abs(row.change_high - (exact[2] - exact[1])) > row.half_width_high
    allowed = _binomial_quantile(0.999, 2 * seeds, 1 - level)
    assert misses <= allowed, f"{misses} of {2 * seeds} intervals missed; allowed {allowed}"
