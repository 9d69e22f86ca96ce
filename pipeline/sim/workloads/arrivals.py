"""Arrival processes: when items reach the pipeline's source.

Every process is a small frozen object with a ``rate`` (mean arrivals per
second), a ``repr`` that rebuilds it, and
``times(rng, *, n=None, duration_s=None)``, which returns absolute,
non-decreasing arrival times in seconds from 0 -- either the first ``n``
arrivals or every arrival in ``[0, duration_s]`` -- drawn in bulk with numpy.

- :class:`Poisson` -- memoryless arrivals (M in M/M/c).
- :class:`Deterministic` -- evenly spaced, at ``1/rate, 2/rate, ...``.
- :class:`MarkovModulated` -- cyclic Markov-modulated Poisson process (MMPP):
  state ``i`` lasts an exponential time of mean ``mean_durations_s[i]``
  with Poisson rate ``rates[i]``, then state ``i + 1`` (cyclically).
- :class:`OnOff` -- the bursty two-state MMPP.
- :class:`TimeVarying` -- a non-homogeneous Poisson process with rate
  ``rate_fn(t)``, drawn by Lewis-Shedler thinning; :func:`daily_curve`,
  :meth:`TimeVarying.from_profile` and :meth:`TimeVarying.from_counts`
  (measured counts per interval, :class:`IntervalCounts`) build common rate
  functions.
- :class:`Trace` -- replays recorded timestamps (``Trace.from_csv``).

:func:`parse_arrivals` reads the CLI spelling (``poisson:rate=3.2``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..._validate import integer, real
from .distributions import (
    build,
    build_from_file,
    generator,
    require,
    split_spec,
)
from .profiles import DailyCurve, IntervalCounts, PiecewiseLinear
from .traces.reader import read_trace_csv

__all__ = [
    "ArrivalProcess",
    "DailyCurve",
    "Deterministic",
    "IntervalCounts",
    "MarkovModulated",
    "OnOff",
    "PiecewiseLinear",
    "Poisson",
    "TimeVarying",
    "Trace",
    "daily_curve",
    "parse_arrivals",
]

_UNIT = "arrivals per second"


class ArrivalProcess:
    """Base class: subclasses provide ``rate`` and ``_by_count`` / ``_by_duration``."""

    __slots__ = ()

    def times(
        self,
        rng: np.random.Generator,
        *,
        n: int | None = None,
        duration_s: float | None = None,
    ) -> np.ndarray:
        """Return absolute, non-decreasing arrival times (seconds from 0).

        Args:
            rng: the generator to draw from (ignored by deterministic processes).
            n: return exactly the first ``n`` arrivals; or
            duration_s: return every arrival in ``[0, duration_s]`` (seconds).

        Raises:
            ValueError: not exactly one of ``n`` / ``duration_s`` given, or a
                negative one.
            TypeError: ``rng`` is not a ``numpy.random.Generator``.
        """
        if (n is None) == (duration_s is None):
            raise ValueError(
                f"give exactly one of n (number of arrivals) or duration_s (seconds), "
                f"got n={n!r}, duration_s={duration_s!r}"
            )
        rng = generator(rng)
        if n is not None:
            out = self._by_count(rng, integer("n", n, "number of arrivals"))
        else:
            out = self._by_duration(rng, real("duration_s", duration_s, "seconds", at_least=0))
        return np.asarray(out, dtype=np.float64)

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        raise NotImplementedError


def _poisson_by_duration(rng: np.random.Generator, rate: float, duration_s: float) -> np.ndarray:
    # Given the count, Poisson arrival times are sorted independent uniforms.
    count = rng.poisson(rate * duration_s)
    return np.sort(rng.random(count)) * duration_s


@dataclass(frozen=True)
class Poisson(ArrivalProcess):
    """Poisson arrivals at ``rate`` per second (exponential gaps of mean 1/rate)."""

    rate: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", real("rate", self.rate, _UNIT, above=0))

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.cumsum(rng.exponential(1.0 / self.rate, n))

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return _poisson_by_duration(rng, self.rate, duration_s)


@dataclass(frozen=True)
class Deterministic(ArrivalProcess):
    """Evenly spaced arrivals at ``k / rate`` seconds, k = 1, 2, ... (CLI ``constant``)."""

    rate: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", real("rate", self.rate, _UNIT, above=0))

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.arange(1, n + 1) / self.rate

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        t = np.arange(1, math.floor(duration_s * self.rate) + 2) / self.rate
        return t[t <= duration_s]


@dataclass(frozen=True)
class MarkovModulated(ArrivalProcess):
    """Cyclic Markov-modulated Poisson process (MMPP).

    The hidden state runs ``0 -> 1 -> ... -> m-1 -> 0``; state ``i`` lasts an
    exponential time of mean ``mean_durations_s[i]`` seconds, during which
    arrivals are Poisson at ``rates[i]`` per second (0 allowed). The initial
    state is drawn from the stationary distribution (time fraction
    proportional to the mean durations), so the process is stationary from 0.
    A general transition matrix is not supported: cycles cover on/off bursts
    and day/night patterns, which is what the notebooks need.
    """

    rates: tuple[float, ...]
    mean_durations_s: tuple[float, ...]

    def __post_init__(self) -> None:
        rates, durs = self.rates, self.mean_durations_s
        if not (
            isinstance(rates, Sequence | np.ndarray)
            and isinstance(durs, Sequence | np.ndarray)
            and 0 < len(rates) == len(durs)
        ):
            raise ValueError(
                "rates and mean_durations_s must be non-empty sequences of equal length "
                f"(one per state), got rates={rates!r}, mean_durations_s={durs!r}"
            )
        rates = tuple(real(f"rates[{i}]", r, _UNIT, at_least=0) for i, r in enumerate(rates))
        durs = tuple(
            real(f"mean_durations_s[{i}]", d, "seconds", above=0) for i, d in enumerate(durs)
        )
        if not any(rates):
            raise ValueError(f"at least one of rates must be > 0 ({_UNIT}), got {rates!r}")
        object.__setattr__(self, "rates", rates)
        object.__setattr__(self, "mean_durations_s", durs)

    @property
    def rate(self) -> float:
        """Long-run mean rate: sum(rates[i] * d[i]) / sum(d[i]) (arrivals per second)."""
        weighted = sum(r * d for r, d in zip(self.rates, self.mean_durations_s, strict=True))
        return weighted / sum(self.mean_durations_s)

    def _arrivals(
        self, rng: np.random.Generator, states: np.ndarray, starts: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        counts = rng.poisson(np.asarray(self.rates)[states] * lengths)
        offsets = rng.random(int(counts.sum())) * np.repeat(lengths, counts)
        return np.sort(np.repeat(starts, counts) + offsets)

    def _walk(self, rng: np.random.Generator, periods: int):
        """Yield blocks of consecutive periods: (states, starts, lengths), forever."""
        durations = np.asarray(self.mean_durations_s)
        state, t, m = (
            int(rng.choice(len(durations), p=durations / durations.sum())),
            0.0,
            len(durations),
        )
        while True:
            states = (state + np.arange(periods)) % m
            lengths = rng.exponential(1.0, periods) * durations[states]
            ends = t + np.cumsum(lengths)
            yield states, ends - lengths, lengths
            state, t = int((states[-1] + 1) % m), float(ends[-1])

    def _block(self, expected_periods: float) -> int:
        return min(1 << 20, int(expected_periods) + 16)

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        cycles = n / (self.rate * sum(self.mean_durations_s))
        walk = self._walk(rng, self._block(cycles * len(self.rates)))
        parts, total = [np.empty(0)], 0
        while total < n:
            parts.append(self._arrivals(rng, *next(walk)))
            total += parts[-1].size
        return np.concatenate(parts)[:n]

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        cycles = duration_s / sum(self.mean_durations_s)
        walk = self._walk(rng, self._block(1.1 * cycles * len(self.rates)))
        parts, end = [np.empty(0)], 0.0
        while end < duration_s:
            states, starts, lengths = next(walk)
            keep = starts < duration_s
            clipped = np.minimum(lengths[keep], duration_s - starts[keep])
            parts.append(self._arrivals(rng, states[keep], starts[keep], clipped))
            end = float(starts[-1] + lengths[-1])
        return np.concatenate(parts)


@dataclass(frozen=True, kw_only=True)
class OnOff(MarkovModulated):
    """Bursty arrivals: a two-state MMPP alternating on and off periods.

    On periods last an exponential time of mean ``mean_on_s`` with Poisson
    arrivals at ``rate_on``; off periods last mean ``mean_off_s`` at
    ``rate_off`` (often 0). Mean rate:
    ``(rate_on * mean_on_s + rate_off * mean_off_s) / (mean_on_s + mean_off_s)``.
    """

    rate_on: float
    rate_off: float
    mean_on_s: float
    mean_off_s: float
    rates: tuple[float, ...] = field(init=False, repr=False)
    mean_durations_s: tuple[float, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, unit, kwargs in (
            ("rate_on", _UNIT, {"at_least": 0}),
            ("rate_off", _UNIT, {"at_least": 0}),
            ("mean_on_s", "seconds", {"above": 0}),
            ("mean_off_s", "seconds", {"above": 0}),
        ):
            object.__setattr__(self, name, real(name, getattr(self, name), unit, **kwargs))
        if not (self.rate_on > 0 or self.rate_off > 0):
            raise ValueError(f"rate_on or rate_off must be > 0 ({_UNIT}), got both 0")
        object.__setattr__(self, "rates", (self.rate_on, self.rate_off))
        object.__setattr__(self, "mean_durations_s", (self.mean_on_s, self.mean_off_s))


# -- non-homogeneous Poisson -------------------------------------------------------------


@dataclass(frozen=True)
class TimeVarying(ArrivalProcess):
    """Non-homogeneous Poisson arrivals with rate ``rate_fn(t)`` (per second at t seconds).

    Drawn by Lewis-Shedler thinning: candidates from a Poisson process at
    ``max_rate``, each kept with probability ``rate_fn(t) / max_rate``.
    ``rate_fn`` must be vectorised (take and return numpy arrays) and stay in
    ``[0, max_rate]``; a value outside raises ``ValueError`` when drawing.
    ``rate`` is the mean of ``rate_fn`` over ``[0, period_s]``; ``period_s``
    defaults to ``rate_fn.period_s`` when the function has one. The repr
    rebuilds the object when ``rate_fn`` is a :class:`PiecewiseLinear` or
    :class:`DailyCurve` (a lambda's repr cannot).
    """

    rate_fn: Callable[[np.ndarray], np.ndarray]
    max_rate: float
    period_s: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.rate_fn):
            raise TypeError(f"rate_fn must be callable (t seconds -> rate), got {self.rate_fn!r}")
        object.__setattr__(self, "max_rate", real("max_rate", self.max_rate, _UNIT, above=0))
        if self.period_s is not None:
            object.__setattr__(
                self, "period_s", real("period_s", self.period_s, "seconds", above=0)
            )

    @classmethod
    def from_counts(cls, counts: Sequence[float], *, interval_s: float) -> TimeVarying:
        """Poisson arrivals whose rate follows measured counts per interval.

        ``TimeVarying.from_counts([120, 340, 95], interval_s=60)``: 120 arrivals
        expected in the first minute, 340 in the second, 95 in the third, then
        again from the start. The rate is constant within an interval (see
        :class:`IntervalCounts` for why, and for the repetition).

        Raises:
            ValueError: no counts, all 0, a count that is not finite and >= 0,
                or ``interval_s`` not finite and > 0.
            TypeError: ``counts`` is not a sequence of numbers.
        """
        if isinstance(counts, str | bytes) or not isinstance(counts, Iterable):
            raise TypeError(
                "counts must be a sequence of numbers (arrivals per interval), "
                f"got {type(counts).__name__}"
            )
        profile = IntervalCounts(tuple(counts), interval_s)
        return cls(profile, profile.max_rate)

    @classmethod
    def from_counts_csv(
        cls, path: str | os.PathLike[str], *, interval_s: float, column: str | None = None
    ) -> TimeVarying:
        """:meth:`from_counts` with the counts read from one column of a CSV file.

        One row per interval, in time order, under a header; ``column`` may be
        left out when the file has a single column.

        Raises:
            ValueError: as :meth:`from_counts`, or no header, no such column
                (the message lists those present), no data rows, or a value that
                is missing, not a number, NaN, infinite or negative; the
                one-line message names the file and the row.
            OSError: the file cannot be read.
        """
        from .csvcolumn import read_csv_column

        _, _, counts = read_csv_column(path, column, unit="arrivals per interval")
        return cls.from_counts(counts, interval_s=interval_s)

    @classmethod
    def from_profile(cls, times_s: Sequence[float], rates: Sequence[float]) -> TimeVarying:
        """Linear rate between ``(times_s[i], rates[i])`` (see :class:`PiecewiseLinear`)."""
        profile = PiecewiseLinear(tuple(times_s), tuple(rates))
        if not max(profile.rates) > 0:
            raise ValueError(f"rates must not all be 0 ({_UNIT}), got {profile.rates!r}")
        return cls(profile, max(profile.rates))

    def integrated_rate(self, t0_s: float, t1_s: float) -> float:
        """Expected number of arrivals in ``[t0_s, t1_s]``: the integral of ``rate_fn``.

        Exact for :class:`PiecewiseLinear` and :class:`IntervalCounts`; otherwise
        Simpson's rule on a fine grid.
        """
        t0 = real("t0_s", t0_s, "seconds", at_least=0)
        t1 = real("t1_s", t1_s, "seconds", at_least=t0)
        if isinstance(self.rate_fn, PiecewiseLinear):
            knots = np.asarray(self.rate_fn.times_s)
            grid = np.unique(np.concatenate(([t0, t1], knots[(knots > t0) & (knots < t1)])))
            y = self.rate_fn(grid)
            return float(np.sum((y[1:] + y[:-1]) * np.diff(grid)) / 2)
        if isinstance(self.rate_fn, IntervalCounts):
            return self.rate_fn.integral(t0, t1)
        steps = 2 * max(1000, min(200_000, math.ceil((t1 - t0) / 60.0)))
        grid = np.linspace(t0, t1, steps + 1)
        y = self._rates_at(grid)
        h = (t1 - t0) / steps
        return float(h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum()))

    @property
    def rate(self) -> float:
        """Mean rate over ``[0, period_s]`` (arrivals per second).

        Raises:
            ValueError: no ``period_s`` given and ``rate_fn`` has none.
        """
        period = (
            self.period_s if self.period_s is not None else getattr(self.rate_fn, "period_s", None)
        )
        if period is None:
            raise ValueError(
                f"the mean rate of {self!r} is unknown: give period_s (seconds) to average over"
            )
        return self.integrated_rate(0.0, float(period)) / float(period)

    def _rates_at(self, t: np.ndarray) -> np.ndarray:
        lam = np.asarray(self.rate_fn(t), dtype=np.float64)
        if lam.shape != t.shape:
            raise ValueError(
                f"rate_fn must be vectorised: given {t.shape[0]} times it returned "
                f"shape {lam.shape}"
            )
        bad = np.flatnonzero(~(lam >= 0) | (lam > self.max_rate * (1 + 1e-9)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"rate_fn must stay in [0, max_rate={self.max_rate!r}] ({_UNIT}), "
                f"got {float(lam[i])!r} at t={float(t[i])!r} s"
            )
        return lam

    def _thin(self, rng: np.random.Generator, candidates: np.ndarray) -> np.ndarray:
        keep = rng.random(candidates.size) * self.max_rate < self._rates_at(candidates)
        return candidates[keep]

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return self._thin(rng, _poisson_by_duration(rng, self.max_rate, duration_s))

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        parts, total, t, empty_candidates = [np.empty(0)], 0, 0.0, 0
        while total < n:
            block = min(1 << 20, max(4096, 2 * (n - total)))
            candidates = t + np.cumsum(rng.exponential(1.0 / self.max_rate, block))
            t = float(candidates[-1])
            kept = self._thin(rng, candidates)
            parts.append(kept)
            total += kept.size
            empty_candidates = 0 if kept.size else empty_candidates + block
            if empty_candidates > 10_000_000:
                raise ValueError(
                    f"rate_fn of {self!r} stayed 0 for 10 million candidates up to t={t:g} s; "
                    "cannot draw n arrivals, use duration_s"
                )
        return np.concatenate(parts)[:n]


def daily_curve(
    base_rate: float, peak_rate: float, peak_hour: float = 9.0, *, width_h: float = 2.0
) -> TimeVarying:
    """A day of traffic with a peak: see :class:`DailyCurve` (``t`` = seconds from midnight).

    Example: ``daily_curve(1.0, 8.0, 9.5)`` -- 1/s at night, 8/s at 09:30.
    """
    curve = DailyCurve(base_rate, peak_rate, peak_hour, width_h)
    return TimeVarying(curve, curve.peak_rate)


# -- trace replay ------------------------------------------------------------------------


class Trace(ArrivalProcess):
    """Replay recorded arrival times (seconds from 0, finite, >= 0, non-decreasing).

    ``times(rng, n=k)`` returns the first ``k`` (``ValueError`` if the trace is
    shorter); ``times(rng, duration_s=T)`` those ``<= T``. ``rng`` is unused.
    ``path`` names the file the times were read from (its repr then reads
    ``Trace.from_csv(path)``), None otherwise.
    """

    __slots__ = ("_path", "_times")

    def __init__(self, times: Sequence[float] | np.ndarray, *, path: str | None = None) -> None:
        try:
            array = np.array(times, dtype=np.float64)
        except OverflowError:  # a number too large for a float: name it
            for i, x in enumerate(times):
                real(f"times[{i}]", x, "seconds", at_least=0)
            raise
        except (TypeError, ValueError):
            raise TypeError(
                f"times must be a sequence of numbers (seconds), got {type(times).__name__}"
            ) from None
        if array.ndim != 1 or array.size == 0:
            raise ValueError(f"times must be a non-empty 1-D sequence (seconds), got {array.shape}")
        bad = np.flatnonzero(~np.isfinite(array) | (array < 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"times must be finite and >= 0 (seconds), got times[{i}]={array[i]}")
        bad = np.flatnonzero(np.diff(array) < 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"times must be non-decreasing (seconds), got times[{i}]={array[i]} "
                f"then times[{i + 1}]={array[i + 1]}"
            )
        array.setflags(write=False)
        self._times = array
        if path is not None and not isinstance(path, str):
            raise TypeError(f"path must be a file name (str) or None, got {path!r}")
        self._path = path

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> Trace:
        """Read the ``arrival_s`` column of a CSV with a header (other columns ignored).

        The same reader as :func:`~pipeline.sim.load_trace`, with the same messages.

        Raises:
            ValueError: no ``arrival_s`` column, no rows, or a value that is not a
                finite number >= 0 or decreases; the one-line message names the
                file, the data row (1 = first after the header) and the column,
                e.g. ``arrivals.csv row 3: arrival_s must be finite and >= 0 seconds, got -1``.
            OSError: the file cannot be read.
        """
        name, columns = read_trace_csv(path, ("arrival_s",))
        return cls(columns["arrival_s"], path=name)

    @property
    def arrival_times(self) -> np.ndarray:
        """The recorded times (read-only array, seconds)."""
        return self._times

    @property
    def rate(self) -> float:
        """Arrivals per second over ``[0, last arrival]`` (``inf`` if all arrive at 0)."""
        last = float(self._times[-1])
        return self._times.size / last if last > 0 else math.inf

    def __len__(self) -> int:
        return int(self._times.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return np.array_equal(self._times, other.arrival_times)

    def __hash__(self) -> int:
        return hash(self._times.tobytes())

    def __repr__(self) -> str:
        if self._path is not None:
            return f"Trace.from_csv({self._path!r})"
        return f"Trace(times={self._times.tolist()!r})"

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if n > self._times.size:
            raise ValueError(f"n must be <= {self._times.size} (arrivals in the trace), got {n}")
        return self._times[:n].copy()

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return self._times[: np.searchsorted(self._times, duration_s, side="right")].copy()


_ARRIVAL_KEYS: dict[str, tuple[str, ...]] = {
    "poisson": ("rate",),
    "constant": ("rate",),
    "onoff": ("rate_on", "rate_off", "mean_on_s", "mean_off_s"),
    "counts": ("file", "column", "interval_s"),
}


def parse_arrivals(spec: str) -> ArrivalProcess:
    """Parse the CLI spelling of an arrival process.

    Spellings: ``poisson:rate=R``, ``constant:rate=R`` (evenly spaced),
    ``onoff:rate_on=R,rate_off=R,mean_on_s=S,mean_off_s=S`` (R per second,
    S seconds), ``counts:file=PATH,column=NAME,interval_s=S`` (Poisson arrivals
    at the rate of counts measured per interval of S seconds, one row per
    interval; see :meth:`TimeVarying.from_counts`; ``column`` may be left out
    for a one-column file, and the path cannot contain a comma).

    Raises:
        ValueError: unknown name or key, missing key, bad number, a file that
            cannot be read or is malformed, or a value the process rejects;
            the one-line message names the spec.
        TypeError: ``spec`` is not a str.
    """
    kind = "arrivals"
    name, p = split_spec(spec, kind, _ARRIVAL_KEYS, ("file", "column"))
    if name == "counts":
        require(spec, kind, name, p, ("file", "interval_s"))
        return build_from_file(  # type: ignore[return-value]
            spec,
            kind,
            p["file"],
            lambda: TimeVarying.from_counts_csv(
                p["file"], interval_s=p["interval_s"], column=p.get("column")
            ),
        )
    require(spec, kind, name, p, _ARRIVAL_KEYS[name])
    cls = {"poisson": Poisson, "constant": Deterministic, "onoff": OnOff}[name]
    return build(spec, kind, lambda: cls(**p))  # type: ignore[return-value]
