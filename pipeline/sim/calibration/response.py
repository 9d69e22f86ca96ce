"""``fit_response_times``: a service time whose twin reproduces recorded response times.

A load test's client (Locust, k6) and a server's request span record each
request's *response* time: its wait for a worker inside the service plus its
service. Taken as the service time, that counts the queueing twice: the twin
queues again on its own workers, and near saturation the error grows without
bound. Given the worker count, this fits instead a log-normal service (its
mean and cv, the two unknowns) such that the twin itself -- the same
arrivals, workers, failures and attempts, run on the fast kernel -- gives
back the recorded response times' mean and quantiles.

The fit is Gauss-Newton on the log ratios of the twin's statistics to the
recorded ones (the mean weighted twice: it is the best-measured), with a
finite-difference Jacobian and a halving line search. Every evaluation runs
the twin with one seed, so the random numbers are common to all of them and
the statistics move smoothly with the parameters instead of jumping with
sampling noise.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..running.recorder import ItemColumns
from ..running.simulate import simulate
from ..workloads.distributions import LogNormal
from ..workloads.scenario import Scenario

__all__ = [
    "FIT_ITEMS",
    "MISFIT",
    "ResponseFit",
    "ResponseFitWarning",
    "fit_response_times",
    "response_statistics",
]

FIT_ITEMS = (20_000, 100_000)
"""Items the twin simulates per evaluation: at least the first, at most the second."""

MISFIT = 0.25
"""A fit whose twin misses a recorded statistic by more than this share is warned about."""

LEVELS = (0.5, 0.75, 0.9, 0.95, 0.99)
"""The quantile levels matched when the response times are known one by one."""

_MEAN_WEIGHT = 2.0
_STEP = 0.02  # finite-difference step in log(mean) and log(cv)
_MAX_STEP = 1.0  # the largest move in log space per iteration (a factor e)
_MAX_ITERATIONS = 25
_TOLERANCE = 1e-3  # stop when every statistic is within 0.1% of its target...
_SMALL_MOVE = 1e-4  # ... or the parameters stop moving
_CV_RANGE = (0.02, 20.0)
_BUSY = 0.97  # a start busier than this has its mean cut until it is not
_ENDED = (ItemColumns.OUTCOMES.index("completed"), ItemColumns.OUTCOMES.index("dead_lettered"))


class ResponseFitWarning(UserWarning):
    """Raised when the twin cannot reproduce the recorded response times (see :data:`MISFIT`).

    The worker count given may be wrong, the load may not have been steady, or the
    service may be far from a log-normal.
    """


@dataclass(frozen=True)
class ResponseFit:
    """A service distribution fitted through the twin, and how close it came.

    Attributes:
        distribution: the fitted service (a :class:`~pipeline.sim.LogNormal`).
        targets: the recorded response times' statistics, seconds, by name
            (``"mean"``, ``"p50"``, ``"p95"``, ...).
        reproduced: the twin's, with that service, by the same names.
        n_items: items the twin simulated per evaluation.
        evaluations: twin runs the fit took.
        utilisation: the twin's workers' busy share with that service.
        engine: the engine the twin ran on (``"kernel"`` for every scenario a
            calibration writes; ``"asyncio"`` outside the kernel's domain).
    """

    distribution: LogNormal
    targets: dict[str, float]
    reproduced: dict[str, float]
    n_items: int
    evaluations: int
    utilisation: float
    engine: str = "kernel"

    @property
    def worst_error(self) -> float:
        """The largest relative difference between a reproduced statistic and its target."""
        return max(abs(self.reproduced[k] / v - 1.0) for k, v in self.targets.items())

    def describe(self) -> str:
        """One sentence: the statistics reproduced against those recorded."""
        shown = ", ".join(
            f"{k} {self.reproduced[k]:.4g} s (recorded {v:.4g})" for k, v in self.targets.items()
        )
        return (
            f"the twin ({self.n_items:,} items on the {self.engine}, {self.evaluations} runs, "
            f"{self.utilisation:.0%} busy) gives back {shown}"
        )


def _name(level: float) -> str:
    return f"p{100 * level:g}".replace(".", "_")


def response_statistics(samples: np.ndarray) -> dict[str, float]:
    """The mean and the :data:`LEVELS` quantiles of response times, seconds."""
    x = np.asarray(samples, dtype=np.float64)
    stats = {"mean": float(x.mean())}
    stats.update({_name(q): float(v) for q, v in zip(LEVELS, np.quantile(x, LEVELS), strict=True)})
    return stats


def quantile_targets(mean_s: float | None, quantiles_s: dict[float, float]) -> dict[str, float]:
    """Targets from a mean and quantiles by level (levels above 0.99 are too noisy to match)."""
    stats = {"mean": float(mean_s)} if mean_s is not None and mean_s > 0 else {}
    levels = sorted(quantiles_s.items())
    stats.update({_name(q): float(v) for q, v in levels if q <= 0.99 and v > 0})
    return stats


def _level(name: str) -> float:
    return float(name[1:].replace("_", ".")) / 100


def _twin_statistics(
    scenario: Scenario, mean: float, cv: float, names: list[str]
) -> tuple[np.ndarray, float, str]:
    result = simulate(scenario.replace(service=LogNormal(mean=mean, cv=cv)), engine="auto")
    columns = result.columns
    ended = np.isin(columns.outcome, _ENDED)
    response = (columns.finish_s - columns.arrival_s)[ended]
    values = [
        float(response.mean()) if name == "mean" else float(np.quantile(response, _level(name)))
        for name in names
    ]
    return np.asarray(values), float(result.summary["utilisation"]), result.summary["engine"]


def fit_response_times(
    scenario: Scenario, targets: dict[str, float], *, recorded: int = 0
) -> ResponseFit:
    """Fit a log-normal service such that ``scenario``'s twin reproduces ``targets``.

    Args:
        scenario: the twin: its arrivals, workers (``config``), failures and
            attempts are kept; its service and length are replaced.
        targets: recorded response-time statistics, seconds: ``"mean"`` and
            quantiles named ``"p50"``, ``"p95"``, ... (:func:`response_statistics`,
            :func:`quantile_targets`); two or more, each > 0.
        recorded: requests behind the targets (the twin simulates at least
            four times as many, within :data:`FIT_ITEMS`).

    Returns:
        A :class:`ResponseFit`.

    Raises:
        ValueError: fewer than two targets, or one that is not > 0.
    """
    names = list(targets)
    goal = np.asarray([targets[n] for n in names], dtype=np.float64)
    if goal.size < 2 or not np.all(np.isfinite(goal) & (goal > 0)):
        shown = ", ".join(f"{k} {v:g} s" for k, v in targets.items()) or "none"
        raise ValueError(
            "the response times give no service to fit: fitting one through the twin needs "
            f"two or more of their mean and quantiles > 0, got {shown}"
        )
    weights = np.asarray([_MEAN_WEIGHT if n == "mean" else 1.0 for n in names])
    n_items = int(min(max(FIT_ITEMS[0], 4 * recorded), FIT_ITEMS[1]))
    # Every item finishes: a drain cut short would drop the slowest from the statistics.
    twin = scenario.replace(
        n_items=n_items, duration_s=None, initial_backlog=0, drain_timeout_s=None
    )
    evaluations = 0

    def residual(x: np.ndarray) -> tuple[np.ndarray, float]:
        nonlocal evaluations
        evaluations += 1
        values, busy, _ = _twin_statistics(twin, math.exp(x[0]), math.exp(x[1]), names)
        return weights * np.log(np.maximum(values, 1e-300) / goal), busy

    x = _start(targets)
    r, busy = residual(x)
    while busy > _BUSY and x[0] > math.log(goal.min()) - 20:
        x[0] -= math.log(1.25)  # overloaded: the queue hides the gradient; come down first
        r, busy = residual(x)
    for _ in range(_MAX_ITERATIONS):
        if np.max(np.abs(r) / weights) < _TOLERANCE:
            break
        jacobian = np.empty((r.size, 2))
        for j in range(2):
            nudged = x.copy()
            nudged[j] += _STEP
            jacobian[:, j] = (residual(nudged)[0] - r) / _STEP
        step = np.linalg.lstsq(jacobian, -r, rcond=None)[0]
        length = float(np.linalg.norm(step))
        if length > _MAX_STEP:
            step *= _MAX_STEP / length
        for _ in range(6):
            trial = _clip(x + step)
            r_trial, busy_trial = residual(trial)
            if np.sum(r_trial**2) < np.sum(r**2):
                break
            step /= 2
        else:
            break  # no step downhill: as close as the log-normal family comes
        moved = float(np.max(np.abs(trial - x)))
        x, r, busy = trial, r_trial, busy_trial
        if moved < _SMALL_MOVE:
            break
    mean, cv = math.exp(x[0]), math.exp(x[1])
    values, busy, engine = _twin_statistics(twin, mean, cv, names)
    fit = ResponseFit(
        LogNormal(mean=mean, cv=cv),
        dict(zip(names, goal.tolist(), strict=True)),
        dict(zip(names, values.tolist(), strict=True)),
        n_items,
        evaluations + 1,
        busy,
        engine,
    )
    if fit.worst_error > MISFIT:
        warnings.warn(
            f"the twin on {scenario.config.concurrency} worker(s) cannot reproduce the "
            f"recorded response times (off by up to {fit.worst_error:.0%}: "
            f"{fit.describe()}); is the worker count right, and was the load steady?",
            ResponseFitWarning,
            stacklevel=2,
        )
    return fit


def _clip(x: np.ndarray) -> np.ndarray:
    return np.array([x[0], min(max(x[1], math.log(_CV_RANGE[0])), math.log(_CV_RANGE[1]))])


def _start(targets: dict[str, float]) -> np.ndarray:
    """The response times' own log-normal: an upper bound on the mean, a first cv."""
    mean = targets.get("mean") or targets.get("p50") or min(targets.values())
    cv = 1.0
    if "p50" in targets and "p95" in targets and targets["p95"] > targets["p50"]:
        sigma = math.log(targets["p95"] / targets["p50"]) / 1.6448536269514722
        cv = math.sqrt(math.expm1(sigma * sigma))
    return _clip(np.array([math.log(mean), math.log(cv)]))
