"""Bottlenecks of a chain: which stage sets the pace, where the backlog waits, what to change.

In a chain joined by bounded queues with blocking after service, the slowest
stage sets the pace of every stage: the stages before it fill their queues
and then block, workers holding finished items they cannot hand on, until
the backlog reaches the source. Measured busy time alone therefore misleads
(a blocked worker is occupied but not working), so the stage is judged by
its **demanded load**: the rate at which items would reach it if nothing
upstream held them back (the source's arrival rate times the fan-outs before
it), times the attempts each item needs and the measured time per attempt,
in busy workers. The stage with the highest demanded utilisation (load /
concurrency) is the bottleneck.

:func:`stage_loads` gives those numbers per stage; :func:`diagnose_chain` (what
:func:`~pipeline.sim.diagnose` calls for a
:class:`~pipeline.sim.ChainSimulationResult`) turns them into a ``BOTTLENECK``
finding (the stage, where the backlog sits and what to change, with numbers)
and adds each stage's own findings (dead letters, drain timeout, hangs, ...)
with the stage's name in the title.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...._units import percent_text as _pct
from ...stats.stepstats import weighted_sum
from .checks import run_checks
from .findings import CODES, LOAD_CRITICAL, RANK, Finding

if TYPE_CHECKING:
    from ...running.chained import ChainSimulationResult

__all__ = ["BUSY_WARN", "QUEUE_PER_WORKER", "StageLoad", "diagnose_chain", "stage_loads"]

BUSY_WARN = 0.85
"""Demanded utilisation from which the busiest stage is reported as a warning (else info)."""

QUEUE_PER_WORKER = 4
"""A bound suggested for an unbounded queue: this many items per worker of the stage
(enough to hide the jitter of the stage before it, small enough for memory)."""

# Stage findings that say something about the stage itself; the single-stage views of
# lag and saturation are replaced by the chain's own BOTTLENECK finding.
# A stage's own LOST_TASK check would count items stranded between stages as lost: the
# chain's report, which accounts for them, is checked instead.
_STAGE_CODES = ("LEASE_EXPIRED", "DRAIN_TIMEOUT", "DEAD_LETTERS", "HIGH_RETRY_AMPLIFICATION")


@dataclass(frozen=True)
class StageLoad:
    """How hard one stage of a chain worked, averaged over the whole run.

    Attributes:
        name: the stage's name.
        concurrency: its workers.
        queue_maxsize: its queue bound (None: unbounded).
        arrival_rate_per_s: items per second that would reach the stage if
            nothing upstream held them back (source rate x fan-outs before it).
        attempt_mean_s: measured seconds per attempt (NaN before any attempt).
        attempts_per_item: attempts per item that started.
        load: demanded busy workers, ``arrival_rate_per_s x attempts_per_item x attempt_mean_s``.
        demanded_utilisation: ``load / concurrency``; above 1 the stage cannot keep up.
        busy_share: share of worker time spent in attempts.
        blocked_share: share of worker time spent holding a finished item the
            next stage had no room for (0 at the last stage).
        queue_depth_mean: time-averaged items in the stage's queue.
        queue_full_share: share of the run with the queue full (0 if unbounded).
        backlog_before_mean: time-averaged items waiting to enter the stage:
            at the source for the first stage, else finished by the stage
            before it and waiting for room (blocked hand-offs).
        hand_off_blocked_s: worker-seconds the stage's hand-offs waited for room.
        items_per_source_item: the stage's items per item of the source (the
            product of the fan-outs before it).
        capacity_per_s: source items per second the stage finishes with every
            worker in attempts (its items per second divided by the fan-outs
            before it), the pace it sets when it is the bottleneck.
    """

    name: str
    concurrency: int
    queue_maxsize: int | None
    arrival_rate_per_s: float
    attempt_mean_s: float
    attempts_per_item: float
    load: float
    demanded_utilisation: float
    busy_share: float
    blocked_share: float
    queue_depth_mean: float
    queue_full_share: float
    backlog_before_mean: float
    hand_off_blocked_s: float
    items_per_source_item: int
    capacity_per_s: float

    def workers_for(self, utilisation: float = 0.8) -> int:
        """Workers that carry the demanded load at about ``utilisation`` (and at least load + 1)."""
        if not math.isfinite(self.load):
            return self.concurrency
        return max(math.ceil(self.load) + 1, math.ceil(self.load / utilisation - 1e-9))


def _time_mean(series: Any, values: np.ndarray, span_s: float) -> float:
    """Time average of a stage's step function over ``[0, span_s]`` (0 before its first row)."""
    if not span_s > 0 or len(values) == 0:
        return 0.0
    durations = np.diff(np.append(series.time_s, max(series.end_s, series.time_s[-1])))
    return weighted_sum(values.astype(np.float64), durations) / span_s


def stage_loads(result: ChainSimulationResult) -> list[StageLoad]:
    """Per stage, in chain order: demanded load, busy and blocked shares, queues and backlogs.

    Args:
        result: a simulated chain (``simulate(Scenario(stages=[...]))``).

    Returns:
        One :class:`StageLoad` per stage.
    """
    specs = result.scenario.stages
    stages = list(result.stages.values())
    span = float(result.summary["sim_time_s"])
    arrivals = np.asarray(result.arrival_s, dtype=np.float64)
    last = float(arrivals[-1]) if len(arrivals) else 0.0
    # A batch (every item at one instant) has no finite arrival rate: demand is unbounded.
    rate = len(arrivals) / last if last > 0 else (math.inf if len(arrivals) > 1 else math.nan)
    spread = 1  # stage items per source item, so far
    loads = []
    for number, (spec, stage) in enumerate(zip(specs, stages, strict=True)):
        series, report = stage.series, result.report.stages[spec.name]
        config = spec.config
        busy_s = weighted_sum(series.in_flight, series.durations())
        attempts = int(report.attempts)
        started = int(np.count_nonzero(np.asarray(stage.columns.attempts) > 0))
        attempt_mean = busy_s / attempts if attempts else math.nan
        per_item = attempts / started if started else math.nan
        load = rate * spread * per_item * attempt_mean
        capacity = config.concurrency * span
        if number + 1 < len(stages):
            after = stages[number + 1].series
            blocked = _time_mean(after, after.producers_blocked, span) / config.concurrency
        else:
            blocked = 0.0
        maxsize = config.queue_maxsize
        full = (
            _time_mean(series, (series.queue_depth >= maxsize).astype(np.float64), span)
            if maxsize is not None
            else 0.0
        )
        loads.append(
            StageLoad(
                name=spec.name,
                concurrency=config.concurrency,
                queue_maxsize=maxsize,
                arrival_rate_per_s=rate * spread,
                attempt_mean_s=attempt_mean,
                attempts_per_item=per_item,
                load=load,
                demanded_utilisation=load / config.concurrency,
                busy_share=busy_s / capacity if capacity > 0 else 0.0,
                blocked_share=blocked,
                queue_depth_mean=_time_mean(series, series.queue_depth, span),
                queue_full_share=full,
                backlog_before_mean=_time_mean(series, series.upstream_backlog, span),
                hand_off_blocked_s=float(report.hand_off_blocked_s),
                items_per_source_item=spread,
                capacity_per_s=config.concurrency / (per_item * attempt_mean * spread)
                if attempts and attempt_mean > 0
                else math.inf,
            )
        )
        spread *= spec.fan_out
    return loads


# -- the finding ------------------------------------------------------------------------------


def _demand(load: StageLoad) -> str:
    """A stage's demanded utilisation in words: a percentage, or why there is none."""
    if math.isnan(load.demanded_utilisation):
        return "(no item reached it)"
    return _pct(load.demanded_utilisation)


def _capacity(load: StageLoad) -> str:
    """A stage's pace in source items per second, in words."""
    if math.isnan(load.attempt_mean_s):
        return "(no item reached it)"
    if math.isinf(load.capacity_per_s):
        return "no limit (its attempts take no time)"
    return f"could do {load.capacity_per_s:.3g}/s"


def _backlog_place(loads: list[StageLoad]) -> tuple[str, float]:
    """Where the most work waits on average, in words, and how many items (of that place).

    Places are compared in source items, so that 100 records waiting after a fan-out of
    100 weigh as much as the one page they came from.
    """
    places = []
    for number, load in enumerate(loads):
        before = (
            "upstream at the source (arrived, not yet admitted: the first stage's queue was full)"
            if number == 0
            else f"between '{loads[number - 1].name}' and '{load.name}' (finished by "
            f"'{loads[number - 1].name}', its workers blocked handing them on)"
        )
        spread = load.items_per_source_item
        places.append((load.backlog_before_mean / spread, load.backlog_before_mean, before))
        places.append(
            (
                load.queue_depth_mean / spread,
                load.queue_depth_mean,
                f"in the queue of stage '{load.name}'",
            )
        )
    _, mean, where = max(places, key=lambda place: place[0])
    return where, mean


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _bottleneck(result: ChainSimulationResult, loads: list[StageLoad]) -> Finding | None:
    known = [load for load in loads if not math.isnan(load.demanded_utilisation)]
    if not known:
        return None
    # Highest demand first; when demand is unbounded (a batch), the lowest capacity.
    worst = max(known, key=lambda load: (load.demanded_utilisation, -load.capacity_per_s))
    if math.isinf(worst.demanded_utilisation):
        return _batch_bottleneck(loads, worst)
    rho = worst.demanded_utilisation
    severity = "critical" if rho >= LOAD_CRITICAL else "warning" if rho >= BUSY_WARN else "info"
    where, backlog = _backlog_place(loads)
    evidence = (
        f"stage '{worst.name}' is asked for {worst.load:.3g} busy workers "
        f"({worst.arrival_rate_per_s:.3g} items/s x {worst.attempts_per_item:.3g} attempts x "
        f"{worst.attempt_mean_s:.3g} s) and has {worst.concurrency}: demanded utilisation "
        f"{_pct(rho)}, busy {_pct(worst.busy_share)} of the time"
        + (
            f", its queue full {_pct(worst.queue_full_share)} of the time. "
            if worst.queue_maxsize is not None
            else ". "
        )
        + ", ".join(f"'{load.name}' {_demand(load)}" for load in loads if load is not worst)
        + (". " if len(loads) > 1 else "")
        + f"Most items wait {where}: {backlog:.3g} on average."
    )
    blocked = [load for load in loads[: loads.index(worst)] if load.blocked_share >= 0.05]
    if blocked:
        evidence += (
            " Workers blocked on hand-off: "
            + ", ".join(
                f"'{load.name}' {_pct(load.blocked_share)} of its worker time" for load in blocked
            )
            + "."
        )
    workers = worst.workers_for()
    fixes = []
    if severity != "info":
        fixes.append(
            f"add workers to stage '{worst.name}': concurrency {worst.concurrency} -> "
            f"{workers} (about {_pct(worst.load / workers)} busy at this load)"
        )
        others = [load for load in known if load is not worst]
        if others:
            following = max(others, key=lambda load: load.demanded_utilisation)
            fixes.append(
                f"then '{following.name}' sets the pace, at "
                f"{_pct(following.demanded_utilisation)} of its {following.concurrency} workers"
            )
        if blocked:
            fixes.append("more workers before it would not help: they would only wait to hand on")
    unbounded = [load for load in loads if load.queue_maxsize is None]
    for load in sorted(unbounded, key=lambda load: -load.queue_depth_mean):
        if load.queue_depth_mean >= load.concurrency or severity == "critical":
            fixes.append(
                f"bound the queue of stage '{load.name}' "
                f"(queue_maxsize={QUEUE_PER_WORKER * load.concurrency}, "
                f"{QUEUE_PER_WORKER} per worker): it held {load.queue_depth_mean:.3g} items on "
                "average and memory grows with the backlog; bounded, the backlog waits at the "
                "source instead"
            )
    if not fixes:
        fixes.append(
            f"nothing needs changing: stage '{worst.name}' keeps up with "
            f"{worst.concurrency - worst.load:.3g} workers to spare"
        )
    title = (
        f"Stage '{worst.name}' is the bottleneck"
        if severity != "info"
        else f"Stage '{worst.name}' is the busiest stage, and keeps up"
    )
    explanation = (
        "In a chain the slowest stage sets the pace of all of them: the stages before it "
        "fill their queues, then their workers wait holding finished items (blocking after "
        "service), and finally the source waits. Their busy time hides this, so each stage is "
        "judged by the work that would reach it if nothing upstream held it back."
    )
    return Finding(
        code="BOTTLENECK",
        severity=severity,
        title=title,
        evidence=evidence,
        explanation=explanation,
        fix=_sentence("; ".join(fixes)),
        numbers={
            "stage": worst.name,
            "demanded_utilisation": rho,
            "load": worst.load,
            "concurrency": worst.concurrency,
            "suggested_concurrency": workers,
            "backlog_where": where,
            "backlog_mean": backlog,
            "bound_queues": [load.name for load in unbounded],
        },
    )


def _batch_bottleneck(loads: list[StageLoad], worst: StageLoad) -> Finding:
    """Every item arrived at once: the slowest stage sets the pace of the whole batch."""
    severity = "warning" if worst.busy_share >= BUSY_WARN else "info"
    where, backlog = _backlog_place(loads)
    others = sorted((load for load in loads if load is not worst), key=lambda x: x.capacity_per_s)
    evidence = (
        f"every item arrived at once (a batch), so the run goes at its slowest stage's pace: "
        f"'{worst.name}' finishes at most {worst.capacity_per_s:.3g} source items/s with "
        f"{worst.concurrency} workers ({worst.attempt_mean_s:.3g} s per attempt) and was busy "
        f"{_pct(worst.busy_share)} of the time"
        + "".join(f"; '{x.name}' {_capacity(x)}" for x in others)
        + f". Most items wait {where}: {backlog:.3g} on average."
    )
    if others and math.isfinite(others[0].capacity_per_s):
        following = others[0]
        workers = math.ceil(worst.concurrency * following.capacity_per_s / worst.capacity_per_s)
        fix = (
            f"To finish sooner, add workers to stage '{worst.name}': concurrency "
            f"{worst.concurrency} -> {workers} brings it to the pace of '{following.name}' "
            f"({following.capacity_per_s:.3g} source items/s), which then sets it. If "
            f"'{worst.name}' cannot take more (a connection pool, a rate limit), this is the pace."
        )
    else:
        workers = worst.concurrency
        fix = (
            f"To finish sooner, add workers to stage '{worst.name}': each adds about "
            f"{worst.capacity_per_s / worst.concurrency:.3g} source items/s."
        )
    return Finding(
        code="BOTTLENECK",
        severity=severity,
        title=f"Stage '{worst.name}' sets the pace of the batch",
        evidence=evidence,
        explanation=(
            "A batch offers all its work at once, so some stage is always the limit: the "
            "stages before it fill their queues and block, and the source waits. That is fine "
            "when it is the stage you meant to be the limit; otherwise give it more workers."
        ),
        fix=fix,
        numbers={
            "stage": worst.name,
            "demanded_utilisation": worst.demanded_utilisation,
            "capacity_per_s": worst.capacity_per_s,
            "concurrency": worst.concurrency,
            "suggested_concurrency": workers,
            "backlog_where": where,
            "backlog_mean": backlog,
            "bound_queues": [load.name for load in loads if load.queue_maxsize is None],
        },
    )


def _lost_items(result: ChainSimulationResult) -> Finding | None:
    report = result.report
    if report.balanced:
        return None
    return Finding(
        code="LOST_TASK",
        severity="critical",
        title="Items are unaccounted for in the chain",
        evidence=(
            f"the chain's report does not balance: offered {report.offered}, completed "
            f"{report.completed}, dead-lettered {report.dead_lettered}, unfinished "
            f"{report.unfinished}, shed {report.shed}."
        ),
        explanation=(
            "Every item must end as exactly one outcome in one stage, or be handed back as "
            "stranded between two. Here the books do not add up: a bug, not a setting."
        ),
        fix=f"Report it with the scenario and seed that reproduce it: seed={result.scenario.seed}.",
        numbers={"offered": report.offered},
    )


def diagnose_chain(result: ChainSimulationResult, precision: float | None = None) -> list[Finding]:
    """The chain's findings: its bottleneck, then each stage's own problems, most severe first.

    ``precision`` is accepted for :func:`~pipeline.sim.diagnose`'s signature;
    a chain's run length is not judged.
    """
    findings = [f for f in (_lost_items(result), _bottleneck(result, stage_loads(result))) if f]
    for name, stage in result.stages.items():
        for finding in run_checks(stage, precision=None):
            if finding.code in _STAGE_CODES:
                findings.append(
                    replace(
                        finding,
                        title=f"stage '{name}': {finding.title}",
                        numbers={**finding.numbers, "stage": name},
                    )
                )
    return sorted(findings, key=lambda x: (RANK[x.severity], CODES.index(x.code)))
