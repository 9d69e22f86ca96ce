"""The detectors behind :func:`~pipeline.sim.diagnose`, one function per finding code.

Each check takes the run's :class:`~pipeline.sim.analysis.diagnostics.facts.Facts` and returns a
:class:`~pipeline.sim.analysis.diagnostics.diagnose.Finding` or None: what went wrong, the
evidence (numbers with units), why, and a fix computed from the run. The
thresholds that decide severity live in :mod:`pipeline.sim.analysis.diagnostics.diagnose`, next
to the codes. :data:`CHECKS` lists the checks in :data:`~.diagnose.CODES`
order.

One concept: a registry of the detectors of the pipeline's failure modes,
each reading the same :class:`Facts` and worded the same way
(:mod:`.wording`), so that a reader comparing two findings' thresholds and
wording finds them side by side. The study's own shortfall, a run too short
for the precision asked (RUN_TOO_SHORT), is :mod:`.precision`. A new finding
code adds one function and one line to :data:`CHECKS`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ...._spelling import setting_name, setting_value
from ...._units import human_bytes
from ...._units import percent_text as _pct
from ...stats.intervals import proportion_ci
from ...stats.stepstats import weighted_sum
from ...workloads.traces.service import ServiceTrace
from .facts import Facts, error_counts, independent_p, lag_growth, service_spread
from .findings import (
    AMP_INFO,
    AMP_WARN,
    BLOCKED_CRITICAL,
    BLOCKED_WARN,
    CODES,
    DEAD_WARN,
    LEASE_CRITICAL,
    LEASE_RATIO,
    LEASE_Z,
    LOAD_CRITICAL,
    RANK,
    SHED_CRITICAL,
    SHED_WARN,
    Finding,
    Severity,
)
from .precision import run_too_short
from .wording import count_text as _n
from .wording import nice_up as _nice_up
from .wording import seconds_text as _s
from .wording import top_names as _top

__all__ = ["CHECKS", "run_checks"]


# -- the checks -----------------------------------------------------------------------------


def _lost_task(f: Facts) -> Finding | None:
    report, outcome = f.report, np.asarray(f.columns.outcome)
    counts = np.bincount(outcome.astype(np.int64), minlength=5)
    problems = []
    if not report.balanced:
        accounted = report.completed + len(report.dead_letters) + len(report.unfinished)
        problems.append(
            f"the report does not balance: offered {_n(report.offered)} != completed "
            f"{_n(report.completed)} + dead-lettered {_n(len(report.dead_letters))} + "
            f"unfinished {_n(len(report.unfinished))} + shed {_n(len(report.shed))} "
            f"(admitted {_n(report.admitted)}, accounted {_n(accounted)})"
        )
    expected = {
        "completed": report.completed,
        "dead_lettered": len(report.dead_letters),
        "shed": len(report.shed),
        "unfinished": len(report.unfinished),
    }
    for code, (name, want) in enumerate(expected.items()):
        if int(counts[code]) != want:
            problems.append(f"{_n(counts[code])} items recorded {name}, the report says {_n(want)}")
    offered_items = int(len(outcome) - counts[4])
    if offered_items != report.offered:
        problems.append(
            f"{_n(offered_items)} items have an outcome but the report says "
            f"{_n(report.offered)} were offered"
        )
    if not problems:
        return None
    missing = report.offered - (
        report.completed + len(report.dead_letters) + len(report.unfinished) + len(report.shed)
    )
    return Finding(
        code="LOST_TASK",
        severity="critical",
        title="Items are unaccounted for",
        evidence="; ".join(problems) + ".",
        explanation=(
            "Every offered item must end as exactly one of completed, dead-lettered, "
            "unfinished (handed back by the drain) or shed. Here the books do not add up, "
            "so some item was dropped or counted twice. No setting causes this: it is a bug "
            "in the engine or in code wrapped around it, and the run's numbers cannot be trusted."
        ),
        fix=(
            "Report it with the scenario and seed that reproduce it "
            f"(seed={f.scenario.seed}); check custom handlers, listeners and sources for "
            "swallowed CancelledError or items dropped outside the pipeline."
        ),
        numbers={"offered": report.offered, "missing": missing, "problems": len(problems)},
    )


def _consumer_lag(f: Facts) -> Finding | None:
    if not (f.attempts and math.isfinite(f.load)):
        return None
    slope, growth = lag_growth(f)
    second_half = int(np.count_nonzero(f.columns.arrival_s >= f.last_arrival_s / 2))
    trending = slope > 0 and growth > max(10.0, 2.0 * f.concurrency, 0.05 * second_half)
    if f.rho < 1.0 and not trending:
        return None
    severity: Severity = "critical" if f.rho >= LOAD_CRITICAL else "warning"
    need, comfortable = f.required_concurrency(), f.comfortable_concurrency()
    amp = f.attempts_per_item
    evidence = (
        f"Items arrived at {f.arrival_rate:.3g}/s; each needed {amp:.3g} attempt(s) of "
        f"{_s(f.mean_attempt_s)} on average, i.e. {f.load:.3g} busy workers, but there are "
        f"{f.concurrency} (demanded utilisation {_pct(f.rho)}). Over the second half of the "
        f"arrivals the backlog (arrived, not finished) grew by {growth:,.0f} items "
        f"({slope:.3g} items/s)."
    )
    if f.config.queue_maxsize is None:
        evidence += (
            f" With the unbounded queue, memory peaked at "
            f"{human_bytes(f.result.summary['memory_peak_bytes'])}."
        )
    explanation = (
        "When work arrives faster than the workers can finish it, no queue size helps: the "
        "backlog grows for as long as the traffic lasts, and so does every item's wait. A "
        "bounded queue with on_full='block' moves the backlog upstream (producers wait); an "
        "unbounded queue holds it in memory until the process runs out."
    )
    if amp > 1.05:
        explanation += f" Retries add to it: each item costs {amp:.3g} attempts, not one."
    fix = (
        f"Raise concurrency from {f.concurrency} to at least {need} (= ceil({f.load:.3g}) + 1), "
        f"about {comfortable} for ~80% utilisation, if the downstream can take it; otherwise "
        f"make attempts cheaper, reduce failures, or shed load (on_full='reject')."
    )
    return Finding(
        code="CONSUMER_LAG",
        severity=severity,
        title="Work arrives faster than the workers finish it",
        evidence=evidence,
        explanation=explanation,
        fix=fix,
        numbers={
            "arrival_rate_per_s": f.arrival_rate,
            "mean_attempt_s": f.mean_attempt_s,
            "attempts_per_item": amp,
            "offered_load_workers": f.load,
            "demanded_utilisation": f.rho,
            "lag_slope_items_per_s": slope,
            "lag_growth_items": growth,
            "required_concurrency": need,
        },
    )


def _maxsize_for(f: Facts, target: float) -> int | None:
    """Smallest queue_maxsize whose M/M/c/K blocking estimate is <= ``target``."""
    from ..theory import mmck

    if not (f.rho < 1.0 and f.arrival_rate > 0 and f.mean_attempt_s > 0):
        return None
    work_s = f.attempts_per_item * f.mean_attempt_s
    c = f.concurrency

    def blocking(size: int) -> float:
        return mmck(f.arrival_rate, work_s, c, size + c).blocking_probability

    high = max(f.config.queue_maxsize or 1, 1)
    while blocking(high) > target:
        high *= 2
        if high > 10_000_000:
            return None
    low = 1
    while low < high:
        mid = (low + high) // 2
        if blocking(mid) > target:
            low = mid + 1
        else:
            high = mid
    return high


def _queue_saturated(f: Facts) -> Finding | None:
    config, report = f.config, f.report
    if config.on_full == "reject":
        if not report.offered:
            return None
        share = len(report.shed) / report.offered
        if share < SHED_WARN:
            return None
        severity: Severity = "critical" if share >= SHED_CRITICAL else "warning"
        evidence = (
            f"{_n(len(report.shed))} of {_n(report.offered)} offered items were shed "
            f"({_pct(share)}): they found the queue full ({config.queue_maxsize} items) "
            f"with all {f.concurrency} workers busy."
        )
        explanation = (
            "With on_full='reject' an item that finds the queue full is turned away at once. "
            "That protects latency and memory, but every shed item is work the caller must "
            "retry later or lose."
        )
        numbers: dict[str, Any] = {"shed_share": share, "shed": len(report.shed)}
    else:
        if config.queue_maxsize is None:
            return None
        start, end = f.first_arrival_s, f.intake_end_s
        span = end - start
        blocked = float(report.statistics.producer_blocked_s)
        blocked_share = blocked / span if span > 0 else 0.0
        s = f.series
        full = (s.queue_depth + s.retry_waiting) >= config.queue_maxsize
        full_share = f.share_of_time(full, start, end)
        share = max(blocked_share, full_share)
        if share < BLOCKED_WARN:
            return None
        severity = "critical" if share >= BLOCKED_CRITICAL else "warning"
        evidence = (
            f"The queue ({config.queue_maxsize} items) was full {_pct(full_share)} of the "
            f"intake period ({_s(span)}); producers were blocked for {_s(blocked)} "
            f"({_pct(blocked_share)}), and up to {_n(f.result.summary['upstream_backlog_max'])} "
            f"items waited upstream."
        )
        explanation = (
            "With on_full='block' a full queue makes producers wait: backpressure. That is the "
            "queue doing its job, but the waiting has moved upstream, not gone away -- callers, "
            "sockets or the source now hold the backlog, and their own timeouts may fire."
        )
        numbers = {
            "full_share": full_share,
            "producer_blocked_share": blocked_share,
            "producer_blocked_s": blocked,
        }
    numbers["demanded_utilisation"] = f.rho
    if f.rho >= 1.0:
        fix = (
            f"The queue is not the problem, capacity is (demanded utilisation {_pct(f.rho)}): "
            f"raise concurrency from {f.concurrency} to at least {f.required_concurrency()}. "
            "A bigger queue would only take longer to fill."
        )
    else:
        size = _maxsize_for(f, 0.01)
        if size is not None and size > (config.queue_maxsize or 0):
            fix = (
                f"The workers keep up on average ({_pct(f.rho)} busy) but bursts overflow the "
                f"queue: raise queue_maxsize from {config.queue_maxsize} to about {size} "
                f"(M/M/c/K estimate for under 1% of arrivals finding it full; memory then up to "
                f"about {human_bytes(size * f.scenario.item_size_bytes)} at "
                f"{f.scenario.item_size_bytes} bytes/item), or add workers to cut the waits."
            )
            numbers["suggested_queue_maxsize"] = size
        else:
            fix = (
                f"Add workers (concurrency {f.concurrency} -> {f.comfortable_concurrency() + 1}) "
                "or smooth the bursts at the source; the queue size already matches the "
                "average load."
            )
    return Finding(
        code="QUEUE_SATURATED",
        severity=severity,
        title=(
            "Many items were shed at a full queue"
            if config.on_full == "reject"
            else "The queue was full and producers blocked"
        ),
        evidence=evidence,
        explanation=explanation,
        fix=fix,
        numbers=numbers,
    )


def _lease_expired(f: Facts) -> Finding | None:
    if not f.attempts or f.scenario.downstream is not None:
        # Behind a downstream an attempt also waits in its queue: long attempts are its
        # queueing (and timeouts its clients' cuts), not code blocking the loop.
        return None
    mean, std, p999 = service_spread(f.scenario)

    service = f.scenario.service
    if isinstance(service, ServiceTrace):
        times = np.asarray(service.times_s)[: len(f.columns.attempts)]
        expected = weighted_sum(f.columns.attempts[: len(times)], times)
        noise = 1e-9 * max(expected, 1.0)
    else:
        expected = f.attempts * mean
        noise = math.sqrt(f.attempts) * std + 1e-9 * max(expected, 1.0)
    excess = f.busy_s - expected
    ratio = f.busy_s / expected if expected > 0 else math.inf
    z = excess / noise
    errors = error_counts(f)
    timeouts = errors.get("TimeoutError", 0)
    hangs = errors.get("SimulatedHang", 0)
    slow = ratio >= LEASE_RATIO and z >= LEASE_Z
    if not (slow or timeouts):
        return None
    severity: Severity = "critical" if ratio >= LEASE_CRITICAL else "warning"
    timeout = f.config.attempt_timeout_s
    capacity_share = excess / (f.concurrency * f.end_s) if f.end_s > 0 else 0.0
    evidence = (
        f"Attempts held a worker {_s(f.mean_attempt_s)} on average, {ratio:.3g}x the "
        f"{_s(expected / f.attempts)} the service times account for: "
        f"{_s(max(excess, 0.0))} of worker time ({_pct(max(capacity_share, 0.0))} of "
        f"capacity) went to waiting."
    )
    recorded = [
        f"{_n(k)} {what}" for k, what in ((timeouts, "attempt timeouts"), (hangs, "hangs")) if k
    ]
    if recorded:
        evidence += f" Dead letters record {' and '.join(recorded)}."

    if f.config.rate_limit is not None:
        evidence += " (Time waiting on the rate limit counts as held, too.)"
    explanation = (
        "Each attempt has an expected window, about its service time. Attempts that run far "
        "longer keep their worker from everything else: a hung dependency, a missing "
        "timeout, or synchronous (blocking) code called on the event loop, which stalls every "
        "task at once. The pool's real capacity drops by the share of time they waste."
    )
    suggestion = _nice_up(1.5 * p999)
    if timeout is None:
        fix = (
            f"Set attempt_timeout_s to about {_s(suggestion)} (1.5x the 99.9th percentile "
            f"service time, {_s(p999)}), so a stuck attempt frees its worker and is retried; "
            "and run blocking calls in a thread (a plain-function handler does)."
        )
    elif timeout > 2 * suggestion:
        fix = (
            f"Lower attempt_timeout_s from {_s(timeout)} to about {_s(suggestion)} (1.5x the "
            f"99.9th percentile service time, {_s(p999)}): each stuck attempt then wastes "
            f"{_s(suggestion)} instead of {_s(timeout)}."
        )
    else:
        fix = (
            f"attempt_timeout_s ({_s(timeout)}) already caps each stuck attempt; find the "
            "dependency that hangs (the dead letters' errors name it), or add workers to "
            f"make up the lost capacity (concurrency -> {f.comfortable_concurrency()})."
        )
    return Finding(
        code="LEASE_EXPIRED",
        severity=severity,
        title="Attempts take far longer than their work",
        evidence=evidence,
        explanation=explanation,
        fix=fix,
        numbers={
            "mean_attempt_s": f.mean_attempt_s,
            "expected_attempt_s": expected / f.attempts,
            "ratio": ratio,
            "wasted_worker_s": excess,
            "timeouts_in_dead_letters": timeouts,
            "suggested_attempt_timeout_s": suggestion,
        },
    )


def _drain_timeout(f: Facts) -> Finding | None:
    report = f.report
    if not report.drain_timed_out:
        return None
    c, s = f.columns, f.series
    left = len(report.unfinished)
    unfinished = c.outcome == 3
    oldest = float(f.end_s - c.arrival_s[unfinished].min()) if unfinished.any() else 0.0
    before = max(int(np.searchsorted(s.time_s, f.end_s, side="left")) - 1, 0)
    queued, running, waiting = (
        int(s.queue_depth[before]),
        int(s.in_flight[before]),
        int(s.retry_waiting[before]),
    )
    per_item = (f.attempts_per_item if math.isfinite(f.attempts_per_item) else 1.0) * (
        f.mean_attempt_s if math.isfinite(f.mean_attempt_s) else 0.0
    )
    clear_s = left * per_item / f.concurrency
    drain_s = f.config.drain_timeout_s or 0.0
    suggestion = _nice_up(drain_s + clear_s)
    timeout = setting_name("drain_timeout_s")  # --drain-timeout on the command line
    fix = (
        f"Re-queue the {_n(left)} unfinished item(s) (report.unfinished) -- they are handed back, "
        f"not lost. To let the drain finish (and count every item in the statistics, "
        f"{setting_value('drain_timeout_s', None)} in a simulation), raise {timeout} from "
        f"{_s(drain_s)} to at least {_s(suggestion)} (the left work is about {_s(clear_s)} "
        f"for {f.concurrency} workers)"
    )
    fix += (
        f", or first fix the capacity shortfall (concurrency -> {f.required_concurrency()})."
        if f.rho >= 1.0
        else "."
    )
    return Finding(
        code="DRAIN_TIMEOUT",
        severity="warning",
        title="The drain timed out with work left",
        evidence=(
            f"The drain stopped after {_s(drain_s)} ({setting_value('drain_timeout_s', drain_s)}) "
            f"with {_n(left)} item(s) left "
            f"({queued} queued, {running} running, {waiting} waiting for a retry); the oldest "
            f"had arrived {_s(oldest)} before the end."
        ),
        explanation=(
            f"At shutdown the pipeline stops intake and waits, at most {timeout}, for "
            "queued, running and retry-waiting items. Whatever is left is cancelled and handed "
            "back as unfinished: not lost, but not done either, and a caller that ignores "
            "report.unfinished drops it. In a simulation those items have no finish time, so "
            "the latency statistics leave them out: the slowest tail is missing."
        ),
        fix=fix,
        numbers={
            "unfinished": left,
            "queued": queued,
            "running": running,
            "retry_waiting": waiting,
            "oldest_age_s": oldest,
            "suggested_drain_timeout_s": suggestion,
        },
    )


def _dead_letters(f: Facts) -> Finding | None:
    letters = f.report.dead_letters
    if not letters or not f.admitted:
        return None
    share = len(letters) / f.admitted
    severity: Severity = "warning" if share >= DEAD_WARN else "info"
    reasons = Counter(letter.reason for letter in letters)
    last_errors = Counter(letter.errors[-1].type for letter in letters if letter.errors)
    top = _top(last_errors)
    k = f.config.max_attempts
    p_hat = f.failed_attempts / f.attempts if f.attempts else math.nan
    evidence = (
        f"{_n(len(letters))} of {_n(f.admitted)} admitted items were dead-lettered "
        f"({_pct(share)}): {_n(reasons.get('max_attempts', 0))} used all {k} attempts, "
        f"{_n(reasons.get('not_retryable', 0))} failed permanently. Final errors: {top}. "
        f"{_pct(p_hat)} of all attempts failed."
    )
    numbers: dict[str, Any] = {
        "dead_lettered": len(letters),
        "share": share,
        "attempt_failure_share": p_hat,
        "max_attempts": k,
    }
    p = independent_p(f.scenario)
    if p is not None:
        theory = p**k
        interval = proportion_ci(len(letters), f.admitted)
        agrees = "inside" if interval.contains(theory) else "OUTSIDE"
        evidence += (
            f" Theory for independent failures (p={p:g}, k={k}): p**k = {_pct(theory)}, "
            f"{agrees} this run's 95% interval [{_pct(interval.low)}, {_pct(interval.high)}]."
        )
        numbers["theory_share"] = theory
    explanation = (
        "An item is dead-lettered when it fails max_attempts times, or fails with an error "
        "the retry policy does not retry. With independent failures of probability p and k "
        "attempts that happens to a share p**k of items; permanent errors are dead-lettered "
        "at once, since retrying cannot help."
    )
    if reasons.get("not_retryable", 0) >= reasons.get("max_attempts", 0):
        fix = (
            "These items fail permanently: inspect them (export_jsonl(report.dead_letters, "
            "path)), fix the data or the handler, then replay them; more attempts will not help."
        )
    elif p_hat**k <= 0.001:
        fix = (
            f"The share matches {_pct(p_hat)} of attempts failing with {k} attempts (p**k); "
            "inspect the dead letters (export_jsonl(report.dead_letters, path)) and replay "
            "them once the cause is fixed."
        )
    elif 0 < p_hat < 0.5:
        need = min(max(math.ceil(math.log(0.001) / math.log(p_hat)), k + 1), 20)
        fix = (
            f"With {_pct(p_hat)} of attempts failing, {setting_value('max_attempts', need)} "
            "would bring the "
            f"dead-letter share under 0.1% (p**k), at the cost of more retries; replay the "
            "current dead letters once the cause is fixed."
        )
        numbers["suggested_max_attempts"] = need
    else:
        fix = (
            f"{_pct(p_hat)} of attempts fail: retries cannot fix a dependency that is mostly "
            "down. Fix or isolate it (a circuit breaker), then replay the dead letters."
        )
    return Finding(
        code="DEAD_LETTERS",
        severity=severity,
        title="Items were dead-lettered",
        evidence=evidence,
        explanation=explanation,
        fix=fix,
        numbers=numbers,
    )


def _retry_amplification(f: Facts) -> Finding | None:
    amp = f.attempts_per_item
    if not (math.isfinite(amp) and amp >= AMP_INFO):
        return None
    severity: Severity = "warning" if amp >= AMP_WARN else "info"
    rate = f.arrival_rate
    errors = error_counts(f)
    evidence = (
        f"{_n(f.attempts)} attempts for {_n(f.started)} started items: {amp:.3g} per item, "
        f"so the downstream saw about {rate * amp:.3g} requests/s for {rate:.3g} arriving/s."
    )
    if errors:
        top = _top(errors)
        evidence += f" Errors recorded on dead letters: {top}."
    fix = (
        "Find why attempts fail before adding retries. If the downstream refuses under load "
        "(429, RateLimited), retries make it worse: add a rate_limit or fewer workers, and use "
        "exponential backoff with jitter so failed items do not return together"
    )
    if not f.config.backoff.jitter:
        fix += " (jitter is off now)"
    fix += f"; consider a lower max_attempts (now {f.config.max_attempts})."
    return Finding(
        code="HIGH_RETRY_AMPLIFICATION",
        severity=severity,
        title="Retries multiply the load",
        evidence=evidence,
        explanation=(
            "Every retry is another request to the downstream and another slot of worker time. "
            "When failures come from overload, retries add load exactly when there is least "
            "room for it, and a brief slowdown can tip into a retry storm."
        ),
        fix=fix,
        numbers={"attempts_per_item": amp, "downstream_rate_per_s": rate * amp},
    )


#: Every check, in CODES order (``diagnose`` sorts by severity, then by code).
CHECKS = (
    _lost_task,
    _consumer_lag,
    _queue_saturated,
    _lease_expired,
    _drain_timeout,
    _dead_letters,
    _retry_amplification,
    run_too_short,
)


def run_checks(result: Any, precision: float | None) -> list[Finding]:
    """Every check of :data:`CHECKS` on one single-stage run, most severe first.

    ``precision`` is already validated (a share of the mean, or None to skip
    the run-length check); :func:`~pipeline.sim.diagnose` and a chain's
    per-stage diagnosis both come here.
    """
    facts = Facts(result, precision)
    findings = [finding for check in CHECKS if (finding := check(facts)) is not None]
    return sorted(findings, key=lambda x: (RANK[x.severity], CODES.index(x.code)))
