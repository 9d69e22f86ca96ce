"""The approval example, run for real: audit fields survive, scoring stays off the loop."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import threading
from datetime import UTC
from decimal import Decimal

import pytest

from pipeline import Backoff, PermanentError, Pipeline, export_jsonl, load_jsonl
from pipeline.examples.approval import (
    ApprovalTask,
    Decision,
    LedgerUnavailable,
    approval_config,
    approval_handler,
    approval_handler_async,
    generate_tasks,
    in_ledger_outage,
    make_tasks,
    run_approvals,
    score,
    summarise,
)

SEED = 2
FAST_RETRIES = Backoff(kind="exponential", base_s=0.005, cap_s=0.02, jitter=True)
#: Liveness guard for runs in real time: no speed is asserted (how fast a run goes belongs
#: in bench/); only a run that never finishes fails, after far longer than any could take.
HANG_S = 60.0


async def unless_hung(run, what):
    """Await ``run``; fail the test as hung if it has not finished within ``HANG_S``."""
    try:
        return await asyncio.wait_for(run, timeout=HANG_S)
    except TimeoutError:
        pytest.fail(f"{what} hung: no result within {HANG_S:.0f} s")


@pytest.fixture(scope="module")
def tasks() -> list[ApprovalTask]:
    tasks = make_tasks(40, seed=SEED)
    # The run must exercise the retry path: this seed has at least one ledger outage.
    assert any(in_ledger_outage(task) for task in tasks)
    return tasks


def test_tasks_are_deterministic_for_a_seed_and_differ_between_seeds():
    first = make_tasks(50, seed=SEED)
    assert first == make_tasks(50, seed=SEED)
    assert first != make_tasks(50, seed=SEED + 1)
    lazy = generate_tasks(seed=SEED)
    assert [next(lazy) for _ in range(50)] == first
    assert len({task.trace_id for task in first}) == 50
    assert len({task.source_hash for task in first}) == 50


def test_tasks_carry_exact_audit_fields():
    tasks = make_tasks(200, seed=SEED)
    for task in tasks:
        assert isinstance(task.amount_usd, Decimal)
        assert task.amount_usd.as_tuple().exponent == -2
        assert task.amount_usd > 0
        assert task.trace_id.version == 4
        assert task.submitted_at.tzinfo is UTC
        assert len(task.source_hash) == 64
        int(task.source_hash, 16)
        assert task.routing_tier in {"auto", "standard", "senior"}
    assert [t.submitted_at for t in tasks] == sorted(t.submitted_at for t in tasks)
    # Skewed: the mean sits well above the median.
    amounts = sorted(task.amount_usd for task in tasks)
    assert sum(amounts) / len(amounts) > amounts[len(amounts) // 2]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tasks[0].amount_usd = Decimal("1.00")  # type: ignore[misc]


def test_invalid_rate_only_negates_amounts():
    plain = make_tasks(100, seed=SEED)
    mixed = make_tasks(100, seed=SEED, invalid_rate=0.2)
    negative = [m for m in mixed if m.amount_usd < 0]
    assert 5 <= len(negative) <= 40
    for p, m in zip(plain, mixed, strict=True):
        assert (p.trace_id, abs(m.amount_usd)) == (m.trace_id, p.amount_usd)


def test_score_is_deterministic_and_raises_the_documented_errors(tasks):
    good = next(task for task in tasks if not in_ledger_outage(task))
    decision = score(good)
    assert decision == score(good)
    assert isinstance(decision, Decision)
    assert decision.decision in {"APPROVED", "REVIEW", "REJECTED"}
    assert 0.0 <= decision.score < 1.0
    assert decision.amount_usd == good.amount_usd
    with pytest.raises(LedgerUnavailable):
        score(next(task for task in tasks if in_ledger_outage(task)))
    for bad in (Decimal("-5.00"), Decimal("1.005"), Decimal("NaN")):
        with pytest.raises(PermanentError):
            score(dataclasses.replace(good, amount_usd=bad))
    with pytest.raises(PermanentError):
        score(dataclasses.replace(good, routing_tier="vip"))


@pytest.mark.parametrize("handler", [approval_handler, approval_handler_async])
def test_real_time_run_accounts_for_every_task_and_keeps_dead_letter_payloads(tasks, handler):
    invalid = dataclasses.replace(tasks[0], amount_usd=Decimal("-12.34"))
    source = [*tasks, invalid]
    # No drain bound: a slow machine must not leave tasks unfinished (unless_hung guards hangs).
    config = approval_config(backoff=FAST_RETRIES, drain_timeout_s=None)
    report, decisions = asyncio.run(
        unless_hung(run_approvals(source, config, handler=handler), "the approval run")
    )

    assert report.balanced
    assert report.offered == len(source)
    assert report.unfinished == [] and report.shed == []
    outages = [task for task in tasks if in_ledger_outage(task)]
    assert report.completed == len(decisions) == len(tasks) - len(outages)

    letters = {letter.payload.trace_id: letter for letter in report.dead_letters}
    assert set(letters) == {t.trace_id for t in outages} | {invalid.trace_id}
    for task in outages:
        letter = letters[task.trace_id]
        assert letter.payload == task  # the whole audit record, unchanged
        assert letter.attempts == 3 and letter.reason == "max_attempts"
        assert [e.type for e in letter.errors] == ["LedgerUnavailable"] * 3
    permanent = letters[invalid.trace_id]
    assert permanent.payload.amount_usd == Decimal("-12.34")
    assert permanent.attempts == 1 and permanent.reason == "not_retryable"
    assert permanent.errors[0].type == "PermanentError"

    summary = summarise(report, decisions)
    assert sum(summary["by_decision"].values()) == report.completed
    tiers = summary["by_tier"]
    assert sum(sum(counts.values()) for counts in tiers.values()) == report.offered
    approved = [d.amount_usd for d in decisions if d.decision == "APPROVED"]
    assert summary["approved_usd"] == sum(approved, Decimal("0.00"))
    assert isinstance(summary["approved_usd"], Decimal)


def test_the_loop_keeps_running_while_tasks_are_scored():
    # Senior-tier tasks take the most CPU (a few ms each on a quiet machine).
    senior = (
        t
        for t in generate_tasks(seed=SEED)
        if t.routing_tier == "senior" and not in_ledger_outage(t)
    )
    tasks = [next(senior) for _ in range(40)]
    # Each call scores its task, then returns only once the loop has ticked three times
    # while scoring was in flight. Off the loop that always happens, at any machine speed;
    # a call made on the loop's own thread would stop every tick (a liveness guard, HANG_S).
    loop_ticked = threading.Event()
    stalled: list[ApprovalTask] = []

    def score_then_wait_for_the_loop(task: ApprovalTask) -> Decision:
        decision = approval_handler(task)
        if not loop_ticked.wait(HANG_S):
            stalled.append(task)
            loop_ticked.set()  # fail once, not once per task
        return decision

    async def main() -> list[int]:
        pipe = Pipeline(score_then_wait_for_the_loop, approval_config())
        busy_at_tick: list[int] = []

        async def ticker() -> None:
            while True:
                await asyncio.sleep(0.001)
                busy_at_tick.append(pipe.statistics().workers_busy)
                if sum(1 for busy in busy_at_tick if busy > 0) >= 3:
                    loop_ticked.set()

        ticking = asyncio.ensure_future(ticker())
        try:
            report = await unless_hung(pipe.run(tasks), "the approval run")
        finally:
            ticking.cancel()
        assert report.completed == len(tasks)
        return busy_at_tick

    busy_at_tick = asyncio.run(main())
    assert stalled == [], "a scoring call blocked the event loop"
    # Ticks landed while scoring was in flight: the CPU work runs on threads, not the loop.
    assert sum(1 for busy in busy_at_tick if busy > 0) >= 3


def test_jsonl_export_keeps_the_amount_as_an_exact_string(tasks):
    invalid = dataclasses.replace(tasks[1], amount_usd=Decimal("-1000.10"))
    config = approval_config(backoff=FAST_RETRIES)
    report, _ = asyncio.run(run_approvals([invalid], config))
    buffer = io.StringIO()
    assert export_jsonl(report.dead_letters, buffer) == 1
    [record] = load_jsonl(io.StringIO(buffer.getvalue()))
    payload = record["payload"]
    assert payload["amount_usd"] == "-1000.10"
    assert Decimal(payload["amount_usd"]) == invalid.amount_usd
    assert payload["trace_id"] == str(invalid.trace_id)
    assert payload["source_hash"] == invalid.source_hash
    assert payload["submitted_at"] == invalid.submitted_at.isoformat()
