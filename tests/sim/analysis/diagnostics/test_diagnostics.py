"""Diagnostics: each finding is triggered by a run built to cause it, and only then."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from pipeline import PipelineConfig
from pipeline.sim import (
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    PermanentFailures,
    Poisson,
    Scenario,
    simulate,
)
from pipeline.sim.analysis.diagnostics.diagnose import (
    CODES,
    Finding,
    diagnose,
    findings_frame,
    format_findings,
)
from pipeline.sim.running.result import SimulationResult
from pipeline.sim.running.summary import BATCH_MEANS_MIN_ITEMS
from pipeline.sim.stats.runlength import scaled_run_length
from pipeline.sim.workloads.failures import Hangs

WARNINGS = {"warning", "critical"}


def run(rate=3.2, n_items=4000, failures=None, expect_drain_timeout=False, **config):
    """Simulate; ``expect_drain_timeout=True``: the drain times out (and warns) on purpose."""
    config.setdefault("concurrency", 4)
    scenario = Scenario(
        arrivals=Poisson(rate=rate),
        service=Exponential(mean=1.0),
        config=PipelineConfig(**config),
        n_items=n_items,
        seed=7,
        **({"failures": failures} if failures is not None else {}),
    )
    if not expect_drain_timeout:
        return simulate(scenario)
    with pytest.warns(DrainTimeoutWarning, match=r"item\(s\) were left unfinished"):
        return simulate(scenario)


def by_code(findings):
    return {f.code: f for f in findings}


@pytest.fixture(scope="module")
def healthy():
    # Long enough that the mean latency is known to +-10% (no RUN_TOO_SHORT).
    return run(n_items=100_000)


@pytest.fixture(scope="module")
def overloaded():
    return run(rate=5.0)


def test_healthy_run_has_no_warnings(healthy):
    findings = diagnose(healthy)
    assert [f for f in findings if f.severity in WARNINGS] == []
    assert findings == []
    assert format_findings(findings) == "No problems found."


def test_overload_shows_lag_and_saturation(overloaded):
    found = by_code(diagnose(overloaded))
    lag, full = found["CONSUMER_LAG"], found["QUEUE_SATURATED"]
    assert lag.severity == "critical" and full.severity == "critical"
    # offered load is 5 workers (5/s x 1 s); the fix asks for ceil(load) + 1 of them
    load = lag.numbers["offered_load_workers"]
    assert 4.5 < load < 5.5
    assert lag.numbers["required_concurrency"] == math.ceil(load) + 1
    assert f"at least {math.ceil(load) + 1}" in lag.fix
    assert lag.numbers["lag_growth_items"] > 100
    assert full.numbers["producer_blocked_share"] > 0.5
    assert "raise concurrency" in full.fix
    # most severe first, in CODES order among equals
    codes = [f.code for f in diagnose(overloaded)]
    assert codes[:2] == ["CONSUMER_LAG", "QUEUE_SATURATED"]


def test_unbounded_overload_mentions_memory():
    found = by_code(
        diagnose(run(rate=5.0, queue_maxsize=None, n_items=3000, expect_drain_timeout=True))
    )
    assert "memory peaked" in found["CONSUMER_LAG"].evidence
    assert "QUEUE_SATURATED" not in found


def test_shedding_is_saturation_with_a_queue_size_fix():
    found = by_code(diagnose(run(queue_maxsize=2, on_full="reject")))
    full = found["QUEUE_SATURATED"]
    assert full.numbers["shed_share"] > 0.05
    size = full.numbers["suggested_queue_maxsize"]
    assert size > 2 and f"about {size}" in full.fix
    assert "CONSUMER_LAG" not in found


def test_hangs_cut_by_a_timeout_are_lease_expired():
    result = run(
        concurrency=8,
        failures=Hangs(p=0.2, hang_s=30.0),
        attempt_timeout_s=5.0,
        max_attempts=2,
    )
    found = by_code(diagnose(result))
    lease = found["LEASE_EXPIRED"]
    assert lease.severity in WARNINGS
    assert lease.numbers["timeouts_in_dead_letters"] > 0
    # about 0.8 x 1 s + 0.2 x 5 s = 1.8 s per attempt against 1 s of work
    assert 1.5 < lease.numbers["ratio"] < 2.1
    assert "TimeoutError" in found["DEAD_LETTERS"].evidence


def test_hangs_without_a_timeout_suggest_one():
    found = by_code(
        diagnose(
            run(
                rate=1.0,
                concurrency=8,
                failures=Hangs(p=0.05, hang_s=60.0),
                expect_drain_timeout=True,
            )
        )
    )
    lease = found["LEASE_EXPIRED"]
    assert "Set attempt_timeout_s" in lease.fix
    assert lease.numbers["suggested_attempt_timeout_s"] < 60


def test_drain_timeout_reports_what_was_left():
    result = run(rate=6.0, n_items=3000, drain_timeout_s=5.0, expect_drain_timeout=True)
    assert result.report.drain_timed_out
    drain = by_code(diagnose(result))["DRAIN_TIMEOUT"]
    left = len(result.report.unfinished)
    assert drain.numbers["unfinished"] == left > 0
    assert (
        drain.numbers["queued"] + drain.numbers["running"] + drain.numbers["retry_waiting"] == left
    )
    assert drain.numbers["oldest_age_s"] > 5.0
    assert drain.numbers["suggested_drain_timeout_s"] > 5.0
    assert f"{left} item(s) left" in drain.evidence


def test_dead_letters_compare_with_theory():
    found = by_code(diagnose(run(concurrency=8, failures=IndependentFailures(0.3))))
    dead = found["DEAD_LETTERS"]
    assert dead.severity == "warning"
    assert dead.numbers["theory_share"] == pytest.approx(0.3**3)
    assert "inside this run's 95% interval" in dead.evidence
    assert dead.numbers["suggested_max_attempts"] > 3
    amp = found["HIGH_RETRY_AMPLIFICATION"]
    assert amp.numbers["attempts_per_item"] == pytest.approx(1 + 0.3 + 0.09, rel=0.05)


def test_permanent_failures_are_not_fixed_by_retries():
    dead = by_code(diagnose(run(failures=PermanentFailures(0.05))))["DEAD_LETTERS"]
    assert "more attempts will not help" in dead.fix


def test_heavy_retries_are_amplification():
    found = by_code(diagnose(run(concurrency=12, failures=IndependentFailures(0.5))))
    assert found["HIGH_RETRY_AMPLIFICATION"].severity == "warning"


def test_lost_task_on_an_inconsistent_result(healthy):
    broken_report = dataclasses.replace(healthy.report, completed=healthy.report.completed - 1)
    broken = SimulationResult(
        healthy.scenario, broken_report, healthy.columns, healthy.series, healthy.wall_time_s
    )
    lost = by_code(diagnose(broken))["LOST_TASK"]
    assert lost.severity == "critical"
    assert lost.numbers["missing"] == 1
    assert "does not balance" in lost.evidence
    assert diagnose(broken)[0].code == "LOST_TASK"


def test_lost_task_when_items_disagree_with_the_report(healthy):
    outcome = healthy.columns.outcome.copy()
    outcome[0] = 1  # one completed item recorded as dead-lettered
    columns = dataclasses.replace(healthy.columns, outcome=outcome)
    broken = SimulationResult(
        healthy.scenario, healthy.report, columns, healthy.series, healthy.wall_time_s
    )
    lost = by_code(diagnose(broken))["LOST_TASK"]
    assert "recorded dead_lettered" in lost.evidence


def test_formatting_and_frame(overloaded):
    findings = diagnose(overloaded)
    text = format_findings(findings)
    assert text.startswith("[CRITICAL] CONSUMER_LAG")
    for word in ("evidence:", "why:", "fix:"):
        assert word in text
    frame = findings_frame(findings)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == [
        "code",
        "severity",
        "title",
        "evidence",
        "explanation",
        "fix",
        "numbers",
    ]
    assert frame["code"].tolist() == [f.code for f in findings]
    assert findings_frame([]).empty
    assert set(frame["code"]) <= set(CODES)


def test_finding_is_frozen_and_validated():
    finding = Finding("X", "info", "t", "e", "x", "f", {"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.code = "Y"  # type: ignore[misc]
    with pytest.raises(ValueError, match="severity must be"):
        Finding("X", "fatal", "t", "e", "x", "f")  # type: ignore[arg-type]


def test_drain_timeout_says_the_tail_is_missing_from_the_statistics():
    result = run(rate=6.0, n_items=3000, drain_timeout_s=5.0, expect_drain_timeout=True)
    drain = by_code(diagnose(result))["DRAIN_TIMEOUT"]
    assert "latency statistics leave them out" in drain.explanation
    assert "drain_timeout_s=None" in drain.fix


def test_a_run_too_short_for_batch_means_is_told_so():
    short = run(n_items=4000)  # below BATCH_MEANS_MIN_ITEMS: no half-width to judge
    too_short = by_code(diagnose(short))["RUN_TOO_SHORT"]
    assert math.isnan(short.summary["latency_mean_ci95_s"])
    assert too_short.numbers["suggested_items"] == BATCH_MEANS_MIN_ITEMS
    assert "Run at least 10,000 items" in too_short.fix
    assert "RUN_TOO_SHORT" not in by_code(diagnose(short, precision=None))


def test_a_short_run_is_told_how_many_items_would_do():
    short = run(n_items=12_000)  # M/M/4 at 80%: the mean latency is known to about +-15%
    found = by_code(diagnose(short))
    too_short = found["RUN_TOO_SHORT"]
    assert too_short.severity == "info"
    relative = too_short.numbers["relative_half_width"]
    assert relative > 0.10
    # n ~ n0 (h0 / h)**2 with h = 10% of the mean
    expected = scaled_run_length(too_short.numbers["items_counted"], relative, 0.10)
    assert too_short.numbers["suggested_items"] == expected
    assert f"about {expected:,} items" in too_short.fix
    # Asked for less precision, the same run is precise enough; None skips the check.
    assert "RUN_TOO_SHORT" not in by_code(diagnose(short, precision=2 * relative))
    assert "RUN_TOO_SHORT" not in by_code(diagnose(short, precision=None))


@pytest.mark.parametrize("precision", [0, -0.1, float("nan"), float("inf"), "10%"])
def test_a_bad_precision_is_named(healthy, precision):
    with pytest.raises((ValueError, TypeError), match="precision"):
        diagnose(healthy, precision=precision)


def test_the_fixes_name_the_python_keywords_from_python():
    # The command line's diagnosis names its flags (tests/cli/test_cli.py); from Python the
    # same fixes name the keywords a caller sets.
    result = run(rate=4.4, n_items=500, failures=IndependentFailures(0.2), max_attempts=1,
                 drain_timeout_s=1.0, expect_drain_timeout=True)  # fmt: skip
    text = format_findings(diagnose(result))
    for said in ("(replications=R)", "max_attempts=", "drain_timeout_s=None", "at most "
                 "drain_timeout_s,"):  # fmt: skip
        assert said in text, said
    assert "--" not in text.replace(" -- ", " ")
