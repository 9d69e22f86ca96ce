"""What a plan decided, read once off the configurations it examined, in cost order.

The *target* is the cheapest configuration examined that meets every SLO
(:func:`first_meeting`). The plan's outcome (:func:`decide`):

- ``"chosen"`` -- the target exists and every cheaper configuration was shown
  to fail (or rejected by queueing theory); with a wait cost priced, the choice
  is the configuration of least total cost per hour (:mod:`~.cheapest`);
- ``"undecided"`` -- a cheaper configuration is still undecided, the run budget
  left one unrun, or the search stopped short of any configuration meeting every
  SLO: nothing is chosen, and the target (if any) is the fallback;
- ``"infeasible"`` -- every configuration in the search fails some SLO.

:func:`~.plan.plan` computes the :class:`Decision` and hands it to
:class:`~.result.Plan`, which describes it and never decides again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .candidate import Candidate
from .records import PlanStatus

__all__ = ["Decision", "decide", "first_meeting", "open_below"]


def first_meeting(candidates: Sequence[Candidate]) -> Candidate | None:
    """The first of ``candidates`` (in cost order) that meets every SLO, else None."""
    return next((c for c in candidates if c.verdict == "meets"), None)


def open_below(candidates: Sequence[Candidate], target: Candidate | None) -> list[Candidate]:
    """The configurations of ``candidates`` cheaper than ``target`` (all of them without
    one) whose verdict is still undecided."""
    cheaper = candidates[: target.rank] if target is not None else candidates
    return [c for c in cheaper if c.verdict == "undecided"]


@dataclass(frozen=True)
class Decision:
    """A plan's outcome and the configurations it rests on.

    Attributes:
        status: ``"chosen"``, ``"undecided"`` or ``"infeasible"`` (a :class:`PlanStatus`).
        target: the chosen configuration (status ``"chosen"``); with status
            ``"undecided"``, the cheapest one shown to meet every SLO (the
            fallback), else None.
        open: the configurations cheaper than the cheapest one meeting every SLO
            (every one examined, when none meets) still undecided, in cost order.
        unrun: the points of the configurations cheaper than any meeting every SLO
            that the run budget left without a run, in cost order.
        cheapest: the first configuration in cost order shown to meet every SLO, or None.
        choice: with a wait cost priced, the configuration of least total cost per
            hour the search found (:mod:`~.cheapest`), or None.
    """

    status: PlanStatus
    target: Candidate | None
    open: tuple[Candidate, ...]
    unrun: tuple[dict[str, Any], ...]
    cheapest: Candidate | None = None
    choice: Candidate | None = None


def decide(
    examined: Sequence[Candidate],
    total: int,
    target: Candidate | None,
    choice: Candidate | None = None,
) -> Decision:
    """The outcome of a search that examined ``examined`` (a prefix of its ``total``
    configurations, in cost order) and found ``target`` first to meet every SLO
    (:func:`first_meeting` of ``examined``, as the walk keeps it: found once, not
    again here); ``choice``: the least total cost per hour, when a wait cost was priced
    (it replaces the cheapest in workers when chosen)."""
    cheapest = target
    cheaper = examined[: target.rank] if target else examined
    open_ = tuple(open_below(examined, target))
    # Configurations the run budget left unrun (and, with no target, the search
    # left short): not shown to fail, so nothing more expensive can be chosen.
    unrun = tuple(dict(c.point) for c in cheaper if c.verdict == "unexamined")
    short = target is None and len(examined) < total
    if open_ or unrun or short:
        status = PlanStatus.UNDECIDED
    elif target is not None:
        status = PlanStatus.CHOSEN
    else:
        status = PlanStatus.INFEASIBLE
    if status is PlanStatus.CHOSEN and choice is not None:
        target = choice  # least total cost per hour (a wait cost is priced)
    return Decision(status, target, open_, unrun, cheapest, choice)
