"""Service-time distributions for simulated handlers.

Each distribution is a small frozen value object: it validates its
parameters at construction, exposes its ``mean`` (seconds) and coefficient of
variation ``cv`` (standard deviation / mean, dimensionless), draws many
samples at once with :meth:`sample`, and has a ``repr`` that rebuilds it
(``Exponential(mean=0.25)``). :func:`parse_distribution` reads the command
line spelling ``name:key=value,...``.

Example::

    >>> import numpy as np
    >>> d = parse_distribution("lognormal:mean=0.2,cv=1.5")
    >>> d
    LogNormal(mean=0.2, cv=1.5)
    >>> d.sample(np.random.default_rng(1), 100_000).shape
    (100000,)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..._validate import integer, real, show
from .percentiles import fit_lognormal, lognormal_quantile, lognormal_sigma2

__all__ = [
    "Constant",
    "Distribution",
    "Empirical",
    "Exponential",
    "Gamma",
    "LogNormal",
    "Uniform",
    "parse_distribution",
]


# -- small validators shared by the sim workload modules -------------------------------


def generator(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(1)), "
            f"got {type(rng).__name__}"
        )
    return rng


def split_spec(
    spec: object,
    kind: str,
    allowed: Mapping[str, Sequence[str]],
    text_keys: Collection[str] = (),
) -> tuple[str, dict]:
    """Split ``name:key=value,...`` into a name and a dict of floats.

    ``allowed`` maps each known name to its allowed keys; values of
    ``text_keys`` (a file name, a column) stay non-empty strings, so they
    cannot contain a comma. Errors are one line and name the spec and what is
    allowed.
    """
    if not isinstance(spec, str):
        raise TypeError(f"{kind} spec must be a str like 'name:key=value', got {show(spec)}")
    names = ", ".join(sorted(allowed))
    name, _, rest = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in allowed:
        raise ValueError(f"unknown {kind} {name!r} in spec {spec!r}; allowed: {names}")
    keys = allowed[name]
    params: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, raw = part.partition("=")
        key = key.strip().lower()
        if not eq:
            raise ValueError(
                f"bad parameter {part!r} in {kind} spec {spec!r}: expected key=value "
                f"with key one of {', '.join(keys)}"
            )
        if key not in keys:
            raise ValueError(
                f"unknown key {key!r} for {name} in spec {spec!r}; allowed: {', '.join(keys)}"
            )
        if key in params:
            raise ValueError(f"key {key!r} given twice in {kind} spec {spec!r}")
        if key in text_keys:
            if not raw.strip():
                raise ValueError(f"empty value for {key} in {kind} spec {spec!r}")
            params[key] = raw.strip()
            continue
        try:
            number = float(raw)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ValueError(
                f"bad number {raw.strip()!r} for {key} in {kind} spec {spec!r}: "
                "expected a finite number"
            )
        params[key] = number
    return name, params


def require(spec: str, kind: str, name: str, params: dict, keys: Iterable[str]) -> None:
    missing = [k for k in keys if k not in params]
    if missing:
        raise ValueError(
            f"missing {', '.join(missing)} for {name} in {kind} spec {spec!r}; "
            f"spell it {name}:" + ",".join(f"{k}=..." for k in keys)
        )


def build(spec: str, kind: str, make: Callable[[], object]) -> object:
    try:
        return make()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid {kind} spec {spec!r}: {exc}") from None


# -- distributions --------------------------------------------------------------------


class Distribution:
    """Base class of service-time distributions.

    Subclasses provide ``mean`` (seconds), ``cv`` (standard deviation / mean)
    and :meth:`sample`. Instances are frozen, comparable and hashable.
    """

    __slots__ = ()

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draw ``size`` independent service times (seconds) as a float64 array.

        Raises:
            TypeError: ``rng`` is not a ``numpy.random.Generator`` or ``size``
                is not an integer.
            ValueError: ``size`` is negative.
        """
        rng = generator(rng)
        size = integer("size", size, "number of samples")
        return np.asarray(self._draw(rng, size), dtype=np.float64)

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise NotImplementedError

    @property
    def std(self) -> float:
        """Standard deviation (seconds)."""
        return self.cv * self.mean  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Constant(Distribution):
    """Every service takes exactly ``value`` seconds (``value >= 0``)."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", real("value", self.value, "seconds", at_least=0))

    @property
    def mean(self) -> float:
        """Mean service time (seconds)."""
        return self.value

    @property
    def cv(self) -> float:
        """Coefficient of variation: 0."""
        return 0.0

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.value)


@dataclass(frozen=True)
class Exponential(Distribution):
    """Exponential service times with the given ``mean`` (seconds, > 0); cv = 1."""

    mean: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", real("mean", self.mean, "seconds", above=0))

    @property
    def rate(self) -> float:
        """Service rate mu = 1 / mean (services per second)."""
        return 1.0 / self.mean

    @property
    def cv(self) -> float:
        """Coefficient of variation: 1."""
        return 1.0

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.mean, size)


@dataclass(frozen=True)
class LogNormal(Distribution):
    """Log-normal service times given by their ``mean`` (seconds) and ``cv``.

    The underlying normal has ``sigma**2 = log(1 + cv**2)`` and
    ``mu = log(mean) - sigma**2 / 2``. Heavy right tail for large ``cv``.
    """

    mean: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", real("mean", self.mean, "seconds", above=0))
        object.__setattr__(
            self, "cv", real("cv", self.cv, "std / mean; use Constant for cv=0", above=0)
        )

    @classmethod
    def from_quantiles(
        cls,
        *,
        mean: float | None = None,
        cv: float | None = None,
        p50: float | None = None,
        p90: float | None = None,
        p95: float | None = None,
        p99: float | None = None,
        rtol: float = 0.05,
    ) -> LogNormal:
        """The log-normal that meets two (or more) of the numbers users quote.

        ``LogNormal.from_quantiles(p50=0.05, p99=1.2)`` or
        ``LogNormal.from_quantiles(mean=0.08, p99=1.0)``: any two of ``mean``,
        ``p50``, ``p90``, ``p95``, ``p99`` (seconds) and ``cv``. The result is
        a plain ``LogNormal(mean=..., cv=...)``, drawing exactly as one. How
        the fit is chosen, and why some pairs have none, is in
        :mod:`pipeline.sim.workloads.percentiles`.

        Args:
            rtol: relative distance a third number may be from the fit before
                it is reported as inconsistent (0.05: about the rounding of two
                significant figures).

        Raises:
            ValueError: fewer than two numbers, one not finite and > 0,
                percentiles that do not increase (``p99 <= p50``), a median at or
                above the mean, or a mean not below the percentile it is fitted with.
            TypeError: a number that is not a real number.

        Warns:
            InconsistentWorkloadWarning: no log-normal meets all the numbers
                (``mean=0.08, p99=1.2``: p99 is at most 14.97 x the mean); the
                message says which fit is used and what it implies.
        """
        known = {"mean": mean, "cv": cv, "p50": p50, "p90": p90, "p95": p95, "p99": p99}
        fitted_mean, fitted_cv = fit_lognormal(known, rtol=rtol)
        return cls(fitted_mean, fitted_cv)

    def quantile(self, q: float) -> float:
        """The service time (seconds) below which a fraction ``q`` (0 < q < 1) of draws fall.

        ``quantile(0.5)`` is the median, ``quantile(0.99)`` the p99.
        """
        q = real("q", q, "probability", above=0)
        if not q < 1:
            raise ValueError(f"q must be < 1 (probability), got {show(q)}")
        return lognormal_quantile(self.mean, self.cv, q)

    @property
    def sigma2(self) -> float:
        """Variance of the underlying normal: ``log(1 + cv**2)`` (dimensionless)."""
        return lognormal_sigma2(self.cv)

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        sigma2 = self.sigma2
        return rng.lognormal(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2), size)


@dataclass(frozen=True)
class Gamma(Distribution):
    """Gamma service times given by their ``mean`` (seconds) and ``cv``.

    Shape ``k = 1 / cv**2``, scale ``mean * cv**2``; ``cv=1`` is exponential,
    ``cv < 1`` is Erlang-like, ``cv > 1`` is more variable than exponential.
    """

    mean: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", real("mean", self.mean, "seconds", above=0))
        object.__setattr__(
            self, "cv", real("cv", self.cv, "std / mean; use Constant for cv=0", above=0)
        )

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.gamma(1.0 / self.cv**2, self.mean * self.cv**2, size)


@dataclass(frozen=True)
class Uniform(Distribution):
    """Service times uniform on ``[low, high)`` seconds, ``0 <= low < high``."""

    low: float
    high: float

    def __post_init__(self) -> None:
        low = real("low", self.low, "seconds", at_least=0)
        high = real("high", self.high, "seconds", above=0)
        if not high > low:
            raise ValueError(
                f"high must be > low (seconds), got low={show(self.low)}, high={show(self.high)}"
            )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def mean(self) -> float:
        """Mean service time (seconds): (low + high) / 2."""
        return (self.low + self.high) / 2

    @property
    def cv(self) -> float:
        """Coefficient of variation: (high - low) / sqrt(12) / mean."""
        return (self.high - self.low) / math.sqrt(12) / self.mean

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, size)


@dataclass(frozen=True)
class Empirical(Distribution):
    """Resample (with replacement) from observed service times (seconds, >= 0).

    ``mean`` and ``cv`` are those of the data itself (population moments,
    which is what resampling reproduces). ``samples`` is stored as a tuple so
    the object stays hashable and its repr rebuilds it.
    """

    samples: tuple[float, ...]
    _array: np.ndarray = field(init=False, repr=False, compare=False, hash=False)
    # How from_csv built it: the repr then names the file, not a million samples.
    _source: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        try:
            array = np.array(self.samples, dtype=np.float64)
        except OverflowError:  # a number too large for a float: name it
            for i, x in enumerate(self.samples):
                real(f"samples[{i}]", x, "seconds", at_least=0)
            raise
        except (TypeError, ValueError):
            raise TypeError(
                "samples must be a sequence of numbers (seconds), "
                f"got {type(self.samples).__name__}"
            ) from None
        if array.ndim != 1 or array.size == 0:
            raise ValueError(
                f"samples must be a non-empty 1-D sequence (seconds), got shape {array.shape}"
            )
        bad = np.flatnonzero(~np.isfinite(array) | (array < 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"samples must be finite and >= 0 (seconds), got samples[{i}]={float(array[i])!r}"
            )
        array.setflags(write=False)
        object.__setattr__(self, "samples", tuple(array.tolist()))
        object.__setattr__(self, "_array", array)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str], *, column: str | None = None) -> Empirical:
        """Resample measured durations: one column (seconds) of a CSV file with a header.

        ``Empirical.from_csv("durations.csv", column="duration_s")``; ``column``
        may be left out when the file has a single column. The repr names the
        file and column.

        Raises:
            ValueError: no header, no such column (the message lists those
                present), no data rows, or a value that is missing, not a
                number, NaN, infinite or negative; the one-line message names the
                file and the row (1 = the first after the header).
            OSError: the file cannot be read.
        """
        from .csvcolumn import read_csv_column

        name, column, values = read_csv_column(path, column, unit="seconds")
        measured = cls(tuple(values))
        object.__setattr__(measured, "_source", f"Empirical.from_csv({name!r}, column={column!r})")
        return measured

    def __repr__(self) -> str:
        if self._source is not None:
            return self._source
        return f"Empirical(samples={self.samples!r})"

    @property
    def mean(self) -> float:
        """Mean of the data (seconds)."""
        return float(self._array.mean())

    @property
    def cv(self) -> float:
        """Population std / mean of the data (0 if the mean is 0)."""
        mean = self.mean
        return float(self._array.std() / mean) if mean > 0 else 0.0

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self._array[rng.integers(0, self._array.size, size)]


_DIST_KEYS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "exponential": ("mean", "rate"),
    "lognormal": ("mean", "cv", "p50", "p90", "p95", "p99"),
    "gamma": ("mean", "cv"),
    "uniform": ("low", "high"),
    "empirical": ("file", "column"),
}
_TEXT_KEYS = ("file", "column")


def parse_distribution(spec: str) -> Distribution:
    """Parse the CLI spelling of a service-time distribution.

    Spellings (S in seconds): ``constant:value=S``, ``exponential:mean=S``
    (or ``rate=R``, per second), ``gamma:mean=S,cv=C``, ``uniform:low=S,high=S``;
    ``lognormal:`` with any two of ``mean=S``, ``cv=C``, ``p50=S``, ``p90=S``,
    ``p95=S``, ``p99=S`` (``lognormal:mean=S,cv=C``, ``lognormal:p50=S,p99=S``,
    ``lognormal:mean=S,p99=S``; see :meth:`LogNormal.from_quantiles`);
    ``empirical:file=PATH,column=NAME`` resamples measured durations (see
    :meth:`Empirical.from_csv`; ``column`` may be left out for a one-column
    file, and the path cannot contain a comma).

    Raises:
        ValueError: unknown name or key, missing key, a bad number, a file
            that cannot be read or is malformed, or a value the distribution
            rejects; the one-line message names the spec.
        TypeError: ``spec`` is not a str.

    Warns:
        InconsistentWorkloadWarning: log-normal numbers that cannot all hold.
    """
    kind = "distribution"
    name, p = split_spec(spec, kind, _DIST_KEYS, _TEXT_KEYS)
    if name == "exponential":
        if ("mean" in p) == ("rate" in p):
            raise ValueError(
                f"exponential spec {spec!r} needs exactly one of mean=... (seconds) "
                "or rate=... (per second)"
            )
        if "rate" in p:
            rate = p["rate"]
            if not rate > 0:
                raise ValueError(
                    f"invalid distribution spec {spec!r}: rate must be > 0 "
                    f"(services per second), got {show(rate)}"
                )
            return Exponential(1.0 / rate)
        return build(spec, kind, lambda: Exponential(p["mean"]))  # type: ignore[return-value]
    if name == "lognormal":
        if set(p) == {"mean", "cv"}:  # the classic spelling, exactly as before
            return build(spec, kind, lambda: LogNormal(**p))  # type: ignore[return-value]
        if len(p) < 2:
            raise ValueError(
                f"lognormal spec {spec!r} needs two of mean, cv, p50, p90, p95, p99 "
                "(e.g. lognormal:mean=S,cv=C or lognormal:p50=S,p99=S), "
                f"got {', '.join(p) or 'none'}"
            )
        return build(spec, kind, lambda: LogNormal.from_quantiles(**p))  # type: ignore[return-value]
    if name == "empirical":
        require(spec, kind, name, p, ("file",))
        return build_from_file(
            spec, kind, p["file"], lambda: Empirical.from_csv(p["file"], column=p.get("column"))
        )
    keys = _DIST_KEYS[name]
    require(spec, kind, name, p, keys)
    cls = {"constant": Constant, "gamma": Gamma, "uniform": Uniform}[name]
    return build(spec, kind, lambda: cls(**p))  # type: ignore[return-value]


def build_from_file(spec: str, kind: str, path: str, make: Callable[[], object]) -> object:
    """:func:`build`, and a file that cannot be read is a ValueError naming the spec too."""
    try:
        return build(spec, kind, make)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"invalid {kind} spec {spec!r}: cannot read {path}: {reason}") from None
