"""``calibrate``: fit a simulation :class:`~pipeline.sim.Scenario` from a real run's trace.

A digital twin is only as good as its inputs. From a
:class:`~pipeline.sim.RunTrace` (what :class:`~pipeline.sim.TraceRecorder`
recorded of a real run) this fits, stage by stage:

- **the arrival process** at the source: a *backlog* (everything available
  at the origin, as in a bulk ingestion) replayed as it was; otherwise a
  Poisson process at the measured rate when the gaps between arrivals pass a
  Kolmogorov-Smirnov test for exponential gaps, else the measured arrival
  times themselves (:class:`~pipeline.sim.Trace`);
- **the service time** of each stage's attempts: a log-normal (fitted to the
  logs' mean and spread) or an exponential (fitted to the mean), whichever
  is closer in the Kolmogorov-Smirnov distance ``D``, when ``D`` is below
  the 5% critical value for a fit with estimated parameters (Lilliefors:
  ``0.886/sqrt(n)`` for the log-normal, ``1.06/sqrt(n)`` for the
  exponential); otherwise, or with ``family="empirical"``, the measured times
  themselves (:class:`~pipeline.sim.Empirical` resamples them). A stage whose
  resource serves fewer attempts at once than it has workers (a database's
  single writer) gets that many servers, and its service times are rebuilt
  from departures (:meth:`StageTrace.service_s`);
- **failures**: the share of attempts that failed and were retried (each
  attempt independently, :class:`~pipeline.sim.IndependentFailures`) and the
  share of items that failed permanently (dead-lettered before using their
  attempts: :class:`~pipeline.sim.PermanentFailures`), each with its Wilson
  interval;
- **fan-out**: the children each completed item yields for the next stage,
  counted as the next stage received them, admitted or shed (a child it
  refused was still produced), rounded to a whole number (the simulator's
  fan-out is a count per item).

A batching stage (``Stage(batch_size > 1)``) is refused: the simulator
serves one item per handler call, so a twin of a batch as an item would have
the wrong service times, queue bounds and fan-outs.

Example::

    fit = calibrate(trace)
    fit.scenario                       # Scenario(stages=[StageSpec(...), ...])
    fit.stages["fetch"].service        # ServiceFit(family='lognormal', ks_statistic=0.04, ...)
    simulate(fit.scenario.replace(...), replications=20)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..._validate import show
from ..stats.intervals import ProportionCI, proportion_ci
from ..workloads.arrivals import ArrivalProcess, Poisson, Trace
from ..workloads.distributions import Distribution, Empirical, Exponential, LogNormal
from ..workloads.failures import (
    FailureModel,
    IndependentFailures,
    NoFailures,
    PermanentFailures,
)
from ..workloads.scenario import Scenario
from ..workloads.stages import MAX_FAN_OUT, StageSpec
from ..workloads.traces.runtrace import RunTrace, StageTrace

__all__ = ["ArrivalFit", "Calibration", "ServiceFit", "StageFit", "calibrate", "ks_distance"]

Family = Literal["auto", "empirical", "lognormal", "exponential"]
_FAMILIES = ("auto", "empirical", "lognormal", "exponential")
# Lilliefors' 5% critical values of D * sqrt(n), parameters estimated from the sample.
_CRITICAL = {"lognormal": 0.886, "exponential": 1.06}
_MIN_FIT = 8  # fewer samples than this: no family is fitted, the samples are replayed


def _lognormal_cdf(x: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    from math import erf, sqrt

    z = (np.log(np.maximum(x, 1e-300)) - mu) / (sigma * sqrt(2.0))
    return 0.5 * (1.0 + np.vectorize(erf)(z))


def ks_distance(samples: np.ndarray, cdf: Any) -> float:
    """Kolmogorov-Smirnov distance ``D = sup |F_n(x) - F(x)|`` of ``samples`` from ``cdf``."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = x.size
    if n == 0:
        return math.nan
    f = cdf(x)
    above = np.arange(1, n + 1) / n - f
    below = f - np.arange(0, n) / n
    return float(max(above.max(), below.max()))


@dataclass(frozen=True)
class ServiceFit:
    """How a stage's service times were modelled.

    Attributes:
        family: ``"lognormal"``, ``"exponential"`` or ``"empirical"``.
        distribution: what the twin draws from.
        n: service times measured.
        mean_s: their mean, seconds.
        ks_statistic: the chosen family's Kolmogorov-Smirnov distance D
            (NaN for ``"empirical"``).
        ks_critical: the 5% critical value D would have to stay below (NaN
            for ``"empirical"``).
        candidates: D of each family tried, by family.
    """

    family: str
    distribution: Distribution
    n: int
    mean_s: float
    ks_statistic: float
    ks_critical: float
    candidates: dict[str, float]

    @property
    def fits(self) -> bool:
        """True when a family was fitted and passed its test (False for empirical)."""
        return self.family != "empirical" and self.ks_statistic <= self.ks_critical


@dataclass(frozen=True)
class StageFit:
    """One stage of the fitted twin.

    Attributes:
        name: the stage.
        service: its :class:`ServiceFit`.
        servers: attempts served at once in the twin (the resource's capacity).
        failure_rate: share of attempts (of items not failing permanently)
            that failed and were retried or used up their attempts.
        permanent_fraction: share of the stage's items that failed permanently.
        fan_out: children per completed item for the next stage.
        spec: the :class:`~pipeline.sim.StageSpec` built from all this.
    """

    name: str
    service: ServiceFit
    servers: int
    failure_rate: ProportionCI
    permanent_fraction: ProportionCI
    fan_out: int
    spec: StageSpec


@dataclass(frozen=True)
class ArrivalFit:
    """The fitted arrival process at the source.

    Attributes:
        kind: ``"backlog"`` (all available at once), ``"poisson"`` or ``"trace"``.
        process: the :class:`~pipeline.sim.ArrivalProcess` the twin uses.
        n: source items.
        rate_per_s: the measured rate (NaN for a backlog).
        rate_ci95: half-width of the rate's 95% interval (Poisson counts).
        ks_statistic: D of the gaps against an exponential (NaN for a backlog).
        ks_critical: its 5% critical value.
    """

    kind: str
    process: ArrivalProcess
    n: int
    rate_per_s: float
    rate_ci95: float
    ks_statistic: float
    ks_critical: float


@dataclass(frozen=True)
class Calibration:
    """A scenario fitted to a real run, and how each part was fitted.

    Attributes:
        scenario: the twin, ready for :func:`~pipeline.sim.simulate` (and ``replace``).
        arrivals: the :class:`ArrivalFit`.
        stages: by name, each :class:`StageFit`.
    """

    scenario: Scenario
    arrivals: ArrivalFit
    stages: dict[str, StageFit]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: per stage the family, its fit and the failure shares."""
        return {
            "arrivals": {
                "kind": self.arrivals.kind,
                "n": self.arrivals.n,
                "rate_per_s": _finite(self.arrivals.rate_per_s),
                "ks_statistic": _finite(self.arrivals.ks_statistic),
            },
            "stages": {
                name: {
                    "service": repr(fit.service.distribution)
                    if fit.service.family != "empirical"
                    else f"Empirical(n={fit.service.n})",
                    "family": fit.service.family,
                    "service_mean_s": fit.service.mean_s,
                    "ks_statistic": _finite(fit.service.ks_statistic),
                    "ks_critical": _finite(fit.service.ks_critical),
                    "servers": fit.servers,
                    "fan_out": fit.fan_out,
                    "failure_rate": fit.failure_rate.estimate,
                    "failure_rate_interval": [fit.failure_rate.low, fit.failure_rate.high],
                    "permanent_fraction": fit.permanent_fraction.estimate,
                }
                for name, fit in self.stages.items()
            },
        }

    def __str__(self) -> str:
        lines = [f"arrivals: {self.arrivals.kind}, {self.arrivals.n} items"]
        for name, fit in self.stages.items():
            s = fit.service
            test = (
                f"KS D={s.ks_statistic:.3f} (5% critical {s.ks_critical:.3f})"
                if s.family != "empirical"
                else "resampled"
            )
            lines.append(
                f"{name}: {s.family} service, mean {s.mean_s * 1e3:.2f} ms over {s.n} "
                f"attempts, {test}; {fit.servers} server(s); failures "
                f"{fit.failure_rate.estimate:.3f} of attempts, permanent "
                f"{fit.permanent_fraction.estimate:.3f} of items; fan-out {fit.fan_out}"
            )
        return "\n".join(lines)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def fit_service(samples: np.ndarray, family: Family = "auto") -> ServiceFit:
    """Model measured service times (seconds): a fitted family, or the samples themselves."""
    x = np.asarray(samples, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("no service times to fit: the stage ran no attempt that ended")
    x = np.maximum(x, 0.0)
    mean = float(x.mean())
    candidates: dict[str, float] = {}
    fitted: dict[str, Distribution] = {}
    if x.size >= _MIN_FIT and mean > 0:
        if family in ("auto", "exponential"):
            fitted["exponential"] = Exponential(mean=mean)
            candidates["exponential"] = ks_distance(x, lambda v: 1.0 - np.exp(-v / mean))
        if family in ("auto", "lognormal") and (x > 0).all():
            logs = np.log(x)
            mu, sigma = float(logs.mean()), float(logs.std(ddof=1))
            if sigma > 0:
                fitted["lognormal"] = LogNormal(
                    mean=math.exp(mu + sigma * sigma / 2), cv=math.sqrt(math.expm1(sigma * sigma))
                )
                candidates["lognormal"] = ks_distance(
                    x, lambda v, mu=mu, sigma=sigma: _lognormal_cdf(v, mu, sigma)
                )
    if family != "empirical" and candidates:
        best = min(candidates, key=candidates.__getitem__)
        critical = _CRITICAL[best] / math.sqrt(x.size)
        if candidates[best] <= critical or family != "auto":
            return ServiceFit(
                best, fitted[best], int(x.size), mean, candidates[best], critical, candidates
            )
    if family in ("lognormal", "exponential") and not candidates:
        raise ValueError(
            f"cannot fit a {family} to {x.size} service times (need at least {_MIN_FIT}, "
            "all > 0 for a log-normal, not all equal)"
        )
    return ServiceFit(
        "empirical", Empirical(tuple(x.tolist())), int(x.size), mean, math.nan, math.nan, candidates
    )


def fit_arrivals(arrivals_s: np.ndarray) -> ArrivalFit:
    """Model the source's arrival times: a backlog, a Poisson process, or the times themselves."""
    t = np.asarray(arrivals_s, dtype=np.float64)
    n = int(t.size)
    if n == 0:
        raise ValueError("no arrivals to fit: the source offered nothing")
    start = min(0.0, float(t[0]))
    t = t - start
    span = float(t[-1] - t[0])
    if n == 1 or span <= 1e-9 * max(1.0, abs(float(t[-1]))):
        return ArrivalFit("backlog", Trace(t), n, math.nan, math.nan, math.nan, math.nan)
    gaps = np.diff(np.concatenate([[0.0], t]))
    rate = n / float(t[-1]) if t[-1] > 0 else math.nan
    mean_gap = float(gaps.mean())
    distance = ks_distance(gaps, lambda v: 1.0 - np.exp(-v / mean_gap))
    critical = _CRITICAL["exponential"] / math.sqrt(n)
    ci = 1.96 * math.sqrt(n) / float(t[-1])
    if n >= _MIN_FIT and distance <= critical and math.isfinite(rate):
        return ArrivalFit("poisson", Poisson(rate=rate), n, rate, ci, distance, critical)
    return ArrivalFit("trace", Trace(t), n, rate, ci, distance, critical)


def _failures(stage: StageTrace) -> tuple[ProportionCI, ProportionCI, FailureModel]:
    """Transient failure share of attempts, permanent share of items, and their model."""
    budget = stage.config.max_attempts
    permanent = (stage.outcome == "dead_lettered") & (stage.attempts < budget)
    items = max(1, len(stage))
    perm = proportion_ci(int(permanent.sum()), items)
    ordinary = ~permanent[stage.attempt_item] if len(stage) else np.zeros(0, bool)
    ended = stage.attempt_outcome[ordinary]
    attempts = int(ended.size)
    failed = int(np.sum(ended != "completed"))
    rate = proportion_ci(failed, max(1, attempts)) if attempts else proportion_ci(0, 1)
    parts: list[FailureModel] = []
    if rate.estimate > 0:
        parts.append(IndependentFailures(rate.estimate))
    if perm.estimate > 0:
        parts.append(PermanentFailures(perm.estimate))
    model: FailureModel = NoFailures()
    for part in parts:
        model = part if isinstance(model, NoFailures) else model | part
    return rate, perm, model


def calibrate(
    trace: RunTrace,
    *,
    family: Family = "auto",
    seed: int = 1,
    n_items: int | None = None,
) -> Calibration:
    """Fit a multi-stage :class:`~pipeline.sim.Scenario` to a recorded run.

    Args:
        trace: the :class:`~pipeline.sim.RunTrace` of a real run.
        family: ``"auto"`` (a log-normal or exponential where one passes its
            goodness-of-fit test, else the samples), ``"empirical"`` (always
            the samples), or one family for every stage.
        seed: the twin's seed.
        n_items: source items the twin offers (default: as many as the run).

    Returns:
        A :class:`Calibration`: ``.scenario`` and how each part was fitted.

    Raises:
        TypeError: ``trace`` is not a RunTrace.
        ValueError: an unknown ``family``, a stage with no attempt to fit, or a
            batching stage (the simulator has none).
    """
    if not isinstance(trace, RunTrace):
        raise TypeError(f"trace must be a RunTrace, got {show(trace)}")
    if family not in _FAMILIES:
        raise ValueError(f"family must be one of {', '.join(_FAMILIES)}, got {show(family)}")
    batching = [name for name, stage in trace.stages.items() if stage.batching]
    if batching:
        raise ValueError(
            f"stage {batching[0]!r} batches its input (Stage(batch_size > 1)); the simulator "
            "serves one item per handler call, so its twin would be wrong: calibrate a run "
            "without batching stages"
        )
    arrivals = fit_arrivals(trace.source_arrivals_s)
    stages: dict[str, StageFit] = {}
    for name, stage in trace.stages.items():
        try:
            service = fit_service(stage.service_s(), family)
        except ValueError as error:
            raise ValueError(f"stage {name!r}: {error}") from None
        rate, perm, failures = _failures(stage)
        children = trace.children_per_item(name)
        fan_out = int(min(MAX_FAN_OUT, max(1, round(children))))
        config = dataclasses.replace(stage.config, concurrency=stage.capacity)
        spec = StageSpec(
            name=name,
            service=service.distribution,
            config=config,
            fan_out=fan_out,
            failures=failures,
        )
        stages[name] = StageFit(name, service, stage.capacity, rate, perm, fan_out, spec)
    scenario = Scenario(
        arrivals=arrivals.process,
        stages=[fit.spec for fit in stages.values()],
        n_items=arrivals.n if n_items is None else n_items,
        seed=seed,
    )
    return Calibration(scenario, arrivals, stages)
