"""Rate functions for :class:`~pipeline.sim.TimeVarying` arrivals.

Each is a small frozen, vectorised callable ``t (seconds, numpy array) ->
rate (arrivals per second)`` with a ``period_s`` and a ``repr`` that rebuilds
it, so a ``TimeVarying`` built on one rebuilds from its repr too.

- :class:`PiecewiseLinear` -- linear between points, held beyond them.
- :class:`IntervalCounts` -- constant within each interval at the measured
  count per interval, repeating.
- :class:`DailyCurve` -- a 24-hour base rate with a Gaussian peak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._validate import real, show

__all__ = ["DailyCurve", "IntervalCounts", "PiecewiseLinear"]

_UNIT = "arrivals per second"


@dataclass(frozen=True)
class PiecewiseLinear:
    """A rate profile (arrivals per second) linear between ``(times_s[i], rates[i])``.

    Before the first point the rate is ``rates[0]``, after the last
    ``rates[-1]`` (as ``numpy.interp``); it does not repeat. ``period_s =
    times_s[-1]`` is the window ``[0, period_s]`` ``TimeVarying.rate`` averages over.
    """

    times_s: tuple[float, ...]
    rates: tuple[float, ...]

    def __post_init__(self) -> None:
        t = tuple(
            real(f"times_s[{i}]", x, "seconds", at_least=0) for i, x in enumerate(self.times_s)
        )
        r = tuple(real(f"rates[{i}]", x, _UNIT, at_least=0) for i, x in enumerate(self.rates))
        if len(t) < 2 or len(t) != len(r):
            raise ValueError(
                "times_s and rates must have the same length >= 2, "
                f"got {len(t)} times and {len(r)} rates"
            )
        for i in range(1, len(t)):
            if not t[i] > t[i - 1]:
                raise ValueError(
                    f"times_s must be strictly increasing (seconds), got times_s[{i - 1}]="
                    f"{t[i - 1]!r} then times_s[{i}]={t[i]!r}"
                )
        object.__setattr__(self, "times_s", t)
        object.__setattr__(self, "rates", r)

    @property
    def period_s(self) -> float:
        """End of the profile (seconds): ``TimeVarying.rate`` averages over ``[0, period_s]``."""
        return self.times_s[-1]

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return np.interp(t, self.times_s, self.rates)


@dataclass(frozen=True)
class IntervalCounts:
    """A piecewise-constant rate from arrivals counted per interval, repeating.

    During ``[i * interval_s, (i + 1) * interval_s)`` the rate is
    ``counts[i] / interval_s`` arrivals per second, so the expected number of
    arrivals in interval ``i`` is exactly ``counts[i]``; after the last
    interval the profile starts again (``period_s = len(counts) * interval_s``),
    so ``n`` items or a long ``duration_s`` replay the measured window as often
    as needed. Counts may be fractional (a mean over several days).

    Why constant, not linear between interval midpoints: interpolation moves
    arrivals between neighbouring intervals, flattens the peak interval and
    breaks "expected arrivals per interval = the count"; within an interval, a
    count says nothing about when its arrivals came.
    """

    counts: tuple[float, ...]
    interval_s: float

    def __post_init__(self) -> None:
        counts = self.counts
        if not isinstance(counts, Sequence | np.ndarray) or isinstance(counts, str):
            raise TypeError(
                "counts must be a sequence of numbers (arrivals per interval), "
                f"got {type(counts).__name__}"
            )
        if len(counts) == 0:
            raise ValueError("counts must not be empty (arrivals per interval)")
        counts = tuple(
            real(f"counts[{i}]", c, "arrivals per interval", at_least=0)
            for i, c in enumerate(counts)
        )
        if not any(counts):
            raise ValueError(f"counts must not all be 0 (arrivals per interval), got {counts!r}")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(
            self, "interval_s", real("interval_s", self.interval_s, "seconds", above=0)
        )
        if not math.isfinite(self.period_s):
            raise ValueError(
                f"interval_s * len(counts) must be a finite number of seconds, "
                f"got {self.interval_s!r} * {len(counts)}"
            )
        cumulative = np.concatenate(([0.0], np.cumsum(counts)))
        cumulative.setflags(write=False)
        object.__setattr__(self, "_cumulative", cumulative)

    @property
    def period_s(self) -> float:
        """Length of the measured window (seconds), after which the profile repeats."""
        return len(self.counts) * self.interval_s

    @property
    def max_rate(self) -> float:
        """The highest rate (arrivals per second): the busiest interval's."""
        return max(self.counts) / self.interval_s

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return np.asarray(self.counts)[self._index(np.asarray(t, dtype=np.float64))] / (
            self.interval_s
        )

    def _index(self, t: np.ndarray) -> np.ndarray:
        phase = np.mod(t, self.period_s)
        # Rounding can put a phase just below period_s into interval len(counts).
        return np.minimum((phase // self.interval_s).astype(np.int64), len(self.counts) - 1)

    def _arrivals_until(self, t_s: float) -> float:
        """Expected arrivals in ``[0, t_s]``: whole periods, whole intervals, then a part."""
        periods, phase = divmod(t_s, self.period_s)
        i = int(self._index(np.array([phase]))[0])
        within = phase - i * self.interval_s
        return float(
            periods * self._cumulative[-1]
            + self._cumulative[i]
            + self.counts[i] * within / self.interval_s
        )

    def integral(self, t0_s: float, t1_s: float) -> float:
        """Expected arrivals in ``[t0_s, t1_s]`` (exact; ``counts[i]`` over interval ``i``)."""
        return self._arrivals_until(t1_s) - self._arrivals_until(t0_s)


@dataclass(frozen=True)
class DailyCurve:
    """A 24-hour periodic rate: ``base_rate`` plus a Gaussian bump at ``peak_hour``.

    ``rate(t) = base + (peak - base) * exp(-d**2 / (2 * width_h**2))`` where
    ``d`` is the circular distance (hours) between ``t``'s hour of day and
    ``peak_hour``; ``t`` is seconds since midnight of day 0.
    """

    base_rate: float
    peak_rate: float
    peak_hour: float = 9.0
    width_h: float = 2.0

    def __post_init__(self) -> None:
        base = real("base_rate", self.base_rate, _UNIT, at_least=0)
        peak = real("peak_rate", self.peak_rate, _UNIT, above=0)
        if peak < base:
            raise ValueError(
                f"peak_rate must be >= base_rate ({_UNIT}), got peak_rate={show(self.peak_rate)}, "
                f"base_rate={show(self.base_rate)}"
            )
        object.__setattr__(self, "base_rate", base)
        object.__setattr__(self, "peak_rate", peak)
        object.__setattr__(
            self,
            "peak_hour",
            real("peak_hour", self.peak_hour, "hour of day", at_least=0, at_most=24),
        )
        object.__setattr__(
            self, "width_h", real("width_h", self.width_h, "hours", above=0, at_most=12)
        )

    period_s = 86_400.0

    def __call__(self, t: np.ndarray) -> np.ndarray:
        hours = np.asarray(t, dtype=np.float64) / 3600.0
        d = np.abs((hours - self.peak_hour + 12.0) % 24.0 - 12.0)
        bump = np.exp(-0.5 * (d / self.width_h) ** 2)
        return self.base_rate + (self.peak_rate - self.base_rate) * bump
