"""One configuration of a plan's search: its place in cost order, its runs, its verdict,
and when its verdict is looked at (the replication schedule and each look's level).

:func:`~.plan.plan` fills these as it walks the search space;
:class:`~.result.Plan` reads them to say what was found. The record lives
apart from both so that the result depends on what a candidate is, not on
the search that made it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .judgement import Judgement, judge
from .slo import SLO

if TYPE_CHECKING:
    from ...workloads.scenario import Scenario

__all__ = [
    "Candidate",
    "look_confidence",
    "replication_schedule",
    "slack",
    "verdict_of_judgements",
]


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
    # Per replication: the values of the cost's metrics (cost.WAIT_METRICS), when priced;
    # in a scenario set, every scenario's in turn.
    extra: list[tuple[float, ...]] = field(default_factory=list)
    # A scenario set (plan(scenarios=...)): the names and this configuration applied to
    # each; then ``values`` and ``counts`` hold every scenario's SLO metrics in turn, and
    # ``cuts`` each scenario's drain timeouts per replication.
    names: tuple[str, ...] = ()
    members: tuple[Scenario, ...] = ()
    cuts: list[tuple[bool, ...]] = field(default_factory=list)
    # Per scenario name, its judgements (one per SLO); per SLO, the scenario that binds.
    by_scenario: dict[str, tuple[Judgement, ...]] = field(default_factory=dict)
    worst_of: tuple[str, ...] = ()

    @property
    def replications(self) -> int:
        return len(self.values)

    def judge(self, slos: Sequence[SLO], confidence: float) -> None:
        """Judge every SLO (in every scenario of a set) at ``confidence``; the verdict
        fails when one judgement fails, meets when every one meets."""
        columns = np.array(self.values, dtype=np.float64).T
        tallies = list(zip(*self.counts, strict=True))
        k = len(slos)

        def judged(offset: int, cuts: Sequence[bool]) -> tuple[Judgement, ...]:
            return tuple(
                judge(
                    slo,
                    columns[offset + i],
                    confidence=confidence,
                    counts=None if None in tallies[offset + i] else list(tallies[offset + i]),
                    timed_out=cuts,
                )
                for i, slo in enumerate(slos)
            )

        if not self.names:
            self.judgements = judged(0, self.timed_out)
        else:
            self.by_scenario = {
                name: judged(s * k, [cut[s] for cut in self.cuts])
                for s, name in enumerate(self.names)
            }
            # Per SLO, the scenario that decides it: one that fails, else one still
            # open, else the one closest to the limit.
            pairs = [
                min(
                    ((name, found[i]) for name, found in self.by_scenario.items()),
                    key=lambda pair: (_ORDER[pair[1].verdict], slack(pair[1])),
                )
                for i in range(k)
            ]
            self.worst_of = tuple(name for name, _ in pairs)
            self.judgements = tuple(j for _, j in pairs)
        self.verdict = verdict_of_judgements(self.judgements)

    def of_scenario(self, name: str) -> Candidate:
        """A scenario set's candidate seen in one scenario: that scenario configured, its
        values, counts, drain cuts and judgements alone (what headroom and sensitivity
        read)."""
        s, k = self.names.index(name), len(self.judgements)
        m = len(self.extra[0]) // len(self.names) if self.extra else 0
        found = self.by_scenario[name]
        return Candidate(
            self.rank,
            dict(self.point),
            scenario=self.members[s],
            values=[v[s * k : s * k + k] for v in self.values],
            counts=[c[s * k : s * k + k] for c in self.counts],
            engines=set(self.engines),
            timed_out=[cut[s] for cut in self.cuts],
            unfinished=list(self.unfinished),
            judgements=found,
            verdict=verdict_of_judgements(found),
            extra=[e[s * m : s * m + m] for e in self.extra],
        )

    def binding_scenario(self) -> str | None:
        """A scenario set's scenario whose judgement is closest to its limit (None
        without a set or judgements)."""
        if not self.names or not self.judgements:
            return None
        index = min(range(len(self.judgements)), key=lambda i: slack(self.judgements[i]))
        return self.worst_of[index]


_ORDER = {"fails": 0, "undecided": 1, "meets": 2}


def verdict_of_judgements(judgements: Sequence[Judgement]) -> str:
    """``fails`` when one judgement fails, ``undecided`` when one is open, else ``meets``."""
    verdicts = {j.verdict for j in judgements}
    return "fails" if "fails" in verdicts else "undecided" if "undecided" in verdicts else "meets"


def slack(j: Judgement) -> float:
    """How far the bound on the safe side is inside the limit, relative to the limit
    (absolute when the limit is 0); negative when it is outside."""
    gap = (j.slo.limit - j.bound) if j.slo.upper else (j.bound - j.slo.limit)
    if math.isnan(gap):
        return math.inf
    return gap / abs(j.slo.limit) if j.slo.limit != 0 else gap


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
