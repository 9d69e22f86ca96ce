"""One configuration of a plan's search: its place in cost order, its runs, its verdict.

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

__all__ = ["Candidate"]


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
    judgements: tuple[Judgement, ...] = ()
    verdict: str = "unexamined"  # meets | fails | undecided | unstable | unexamined

    @property
    def replications(self) -> int:
        return len(self.values)

    def judge(self, slos: Sequence[SLO], confidence: float) -> None:
        columns = np.array(self.values, dtype=np.float64).T
        tallies = list(zip(*self.counts, strict=True))
        self.judgements = tuple(
            judge(slo, column, confidence=confidence, counts=None if None in tally else list(tally))
            for slo, column, tally in zip(slos, columns, tallies, strict=True)
        )
        verdicts = {j.verdict for j in self.judgements}
        self.verdict = (
            "fails" if "fails" in verdicts else "undecided" if "undecided" in verdicts else "meets"
        )
