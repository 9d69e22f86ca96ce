"""With a wait cost: the configuration of least total cost per hour meeting every SLO.

:func:`~.plan.plan` first finds the cheapest configuration in workers that
meets every SLO (every cheaper one shown to fail). With ``wait_hour`` priced,
more workers can cost less in total (less waiting), so the search goes on:

1. the *best* is the configuration meeting every SLO with the least mean total
   cost per hour (ties: the earlier in cost order);
2. no configuration whose workers alone cost more than the best's upper bound
   can be cheaper: those are left unexamined (their note says so);
3. the others are examined in cost order (``lookahead`` per round) and judged
   on the SLOs as usual; a *rival* -- another configuration meeting every SLO
   whose total is not shown to exceed the best's (the lower bound of the paired
   difference of totals, replication by replication, is <= 0) -- gets more
   replications, as the best does, up to the budget;
4. when a round has nothing to run, the best is the answer; a rival still not
   told apart is named in the cost's note.

Every bound is one-sided at the plan's per-look level, as the SLO verdicts are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .candidate import Candidate
from .cost import Cost, Mix, difference_bounds, estimate

__all__ = ["least_total_cost"]


def _doubled(candidate: Candidate, high: int, at_least: int = 0) -> list[tuple[Any, int]]:
    """The next replications of ``candidate``: up to twice as many (or ``at_least``), capped."""
    n = candidate.replications
    stop = min(max(2 * n, at_least), high)
    return [(candidate, r) for r in range(n, stop)]


def _adder(tasks: dict[tuple[int, int], tuple[Any, int]]) -> Callable[[list[Any]], None]:
    def add(pairs: list[tuple[Any, int]]) -> None:
        for candidate, r in pairs:
            tasks[(candidate.rank, r)] = (candidate, r)

    return add


def least_total_cost(
    candidates: Sequence[Candidate],
    examined: int,
    run: Callable[[list[tuple[Any, int]]], int],
    examine: Callable[[Candidate], bool],
    *,
    cost: Cost,
    mix: Mix,
    level: float,
    replications: tuple[int, int],
    lookahead: int,
) -> tuple[int, Candidate]:
    """Search on past the cheapest configuration in workers (see the module docstring).

    Args:
        candidates: every configuration, in cost order; ``candidates[:examined]``
            looked at so far, at least one of them meeting every SLO.
        run: runs a round of ``(candidate, replication)`` tasks and judges them again;
            returns the runs made (0: the plan's run budget allowed none).
        examine: configures a candidate met for the first time; False if queueing
            theory rejects it.
        mix: the scenarios the cost per hour averages over (one, or a set's with
            their shares of the hours).

    Returns:
        How many candidates are now looked at (a prefix), and the choice.
    """
    low, high = replications
    workers = [mix.workers_per_hour(cost, c.point) for c in candidates]
    # The least workers' cost from each position on: where nothing left can be cheaper.
    floor = list(workers)
    for i in range(len(floor) - 2, -1, -1):
        floor[i] = min(floor[i], floor[i + 1])

    def total(candidate: Candidate) -> Any:
        return estimate(cost, mix, candidate.point, candidate.extra, level)

    def difference(a: Candidate, b: Candidate) -> tuple[float, float]:
        return difference_bounds(cost, mix, a.extra, a.point, b.extra, b.point, level)

    while True:
        feasible = [c for c in candidates[:examined] if c.verdict == "meets"]
        best = min(feasible, key=lambda c: (total(c).total, c.rank))
        ceiling = total(best).high
        tasks: dict[tuple[int, int], tuple[Any, int]] = {}
        add = _adder(tasks)
        for c in candidates[:examined]:
            if c.verdict == "undecided" and workers[c.rank] < ceiling:
                add(_doubled(c, high))
        for c in feasible:
            if c is best or difference(best, c)[0] > 0:
                continue  # shown to cost more than the best
            if c.replications < high or best.replications < high:
                add(_doubled(c, high, at_least=best.replications))
                add(_doubled(best, high, at_least=c.replications))
        fresh = 0
        while fresh < lookahead and examined < len(candidates) and floor[examined] < ceiling:
            c = candidates[examined]
            examined += 1
            if workers[c.rank] >= ceiling:
                c.note = (
                    f"not run: its workers alone cost {workers[c.rank]:.4g} per hour, more "
                    f"than the total of a configuration meeting every SLO (at most {ceiling:.4g})"
                )
                continue
            if not examine(c):
                continue
            add([(c, r) for r in range(low)])
            fresh += 1
        # A candidate's tasks in replication order (the round records them as listed); a
        # round the run budget leaves nothing of ends the search.
        if not tasks or not run(sorted(tasks.values(), key=lambda task: (task[0].rank, task[1]))):
            break
    return examined, best
