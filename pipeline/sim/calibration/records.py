"""What a calibration found: the fitted twin, and how each of its parts was fitted.

:func:`~pipeline.sim.calibrate` (a recorded run) and
:func:`~pipeline.sim.calibration.calibrate_observed` (telemetry) both answer with
a :class:`Calibration`: the :class:`~pipeline.sim.Scenario` ready to simulate,
the :class:`ArrivalFit` of the source and, per stage, a :class:`StageFit`
holding its :class:`ServiceFit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..stats.intervals import ProportionCI
from ..workloads.arrivals import ArrivalProcess
from ..workloads.distributions import Distribution
from ..workloads.scenario import Scenario
from ..workloads.stages import StageSpec

__all__ = ["ArrivalFit", "Calibration", "ServiceFit", "StageFit", "json_float"]


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
                "rate_per_s": json_float(self.arrivals.rate_per_s),
                "ks_statistic": json_float(self.arrivals.ks_statistic),
            },
            "stages": {
                name: {
                    "service": repr(fit.service.distribution)
                    if fit.service.family != "empirical"
                    else f"Empirical(n={fit.service.n})",
                    "family": fit.service.family,
                    "service_mean_s": fit.service.mean_s,
                    "ks_statistic": json_float(fit.service.ks_statistic),
                    "ks_critical": json_float(fit.service.ks_critical),
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


def json_float(value: float | None) -> float | None:
    """``value`` as a JSON number: None for None, NaN and infinities (JSON has none of them)."""
    return float(value) if value is not None and math.isfinite(value) else None
