"""A plan's search space: its axes checked, its points in cost order, each point's scenario.

:func:`~.plan.plan` walks the points :func:`cost_order` lists, fewest workers
first (on a chain, the fewest workers and queue slots over the stages
searched), then the smallest queue (an unbounded one last), then the other
fields in the order given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...running.engine_choice import choose_engine
from ...workloads.scenario import Scenario
from .records import ranked_values

__all__ = [
    "MAX_CANDIDATES",
    "configured",
    "cost_fields",
    "cost_order",
    "cost_totals",
    "replication_range",
    "search_axes",
]

MAX_CANDIDATES = 100_000
"""Most configurations a search space may hold (the product of its value lists)."""

_MAX_REPLICATIONS = 10_000


# -- validating the arguments --------------------------------------------------------------


def replication_range(replications: int | Sequence[int]) -> tuple[int, int]:
    allowed = (
        "replications must be an integer >= 2 or a pair (min, max) with "
        f"2 <= min <= max <= {_MAX_REPLICATIONS:,}"
    )

    def whole(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"{allowed}, got {replications!r}")
        return int(value)

    if isinstance(replications, Sequence) and not isinstance(replications, str):
        if len(replications) != 2:
            raise ValueError(f"{allowed}, got {replications!r}")
        low, high = whole(replications[0]), whole(replications[1])
    else:
        low = high = whole(replications)
    if not 2 <= low <= high <= _MAX_REPLICATIONS:
        raise ValueError(f"{allowed}, got {replications!r}")
    return low, high


def _plain_value(value: Any) -> Any:
    """numpy scalars as Python ones, so the plan's tables and JSON hold plain values."""
    return value.item() if isinstance(value, np.generic) else value


class _Seen:
    """Values met so far: a set where they hash, a list for the rest (a 10,000-value range)."""

    def __init__(self) -> None:
        self._hashed: set[Any] = set()
        self._other: list[Any] = []

    def add(self, value: Any) -> bool:
        """Remember ``value``; True if an equal one was met before."""
        try:
            if value in self._hashed:
                return True
            self._hashed.add(value)
        except TypeError:
            if value in self._other:
                return True
            self._other.append(value)
        return False


def search_axes(
    base: Scenario, search: Mapping[str, Sequence[Any]], engine: str
) -> dict[str, list[Any]]:
    """The search, checked: field -> distinct values, each accepted by the scenario."""
    if not isinstance(search, Mapping):
        raise TypeError(
            f"search must be a dict of field name -> values, e.g. "
            f"{{'concurrency': range(1, 65)}}, got {search!r}"
        )
    if not search:
        raise ValueError(
            "the search space is empty: give at least one field to vary, "
            "e.g. {'concurrency': range(1, 65)}"
        )
    axes: dict[str, list[Any]] = {}
    size = 1
    for name, values in search.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
            raise TypeError(
                f"search[{name!r}] must be a sequence of values (a list or range), got {values!r}"
            )
        plain = [_plain_value(v) for v in values]
        if not plain:
            raise ValueError(f"the search space is empty: search[{name!r}] holds no value")
        seen = _Seen()
        for value in plain:
            if seen.add(value):
                raise ValueError(f"search[{name!r}] repeats the value {value!r}")
            try:
                base.replace(**{name: value})
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"search[{name!r}] = {value!r}: {exc}") from None
        axes[name] = plain
        size *= len(plain)
        if size > MAX_CANDIDATES:
            raise ValueError(
                f"the search space holds more than {MAX_CANDIDATES:,} configurations; "
                "narrow a range or drop a field"
            )
    _check_engine_takes(base, axes, engine)
    return axes


def _check_engine_takes(base: Scenario, axes: Mapping[str, Sequence[Any]], engine: str) -> None:
    """Refuse, before any run, a search holding a configuration ``engine`` cannot run.

    Each value is tried with every other field at its first value: configurations
    of the search, one per value. Whether a scenario is inside the kernel's domain
    is decided field by field, so these are all inside exactly when every
    configuration is (a value the base lacks can bring the base inside).
    """
    first = {name: values[0] for name, values in axes.items()}
    for name, values in axes.items():
        for value in values:
            point = {**first, name: value}
            try:
                scenario = base.replace(**point)
            except (TypeError, ValueError):
                continue  # values that do not go together: configured() names the point
            choose_engine(scenario, engine, where=f"search point {point}")


# Config fields a default cost order minimises first, in this order; on a chain, the
# total over the stages searched (their "stage.concurrency" fields, ...).
_TOTALLED = ("concurrency", "queue_maxsize")


def cost_totals(base: Scenario, axes: Mapping[str, Sequence[Any]]) -> list[list[str]]:
    """A chain's default cost groups: its searched ``*.concurrency`` fields, then its
    ``*.queue_maxsize`` fields (empty groups left out); none for a single stage."""
    if base.stages is None:
        return []
    groups = [[f for f in axes if f.rpartition(".")[2] == total] for total in _TOTALLED]
    return [group for group in groups if group]


def cost_fields(
    axes: Mapping[str, Sequence[Any]], cost: Sequence[str] | None, totals: list[list[str]]
) -> list[str]:
    if cost is None and totals:
        first = [f for group in totals for f in group]
    elif cost is None:
        first = [f for f in _TOTALLED if f in axes]
    else:
        first = [cost] if isinstance(cost, str) else list(cost)
        unknown = [f for f in first if f not in axes]
        if unknown:
            raise ValueError(f"cost fields {unknown} are not searched; searched: {list(axes)}")
    return first + [f for f in axes if f not in first]


def cost_order(
    axes: Mapping[str, list[Any]], fields: Sequence[str], totals: Sequence[Sequence[str]] = ()
) -> list[dict[str, Any]]:
    """Every configuration, cheapest first.

    Lexicographic in ``fields``; with ``totals`` (a chain's default), first by
    the sum of each group's values in turn (total workers, then total queue
    slots, an unbounded queue counting as infinite), lexicographic among equal
    sums. Either way, one step cheaper in one field is earlier.
    """
    import itertools

    ranked = {name: ranked_values(values) for name, values in axes.items()}
    points = [
        dict(zip(fields, combo, strict=True))
        for combo in itertools.product(*(ranked[f] for f in fields))
    ]
    if totals:

        def total(point: dict[str, Any], group: Sequence[str]) -> float:
            return sum(math.inf if point[f] is None else point[f] for f in group)

        # A stable sort: equal totals keep their lexicographic order.
        points.sort(key=lambda point: tuple(total(point, group) for group in totals))
    return points


def configured(base: Scenario, point: Mapping[str, Any]) -> Scenario:
    try:
        return base.replace(**point)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"search point {point}: {exc}") from None
