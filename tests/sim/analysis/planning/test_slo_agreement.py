"""Replications that agree exactly: an exact binomial bound for fractions, no "± 0" for the rest.

Three runs that shed nothing do not make the shed fraction 0 for sure; a t
interval of zero width says they do. The planner bounds such a fraction by
the exact one-sided (Clopper-Pearson) bound on the pooled counts instead:
``1 - (1 - level)**(1/N)`` for no event in ``N`` items, about ``3/N`` at 95%.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline import PipelineConfig
from pipeline.sim import Exponential, Poisson, Scenario, compare, plan
from pipeline.sim.analysis.planning.judgement import judge
from pipeline.sim.analysis.planning.slo import SLO, metric_counts, metric_value
from pipeline.sim.stats.intervals import proportion_bound, t_quantile

SHED = SLO.parse("shed_fraction<=0.01")


def _binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


# -- the exact bound -------------------------------------------------------------------------


@pytest.mark.parametrize("trials", [1, 10, 300, 3_000_000])
@pytest.mark.parametrize("level", [0.5, 0.95, 0.99])
def test_no_events_give_the_closed_form_upper_bound(trials, level):
    bound = proportion_bound(0, trials, level)
    assert bound == pytest.approx(1 - (1 - level) ** (1 / trials), rel=1e-12)
    assert proportion_bound(trials, trials, level, upper=False) == pytest.approx(
        (1 - level) ** (1 / trials), rel=1e-12
    )
    assert proportion_bound(0, trials, level, upper=False) == 0.0
    assert proportion_bound(trials, trials, level) == 1.0


def test_the_rule_of_three_at_95_percent():
    # -ln(0.05) = 2.996: for large N the bound is 3/N to within a fraction of a percent.
    assert proportion_bound(0, 30_000) == pytest.approx(2.9957 / 30_000, rel=1e-3)


@pytest.mark.parametrize(("events", "trials"), [(1, 10), (3, 20), (17, 40), (39, 40)])
def test_bounds_between_solve_the_binomial_tails(events, trials):
    # The defining equations: P(B <= k; high) = 1 - level and P(B >= k; low) = 1 - level.
    high = proportion_bound(events, trials, 0.95)
    low = proportion_bound(events, trials, 0.95, upper=False)
    assert _binomial_cdf(events, trials, high) == pytest.approx(0.05, abs=1e-9)
    assert 1 - _binomial_cdf(events - 1, trials, low) == pytest.approx(0.05, abs=1e-9)
    assert low < events / trials < high


def test_the_textbook_value():
    # One event in ten: the one-sided 95% upper bound is 0.3942 (Clopper-Pearson tables).
    assert proportion_bound(1, 10, 0.95) == pytest.approx(0.39416, abs=1e-5)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0, 0), ValueError, "trials must be >= 1"),
        ((5, 4), ValueError, "events must be <= trials=4, got 5"),
        ((-1, 4), ValueError, "events must be >= 0"),
        ((0, 4, math.nan), ValueError, "level"),
        ((0, 4, 1.0), ValueError, "level must be < 1"),
        ((0.5, 4), TypeError, "events must be an integer"),
        ((0, math.inf), TypeError, "trials must be an integer"),
    ],
)
def test_bad_arguments_are_named(args, error, match):
    with pytest.raises(error, match=match):
        proportion_bound(*args)


# -- judging ---------------------------------------------------------------------------------


def test_no_shedding_meets_only_once_enough_items_were_seen():
    # 3/N <= 0.01 needs N >= 299 at 95%: 3 runs of 100 offered items are enough, of 90 not.
    enough = judge(SHED, [0.0, 0.0, 0.0], confidence=0.95, counts=[(0, 100)] * 3)
    assert enough.verdict == "meets" and enough.basis == "binomial"
    assert enough.bound == pytest.approx(1 - 0.05 ** (1 / 300), rel=1e-12)
    assert enough.bound <= 0.01 and enough.mean == 0.0
    assert (enough.low, enough.high) == (0.0, enough.bound) and enough.pooled == (0, 300)
    assert "no item shed in 300 items offered over 3 runs" in enough.note
    assert "3/N" in enough.note
    short = judge(SHED, [0.0, 0.0, 0.0], confidence=0.95, counts=[(0, 90)] * 3)
    assert short.verdict == "undecided" and short.bound > 0.01


def test_the_bound_pools_runs_of_different_lengths():
    j = judge(SHED, [0.0, 0.0], confidence=0.99, counts=[(0, 250), (0, 1000)])
    assert j.bound == pytest.approx(proportion_bound(0, 1250, 0.99)) and j.verdict == "meets"


def test_every_item_completed_is_bounded_from_below():
    slo = SLO.parse("completed_fraction>=0.99")
    j = judge(slo, [1.0, 1.0, 1.0], confidence=0.95, counts=[(1000, 1000)] * 3)
    assert j.basis == "binomial" and j.verdict == "meets"
    assert j.bound == pytest.approx(0.05 ** (1 / 3000)) and j.high == 1.0
    few = judge(slo, [1.0, 1.0], confidence=0.95, counts=[(50, 50)] * 2)
    assert few.verdict == "undecided"


def test_agreeing_on_a_fraction_above_the_limit_still_fails():
    # Every run shed exactly half of 1000: the exact lower bound is far above 1%.
    j = judge(SHED, [0.5, 0.5, 0.5], confidence=0.95, counts=[(500, 1000)] * 3)
    assert j.verdict == "fails" and j.basis == "binomial" and j.low > 0.45
    assert j.low < 0.5 < j.high


def test_a_fraction_without_its_counts_cannot_be_certain():
    j = judge(SHED, [0.0, 0.0, 0.0], confidence=0.95)
    assert j.verdict == "undecided" and math.isinf(j.bound)
    assert "without their counts" in j.note
    assert judge(SHED, [0.5, 0.5], confidence=0.95).verdict == "fails"


def test_other_metrics_that_agree_keep_their_value_and_say_so():
    slo = SLO.parse("memory_peak_bytes<=5000")
    j = judge(slo, [5000.0] * 4, confidence=0.95)
    assert (j.verdict, j.basis, j.bound, j.half_width) == ("meets", "exact", 5000.0, 0.0)
    assert "agreed exactly" in j.note and "no interval" in j.note
    assert judge(SLO.parse("memory_peak_bytes<=4999"), [5000.0] * 4, confidence=0.95).verdict == (
        "fails"
    )
    # attempts_per_item is a ratio, not a fraction: no binomial bound for it.
    ratio = judge(SLO.parse("attempts_per_item<=1"), [1.0, 1.0], confidence=0.95)
    assert ratio.basis == "exact" and ratio.verdict == "meets"


def test_a_spread_keeps_the_student_t_bound():
    j = judge(SHED, [0.0, 0.001, 0.0], confidence=0.95, counts=[(0, 1000), (1, 1000), (0, 1000)])
    assert (j.basis, j.note) == ("t", None)
    # At least the t bound, wider on the side the skew (one shed item in three runs) reaches.
    t_high = j.mean + t_quantile(0.95, 2) * float(np.std([0.0, 0.001, 0.0], ddof=1)) / 3**0.5
    assert j.interval == (j.low, j.high) and j.high == j.bound >= t_high
    assert j.high == pytest.approx(j.mean + j.half_width)
    # One run: no spread to measure is not zero spread.
    assert judge(SHED, [0.0], confidence=0.95, counts=[(0, 10**6)]).verdict == "undecided"


def test_a_run_without_a_value_still_fails():
    j = judge(SHED, [math.nan, math.nan], confidence=0.95, counts=[(0, 0), (0, 0)])
    assert j.verdict == "fails"


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ([(0, 100)] * 2, r"one \(events, trials\) pair per value \(3\), got 2"),
        ([(0, 100), (101, 100), (0, 100)], "0 <= events <= trials"),
        ([(0, 100), (-1, 100), (0, 100)], "0 <= events <= trials"),
    ],
)
def test_bad_counts_are_named(counts, match):
    with pytest.raises(ValueError, match=match):
        judge(SHED, [0.0, 0.0, 0.0], confidence=0.95, counts=counts)


def test_counts_come_from_the_summary_that_gives_the_value():
    summary = {"items_shed": 3, "items_offered": 300, "items_admitted": 297, "attempts_total": 400}
    assert metric_counts(summary, "shed_fraction") == (3, 300)
    assert metric_value(summary, "shed_fraction") == 3 / 300
    assert metric_counts(summary, "attempts_per_item") is None
    assert metric_counts(summary, "latency_p95_s") is None


# -- in a plan -------------------------------------------------------------------------------


def _never_sheds(n_items: int) -> Scenario:
    # A queue longer than the run: nothing can be shed, in any replication.
    return Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=0.5),
        config=PipelineConfig(on_full="reject", queue_maxsize=1000, drain_timeout_s=None),
        n_items=n_items,
        seed=3,
    )


def test_a_plan_needs_enough_items_to_call_no_shedding_a_pass():
    search = {"concurrency": [2]}
    enough = plan(
        _never_sheds(100), search, ["shed_fraction<=0.01"], replications=3, progress=False
    )
    assert enough.status == "chosen"
    row = enough.candidates.iloc[0]
    assert row["shed_fraction_mean"] == 0.0
    assert row["shed_fraction_bound"] == pytest.approx(1 - 0.05 ** (1 / 300))
    assert "no item shed in 300 items offered" in row["shed_fraction_note"]
    assert "(binomial)" in enough.report() and "± 0 " not in enough.report()

    short = plan(_never_sheds(90), search, ["shed_fraction<=0.01"], replications=3, progress=False)
    assert short.status == "undecided" and short.chosen is None
    (question,) = short.undecided
    assert question.note.startswith("no item shed in 270 items offered")
    # The advice solves 1 - 0.05**(1/N) <= 0.01: N >= 299 items, so 4 runs of 90 or 3 of 100.
    assert "about 299 items pooled, about 4 replications (now 3)" in question.advice
    assert "runs of about 100 items" in question.advice
    assert short.to_dict()["candidates"][0]["shed_fraction_note"] == question.note


def test_a_plan_adds_replications_until_the_bound_clears_the_limit():
    p = plan(
        _never_sheds(60), {"concurrency": [2]}, ["shed_fraction<=0.01"], replications=(3, 12),
        progress=False,
    )  # fmt: skip
    # Looks at 3, 6, 12 runs of 60 items at 1 - 0.05/3 each: 360 items leave the bound
    # above 0.01 (0.0113), 720 bring it under (0.0057).
    assert p.status == "chosen" and p.candidates.iloc[0]["replications"] == 12
    assert p.candidates.iloc[0]["shed_fraction_bound"] == pytest.approx(
        proportion_bound(0, 720, 1 - 0.05 / 3)
    )


# -- compare() on the metrics plan() judges ---------------------------------------------------


def test_compare_takes_the_derived_metrics_a_plan_takes():
    base = Scenario(
        arrivals=Poisson(rate=4.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=3, queue_maxsize=2, on_full="reject"),
        n_items=400,
        seed=2,
    )
    c = compare(base, base.replace(concurrency=5), metric="shed_fraction", replications=3)
    shed = compare(base, base.replace(concurrency=5), metric="items_shed", replications=3)
    offered = compare(base, base.replace(concurrency=5), metric="items_offered", replications=3)
    expected = [s / o for s, o in zip(shed.values_a, offered.values_a, strict=True)]
    assert list(c.values_a) == expected  # the same division, bit for bit
    assert c.difference < 0 and c.metric == "shed_fraction"
    assert "shed_fraction: b - a = " in str(c)


def test_compare_names_the_derived_metrics_when_the_metric_is_unknown():
    small = _never_sheds(20)
    with pytest.raises(ValueError, match=r"one of .*'shed_fraction'.*got 'shed_fractoin'"):
        compare(small, small, metric="shed_fractoin", replications=2)
