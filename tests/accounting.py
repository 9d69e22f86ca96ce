"""Payload-level bookkeeping checks shared by the fault tests.

A balanced count is not enough: a run that loses one item and counts another
twice still balances. These helpers check the account payload by payload.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest

__all__ = [
    "assert_each_payload_once",
    "assert_nothing_lost",
    "assert_results_accounted",
    "completed_payloads",
    "run_interrupted",
    "undelivered_payloads",
]

# Where a report may list the results the results() stream could not hand over
# (the consumer left, or the drain cancelled a worker blocked on the hand-off).
# The engine does not have such a field yet; point this at the one it gets.
_UNDELIVERED_FIELDS = (
    "undelivered",
    "results_undelivered",
    "undelivered_results",
    "results_dropped",
)


def undelivered_payloads(report: Any) -> list[Any] | int | None:
    """What the report says was not delivered to the results consumer.

    Returns the payloads (a list), or only their number (an int) when that is
    all the report keeps, or None when the report has no such field (then
    nothing is reported, so every result must have been delivered).
    """
    for name in _UNDELIVERED_FIELDS:
        value = getattr(report, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if value is not None:
            return [getattr(each, "payload", each) for each in value]
    return None


def completed_payloads(report: Any, offered: Iterable[Any]) -> Counter:
    """The offered payloads that are neither dead-lettered, unfinished, shed nor expired."""
    others = Counter(
        [letter.payload for letter in report.dead_letters]
        + list(report.unfinished)
        + list(report.shed)
        + list(getattr(report, "expired", ()))
    )
    return Counter(offered) - others


def assert_each_payload_once(report: Any, offered: Iterable[Any]) -> Counter:
    """Check that every offered payload has exactly one outcome; return the completed ones.

    ``offered`` must hold distinct payloads, as the tests' sources yield.
    """
    offered = list(offered)
    assert len(offered) == len(set(offered)), "test sources yield distinct payloads"
    assert report.offered == len(offered), (report.offered, offered)
    assert report.balanced, report
    # an item CoDel shed from the queue was admitted first (report.codel_shed of them)
    codel_shed = getattr(report, "codel_shed", 0)
    assert report.admitted == report.offered - len(report.shed) + codel_shed, report
    dead = [letter.payload for letter in report.dead_letters]
    expired = list(getattr(report, "expired", ()))
    outcomes = Counter(dead + list(report.unfinished) + list(report.shed) + expired)
    twice = [payload for payload, count in outcomes.items() if count > 1]
    assert not twice, f"payloads with two outcomes: {twice} in {report}"
    strangers = set(outcomes) - set(offered)
    assert not strangers, f"payloads never offered: {strangers}"
    completed = completed_payloads(report, offered)
    assert sum(completed.values()) == report.completed, (completed, report)
    return completed


def assert_results_accounted(delivered: Iterable[Any], finished: Counter, report: Any) -> None:
    """Every finished item's result was delivered once or reported as not delivered."""
    delivered = Counter(delivered)
    undelivered = undelivered_payloads(report)
    if isinstance(undelivered, int):
        # Results still in the stream at the close may be read afterwards (or not,
        # by a consumer that stopped): they are neither lost nor counted twice.
        waiting = getattr(report, "results_waiting", 0)
        got, done = sum(delivered.values()), sum(finished.values())
        assert not delivered - finished, f"delivered unfinished items: {delivered - finished}"
        assert got + undelivered <= done <= got + undelivered + waiting, (
            f"{got} results delivered + {undelivered} reported undelivered "
            f"(+ {waiting} waiting at the close) do not account for {done} finished"
        )
        return
    reported = Counter(undelivered or [])
    assert delivered + reported == finished, (
        f"results delivered {sorted(delivered.elements())} + reported undelivered "
        f"{sorted(reported.elements())} != finished {sorted(finished.elements())}"
    )


def run_interrupted(
    pipe: Any,
    source: Any,
    *,
    stop_at: float | None = None,
    cancel_at: float | None = None,
    cancel_twice: bool = False,
) -> Any:
    """Run ``pipe`` on ``source`` in virtual time; stop it, or cancel the run (once or
    twice), after the seconds given; return its report."""
    from pipeline.sim.vloop import run_virtual

    async def main():
        run = asyncio.ensure_future(pipe.run(source))
        if stop_at is not None:
            await asyncio.sleep(stop_at)
            pipe.stop()
        if cancel_at is not None:
            await asyncio.sleep(cancel_at)
            run.cancel()
            if cancel_twice:
                await asyncio.sleep(0)
                run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            return pipe.report
        return await run

    return run_virtual(main())


def assert_nothing_lost(report: Any, offered: list[Any], completed: list[Any]) -> None:
    """Every offered payload ended exactly once (``completed`` as the handler saw them),
    and nothing is left queued or running."""
    assert report.balanced, report
    others = [
        *report.shed,
        *report.unfinished,
        *report.expired,
        *(letter.payload for letter in report.dead_letters),
    ]
    assert Counter(completed + others) == Counter(offered), report
    assert len(completed) == report.completed and len(offered) == report.offered
    assert report.statistics.queue_size == 0 and report.statistics.workers_busy == 0
