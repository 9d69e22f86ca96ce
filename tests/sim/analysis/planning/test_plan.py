"""plan(): the cheapest configuration meeting every SLO, checked against queueing theory.

Runs are short (a few thousand items on the exact kernel, about 2 ms each), so
a plan of a few dozen runs takes a fraction of a second. Statistical claims
rest on the plan's own confidence bounds; the tests pick limits far from the
true values of the neighbouring configurations, so that a correct planner
decides them, and check the answer against Erlang C.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from pipeline import PipelineConfig, RetryPolicy
from pipeline.sim import (
    Constant,
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    simulate,
    simulate_replication,
    theory,
)
from pipeline.sim.analysis.diagnostics.stability import unstable_note
from pipeline.sim.analysis.planning.candidate import look_confidence, replication_schedule
from pipeline.sim.analysis.planning.judgement import judge
from pipeline.sim.analysis.planning.plan import plan
from pipeline.sim.analysis.planning.slo import (
    DRAIN_CUT_METRICS,
    METRICS,
    SLO,
    SUMMARY_METRICS,
    metric_value,
    parse_slos,
)
from pipeline.sim.stats.intervals import lognormal_mean_bounds, t_quantile
from pipeline.sim.workloads.arrivals import Deterministic

RATE, MEAN = 3.2, 1.0  # offered load 3.2 Erlangs: four workers are 80% busy


def mmc_base(n_items: int = 4000, seed: int = 3, **config) -> Scenario:
    return Scenario(
        arrivals=Poisson(rate=RATE),
        service=Exponential(mean=MEAN),
        config=PipelineConfig(**{"concurrency": 4, "queue_maxsize": None, **config}),
        n_items=n_items,
        seed=seed,
    )


def erlang_wait(c: int) -> float:
    return theory.mmc(RATE, MEAN, c).wait_mean_s


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that counts the runs submitted to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


# -- SLOs ---------------------------------------------------------------------------------


def test_slos_parse_with_spaces_exponents_and_both_directions() -> None:
    assert SLO.parse("latency_p95_s<=0.5") == SLO("latency_p95_s", "<=", 0.5)
    assert SLO.parse("  memory_peak_bytes <= 200e6 ") == SLO("memory_peak_bytes", "<=", 2e8)
    assert SLO.parse("throughput_per_s>=49") == SLO("throughput_per_s", ">=", 49.0)
    assert str(SLO.parse("memory_peak_bytes<=200e6")) == "memory_peak_bytes<=200000000"
    assert str(SLO.parse("dead_letter_fraction<=1e-4")) == "dead_letter_fraction<=0.0001"
    # one metric bounded from both sides is a band, which is allowed
    assert len(parse_slos(["utilisation>=0.5", "utilisation<=0.85"])) == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("latency_p95_s", "METRIC<=LIMIT"),
        ("", "METRIC<=LIMIT"),
        ("<=0.5", "METRIC<=LIMIT"),
        ("latency_p95_s<0.5", "use '<=' or '>='"),
        ("latency_p95_s>0.5", "use '<=' or '>='"),
        ("latency_p95_s=0.5", "use '<=' or '>='"),
        ("latency_p95_s==0.5", "use '<=' or '>='"),
        ("latency_p95_s<=", "must be a number"),
        ("latency_p95_s<=fast", "must be a number"),
        ("latency_p95_s<=nan", "must be finite"),
        ("latency_p95_s<=inf", "must be finite"),
        ("latency_p95_s<=-inf", "must be finite"),
        ("latency_p90_s<=0.5", "unknown metric 'latency_p90_s'"),
        ("wall_time_s<=1", "unknown metric 'wall_time_s'"),
        ("engine<=1", "unknown metric"),
        ("x" * 5000 + "<=1", "unknown metric"),
    ],
)
def test_bad_slos_are_one_line_errors(text, words) -> None:
    with pytest.raises(ValueError, match=None) as info:
        SLO.parse(text)
    message = str(info.value)
    assert words in message
    assert "\n" not in message and len(message) < 1200


def test_unknown_metric_lists_the_allowed_ones() -> None:
    with pytest.raises(ValueError) as info:
        SLO.parse("latency_p90_s<=0.5")
    assert "allowed:" in str(info.value)
    assert all(metric in str(info.value) for metric in ("latency_p95_s", "shed_fraction"))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("latency_p95_s", "<=", math.nan), "finite"),
        (("latency_p95_s", "<=", math.inf), "finite"),
        (("latency_p95_s", "<=", "0.5"), "finite number"),
        (("latency_p95_s", "<=", True), "finite number"),
        (("latency_p95_s", "<", 0.5), "operator"),
        (("p95", "<=", 0.5), "unknown metric"),
    ],
)
def test_slo_objects_check_their_fields(args, words) -> None:
    with pytest.raises(ValueError, match=words):
        SLO(*args)


def test_slo_lists_must_be_non_empty_and_not_repeat_a_side() -> None:
    with pytest.raises(ValueError, match="at least one SLO"):
        parse_slos([])
    with pytest.raises(ValueError, match="same side"):
        parse_slos(["latency_p95_s<=0.5", "latency_p95_s<=0.4"])
    with pytest.raises(ValueError, match="list of expressions"):
        parse_slos(42)


def test_the_metrics_are_every_numeric_summary_key_but_wall_time() -> None:
    summary = simulate(mmc_base(n_items=50)).summary
    numeric = {
        key
        for key, value in summary.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    assert set(SUMMARY_METRICS) == numeric - {"wall_time_s"}
    assert set(METRICS) >= set(SUMMARY_METRICS) | {"shed_fraction", "dead_letter_fraction"}


def test_derived_metrics_are_ratios_of_counts_and_nan_when_undefined() -> None:
    summary = {
        "items_offered": 200,
        "items_admitted": 150,
        "items_shed": 50,
        "items_dead_lettered": 3,
        "items_unfinished": 0,
        "items_completed": 147,
        "attempts_total": 180,
    }
    assert metric_value(summary, "shed_fraction") == 0.25
    assert metric_value(summary, "dead_letter_fraction") == 3 / 150
    assert metric_value(summary, "completed_fraction") == 147 / 200
    assert metric_value(summary, "attempts_per_item") == 1.2
    assert math.isnan(metric_value({**summary, "items_offered": 0}, "shed_fraction"))


def test_judge_uses_one_sided_student_t_bounds() -> None:
    # A value of 0 has no log: the bounds are Student t's alone.
    values = [0.0, 1.0, 2.0]
    half = t_quantile(0.95, 2) * 1.0 / math.sqrt(3)  # sample sd of 0, 1, 2 is 1
    j = judge(SLO("wait_mean_s", "<=", 1.0 + half + 1e-9), values, confidence=0.95)
    assert (j.verdict, j.mean, j.bound) == ("meets", 1.0, pytest.approx(1.0 + half))
    assert judge(SLO("wait_mean_s", "<=", 1.0 + half - 1e-9), values, confidence=0.95).verdict == (
        "undecided"
    )
    assert judge(SLO("wait_mean_s", "<=", 1.0 - half - 1e-9), values, confidence=0.95).verdict == (
        "fails"
    )
    # >= mirrors it: the lower bound must clear the limit
    assert judge(
        SLO("throughput_per_s", ">=", 1.0 - half - 1e-9), values, confidence=0.95
    ).verdict == ("meets")
    assert judge(
        SLO("throughput_per_s", ">=", 1.0 + half + 1e-9), values, confidence=0.95
    ).verdict == ("fails")
    # one run has no spread: undecided; a run without a value counts against the SLO
    assert judge(SLO("wait_mean_s", "<=", 100.0), [1.0], confidence=0.95).verdict == "undecided"
    assert judge(SLO("wait_mean_s", "<=", 100.0), [1.0, math.nan], confidence=0.95).verdict == (
        "fails"
    )


def test_judge_widens_to_the_lognormal_bound_on_positive_values() -> None:
    values = [1.0, 2.0, 3.0]
    half = t_quantile(0.95, 2) * 1.0 / math.sqrt(3)
    low, high = lognormal_mean_bounds(values, 0.95)
    j = judge(SLO("wait_mean_s", "<=", 10.0), values, confidence=0.95)
    assert j.interval == (min(2.0 - half, low), max(2.0 + half, high))
    assert j.bound == j.high and j.half_width == pytest.approx(j.high - 2.0)
    assert j.high > 2.0 + half  # three skew-prone values: the lognormal bound is the wider


def test_the_replication_schedule_doubles_and_looks_share_the_error() -> None:
    assert replication_schedule(3, 30) == [3, 6, 12, 24, 30]
    assert replication_schedule(5, 5) == [5]
    assert look_confidence(0.95, 5) == pytest.approx(0.99)
    assert look_confidence(0.95, 1) == 0.95


# -- the planner against queueing theory ----------------------------------------------------


@pytest.mark.parametrize("c_star", [5, 6, 7])
def test_a_wait_slo_picks_the_smallest_concurrency_erlang_c_allows(c_star) -> None:
    # The limit sits at the geometric mean of the neighbours' Erlang C waits, so each
    # neighbour is a factor >= 1.8 from it (checked here): far from the boundary, and
    # decided by the plan's own bounds within its budget.
    limit = math.sqrt(erlang_wait(c_star) * erlang_wait(c_star - 1))
    assert erlang_wait(c_star - 1) / limit > 1.8 and limit / erlang_wait(c_star) > 1.8
    result = plan(
        mmc_base(),
        {"concurrency": range(1, 17)},
        [f"wait_mean_s<={limit}"],
        processes=1,
        progress=False,
    )
    assert result.status == "chosen"
    assert result.chosen["concurrency"] == c_star
    assert result.binding.slo == SLO("wait_mean_s", "<=", limit)
    assert result.binding.cheaper[0].change == {"concurrency": c_star - 1}
    assert result.binding.cheaper[0].failed == (SLO("wait_mean_s", "<=", limit),)


@pytest.mark.parametrize(
    ("wait_limit", "utilisation_limit"),
    [(0.5, 0.7), (0.05, 0.7), (0.5, 0.5), (0.02, 0.6), (1.0, 0.66)],
)
def test_the_choice_never_violates_a_bound_theory_knows(wait_limit, utilisation_limit) -> None:
    result = plan(
        mmc_base(seed=7),
        {"concurrency": range(1, 17)},
        [f"wait_mean_s<={wait_limit}", f"utilisation<={utilisation_limit}"],
        processes=1,
        progress=False,
    )
    assert result.status == "chosen"
    c = result.chosen["concurrency"]
    assert RATE * MEAN / c <= utilisation_limit  # utilisation = offered load / c
    assert erlang_wait(c) <= wait_limit
    # and one worker fewer really violates one of them (or cannot keep up at all)
    assert (
        c - 1 <= RATE * MEAN
        or RATE * MEAN / (c - 1) > utilisation_limit
        or erlang_wait(c - 1) > wait_limit
    )


def test_runs_use_common_random_numbers() -> None:
    base = mmc_base()
    result = plan(base, {"concurrency": [5, 6]}, ["wait_mean_s<=10"], processes=1, progress=False)
    runs = result.runs
    for c in (5, 6):
        for r in (0, 2):
            row = runs[(runs["concurrency"] == c) & (runs["replication"] == r)]
            expected = simulate_replication(base.replace(concurrency=c), r).summary
            assert row["wait_mean_s"].item() == expected["wait_mean_s"]


# -- the stopping rule --------------------------------------------------------------------


def deterministic_base() -> Scenario:
    # Evenly spaced arrivals, constant service: every replication is the same run, so
    # every verdict is decided at the first look (zero spread).
    return Scenario(
        arrivals=Deterministic(rate=3.0),
        service=Constant(value=1.0),
        config=PipelineConfig(concurrency=1, queue_maxsize=None),
        n_items=300,
        seed=1,
    )


@pytest.mark.parametrize(
    ("lookahead", "skip_unstable", "runs"),
    [
        # c = 1, 2 are unstable (load 3 > c) and rejected without runs; round 1 examines
        # c = 3..6, c = 3 keeps up exactly (load 3 = c is simulated), meets: 4 x 3 runs.
        (4, True, 12),
        (1, True, 3),
        # without theory, c = 1, 2 are run and fail (their waits grow): still one round
        (4, False, 12),
        # one configuration a round: c = 1, then 2, then 3, which meets: 3 rounds
        (1, False, 9),
    ],
)
def test_decided_verdicts_stop_at_the_first_look(lookahead, skip_unstable, runs) -> None:
    # Run, c = 1 and 2 leave a backlog the 30 s drain cannot clear: the plan says so.
    warns = contextlib.nullcontext() if skip_unstable else pytest.warns(DrainTimeoutWarning)
    with CountingExecutor() as executor, warns:
        result = plan(
            deterministic_base(),
            {"concurrency": range(1, 11)},
            ["wait_mean_s<=0.001"],
            lookahead=lookahead,
            skip_unstable=skip_unstable,
            executor=executor,
            progress=False,
        )
    assert result.status == "chosen" and result.chosen["concurrency"] == 3
    assert executor.submitted == result.runs_total == len(result.runs) == runs
    assert set(result.candidates["replications"]) <= {0, 3}


def test_an_open_verdict_doubles_its_replications_up_to_the_budget() -> None:
    # The dead-lettered share of admitted items is p**k = 0.25 exactly in expectation:
    # a limit right there cannot be decided, so replications go 3 -> 6 -> 12 and stop.
    base = mmc_base(n_items=2000, seed=1, max_attempts=2).replace(failures=IndependentFailures(0.5))
    with CountingExecutor() as executor:
        result = plan(
            base,
            {"concurrency": [6]},
            ["dead_letter_fraction<=0.25"],
            replications=(3, 12),
            executor=executor,
            progress=False,
        )
    assert result.status == "undecided"
    assert result.chosen is None and result.binding is None and result.fallback is None
    assert executor.submitted == 12 == result.candidates["replications"].item()
    [question] = result.undecided
    assert question.candidate == {"concurrency": 6}
    assert question.slo == SLO.parse("dead_letter_fraction<=0.25")
    assert question.replications == 12
    assert question.low <= 0.25 <= question.high
    assert "replications (now 12)" in question.advice
    text = result.report()
    assert text.startswith("plan: undecided") and "concurrency=6" in text and "advice:" in text


def test_replications_are_added_only_where_a_verdict_was_open() -> None:
    # Replays the rule from the runs: every configuration has a count from the schedule,
    # and each step past the first was taken only because the previous look was open.
    result = plan(
        mmc_base(n_items=2000, seed=5),
        {"concurrency": range(1, 13), "queue_maxsize": [20, None]},
        ["wait_mean_s<=0.05", "utilisation<=0.6"],
        replications=(3, 24),
        processes=1,
        progress=False,
    )
    schedule = replication_schedule(3, 24)
    level = look_confidence(0.95, len(schedule))
    assert result.look_confidence == level
    runs = result.runs
    stepped = 0
    for _, row in result.candidates.iterrows():
        n = row["replications"]
        if row["verdict"] == "unstable":
            assert n == 0
            continue
        assert n in schedule
        mine = runs[
            (runs["concurrency"] == row["concurrency"])
            & runs["queue_maxsize"].apply(lambda v, q=row["queue_maxsize"]: v == q)
        ]
        for earlier in schedule[: schedule.index(n)]:
            verdicts = [
                judge(slo, mine[slo.metric].to_numpy()[:earlier], confidence=level).verdict
                for slo in result.slos
            ]
            assert "fails" not in verdicts and "undecided" in verdicts, (row.to_dict(), earlier)
            stepped += 1
    assert stepped > 0  # the case exercises the doubling
    # The outcome is the documented one. The limit sits near concurrency 6's Erlang C
    # wait (0.045 s), which 24 replications cannot separate from it: "undecided", with
    # every open configuration cheaper than the fallback at the full budget.
    assert result.status == "undecided" and result.chosen is None
    assert result.fallback["concurrency"] == 7
    frame = result.candidates
    fallback_rank = frame.loc[frame["verdict"] == "meets", "rank"].min()
    cheaper = frame[frame["rank"] < fallback_rank]
    assert set(cheaper["verdict"]) <= {"fails", "unstable", "undecided"}
    assert set(cheaper.loc[cheaper["verdict"] == "undecided", "replications"]) == {24}
    assert {q.candidate["concurrency"] for q in result.undecided} == {6}


def test_an_exact_replication_count_runs_exactly_that_many() -> None:
    result = plan(
        mmc_base(), {"concurrency": [5, 6, 7]}, ["wait_mean_s<=0.1"], replications=4, progress=False
    )
    assert set(result.candidates["replications"]) == {4}
    assert result.look_confidence == 0.95


# -- outcomes -------------------------------------------------------------------------------


def test_infeasible_when_theory_rejects_every_configuration() -> None:
    result = plan(mmc_base(), {"concurrency": [1, 2, 3]}, ["latency_p95_s<=100"], progress=False)
    assert result.status == "infeasible" and result.chosen is None
    assert result.runs_total == 0
    assert set(result.candidates["verdict"]) == {"unstable"}
    assert result.candidates["note"].str.contains("offered load 3.2 > concurrency").all()


def test_infeasible_when_every_configuration_fails() -> None:
    # Shedding at K = maxsize + c = 4..5 places under 3.2 Erlangs: M/M/c/K blocks (at c = 4;
    # c = 3 blocks more) over 5% of arrivals, 50 times the limit.
    assert theory.mmck(RATE, MEAN, 4, 5).blocking_probability > 0.05
    base = mmc_base(on_full="reject", queue_maxsize=1)
    result = plan(base, {"concurrency": [3, 4]}, ["shed_fraction<=0.001"], progress=False)
    assert result.status == "infeasible"
    assert set(result.candidates["verdict"]) == {"fails"}
    assert result.report().startswith("plan: infeasible")
    assert "fails shed_fraction<=0.001" in result.report()


def test_theory_skips_only_where_the_argument_is_exact() -> None:
    slos = parse_slos(["latency_p95_s<=1"])
    assert unstable_note(mmc_base(concurrency=3), slos) is not None
    assert unstable_note(mmc_base(concurrency=4), slos) is None
    # no wait or latency SLO: nothing grows that the SLOs bound
    assert unstable_note(mmc_base(concurrency=3), parse_slos(["memory_peak_bytes<=1e9"])) is None
    # a bounded queue that sheds is stable at any load
    assert unstable_note(mmc_base(concurrency=3, on_full="reject", queue_maxsize=10), slos) is None
    # attempt timeouts cut service short: the load is not known
    assert unstable_note(mmc_base(concurrency=3, attempt_timeout_s=0.5), slos) is None
    # retries add load: 3.2 x (1 + 0.5) = 4.8 > 4 workers
    retrying = mmc_base(concurrency=4, max_attempts=2).replace(failures=IndependentFailures(0.5))
    assert "4.8" in unstable_note(retrying, slos)
    # a policy that retries nothing: one attempt per item, 3.2 < 4 workers
    no_retries = retrying.replace(retry=RetryPolicy(retry_on=()))
    assert unstable_note(no_retries, slos) is None
    assert "3.2 > concurrency 3" in unstable_note(no_retries.replace(concurrency=3), slos)


def test_cost_order_puts_the_unbounded_queue_last_and_follows_cost() -> None:
    result = plan(
        mmc_base(),
        {"queue_maxsize": [None, 50, 10], "concurrency": [6, 5]},
        ["wait_mean_s<=10"],
        replications=2,
        lookahead=6,
        progress=False,
    )
    frame = result.candidates
    points = list(zip(frame["concurrency"], frame["queue_maxsize"], strict=True))
    assert points == [(5, 10), (5, 50), (5, None), (6, 10), (6, 50), (6, None)]
    assert result.chosen == {
        "concurrency": 5,
        "queue_maxsize": 10,
        "on_full": "block",
        "max_attempts": 3,
    }
    by_queue = plan(
        mmc_base(),
        {"queue_maxsize": [None, 50], "concurrency": [6, 5]},
        ["wait_mean_s<=10"],
        replications=2,
        cost=["queue_maxsize"],
        lookahead=4,
        progress=False,
    )
    frame = by_queue.candidates
    points = list(zip(frame["queue_maxsize"], frame["concurrency"], strict=True))
    assert points == [(50, 5), (50, 6), (None, 5), (None, 6)]


# -- outputs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_slo_plan():
    return plan(
        mmc_base(),
        {"concurrency": range(1, 12), "queue_maxsize": [20, 200]},
        ["wait_mean_s<=0.085", "memory_peak_bytes<=200e3"],
        progress=False,
    )


def test_to_dict_is_plain_json_with_the_promised_keys(two_slo_plan) -> None:
    payload = json.loads(json.dumps(two_slo_plan.to_dict(), allow_nan=False))
    assert payload["status"] == "chosen"
    assert payload["chosen"]["concurrency"] == 6 and payload["chosen"]["queue_maxsize"] == 20
    assert payload["binding"]["slo"] in payload["slos"]
    assert payload["runs"] == sum(c["replications"] for c in payload["candidates"])
    first = payload["candidates"][0]
    assert first["verdict"] == "unstable" and first["wait_mean_s_mean"] is None
    assert {"wait_mean_s_bound", "memory_peak_bytes_verdict", "rank", "note"} <= set(first)


def test_candidates_table_report_and_figure(two_slo_plan) -> None:
    frame = two_slo_plan.candidates
    assert list(frame.columns[:2]) == ["concurrency", "queue_maxsize"]
    assert frame["rank"].is_monotonic_increasing
    ran = frame[frame["replications"] > 0]
    upper = ran["wait_mean_s_mean"] + ran["wait_mean_s_half_width"]
    np.testing.assert_allclose(ran["wait_mean_s_bound"], upper)
    text = str(two_slo_plan)
    assert text.startswith("plan: chosen concurrency=6, queue_maxsize=20")
    assert "binding" in text and "one step cheaper, concurrency=5: fails" in text
    assert repr(two_slo_plan).startswith("<Plan status=chosen")
    fig = two_slo_plan.figure()
    visible = [ax for ax in fig.axes if ax.get_visible()]
    # Titles in words, the limit in the metric's unit: a figure reads without the keys.
    assert [ax.get_title() for ax in visible] == ["mean wait ≤ 0.085 s", "peak memory ≤ 200 kB"]


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("search", "slos", "options", "words"),
    [
        ({}, ["wait_mean_s<=1"], {}, "search space is empty"),
        ({"concurrency": []}, ["wait_mean_s<=1"], {}, "search space is empty"),
        ({"concurrency": [0]}, ["wait_mean_s<=1"], {}, "search['concurrency'] = 0"),
        ({"workers": [1]}, ["wait_mean_s<=1"], {}, "unknown scenario or config field"),
        ({"concurrency": [2, 2]}, ["wait_mean_s<=1"], {}, "repeats"),
        ({"concurrency": [2]}, [], {}, "at least one SLO"),
        ({"concurrency": [2]}, ["p99<=1"], {}, "unknown metric 'p99'"),
        ({"concurrency": [2]}, ["wait_mean_s<=nan"], {}, "finite"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"confidence": 1.0}, "confidence"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"confidence": 0.3}, "confidence"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"confidence": math.nan}, "confidence"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"replications": 1}, "replications"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"replications": (5, 3)}, "replications"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"replications": (2, 10**9)}, "replications"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"lookahead": 0}, "lookahead"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"processes": 0}, "processes"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"cost": ["queue_maxsize"]}, "not searched"),
        ({"concurrency": [2]}, ["wait_mean_s<=1"], {"engine": "fast"}, "engine"),
        (
            {"concurrency": range(1, 1001), "queue_maxsize": range(1, 1001)},
            ["wait_mean_s<=1"],
            {},
            "more than 100,000",
        ),
    ],
)
def test_bad_arguments_are_one_line_value_errors(search, slos, options, words) -> None:
    with pytest.raises(ValueError) as info:
        plan(mmc_base(), search, slos, progress=False, **options)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_types_are_type_errors() -> None:
    with pytest.raises(TypeError, match="base must be a Scenario"):
        plan("scenario", {"concurrency": [1]}, ["wait_mean_s<=1"])
    with pytest.raises(TypeError, match="search must be a dict"):
        plan(mmc_base(), [("concurrency", [1])], ["wait_mean_s<=1"])
    with pytest.raises(TypeError, match="sequence of values"):
        plan(mmc_base(), {"concurrency": 4}, ["wait_mean_s<=1"])


# -- where the runs run ----------------------------------------------------------------------


SEARCH = {"concurrency": range(1, 10), "queue_maxsize": [10, None]}
SLOS = ["wait_mean_s<=0.085", "utilisation<=0.7"]


@pytest.fixture(scope="module")
def in_process():
    return plan(mmc_base(n_items=2000), SEARCH, SLOS, processes=1, progress=False).to_dict()


def test_a_thread_pool_gives_the_same_plan(in_process) -> None:
    with ThreadPoolExecutor(max_workers=3) as executor:
        pooled = plan(mmc_base(n_items=2000), SEARCH, SLOS, executor=executor, progress=False)
    assert pooled.to_dict() == in_process


@pytest.mark.slow  # starts a Dask local cluster: 3 s of CPU
def test_a_dask_local_cluster_gives_the_same_plan(in_process) -> None:
    from pipeline.sim.executors.cluster import scheduler_executor

    with scheduler_executor("local", workers=2) as executor:
        remote = plan(mmc_base(n_items=2000), SEARCH, SLOS, executor=executor, progress=False)
    assert remote.to_dict() == in_process


# -- a run whose drain timed out never supports "meets" on a latency or wait SLO -------------


def backlogged(drain_timeout_s: float | None = 30.0) -> Scenario:
    """200 items in about 100 s: one worker (1 s each) is left with a backlog of about 100."""
    return Scenario(
        arrivals=Poisson(rate=2.0),
        service=Exponential(mean=1.0),
        config=PipelineConfig(concurrency=1, queue_maxsize=None, drain_timeout_s=drain_timeout_s),
        n_items=200,
        seed=4,
    )


@pytest.mark.parametrize("engine", ["asyncio", "kernel"])
def test_a_single_stage_plan_fails_latency_and_wait_slos_on_cut_runs(engine):
    slos = ["latency_p95_s<=100", "wait_p95_s<=100", "memory_peak_bytes<=1e9"]
    with pytest.warns(DrainTimeoutWarning, match=r"in 8 of 24 plan runs"):
        result = plan(
            backlogged(), {"concurrency": [1, 2, 3]}, slos, replications=8,
            skip_unstable=False, processes=1, progress=False, engine=engine,
        )  # fmt: skip
    one = result.candidates.iloc[0]
    assert set(result.candidates["engine"]) == {engine}
    # The cut runs' bounds clear the limits (the slowest items are missing): they fail anyway.
    assert one["latency_p95_s_bound"] < 100 and one["wait_p95_s_bound"] < 100
    assert one["latency_p95_s_verdict"] == one["wait_p95_s_verdict"] == "fails"
    assert "have no wait" in one["wait_p95_s_note"]
    assert one["memory_peak_bytes_verdict"] == "meets"  # not a latency: judged as usual
    assert one["drain_timed_out"] == 8 and result.chosen["concurrency"] == 2
    # Drained, every item counts, and one worker fails on its own numbers.
    drained = simulate_replication(backlogged(None), 0, engine=engine).summary
    assert drained["latency_p95_s"] > 100 and not drained["drain_timed_out"]


def test_judge_fails_a_latency_or_wait_slo_on_any_cut_run():
    values = [10.0, 11.0, 12.0, 10.5]
    for metric in DRAIN_CUT_METRICS:
        slo = SLO.parse(f"{metric}<=1000")
        assert judge(slo, values, confidence=0.95).verdict == "meets"
        cut = judge(slo, values, confidence=0.95, timed_out=[False, True, False, False])
        assert cut.verdict == "fails" and cut.drain_timed_out == 1
        assert cut.note.startswith("the drain timed out in 1 of 4 runs")
        assert cut.bound == judge(slo, values, confidence=0.95).bound  # still shown
        lower = judge(SLO.parse(f"{metric}>=0"), values, confidence=0.95, timed_out=[True] * 4)
        assert lower.verdict == "fails"  # never a "meets", from either side
    assert {"latency_p95_s", "wait_mean_s", "latency_mean_s"} <= set(DRAIN_CUT_METRICS)
    assert not {"memory_peak_bytes", "unfinished_fraction"} & set(DRAIN_CUT_METRICS)
    # Other metrics, and runs that all drained, are judged as before.
    memory = SLO.parse("memory_peak_bytes<=1000")
    assert judge(memory, values, confidence=0.95, timed_out=[True] * 4).verdict == "meets"
    latency = SLO.parse("latency_p95_s<=1000")
    same = judge(latency, values, confidence=0.95, timed_out=[False] * 4)
    assert same == judge(latency, values, confidence=0.95)
    # Agreeing runs (exact basis) and runs without a value keep the drain's note too.
    agreed = judge(latency, [5.0, 5.0], confidence=0.95, timed_out=np.array([True, False]))
    assert agreed.verdict == "fails" and "agreed exactly" in agreed.note
    empty = judge(latency, [math.nan, 5.0], confidence=0.95, timed_out=[True, True])
    assert empty.verdict == "fails" and empty.drain_timed_out == 2
    with pytest.raises(ValueError, match=r"^timed_out must have one flag per value \(4\), got 3$"):
        judge(latency, values, confidence=0.95, timed_out=[True] * 3)


def test_the_plan_command_prints_one_warning_line_and_the_counts(tmp_path):
    # Light load (theory runs it), but the last of 3 items of 40 s is always cut by the
    # 30 s drain: the others' 40 s latencies would meet the SLO, and no run shows it met.
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "plan", "--arrivals", "poisson:rate=0.01",
         "--service", "constant:value=40", "--items", "3", "--seed", "4",
         "--search", "concurrency=1..2", "--slo", "latency_p95_s<=100",
         "--replications", "4", "--processes", "1", "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # infeasible: no configuration meets the SLO
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and warned[0].startswith("pipeline: warning: the drain timed out")
    assert "in 8 of 8 plan runs" in warned[0] and "as failing every latency" in warned[0]
    payload = json.loads(done.stdout)
    assert payload["status"] == "infeasible" and payload["chosen"] is None
    assert payload["runs_drain_timed_out"] == 8
    assert [c["drain_timed_out"] for c in payload["candidates"]] == [4, 4]
    assert all(c["latency_p95_s_mean"] < 100 for c in payload["candidates"])


def test_the_plans_drain_line_names_the_setting_in_the_readers_words(tmp_path):
    # The same cut plan, printed: the command line names its flag, Python its keyword.
    args = ["--arrivals", "poisson:rate=0.01", "--service", "constant:value=40", "--items", "3",
            "--seed", "4", "--search", "concurrency=1..2", "--slo", "latency_p95_s<=100",
            "--replications", "4", "--processes", "1"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "plan", *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if "the drain timed out (" in line]
    assert "(--drain-timeout 30" in line and "--drain-timeout none lets every" in line
    assert "drain_timeout_s" not in line
    scenario = Scenario(
        arrivals=Poisson(rate=0.01), service=Constant(value=40.0), n_items=3, seed=4,
        config=PipelineConfig(drain_timeout_s=30.0),
    )  # fmt: skip
    with pytest.warns(DrainTimeoutWarning):
        result = plan(
            scenario, {"concurrency": [1, 2]}, ["latency_p95_s<=100"], replications=4,
            processes=1, progress=False,
        )  # fmt: skip
    (line,) = [line for line in str(result).splitlines() if "the drain timed out (" in line]
    assert "(drain_timeout_s=30.0)" in line and "drain_timeout_s=None lets every" in line
