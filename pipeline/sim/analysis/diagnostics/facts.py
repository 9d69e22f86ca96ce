"""Derived quantities of one simulated run, computed once and shared by every check.

:class:`Facts` turns a :class:`~pipeline.sim.SimulationResult` into the numbers
the detectors in :mod:`pipeline.sim.analysis.diagnostics.checks` reason with: arrival rate (items
per second), mean attempt time (seconds), attempts per item, offered load (busy
workers) and demanded utilisation. The functions below add facts a single
check needs but that do not depend on any threshold. Nothing here decides
whether a run has a problem; that is :mod:`pipeline.sim.analysis.diagnostics.checks`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from ...stats.stepstats import time_weighted_mean, weighted_sum
from ...workloads.failures import IndependentFailures
from ...workloads.traces.service import ServiceTrace

if TYPE_CHECKING:
    from ...running.result import SimulationResult

__all__ = ["Facts", "error_counts", "independent_p", "lag_growth", "service_spread"]


# -- the facts ------------------------------------------------------------------------------


class Facts:
    """Derived quantities of a run, computed once."""

    def __init__(self, result: SimulationResult, precision: float | None = None) -> None:
        self.result = result
        # Largest acceptable relative half-width of the mean latency; None: not judged.
        self.precision = precision
        self.scenario = scenario = result.scenario
        self.config = config = scenario.config
        self.report = result.report
        self.columns = c = result.columns
        self.series = s = result.series
        self.concurrency = config.concurrency
        arrivals = np.asarray(c.arrival_s, dtype=np.float64)
        # A chain stage's columns hold every item that could reach it; those that did
        # not (a parent dead-lettered or shed upstream) have no arrival.
        arrivals = arrivals[~np.isnan(arrivals)]
        self.n_arrived = len(arrivals)
        self.first_arrival_s = float(arrivals[0]) if len(arrivals) else 0.0
        self.last_arrival_s = float(arrivals[-1]) if len(arrivals) else 0.0
        self.arrival_rate = (
            self.n_arrived / self.last_arrival_s if self.last_arrival_s > 0 else math.nan
        )
        self.end_s = float(s.end_s)
        self.busy_s = weighted_sum(s.in_flight, s.durations())
        self.attempts = int(self.report.attempts)
        self.admitted = int(self.report.admitted)
        self.mean_attempt_s = self.busy_s / self.attempts if self.attempts else math.nan
        # Per item that started: unfinished items still queued have made no attempt yet.
        self.started = int(np.count_nonzero(np.asarray(c.attempts) > 0))
        self.attempts_per_item = self.attempts / self.started if self.started else math.nan
        # Workers needed on average to keep up: arrival rate x attempts x attempt time.
        self.load = self.arrival_rate * self.attempts_per_item * self.mean_attempt_s
        self.rho = self.load / self.concurrency
        admitted = c.admitted_s[~np.isnan(c.admitted_s)]
        self.intake_end_s = max(
            self.last_arrival_s, float(admitted.max()) if admitted.size else 0.0
        )
        self.failed_attempts = int(self.report.statistics.retried) + len(self.report.dead_letters)

    def required_concurrency(self) -> int:
        """Minimum workers that keep up: ``ceil(load) + 1``."""
        return math.ceil(self.load) + 1 if math.isfinite(self.load) else self.concurrency + 1

    def comfortable_concurrency(self) -> int:
        """Workers for about 80% utilisation."""
        if not math.isfinite(self.load):
            return self.required_concurrency()
        return max(self.required_concurrency(), math.ceil(self.load / 0.8))

    def share_of_time(self, mask: np.ndarray, start_s: float, end_s: float) -> float:
        """Share of ``[start_s, end_s]`` during which the step function ``mask`` is true.

        The series holds nothing before its first row or after its end, so time
        there counts as false.
        """
        if end_s <= start_s:
            return 0.0
        s = self.series
        lo, hi = max(start_s, float(s.time_s[0])), min(end_s, s.end_s)
        if not hi > lo:
            return 0.0
        inside = time_weighted_mean(s.time_s, mask, hi, t_start=lo)
        return inside * (hi - lo) / (end_s - start_s)

    def at(self, values: np.ndarray, times_s: np.ndarray) -> np.ndarray:
        """Values of a step function at the given times."""
        index = np.searchsorted(self.series.time_s, times_s, side="right") - 1
        return values[np.clip(index, 0, len(values) - 1)]


def service_spread(scenario: Any) -> tuple[float, float, float]:
    """(mean, standard deviation, 99.9th percentile) of one attempt's service time, seconds."""
    service = scenario.service
    if isinstance(service, ServiceTrace):
        times = np.asarray(service.times_s) if service.times_s else np.zeros(1)
        return float(times.mean()), float(times.std()), float(np.quantile(times, 0.999))
    sample = service.sample(np.random.default_rng(0), 20_000)
    return float(service.mean), float(service.std), float(np.quantile(sample, 0.999))


def lag_growth(f: Facts) -> tuple[float, float]:
    """(slope items/s, growth in items) of the lag over the second half of the arrivals."""
    start, end = f.last_arrival_s / 2, f.last_arrival_s
    if not end > start or len(f.series.time_s) < 2:
        return 0.0, 0.0
    grid = np.linspace(start, end, 256)
    lag = f.at(f.series.lag_items, grid).astype(np.float64)
    slope = float(np.polyfit(grid, lag, 1)[0])
    return slope, slope * (end - start)


def error_counts(f: Facts) -> Counter[str]:
    """How often each error type was recorded, over every dead letter's attempts."""
    return Counter(e.type for letter in f.report.dead_letters for e in letter.errors)


def independent_p(scenario: Any) -> float | None:
    """The per-attempt failure probability ``p`` if failures are independent, else None."""
    failures = scenario.failures
    return failures.p if isinstance(failures, IndependentFailures) else None
