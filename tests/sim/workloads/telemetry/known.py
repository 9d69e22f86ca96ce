"""A simulated run with known truth, and its attempts as a telemetry file would hold them.

Poisson arrivals, log-normal service, 5 % of attempts failing and retried:
each reader's test writes this run's attempts the way its tool would, reads
the file back, and checks the ``Observed`` against what went in (exactly)
and against the scenario (within sampling error at :data:`LEVEL`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pipeline import Backoff, PipelineConfig
from pipeline.sim import IndependentFailures, LogNormal, Poisson, Scenario, simulate

RATE = 20.0  # arrivals per second
MEAN = 0.02  # service mean, seconds (below Locust's 100 ms rounding threshold at p95)
CV = 0.8
P_FAIL = 0.05
MAX_ATTEMPTS = 3
T0_NS = 1_780_000_000_123_456_789  # the run's start, Unix nanoseconds (2026)

LEVEL = 0.999
"""Each statistical check's level: it fails by chance once in a thousand seeds."""
Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)


@dataclass(frozen=True)
class Run:
    """One run's items and attempts, times in integer nanoseconds from the Unix epoch."""

    arrival_ns: np.ndarray  # per item, in arrival order
    item: np.ndarray  # per attempt: its item's index
    first: np.ndarray  # per attempt: True for the item's first attempt
    start_ns: np.ndarray
    end_ns: np.ndarray
    failed: np.ndarray  # per attempt: it failed (a retry or a dead letter followed)

    @property
    def duration_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns


BACKOFF = Backoff(kind="constant", base_s=0.01)


def scenario(
    *,
    concurrency: int = 64,
    n_items: int = 3000,
    seed: int = 1,
    p_fail: float = P_FAIL,
    backoff: Backoff = BACKOFF,
) -> Scenario:
    """The known scenario; ``concurrency`` 64 leaves nothing waiting, 1-2 makes a queue."""
    return Scenario(
        arrivals=Poisson(rate=RATE),
        service=LogNormal(mean=MEAN, cv=CV),
        failures=IndependentFailures(p=p_fail),
        config=PipelineConfig(
            concurrency=concurrency, max_attempts=MAX_ATTEMPTS, backoff=backoff
        ),
        n_items=n_items,
        seed=seed,
    )  # fmt: skip


def run(
    *,
    concurrency: int = 64,
    n_items: int = 3000,
    seed: int = 1,
    engine: str = "auto",
    p_fail: float = P_FAIL,
    backoff: Backoff = BACKOFF,
) -> Run:
    """Simulate the known :func:`scenario` and keep its attempts."""
    scenario_ = scenario(
        concurrency=concurrency, n_items=n_items, seed=seed, p_fail=p_fail, backoff=backoff
    )  # fmt: skip
    columns = simulate(scenario_, engine=engine).columns
    log = columns.attempt_log
    attempts = columns.attempts
    item = np.repeat(np.arange(attempts.size), attempts)
    first = np.ones(item.size, dtype=bool)
    first[1:] = item[1:] != item[:-1]

    def ns(seconds: np.ndarray) -> np.ndarray:
        return T0_NS + np.round(np.asarray(seconds) * 1e9).astype(np.int64)

    return Run(
        arrival_ns=ns(columns.admitted_s),
        item=item,
        first=first,
        start_ns=ns(log.start_s),
        end_ns=ns(log.end_s),
        failed=log.ending != 0,
    )


QUEUED_WORKERS = 4
QUEUED_RATE = 60.0  # requests per second: 60% busy at a 40 ms mean
QUEUED_MEAN = 0.04  # service mean, seconds; cv 0.8, 2% of requests failing, no retries


def queued_scenario(rate: float = QUEUED_RATE, *, n_items: int, seed: int) -> Scenario:
    """A service with a queue: four workers at 60% busy, each request one attempt."""
    return Scenario(
        arrivals=Poisson(rate=rate), service=LogNormal(mean=QUEUED_MEAN, cv=CV),
        failures=IndependentFailures(p=0.02),
        config=PipelineConfig(concurrency=QUEUED_WORKERS, max_attempts=1, queue_maxsize=None),
        n_items=n_items, seed=seed,
    )  # fmt: skip


def requests(scenario: Scenario) -> Run:
    """Each item as one request a client saw: sent at its arrival, answered at its end, so
    its duration is the response time (the wait for a worker included)."""
    columns = simulate(scenario, engine="kernel").columns
    ended = np.isin(columns.outcome, (0, 1))  # completed, dead-lettered

    def ns(seconds: np.ndarray) -> np.ndarray:
        return T0_NS + np.round(np.asarray(seconds)[ended] * 1e9).astype(np.int64)

    n = int(ended.sum())
    return Run(
        arrival_ns=ns(columns.arrival_s), item=np.arange(n), first=np.ones(n, bool),
        start_ns=ns(columns.arrival_s), end_ns=ns(columns.finish_s),
        failed=columns.outcome[ended] == 1,
    )  # fmt: skip


def p95() -> float:
    """The log-normal service time's 95th percentile, seconds."""
    sigma = math.sqrt(math.log(1 + CV**2))
    mu = math.log(MEAN) - sigma**2 / 2
    return math.exp(mu + NormalDist().inv_cdf(0.95) * sigma)


def p95_sd(n: int) -> float:
    """The standard deviation of the sample 95th percentile of n service times, seconds."""
    sigma = math.sqrt(math.log(1 + CV**2))
    q = p95()
    density = NormalDist().pdf(NormalDist().inv_cdf(0.95)) / (q * sigma)
    return math.sqrt(0.95 * 0.05 / n) / density


def attempts_per_item() -> float:
    """Expected attempts per item: 1 + p + p**2 with three attempts."""
    return sum(P_FAIL**k for k in range(MAX_ATTEMPTS))


def check_truth(
    *,
    n_attempts: int,
    rate_per_s: float,
    n_arrivals: int,
    mean_s: float,
    p95_s: float,
    failed: int,
    rate_truth: float,
    p95_slack_s: float = 0.0,
) -> None:
    """The statistical checks every format shares, each at :data:`LEVEL`."""
    assert abs(rate_per_s / rate_truth - 1) <= Z / math.sqrt(n_arrivals)
    assert abs(mean_s - MEAN) <= Z * CV * MEAN / math.sqrt(n_attempts)
    assert abs(p95_s - p95()) <= Z * p95_sd(n_attempts) + p95_slack_s
    share = failed / n_attempts
    assert abs(share - P_FAIL) <= Z * math.sqrt(P_FAIL * (1 - P_FAIL) / n_attempts)
