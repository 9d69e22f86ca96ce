"""Diagnostics: check a simulated run for the classic failure modes and explain each.

:func:`diagnose` looks at one :class:`~pipeline.sim.SimulationResult` and
returns a list of :class:`Finding` -- what went wrong, the evidence from this
run (numbers with units), why it happens in plain language, and a concrete
fix computed from the run. A healthy run gives an empty list (or only
``"info"`` findings).

Codes (most severe first in the returned list):

- ``LOST_TASK`` -- an item unaccounted for; must never happen (critical).
- ``CONSUMER_LAG`` -- work arrives faster than the workers finish it: the
  backlog trends up.
- ``QUEUE_SATURATED`` -- the queue is full / producers blocked a large share
  of the time, or (``on_full="reject"``) a large share of items is shed.
- ``LEASE_EXPIRED`` -- attempts hold their worker far longer than the work
  needs (hangs, timeouts, blocking code on the event loop).
- ``DRAIN_TIMEOUT`` -- the drain hit ``drain_timeout_s``; items were handed back.
- ``DEAD_LETTERS`` -- items that used their attempt budget or failed for good.
- ``HIGH_RETRY_AMPLIFICATION`` -- retries multiply the load on the downstream.

Example:
    >>> for finding in diagnose(simulate(scenario)):
    ...     print(finding.code, finding.evidence)
    >>> print(format_findings(result.diagnostics))
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from .simulate import SimulationResult

__all__ = ["CODES", "Finding", "diagnose", "findings_frame", "format_findings"]

Severity = Literal["info", "warning", "critical"]

CODES = (
    "LOST_TASK",
    "CONSUMER_LAG",
    "QUEUE_SATURATED",
    "LEASE_EXPIRED",
    "DRAIN_TIMEOUT",
    "DEAD_LETTERS",
    "HIGH_RETRY_AMPLIFICATION",
)
"""Every finding code, in the order findings of equal severity are listed."""

_RANK = {"critical": 0, "warning": 1, "info": 2}

# Thresholds, as shares of the run unless noted.
BLOCKED_WARN, BLOCKED_CRITICAL = 0.10, 0.50
SHED_WARN, SHED_CRITICAL = 0.01, 0.10
LOAD_CRITICAL = 1.10  # utilisation demanded, above which lag is critical
LEASE_RATIO, LEASE_CRITICAL, LEASE_Z = 1.20, 2.0, 4.0
DEAD_WARN = 0.01
AMP_INFO, AMP_WARN = 1.20, 1.50


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem of a run.

    Attributes:
        code: one of :data:`CODES`, e.g. ``"CONSUMER_LAG"``.
        severity: ``"info"``, ``"warning"`` or ``"critical"``.
        title: one line saying what is wrong.
        evidence: what this run measured, with units.
        explanation: why it happens, in plain language.
        fix: what to change, with values computed from the run.
        numbers: the measured quantities behind the text (plain floats/ints).
    """

    code: str
    severity: Severity
    title: str
    evidence: str
    explanation: str
    fix: str
    numbers: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(
                f"severity must be 'info', 'warning' or 'critical', got {self.severity!r}"
            )


# -- formatting ---------------------------------------------------------------------------


def _s(seconds: float) -> str:
    """Seconds for prose: ``0.25 s``, ``12.5 min``, ``3.1 h``."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if abs(seconds) < 120:
        return f"{seconds:.3g} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _pct(share: float) -> str:
    return f"{100 * share:.3g}%"


def _n(count: float) -> str:
    return f"{count:,.0f}" if float(count).is_integer() else f"{count:,.3g}"


def _bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.3g} {unit}" if unit != "B" else f"{size:.0f} B"
        size /= 1024
    return f"{size:.3g} TiB"  # pragma: no cover


def _nice_up(x: float) -> float:
    """Round up to two significant digits (0.0123 -> 0.013, 47.1 -> 48)."""
    if not (x > 0 and math.isfinite(x)):
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / scale - 1e-9) * scale


# -- facts shared by the checks -------------------------------------------------------------


class _Facts:
    """Derived quantities of a run, computed once."""

    def __init__(self, result: SimulationResult) -> None:
        self.result = result
        self.scenario = scenario = result.scenario
        self.config = config = scenario.config
        self.report = result.report
        self.columns = c = result.columns
        self.series = s = result.series
        self.concurrency = config.concurrency
        arrivals = np.asarray(c.arrival_s, dtype=np.float64)
        self.n_arrived = len(arrivals)
        self.first_arrival_s = float(arrivals[0]) if len(arrivals) else 0.0
        self.last_arrival_s = float(arrivals[-1]) if len(arrivals) else 0.0
        self.arrival_rate = (
            self.n_arrived / self.last_arrival_s if self.last_arrival_s > 0 else math.nan
        )
        self.end_s = float(s.end_s)
        self.busy_s = float(np.dot(s.in_flight, s.durations()))
        self.attempts = int(self.report.attempts)
        self.admitted = int(self.report.admitted)
        self.mean_attempt_s = self.busy_s / self.attempts if self.attempts else math.nan
        # Per item that started: unfinished items still queued have made no attempt yet.
        self.started = int(np.count_nonzero(np.asarray(c.attempts) > 0))
        self.attempts_per_item = self.attempts / self.started if self.started else math.nan
        # Workers needed on average to keep up: arrival rate x attempts x attempt time.
        self.load = self.arrival_rate * self.attempts_per_item * self.mean_attempt_s
        self.rho = self.load / self.concurrency
        admitted = c.admitted_s[~np.isnan(c.admitted_s)]
        self.intake_end_s = max(
            self.last_arrival_s, float(admitted.max()) if admitted.size else 0.0
        )
        self.failed_attempts = int(self.report.statistics.retried) + len(self.report.dead_letters)

    def required_concurrency(self) -> int:
        """Minimum workers that keep up: ``ceil(load) + 1``."""
        return math.ceil(self.load) + 1 if math.isfinite(self.load) else self.concurrency + 1

    def comfortable_concurrency(self) -> int:
        """Workers for about 80% utilisation."""
        return max(self.required_concurrency(), math.ceil(self.load / 0.8))

    def share_of_time(self, mask: np.ndarray, start_s: float, end_s: float) -> float:
        """Share of ``[start_s, end_s]`` during which the step function ``mask`` is true."""
        if end_s <= start_s:
            return 0.0
        t = self.series.time_s
        ends = np.append(t[1:], self.end_s)
        overlap = np.clip(np.minimum(ends, end_s) - np.maximum(t, start_s), 0.0, None)
        return float(overlap[mask].sum() / (end_s - start_s))

    def at(self, values: np.ndarray, times_s: np.ndarray) -> np.ndarray:
        """Values of a step function at the given times."""
        index = np.searchsorted(self.series.time_s, times_s, side="right") - 1
        return values[np.clip(index, 0, len(values) - 1)]


def _service_spread(scenario: Any) -> tuple[float, float, float]:
    """(mean, standard deviation, 99.9th percentile) of one attempt's service time, seconds."""
    from .scenario import ServiceTrace

    service = scenario.service
    if isinstance(service, ServiceTrace):
        times = np.asarray(service.times_s) if service.times_s else np.zeros(1)
        return float(times.mean()), float(times.std()), float(np.quantile(times, 0.999))
    sample = service.sample(np.random.default_rng(0), 20_000)
    return float(service.mean), float(service.std), float(np.quantile(sample, 0.999))


# -- the checks -----------------------------------------------------------------------------


def _lost_task(f: _Facts) -> Finding | None:
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


def _lag_growth(f: _Facts) -> tuple[float, float]:
    """(slope items/s, growth in items) of the lag over the second half of the arrivals."""
    start, end = f.last_arrival_s / 2, f.last_arrival_s
    if not end > start or len(f.series.time_s) < 2:
        return 0.0, 0.0
    grid = np.linspace(start, end, 256)
    lag = f.at(f.series.lag_items, grid).astype(np.float64)
    slope = float(np.polyfit(grid, lag, 1)[0])
    return slope, slope * (end - start)


def _consumer_lag(f: _Facts) -> Finding | None:
    if not (f.attempts and math.isfinite(f.load)):
        return None
    slope, growth = _lag_growth(f)
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
            f"{_bytes(f.result.summary['memory_peak_bytes'])}."
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


def _maxsize_for(f: _Facts, target: float) -> int | None:
    """Smallest queue_maxsize whose M/M/c/K blocking estimate is <= ``target``."""
    from .theory import mmck

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


def _queue_saturated(f: _Facts) -> Finding | None:
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
                f"about {_bytes(size * f.scenario.item_size_bytes)} at "
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


def _error_counts(f: _Facts) -> Counter[str]:
    return Counter(e.type for letter in f.report.dead_letters for e in letter.errors)


def _lease_expired(f: _Facts) -> Finding | None:
    if not f.attempts:
        return None
    mean, std, p999 = _service_spread(f.scenario)
    from .scenario import ServiceTrace

    service = f.scenario.service
    if isinstance(service, ServiceTrace):
        times = np.asarray(service.times_s)[: len(f.columns.attempts)]
        expected = float(np.dot(f.columns.attempts[: len(times)], times))
        noise = 1e-9 * max(expected, 1.0)
    else:
        expected = f.attempts * mean
        noise = math.sqrt(f.attempts) * std + 1e-9 * max(expected, 1.0)
    excess = f.busy_s - expected
    ratio = f.busy_s / expected if expected > 0 else math.inf
    z = excess / noise
    errors = _error_counts(f)
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


def _drain_timeout(f: _Facts) -> Finding | None:
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
    fix = (
        f"Re-queue the {_n(left)} unfinished item(s) (report.unfinished) -- they are handed back, "
        f"not lost. To let the drain finish, raise drain_timeout_s from {_s(drain_s)} to at "
        f"least {_s(suggestion)} (the left work is about {_s(clear_s)} for {f.concurrency} "
        "workers)"
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
            f"The drain stopped after drain_timeout_s={_s(drain_s)} with {_n(left)} item(s) left "
            f"({queued} queued, {running} running, {waiting} waiting for a retry); the oldest "
            f"had arrived {_s(oldest)} before the end."
        ),
        explanation=(
            "At shutdown the pipeline stops intake and waits, at most drain_timeout_s, for "
            "queued, running and retry-waiting items. Whatever is left is cancelled and handed "
            "back as unfinished: not lost, but not done either, and a caller that ignores "
            "report.unfinished drops it."
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


def _independent_p(scenario: Any) -> float | None:
    from .failures import IndependentFailures

    failures = scenario.failures
    return failures.p if isinstance(failures, IndependentFailures) else None


def _dead_letters(f: _Facts) -> Finding | None:
    from .stats import proportion_ci

    letters = f.report.dead_letters
    if not letters or not f.admitted:
        return None
    share = len(letters) / f.admitted
    severity: Severity = "warning" if share >= DEAD_WARN else "info"
    reasons = Counter(letter.reason for letter in letters)
    last_errors = Counter(letter.errors[-1].type for letter in letters if letter.errors)
    top = ", ".join(f"{name} x{_n(k)}" for name, k in last_errors.most_common(3))
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
    p = _independent_p(f.scenario)
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
            f"With {_pct(p_hat)} of attempts failing, max_attempts={need} would bring the "
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


def _retry_amplification(f: _Facts) -> Finding | None:
    amp = f.attempts_per_item
    if not (math.isfinite(amp) and amp >= AMP_INFO):
        return None
    severity: Severity = "warning" if amp >= AMP_WARN else "info"
    rate = f.arrival_rate
    errors = _error_counts(f)
    evidence = (
        f"{_n(f.attempts)} attempts for {_n(f.started)} started items: {amp:.3g} per item, "
        f"so the downstream saw about {rate * amp:.3g} requests/s for {rate:.3g} arriving/s."
    )
    if errors:
        top = ", ".join(f"{name} x{_n(k)}" for name, k in errors.most_common(3))
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


_CHECKS = (
    _lost_task,
    _consumer_lag,
    _queue_saturated,
    _lease_expired,
    _drain_timeout,
    _dead_letters,
    _retry_amplification,
)


def diagnose(result: SimulationResult) -> list[Finding]:
    """Check one simulated run for the classic failure modes.

    Args:
        result: a :class:`~pipeline.sim.SimulationResult` (anything with its
            ``scenario``, ``report``, ``columns``, ``series`` and ``summary``).

    Returns:
        Findings, most severe first (then in :data:`CODES` order); empty for a
        healthy run, which may also get ``"info"`` findings.

    Example:
        >>> [f.code for f in diagnose(simulate(overloaded))]
        ['CONSUMER_LAG', 'QUEUE_SATURATED']
    """
    facts = _Facts(result)
    findings = [finding for check in _CHECKS if (finding := check(facts)) is not None]
    return sorted(findings, key=lambda x: (_RANK[x.severity], CODES.index(x.code)))


def format_findings(findings: list[Finding]) -> str:
    """The findings as plain text, one block per finding ("No problems found." if none)."""
    if not findings:
        return "No problems found."
    blocks = []
    for f in findings:
        blocks.append(
            f"[{f.severity.upper()}] {f.code}: {f.title}\n"
            f"  evidence: {f.evidence}\n"
            f"  why:      {f.explanation}\n"
            f"  fix:      {f.fix}"
        )
    return "\n\n".join(blocks)


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    """The findings as a DataFrame, one row each (columns as :class:`Finding`'s fields)."""
    import pandas as pd

    columns = ["code", "severity", "title", "evidence", "explanation", "fix", "numbers"]
    return pd.DataFrame([{c: getattr(f, c) for c in columns} for f in findings], columns=columns)
