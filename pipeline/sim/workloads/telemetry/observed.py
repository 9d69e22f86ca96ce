"""``Observed``: what a telemetry file says about a service, whatever its format.

Monitoring data comes at three grains, and a reader keeps the finest its
format has, so the fit can say how each part was fitted:

- **per request** (k6 points, OTLP spans): arrival times and service times
  one by one, and whether each attempt failed;
- **per interval** (a Prometheus counter's increase, Locust's requests per
  second): arrivals counted per interval, which becomes a time-varying
  arrival process when the rate varies;
- **summarised** (a Prometheus histogram's buckets, Locust's percentiles):
  the service-time distribution as cumulative bucket counts or as quantiles.

Every time is in seconds, every count a plain number; a reader converts its
format's units (k6's milliseconds, Prometheus's Unix seconds) before it
builds an ``Observed``, and validates as it reads (one line naming the file,
the line or field, the value and what was expected). Every number a reader
takes is held to what a scenario and ``simulate`` accept (:func:`check_number`
and the ``MAX_`` limits below), so a file of absurd numbers is refused by
name before anything is fitted or written, not later by the simulator.
``Observed`` checks the same limits and that what it is given is consistent,
so a reader's bug is caught here rather than as a strange fit.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ....config import MAX_CONCURRENCY
from ..scenario import MAX_N_ITEMS

__all__ = [
    "MAX_ARRIVALS",
    "MAX_BACKLOG",
    "MAX_COUNT",
    "MAX_INTERVALS",
    "MAX_SECONDS",
    "MAX_WORKERS",
    "Observed",
    "ServiceHistogram",
    "check_number",
]

MAX_ARRIVALS = MAX_N_ITEMS
"""Arrivals a window may hold (10**9): the twin runs the window, a scenario at most these."""
MAX_BACKLOG = MAX_N_ITEMS
"""Items waiting at the window's end (10**9), a scenario's ``initial_backlog`` at most."""
MAX_WORKERS = MAX_CONCURRENCY
"""Workers (1,000,000), a ``PipelineConfig``'s ``concurrency`` at most."""
MAX_COUNT = 2**53
"""Attempts, failures and histogram counts: whole numbers a float still holds exactly."""
MAX_SECONDS = 1e9
"""A service time, seconds (about 31 years): longer is a unit mistake, not a service."""
MAX_INTERVALS = 1 << 22
"""Counting intervals a window may span (4 Mi: seven weeks of seconds, two years of 15 s)."""


def check_number(value: float, at_most: float, where: str, what: str, why: str = "") -> float:
    """``value`` as a float when it is finite and from 0 to ``at_most``.

    Args:
        value: the number read.
        at_most: the largest allowed.
        where: the file and the field or series, and a verb, for the message
            (``"run.json: data.result[0]: requests_total increased by"``).
        what: what the number counts (``"arrivals in the window"``).
        why: where the limit comes from (``"the most a scenario runs"``).

    Raises:
        ValueError: one line: ``where``, the value, what is allowed and why.
    """
    number = float(value)
    if not (math.isfinite(number) and 0 <= number <= at_most):
        limit = f"{int(at_most):,}" if at_most == int(at_most) < 1e16 else f"{at_most:.6g}"
        reason = f" ({why})" if why else ""
        raise ValueError(
            f"{where} {number:.6g} {what}; allowed: a finite number from 0 to {limit}{reason}"
        )
    return number


def _vector(
    name: str, values: object, *, positive: bool = False, at_most: float = math.inf
) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite numbers")
    if positive and np.any(array <= 0):
        raise ValueError(f"{name} must be > 0")
    if not positive and np.any(array < 0):
        raise ValueError(f"{name} must be >= 0")
    if np.any(array > at_most):
        raise ValueError(f"{name} must be <= {at_most:,.6g}, got {float(array.max()):.6g}")
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class ServiceHistogram:
    """Service times as a cumulative histogram (Prometheus's ``le`` buckets).

    Attributes:
        upper_bounds_s: each bucket's upper bound, seconds, increasing; the
            last may be ``inf`` (Prometheus's ``+Inf`` bucket).
        cumulative_counts: observations at or below each bound,
            non-decreasing (Prometheus's ``_bucket`` counters' increase over
            the window).
        sum_s: the observations' total, seconds (``_sum``), or NaN if unknown.
    """

    upper_bounds_s: np.ndarray
    cumulative_counts: np.ndarray
    sum_s: float = math.nan

    def __post_init__(self) -> None:
        bounds = np.asarray(self.upper_bounds_s, dtype=np.float64)
        counts = _vector("cumulative_counts", self.cumulative_counts, at_most=MAX_COUNT)
        if bounds.ndim != 1 or bounds.size != counts.size or bounds.size == 0:
            raise ValueError("upper_bounds_s and cumulative_counts must be equal, non-empty rows")
        if np.any(np.isnan(bounds)) or np.any(bounds <= 0) or np.any(np.diff(bounds) <= 0):
            raise ValueError("upper_bounds_s must be > 0 and increasing")
        if np.any(np.diff(counts) < 0):
            raise ValueError("cumulative_counts must not decrease")
        if not (math.isnan(self.sum_s) or 0 <= self.sum_s <= MAX_SECONDS * max(counts[-1], 1)):
            raise ValueError(
                f"sum_s must be NaN or seconds within the counts' range, got {self.sum_s!r}"
            )
        bounds.setflags(write=False)
        object.__setattr__(self, "upper_bounds_s", bounds)
        object.__setattr__(self, "cumulative_counts", counts)

    @property
    def n(self) -> int:
        """Observations counted (the last bucket's count, rounded)."""
        return round(float(self.cumulative_counts[-1]))


@dataclass(frozen=True)
class Observed:
    """What one telemetry file says about one service (one stage).

    Give whatever the format has; leave the rest ``None``. At least one way to
    know arrivals and one to know service times must be present for a fit.

    Attributes:
        source: where it came from, for messages (``"k6 run.json"``).
        arrivals_s: arrival times, seconds from the window's start, sorted
            (per-request formats).
        interval_s: with ``counts``, the length of each counting interval, seconds.
        counts: arrivals counted per interval (per-interval formats).
        service_s: service (attempt) durations, seconds, one per attempt.
        histogram: service times as a :class:`ServiceHistogram`.
        quantiles_s: service-time quantiles by level (``{0.5: 0.08, 0.95: 0.3}``),
            seconds, with ``mean_service_s`` if the format gives it.
        mean_service_s: the service times' mean, seconds, when known apart
            from ``service_s`` (Locust's average, a histogram's ``_sum/_count``).
        attempts: attempts (requests) in the window, for the failure share.
        failed: of those, how many failed.
        backlog: items waiting now (a queue-depth gauge's last value).
        workers: workers (concurrency) serving the stage, when the data says.
        max_attempts: the most attempts the data shows one item making: 1 when
            each record is one request (a load test's client, a server's
            span); None when the data cannot tell (counters of attempts).
        retry_gaps_s: for each retry the data shows, seconds from the end of the
            item's attempt before it to its start (the backoff, and any wait in the
            queue after it); None when the data shows no retries one by one.
        retry_numbers: with ``retry_gaps_s``, each retry's number (1 for an
            item's first retry, 2 for its second, ...).
        response_times: True when the durations are response times (the
            wait for a worker inside the service included, as a client or a
            server span sees a request), False when they are the service's
            time alone (the engine's attempt spans and histogram).
        notes: what the reader assumed or converted, one sentence each.
    """

    source: str
    arrivals_s: np.ndarray | None = None
    interval_s: float | None = None
    counts: np.ndarray | None = None
    service_s: np.ndarray | None = None
    histogram: ServiceHistogram | None = None
    quantiles_s: dict[float, float] | None = None
    mean_service_s: float | None = None
    attempts: int | None = None
    failed: int | None = None
    backlog: int | None = None
    workers: int | None = None
    max_attempts: int | None = None
    retry_gaps_s: np.ndarray | None = None
    retry_numbers: np.ndarray | None = None
    response_times: bool = False
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        # In this order, so that a record with several faults names the same one first.
        self._check_arrivals()
        self._check_service()
        self._check_whole_numbers()
        self._check_retries()
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts!r}")
        if not isinstance(self.response_times, bool):
            raise ValueError(f"response_times must be True or False, got {self.response_times!r}")
        if (self.failed is None) != (self.attempts is None):
            raise ValueError("failed and attempts go together")
        if self.failed is not None and self.failed > self.attempts:
            raise ValueError(f"failed ({self.failed}) exceeds attempts ({self.attempts})")
        object.__setattr__(self, "notes", tuple(self.notes))

    def _check_arrivals(self) -> None:
        """Arrival times sorted; counts with their interval, within a scenario's reach."""
        if self.arrivals_s is not None:
            arrivals = _vector("arrivals_s", self.arrivals_s)
            if np.any(np.diff(arrivals) < 0):
                raise ValueError("arrivals_s must be sorted")
            object.__setattr__(self, "arrivals_s", arrivals)
        if (self.counts is None) != (self.interval_s is None):
            raise ValueError("counts and interval_s go together")
        if self.counts is not None:
            object.__setattr__(self, "counts", _vector("counts", self.counts))
            if self.counts.size > MAX_INTERVALS:
                raise ValueError(
                    f"{self.source}: {self.counts.size:,} counting intervals; allowed: at most "
                    f"{MAX_INTERVALS:,}"
                )
            check_number(
                float(np.sum(self.counts)), MAX_ARRIVALS, f"{self.source}: counts hold",
                "arrivals counted in the window", "the most a scenario runs",
            )  # fmt: skip
            if not (math.isfinite(self.interval_s) and self.interval_s > 0):
                raise ValueError(f"interval_s must be a finite number > 0, got {self.interval_s!r}")

    def _check_service(self) -> None:
        """Service times, their mean and their quantiles: seconds a scenario can draw."""
        if self.service_s is not None:
            object.__setattr__(
                self, "service_s", _vector("service_s", self.service_s, at_most=MAX_SECONDS)
            )
        if self.mean_service_s is not None:
            check_number(
                self.mean_service_s, MAX_SECONDS, f"{self.source}: mean_service_s is", "seconds"
            )
        if self.quantiles_s is not None:
            levels = sorted(self.quantiles_s)
            values = [self.quantiles_s[q] for q in levels]
            if not all(0 < q < 1 for q in levels):
                raise ValueError("quantile levels must be in (0, 1)")
            if not all(math.isfinite(v) and 0 <= v <= MAX_SECONDS for v in values) or any(
                b < a for a, b in itertools.pairwise(values)
            ):
                raise ValueError(
                    f"quantiles_s must be from 0 to {MAX_SECONDS:g} seconds and non-decreasing"
                )

    def _check_whole_numbers(self) -> None:
        """Attempts, failures, backlog, workers and max_attempts: whole numbers within limits."""
        limits = {"attempts": MAX_COUNT, "failed": MAX_COUNT, "backlog": MAX_BACKLOG,
                  "workers": MAX_WORKERS, "max_attempts": MAX_COUNT}  # fmt: skip
        for name, limit in limits.items():
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or int(value) != value or not 0 <= value <= limit
            ):
                raise ValueError(
                    f"{self.source}: {name} must be a whole number from 0 to {limit:,}, "
                    f"got {value!r}"
                )

    def _check_retries(self) -> None:
        """Retry gaps (seconds) with their retry numbers (whole, >= 1), one each."""
        if (self.retry_gaps_s is None) != (self.retry_numbers is None):
            raise ValueError("retry_gaps_s and retry_numbers go together")
        if self.retry_gaps_s is not None:
            gaps = _vector("retry_gaps_s", self.retry_gaps_s, at_most=MAX_SECONDS)
            numbers = _vector("retry_numbers", self.retry_numbers, positive=True)
            if gaps.size != numbers.size or np.any(numbers != np.round(numbers)):
                raise ValueError("retry_numbers must be one whole number >= 1 per retry gap")
            numbers = numbers.astype(np.int64)
            numbers.setflags(write=False)
            object.__setattr__(self, "retry_gaps_s", gaps)
            object.__setattr__(self, "retry_numbers", numbers)

    @property
    def has_arrivals(self) -> bool:
        """True when the arrivals are known, one by one or counted per interval."""
        return self.arrivals_s is not None or self.counts is not None

    @property
    def has_service(self) -> bool:
        """True when service times are known, one by one, bucketed or as quantiles."""
        return self.service_s is not None or self.histogram is not None or bool(self.quantiles_s)
