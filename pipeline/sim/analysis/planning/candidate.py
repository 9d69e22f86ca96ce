"""One configuration of a plan's search: its place in cost order, its runs, its verdict,
and when its verdict is looked at (the replication schedule and each look's level).

:func:`~.plan.plan` fills these as it walks the search space;
:class:`~.result.Plan` reads them to say what was found. The record lives
apart from both so that the result depends on what a candidate is, not on
the search that made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .slo import SLO, Judgement, judge

if TYPE_CHECKING:
    from ...workloads.scenario import Scenario

__all__ = ["Candidate", "look_confidence", "replication_schedule"]


@dataclass
class Candidate:
    """One configuration of the search: its place in cost order and what its runs measured."""

    rank: int
    point: dict[str, Any]
    scenario: Scenario | None = None
    note: str | None = None  # why it was rejected without runs
    values: list[tuple[float, ...]] = field(default_factory=list)  # per replication
    # Per replication, per SLO metric: (events, trials) behind a fraction, else None.
    counts: list[tuple[tuple[int, int] | None, ...]] = field(default_factory=list)
    engines: set[str] = field(default_factory=set)
    # Per replication: did its drain time out, and how many items did it leave unfinished.
    timed_out: list[bool] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    judgements: tuple[Judgement, ...] = ()
    verdict: str = "unexamined"  # meets | fails | undecided | unstable | unexamined
    # Per replication: the values of the cost's metrics (cost.WAIT_METRICS), when priced.
    extra: list[tuple[float, ...]] = field(default_factory=list)

    @property
    def replications(self) -> int:
        return len(self.values)

    def judge(self, slos: Sequence[SLO], confidence: float) -> None:
        columns = np.array(self.values, dtype=np.float64).T
        tallies = list(zip(*self.counts, strict=True))
        self.judgements = tuple(
            judge(
                slo,
                column,
                confidence=confidence,
                counts=None if None in tally else list(tally),
                timed_out=self.timed_out,
            )
            for slo, column, tally in zip(slos, columns, tallies, strict=True)
        )
        verdicts = {j.verdict for j in self.judgements}
        self.verdict = (
            "fails" if "fails" in verdicts else "undecided" if "undecided" in verdicts else "meets"
        )


def replication_schedule(low: int, high: int) -> list[int]:
    """Replication counts a configuration can reach: ``low``, doubling, capped at ``high``.

    ``(3, 30)`` gives ``[3, 6, 12, 24, 30]``: a verdict is looked at after each.
    """
    counts = [low]
    while counts[-1] < high:
        counts.append(min(2 * counts[-1], high))
    return counts


def look_confidence(confidence: float, looks: int) -> float:
    """The level of each look so that ``looks`` looks together keep ``confidence``.

    Looking again after more replications, and stopping at the first decisive
    bound, gives a wrong verdict more chances (optional stopping). By
    Bonferroni, judging each look at ``1 - (1 - confidence) / looks`` keeps the
    probability that any look gives a wrong verdict at most ``1 - confidence``.
    """
    return 1.0 - (1.0 - confidence) / looks
