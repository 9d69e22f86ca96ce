"""A plan's walk through its search space: every configuration in cost order, each
configured when first met, and the rounds that run them until a verdict settles.

Each round (the stopping rule of :func:`~.plan.plan`):

1. the *target* is the cheapest examined configuration that meets (if any): found
   again after every round that ran (:meth:`Walk.run_round`), so that the rest of the
   plan (the wait-cost search, the decision) reads it and never looks again;
2. every undecided configuration cheaper than the target (every one, with no
   target) that has fewer than ``max`` replications gets as many more as it
   has, capped at ``max``;
3. with no target yet, the next ``lookahead`` configurations not yet examined
   get ``min`` replications each (those queueing theory rejects, with
   ``skip_unstable``, are marked ``unstable`` without runs and do not count);
4. the round's runs go out together; a round with nothing to run (or nothing
   the run budget still allows) ends the walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..diagnostics.stability import unstable_note
from .candidate import Candidate
from .decision import first_meeting
from .search import configured, cost_fields, cost_order, cost_totals

if TYPE_CHECKING:
    from .arguments import PlanArguments
    from .rounds import Rounds

__all__ = ["Walk"]


class Walk:
    """Every configuration of a plan's search in cost order, and how far it has looked.

    Attributes:
        fields: the searched fields in cost order (the plan's ``cost``).
        candidates: every configuration, cheapest first.
        examined: how many have been looked at: ``candidates[:examined]``.
        target: the first configuration in cost order shown to meet every SLO after
            the last round run, or None.
    """

    def __init__(self, arguments: PlanArguments) -> None:
        self.arguments = arguments
        axes, order, prices = arguments.axes, arguments.order, arguments.prices
        totals = cost_totals(arguments.base, axes) if order is None else []
        self.fields = cost_fields(axes, order, totals)
        points = cost_order(axes, self.fields, totals)
        if prices is not None and order is None:
            # Priced: money first (a stable sort: equal prices keep the default order).
            points.sort(key=lambda point: arguments.mix.workers_per_hour(prices, point))
        self.candidates = [Candidate(rank, point) for rank, point in enumerate(points)]
        self.examined = 0
        self.target: Candidate | None = None

    @property
    def seen(self) -> list[Candidate]:
        """The configurations looked at so far, in cost order."""
        return self.candidates[: self.examined]

    def examine(self, candidate: Candidate) -> bool:
        """Configure a candidate met for the first time; False if theory rejects it."""
        arguments = self.arguments
        members, slos = arguments.members, arguments.slos
        skip_unstable = arguments.skip_unstable
        candidate.scenario = configured(arguments.base, candidate.point)
        note = unstable_note(candidate.scenario, slos) if skip_unstable and not members else None
        if members:
            candidate.names = tuple(members)
            candidate.members = tuple(configured(m, candidate.point) for m in members.values())
            for name, member in zip(candidate.names, candidate.members, strict=True):
                found = unstable_note(member, slos) if skip_unstable else None
                if found is not None:
                    note = f"scenario {name!r}: {found}"
                    break
        if note is not None:
            candidate.note, candidate.verdict = note, "unstable"
            return False
        return True

    def run_round(self, rounds: Rounds, tasks: list[tuple[Candidate, int]]) -> int:
        """Run a round of ``tasks`` on ``rounds`` and find the target again; returns
        the runs made (0: the run budget allowed none, and nothing changed)."""
        made = rounds.run(tasks)
        if made:
            # A verdict only changes with runs; one not yet examined is never "meets", so
            # the search past ``examined`` (the wait-cost search's) is counted too.
            self.target = first_meeting(self.candidates)
        return made

    def run(self, rounds: Rounds) -> None:
        """Run rounds (see the module docstring) until one has nothing to run."""
        low, high = self.arguments.replications
        while True:
            target = self.target
            cheaper = self.candidates[: target.rank if target else self.examined]
            tasks: list[tuple[Candidate, int]] = [
                (c, r)
                for c in cheaper
                if c.verdict == "undecided" and c.replications < high
                for r in range(c.replications, min(2 * c.replications, high))
            ]
            fresh = 0
            while (
                target is None
                and fresh < self.arguments.lookahead
                and self.examined < len(self.candidates)
            ):
                candidate = self.candidates[self.examined]
                self.examined += 1
                if not self.examine(candidate):
                    continue
                tasks += [(candidate, r) for r in range(low)]
                fresh += 1
            if not tasks or not self.run_round(rounds, tasks):
                break  # nothing left to run, or nothing the budget still allows
