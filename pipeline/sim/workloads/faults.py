"""Faults a scenario injects: a drop in the downstream's capacity, a spike in the load.

- :class:`CapacityDrop` scales every downstream server's speed by ``factor``
  during ``[at_s, at_s + for_s)``, work in progress included: a service that
  spans a boundary runs at each speed for the part of it inside each interval
  (remaining work = remaining time x speed).
- :class:`LoadSpike` scales the arrival rate by ``factor`` during the same
  kind of interval (see :mod:`pipeline.sim.workloads.spikes` for how).

Overlapping faults of one kind multiply. :class:`SpeedProfile` is the
piecewise-constant product of a scenario's factors: the downstream asks it
when a service that starts at ``t`` with ``w`` seconds of work (at full speed)
ends, and the arrivals ask it for the spike's rate factor.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..._validate import real, show

__all__ = ["CapacityDrop", "Fault", "LoadSpike", "SpeedProfile", "check_faults"]


@dataclass(frozen=True, kw_only=True)
class Fault:
    """Base of the faults: ``factor`` applies during ``[at_s, at_s + for_s)``, seconds of
    virtual time from the run's start.

    Raises:
        TypeError: a part that is not a real number (a bool is not).
        ValueError: ``at_s < 0``, ``for_s <= 0``, ``factor <= 0``, NaN or infinity.
    """

    at_s: float
    for_s: float
    factor: float

    def __post_init__(self) -> None:
        kind = type(self).__name__
        object.__setattr__(
            self, "at_s", real("at_s", self.at_s, f"seconds, {kind} start", at_least=0)
        )
        object.__setattr__(
            self, "for_s", real("for_s", self.for_s, f"seconds, {kind} length", above=0)
        )
        object.__setattr__(
            self, "factor", real("factor", self.factor, f"{kind} multiplier", above=0)
        )
        if not math.isfinite(self.at_s + self.for_s):
            raise ValueError(
                f"at_s + for_s must be finite (seconds), got {show(self.at_s)} + {show(self.for_s)}"
            )

    @property
    def end_s(self) -> float:
        """When the fault ends, seconds (``at_s + for_s``; the fault is off from then on)."""
        return self.at_s + self.for_s


@dataclass(frozen=True, kw_only=True)
class CapacityDrop(Fault):
    """Every downstream server runs at ``factor`` x its speed during ``[at_s, at_s + for_s)``.

    ``factor=0.2`` is an 80% cut (a service needing 1 s takes 5 s inside the
    drop); ``factor > 1`` is a boost. Work in progress slows down and speeds
    up at the boundaries. Needs a :class:`~pipeline.sim.Downstream` in the scenario.

    Example:
        >>> CapacityDrop(at_s=60.0, for_s=10.0, factor=0.2)
    """


@dataclass(frozen=True, kw_only=True)
class LoadSpike(Fault):
    """The arrival rate is ``factor`` x its own during ``[at_s, at_s + for_s)``.

    ``factor=2.0`` doubles it; ``factor=0.7`` is a 30% cut in the load.

    Example:
        >>> LoadSpike(at_s=60.0, for_s=10.0, factor=2.0)
    """


def check_faults(faults: object) -> tuple[Fault, ...]:
    """``faults`` as a tuple of :class:`Fault`, or a TypeError naming the bad entry."""
    if isinstance(faults, str | bytes | Fault) or not isinstance(faults, Iterable):
        raise TypeError(f"faults must be a list of CapacityDrop or LoadSpike, got {show(faults)}")
    checked = tuple(faults)
    for index, fault in enumerate(checked):
        if type(fault) not in (CapacityDrop, LoadSpike):
            raise TypeError(
                f"faults[{index}] must be a CapacityDrop or a LoadSpike, got {show(fault)}"
            )
    return checked


class SpeedProfile:
    """The product of some faults' factors, a step function of time (1.0 outside them).

    Args:
        faults: the faults whose factors multiply (any number; none is speed 1 throughout).
    """

    __slots__ = ("_factors", "_starts")

    def __init__(self, faults: Sequence[Fault]) -> None:
        edges = sorted({0.0} | {f.at_s for f in faults} | {f.end_s for f in faults})
        factors = []
        for start in edges:
            product = 1.0
            for fault in faults:
                if fault.at_s <= start < fault.end_s:
                    product *= fault.factor
            factors.append(product)
        self._starts = edges
        self._factors = factors

    @property
    def constant(self) -> bool:
        """Whether the factor is 1.0 throughout (no fault)."""
        return all(factor == 1.0 for factor in self._factors)

    def segments(self) -> list[tuple[float, float, float]]:
        """``(start_s, end_s, factor)`` of each piece, the last ending at infinity."""
        ends = [*self._starts[1:], math.inf]
        return list(zip(self._starts, ends, self._factors, strict=True))

    def factor_at(self, t: float) -> float:
        """The factor in force at ``t`` seconds (pieces are closed on the left)."""
        return self._factors[max(bisect.bisect_right(self._starts, t) - 1, 0)]

    def finish_s(self, start_s: float, work_s: float) -> float:
        """When ``work_s`` seconds of full-speed work started at ``start_s`` is done.

        Walks the pieces from the one holding ``start_s``: in a piece of factor
        ``f`` ending at ``b``, ``(b - t) x f`` of the work is done; the piece in
        which the rest fits ends the service at ``t + rest / f``.
        """
        index = max(bisect.bisect_right(self._starts, start_s) - 1, 0)
        t, rest = start_s, work_s
        starts, factors = self._starts, self._factors
        last = len(starts) - 1
        while index < last:
            factor, end = factors[index], starts[index + 1]
            room = (end - t) * factor
            if rest <= room:
                return t + rest / factor
            rest -= room
            t = end
            index += 1
        return t + rest / factors[last]
