"""A plan's arguments, checked before any run: each refused in one line naming the
argument, its value and what is allowed (see :func:`~.plan.plan`'s ``Raises``).

:func:`check_arguments` returns them as one frozen :class:`PlanArguments`: the SLOs
parsed, the search's axes with their values, the scenario set, the prices and the
mix of hours a cost averages over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...running.engine_choice import check_engine
from ...workloads.randomness import check_replications, replays_one_sample
from ...workloads.scenario import Scenario
from .cost import Cost, Mix, check_shares
from .rounds import check_budget
from .search import replication_range, search_axes
from .slo import SLO, check_confidence, check_slo_metrics, parse_slos

__all__ = ["PlanArguments", "check_arguments"]


@dataclass(frozen=True)
class PlanArguments:
    """What :func:`~.plan.plan` was asked, checked.

    Attributes:
        base: the scenario every configuration starts from.
        slos: the SLOs, parsed, in the order given.
        level: the one-sided confidence asked for.
        replications: ``(min, max)`` replications per configuration.
        budget: the most simulation runs the plan may make.
        check: judge the one configuration given instead of searching.
        lookahead: configurations examined per round while no target is known.
        processes: local worker processes asked for (None: the default).
        engine: ``"auto"``, ``"asyncio"`` or ``"kernel"``.
        members: a scenario set's scenarios by name (empty without a set).
        axes: field -> its distinct values, each accepted by every scenario.
        prices: the prices (None: unpriced).
        order: the fields in the order they are minimised (None: the default).
        mix: the scenarios a cost per hour averages over, with their shares.
        headroom: find the choice's headroom too.
        skip_unstable: reject what queueing theory shows cannot keep up, unrun.
    """

    base: Scenario
    slos: tuple[SLO, ...]
    level: float
    replications: tuple[int, int]
    budget: int
    check: bool
    lookahead: int
    processes: int | None
    engine: str
    members: dict[str, Scenario]
    axes: dict[str, list[Any]]
    prices: Cost | None
    order: Sequence[str] | None
    mix: Mix
    headroom: bool
    skip_unstable: bool


def check_arguments(
    base: Any,
    search: Any,
    slos: Any,
    *,
    confidence: Any,
    replications: Any,
    budget: Any,
    check: Any,
    cost: Any,
    order: Any,
    headroom: Any,
    scenarios: Any,
    shares: Any,
    lookahead: Any,
    skip_unstable: bool,
    processes: Any,
    engine: Any,
) -> PlanArguments:
    """:func:`~.plan.plan`'s arguments checked, in the order its docstring lists them.

    Raises:
        TypeError, ValueError: as :func:`~.plan.plan` says.
    """
    if not isinstance(base, Scenario):
        raise TypeError(f"base must be a Scenario, got {base!r}")
    parsed = parse_slos(slos)
    level = check_confidence(confidence)
    low, high = replication_range(replications)
    allowed = check_budget(budget)
    _check_switches(check, lookahead, processes)
    engine = check_engine(engine)
    members = _scenario_set(base, scenarios)
    axes = _checked_axes(base, search, engine, members, check)
    _check_one_sample(base, members, low, high)
    _check_metrics(parsed, base, members, axes)
    prices, order = _prices(cost, order, base, members)
    mix = _mix(base, members, shares, prices)
    if not isinstance(headroom, bool):
        raise TypeError(f"headroom must be True or False, got {headroom!r}")
    return PlanArguments(
        base=base,
        slos=tuple(parsed),
        level=level,
        replications=(low, high),
        budget=allowed,
        check=check,
        lookahead=lookahead,
        processes=processes,
        engine=engine,
        members=members,
        axes=axes,
        prices=prices,
        order=order,
        mix=mix,
        headroom=headroom,
        skip_unstable=skip_unstable,
    )


def _check_switches(check: Any, lookahead: Any, processes: Any) -> None:
    if not isinstance(check, bool):
        raise TypeError(f"check must be True or False, got {check!r}")
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 1:
        raise ValueError(f"lookahead must be an integer >= 1, got {lookahead!r}")
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ValueError(f"processes must be an integer >= 1 or None, got {processes!r}")


def _checked_axes(
    base: Scenario,
    search: Any,
    engine: str,
    members: Mapping[str, Scenario],
    check: bool,
) -> dict[str, list[Any]]:
    """The search's axes, every value accepted by ``base`` and by each scenario of the set;
    for a check, one value each."""
    axes = search_axes(base, search, engine)
    if check:
        several = next((name for name, values in axes.items() if len(values) != 1), None)
        if several is not None:
            raise ValueError(
                f"a check judges one configuration: search[{several!r}] must hold one value, "
                f"got {len(axes[several])}"
            )
    for name, member in members.items():
        try:
            search_axes(member, search, engine)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"scenario {name!r}: {exc}") from None
    return axes


def _check_one_sample(base: Scenario, members: Mapping[str, Scenario], low: int, high: int) -> None:
    # A plan judges by the spread of its replications: a replayed day has none to show, and
    # its runs' agreement would pass for certainty (a model with nothing random is exact).
    for name, scenario in (("", base), *members.items()):
        if replays_one_sample(scenario):
            where = f"scenario {name!r}: " if name else ""
            check_replications(scenario, high, f"{where}a plan's replications ({low} to {high})")


def _check_metrics(
    parsed: Sequence[SLO],
    base: Scenario,
    members: Mapping[str, Scenario],
    axes: Mapping[str, Sequence[Any]],
) -> None:
    """Every SLO's metric is one each scenario's runs report."""
    for scenario in (base, *members.values()):
        backlog = scenario.initial_backlog > 0 or "initial_backlog" in axes
        names = None if scenario.classes is None else [c.name for c in scenario.classes]
        if scenario.stages is not None:
            fans_out = any(stage.fan_out != 1 for stage in scenario.stages) or any(
                str(name).rpartition(".")[2] == "fan_out" for name in axes
            )
            check_slo_metrics(parsed, chain=True, fan_out=fans_out, backlog=backlog, classes=names)
        else:
            check_slo_metrics(parsed, chain=False, backlog=backlog, classes=names)


def _prices(
    cost: Any, order: Any, base: Scenario, members: Mapping[str, Scenario]
) -> tuple[Cost | None, Any]:
    """``(prices, order)``: ``cost`` parsed and checked against every scenario, or, for a
    sequence of field names (earlier callers' spelling), taken as the field order."""
    prices: Cost | None = None
    if isinstance(cost, Cost | Mapping):
        prices = Cost.parse(cost)
        prices.check(base)
        for name, member in members.items():
            try:
                prices.check(member)
            except ValueError as exc:
                raise ValueError(f"scenario {name!r}: {exc}") from None
    elif order is None:
        order = cost
    elif cost is not None:
        raise ValueError("give the field order as order= (cost= then holds prices), not both")
    return prices, order


def _mix(base: Scenario, members: Mapping[str, Scenario], shares: Any, prices: Cost | None) -> Mix:
    """The scenarios a cost per hour averages over, with their shares of the hours."""
    if shares is not None and not members:
        raise ValueError("shares weigh a scenario set's hours: give scenarios= too, or no shares")
    if shares is not None and prices is None:
        raise ValueError(
            "shares weigh the cost per hour over the scenarios: give cost= too, or no shares"
        )
    mix = (
        Mix(
            tuple(members.values()),
            check_shares(tuple(members), shares),
            tuple(members),
            given=shares is not None,
        )
        if members
        else Mix.single(base)
    )
    if prices is not None:
        mix.rates  # noqa: B018 -- a rate the cost needs and cannot find: refused before any run
    return mix


def _scenario_set(base: Scenario, scenarios: Mapping[str, Scenario] | None) -> dict[str, Scenario]:
    """``scenarios``, checked: names -> Scenario, all chains or all single stages."""
    if scenarios is None:
        return {}
    if not isinstance(scenarios, Mapping):
        raise TypeError(
            f"scenarios must be a dict of name -> Scenario, e.g. {{'normal': base, 'peak': peak}}, "
            f"got {scenarios!r}"
        )
    if not scenarios:
        raise ValueError("scenarios is empty: give at least one name -> Scenario, or None")
    out: dict[str, Scenario] = {}
    for name, scenario in scenarios.items():
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"a scenario name must be a non-empty string, got {name!r}")
        if not isinstance(scenario, Scenario):
            raise TypeError(f"scenarios[{name!r}] must be a Scenario, got {scenario!r}")
        out[name] = scenario
    chains = {name for name, s in out.items() if s.stages is not None}
    if chains and (len(chains) < len(out) or base.stages is None):
        single = next(n for n in out if n not in chains) if len(chains) < len(out) else "base"
        raise ValueError(
            f"scenarios mix a chain ({sorted(chains)[0]!r}) with a single stage ({single!r}): "
            "every scenario must be a chain, or every one a single stage"
        )
    if not chains and base.stages is not None:
        raise ValueError(
            "scenarios mix a chain ('base') with a single stage: every scenario must be a "
            "chain, or every one a single stage"
        )
    return out
