"""The approval queue: audit-carrying tasks scored by CPU-bound code off the event loop.

What this example shows, on the unchanged engine and in real time:

- payloads that must never lose their audit fields (trace id, source hash,
  ledger batch, an exact ``Decimal`` amount) keep them through retries, dead
  letters and JSONL export;
- a plain-function handler is run with ``asyncio.to_thread``, so a few
  milliseconds of CPU per task do not stall the loop (or a Jupyter kernel);
- a deterministic subset of tasks meets a ledger outage (``LedgerUnavailable``,
  retried until the budget is spent, then dead-lettered), and invalid tasks fail
  permanently (``PermanentError``, dead-lettered after one attempt).

Example (a notebook cell, on the kernel's own loop)::

    report, decisions = await run_approvals(make_tasks(200, seed=1))
    summarise(report, decisions)
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import random
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from ..config import PipelineConfig
from ..engine import Pipeline
from ..errors import PermanentError
from ..records import Result, RunReport
from ..retry import Backoff

__all__ = [
    "ROUTING_TIERS",
    "ApprovalTask",
    "Decision",
    "LedgerUnavailable",
    "approval_config",
    "approval_handler",
    "approval_handler_async",
    "approval_widget",
    "generate_tasks",
    "in_ledger_outage",
    "make_tasks",
    "run_approvals",
    "score",
    "summarise",
]

CENT = Decimal("0.01")
# Hash rounds per tier: about 1, 3 and 7 ms of CPU at ~0.36 us per sha256 round.
ROUTING_TIERS: dict[str, int] = {"auto": 2_500, "standard": 7_500, "senior": 20_000}
# Score thresholds per tier: (approve at or above, reject below); REVIEW in between.
_THRESHOLDS = {"auto": (0.30, 0.05), "standard": (0.50, 0.10), "senior": (0.80, 0.15)}
_OUTAGE_ONE_IN = 25  # about 4% of tasks hit a ledger outage on every attempt


class LedgerUnavailable(Exception):
    """Raised by :func:`score` when the ledger cannot be read (transient, retryable)."""


@dataclass(frozen=True, slots=True)
class ApprovalTask:
    """One payment awaiting approval, with the audit fields a run must never lose.

    Attributes:
        trace_id: follows the task through logs, retries and dead letters.
        source_hash: sha256 hex of the record's content, as received.
        ledger_batch_ref: the ledger batch it belongs to, e.g. ``"LB-20260105-0003"``.
        amount_usd: exact amount in US dollars, 2 decimal places (never a float).
        routing_tier: ``"auto"`` (under 500 USD), ``"standard"`` or ``"senior"``
            (5000 USD and over).
        submitted_at: submission time, timezone-aware UTC.
    """

    trace_id: uuid.UUID
    source_hash: str
    ledger_batch_ref: str
    amount_usd: Decimal
    routing_tier: str
    submitted_at: datetime


@dataclass(frozen=True, slots=True)
class Decision:
    """What scoring decided for one task.

    Attributes:
        decision: ``"APPROVED"``, ``"REVIEW"`` or ``"REJECTED"``.
        score: confidence in [0, 1); higher is safer.
        trace_id, amount_usd, routing_tier: copied from the task, so decisions
            can be totalled without it.
    """

    trace_id: uuid.UUID
    decision: Literal["APPROVED", "REVIEW", "REJECTED"]
    score: float
    amount_usd: Decimal
    routing_tier: str


def _content_hash(trace_id: uuid.UUID, batch: str, amount: Decimal, tier: str, at: datetime) -> str:
    content = f"{trace_id}|{batch}|{amount}|{tier}|{at.isoformat()}"
    return hashlib.sha256(content.encode()).hexdigest()


def generate_tasks(
    *,
    seed: int,
    start: datetime = datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
    mean_gap_s: float = 2.0,
    batch_size: int = 25,
    invalid_rate: float = 0.0,
) -> Iterator[ApprovalTask]:
    """Yield approval tasks lazily and forever, the same ones for the same seed.

    Amounts are log-normal (median about 400 USD, a long tail into the tens of
    thousands), rounded to cents; submission times are a Poisson stream.

    Args:
        seed: seeds the only random generator used.
        start: submission time of the stream's start (UTC).
        mean_gap_s: mean seconds between submissions.
        batch_size: tasks per ledger batch reference.
        invalid_rate: fraction of tasks given a negative amount (they fail
            permanently); the other tasks do not change with it.
    """
    rng = random.Random(seed)
    at = start
    for index in itertools.count():
        trace_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        at += timedelta(seconds=rng.expovariate(1.0 / mean_gap_s))
        amount = Decimal(max(rng.lognormvariate(6.0, 1.5), 1.0)).quantize(CENT)
        tier = "auto" if amount < 500 else "standard" if amount < 5000 else "senior"
        if rng.random() < invalid_rate:  # always drawn: common random numbers
            amount = -amount
        batch = f"LB-{start:%Y%m%d}-{index // batch_size:04d}"
        yield ApprovalTask(
            trace_id=trace_id,
            source_hash=_content_hash(trace_id, batch, amount, tier, at),
            ledger_batch_ref=batch,
            amount_usd=amount,
            routing_tier=tier,
            submitted_at=at,
        )


def make_tasks(n: int, *, seed: int, **options: Any) -> list[ApprovalTask]:
    """The first ``n`` tasks of :func:`generate_tasks` (same options) as a list."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    tasks = generate_tasks(seed=seed, **options)
    return [next(tasks) for _ in range(n)]


def in_ledger_outage(task: ApprovalTask) -> bool:
    """True for the deterministic ~4% of tasks whose ledger is always unavailable."""
    return int(task.source_hash[-8:], 16) % _OUTAGE_ONE_IN == 0


def score(task: ApprovalTask) -> Decision:
    """Score one task: pure Python CPU work, about 1-7 ms (more for higher tiers).

    Deterministic: the same task always gets the same decision and score.

    Raises:
        PermanentError: the task is invalid (amount negative, not a finite
            ``Decimal`` or not whole cents; unknown tier); retrying cannot help.
        LedgerUnavailable: the task is in the ledger outage (:func:`in_ledger_outage`);
            transient as far as the pipeline knows, so it is retried.
    """
    if task.routing_tier not in ROUTING_TIERS:
        raise PermanentError(f"unknown routing_tier {task.routing_tier!r} ({task.trace_id})")
    amount = task.amount_usd
    if (
        not isinstance(amount, Decimal)
        or not amount.is_finite()
        or amount < 0
        or amount.normalize().as_tuple().exponent < -2  # type: ignore[operator]
    ):
        raise PermanentError(f"invalid amount_usd {amount!r} ({task.trace_id})")
    if in_ledger_outage(task):
        raise LedgerUnavailable(f"ledger batch {task.ledger_batch_ref} unavailable")
    digest = bytes.fromhex(task.source_hash)
    for _ in range(ROUTING_TIERS[task.routing_tier]):
        digest = hashlib.sha256(digest).digest()
    value = int.from_bytes(digest[:8], "big") / 2**64
    approve_at, reject_below = _THRESHOLDS[task.routing_tier]
    if value >= approve_at:
        decision: Literal["APPROVED", "REVIEW", "REJECTED"] = "APPROVED"
    elif value < reject_below:
        decision = "REJECTED"
    else:
        decision = "REVIEW"
    return Decision(task.trace_id, decision, value, task.amount_usd, task.routing_tier)


def approval_handler(task: ApprovalTask) -> Decision:
    """Plain-function handler: the pipeline runs it on a thread (``asyncio.to_thread``)."""
    return score(task)


async def approval_handler_async(task: ApprovalTask) -> Decision:
    """Async handler: offloads :func:`score` to a thread itself, the loop stays free."""
    return await asyncio.to_thread(score, task)


def approval_config(**overrides: Any) -> PipelineConfig:
    """The reference configuration: 4 workers, 100 slots, 3 attempts, 30 s drain.

    Retries back off exponentially with full jitter (0.2 s, 0.4 s, ... capped
    at 5 s). Any :class:`~pipeline.config.PipelineConfig` field can be overridden.
    """
    settings: dict[str, Any] = {
        "concurrency": 4,
        "queue_maxsize": 100,
        "max_attempts": 3,
        "drain_timeout_s": 30.0,
        "backoff": Backoff(kind="exponential", base_s=0.2, factor=2.0, cap_s=5.0, jitter=True),
    }
    settings.update(overrides)
    return PipelineConfig(**settings)


async def run_approvals(
    tasks: Iterable[ApprovalTask],
    config: PipelineConfig | None = None,
    *,
    handler: Any = approval_handler,
    rng: random.Random | None = None,
) -> tuple[RunReport, list[Decision]]:
    """Run ``tasks`` through a pipeline on the running loop; return the report and decisions.

    Decisions come back in finish order. ``rng`` seeds backoff jitter.
    """
    pipe = Pipeline(handler, config or approval_config(), rng=rng, name="approvals")
    stream = pipe.results()

    async def collect() -> list[Decision]:
        return [result.value async for result in stream if result.ok]

    collector = asyncio.ensure_future(collect())
    try:
        report = await pipe.run(tasks)
    except BaseException:
        collector.cancel()
        raise
    return report, await collector


def summarise(report: RunReport, decisions: Iterable[Decision | Result] = ()) -> dict[str, Any]:
    """Totals for a notebook: counts by outcome, decision and tier, exact USD sums.

    Args:
        report: the run's report (dead letters are counted per tier from it).
        decisions: :class:`Decision` values, or the pipeline's ``Result`` records.

    Returns:
        A dict with ``offered``, ``completed``, ``dead_lettered``, ``unfinished``,
        ``shed``, ``attempts``, ``by_decision`` and ``by_tier`` (counts), and
        ``approved_usd`` / ``dead_lettered_usd`` (``Decimal``, exact; the latter
        sums amounts as given, invalid negative ones included).
    """
    values = [d.value if isinstance(d, Result) else d for d in decisions]
    values = [d for d in values if isinstance(d, Decision)]
    by_tier: dict[str, Counter[str]] = {tier: Counter() for tier in ROUTING_TIERS}
    for d in values:
        by_tier.setdefault(d.routing_tier, Counter())[d.decision] += 1
    for letter in report.dead_letters:
        tier = getattr(letter.payload, "routing_tier", "unknown")
        by_tier.setdefault(tier, Counter())["DEAD_LETTERED"] += 1
    by_decision = Counter({"APPROVED": 0, "REVIEW": 0, "REJECTED": 0})
    by_decision.update(d.decision for d in values)
    return {
        "offered": report.offered,
        "completed": report.completed,
        "dead_lettered": len(report.dead_letters),
        "unfinished": len(report.unfinished),
        "shed": len(report.shed),
        "attempts": report.attempts,
        "by_decision": dict(by_decision),
        "by_tier": {tier: dict(counts) for tier, counts in by_tier.items()},
        "approved_usd": sum((d.amount_usd for d in values if d.decision == "APPROVED"), CENT * 0),
        "dead_lettered_usd": sum(
            (getattr(x.payload, "amount_usd", CENT * 0) for x in report.dead_letters), CENT * 0
        ),
    }


def approval_widget(capacity_per_s: float, *, duration_s: float = 3.0, seed: int = 1) -> Any:
    """Notebook 07's live run: approval tasks at a rate relative to one core's capacity.

    Args:
        capacity_per_s: tasks one core scores per second (measured in the notebook).
        duration_s: seconds of arrivals per run.
        seed: seed of the tasks and of their arrival times.
    """
    import random

    import numpy as np

    from pipeline.sim import Poisson
    from pipeline.viz.live import paced
    from pipeline.viz.widgets.focused import slider
    from pipeline.viz.widgets.live_run import LiveRunWidget

    controls = {
        "concurrency": slider("concurrency", 4, 1, 8),
        "load": slider("arrivals (× one core)", 0.5, 0.25, 2.0, 0.25),
    }

    def start(s: dict[str, Any]) -> tuple[Any, Any]:
        rate = s["load"] * capacity_per_s
        times = Poisson(rate=rate).times(np.random.default_rng(seed), duration_s=duration_s)
        tasks = make_tasks(len(times), seed=seed, invalid_rate=0.01)
        config = approval_config(concurrency=s["concurrency"], drain_timeout_s=2.0)
        pipe = Pipeline(approval_handler, config, rng=random.Random(seed), name="approvals")
        return pipe, paced(tasks, times)

    return LiveRunWidget(controls, start, title="Approvals, live")
