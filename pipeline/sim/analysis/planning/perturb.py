"""Moving one input of a scenario by a factor: the arrival rate, a service time, ...

A sensitivity analysis (:mod:`~pipeline.sim.analysis.planning.sensitivity`)
asks "what if this input were 20% higher?". :func:`perturbed` answers the
"this input" part: the scenario with one input multiplied by a factor and
everything else, the seed included, unchanged, so the runs see the same
random numbers (common random numbers) and only the input differs.

The inputs (:data:`INPUTS`):

- ``arrival_rate`` -- every rate of the arrival process (Poisson, deterministic,
  Markov-modulated, on/off; a time-varying rate at every moment, its shape in
  time kept: a morning peak stays at its hour); a trace's arrivals are
  replayed as recorded and cannot move;
- ``service_mean`` -- the mean service time, shape kept (the coefficient of
  variation stays); on a chain, each stage's own (``write.service_mean``);
- ``service_spread`` -- the coefficient of variation, mean kept: lognormal and
  gamma times directly, a uniform's width about its mean, an exponential
  time (cv 1) as a gamma of cv 1 × factor. Longer tails, so it moves the p99
  with it;
- ``failure_rate`` -- the probability an attempt fails (independent failures,
  hangs) or the share of items that always fail (permanent failures);
- ``item_size`` -- ``item_size_bytes``, what one item holds in memory.

An input that does not apply raises :class:`NotApplicable` with the reason
(no failures to scale, a trace, a constant service time has no spread).
"""

from __future__ import annotations

import dataclasses
import decimal
import numbers
from typing import Any

from ...workloads.arrivals import (
    ArrivalProcess,
    Deterministic,
    MarkovModulated,
    OnOff,
    Poisson,
    TimeVarying,
)
from ...workloads.distributions import Constant, Exponential, Gamma, LogNormal, Uniform
from ...workloads.failures import Hangs, IndependentFailures, NoFailures, PermanentFailures
from ...workloads.scenario import Scenario

__all__ = ["INPUTS", "NotApplicable", "ScaledRate", "inputs_of", "perturbed"]

INPUTS = ("arrival_rate", "service_mean", "service_spread", "failure_rate", "item_size")
"""The inputs a scenario can move, in the order a report lists them."""

_PER_STAGE = ("service_mean", "service_spread", "failure_rate")


class NotApplicable(ValueError):
    """Raised when an input cannot be moved in this scenario; the message says why."""


def inputs_of(scenario: Scenario) -> list[str]:
    """The input names of ``scenario``: :data:`INPUTS`; on a chain, the service and
    failure inputs once per stage, ``"write.service_mean"``."""
    if scenario.stages is None:
        return list(INPUTS)
    staged = [f"{stage.name}.{name}" for stage in scenario.stages for name in _PER_STAGE]
    return ["arrival_rate", *staged, "item_size"]


def perturbed(scenario: Scenario, name: str, factor: float) -> Scenario:
    """``scenario`` with the input ``name`` multiplied by ``factor`` (> 0).

    Raises:
        ValueError: ``name`` is not one of :func:`inputs_of` ``(scenario)``, or
            ``factor`` is not a real number > 0 and < 1e9.
        NotApplicable: the input does not apply here, or the factor takes it
            outside what it allows (a failure probability above 1).
    """
    if (
        isinstance(factor, bool)
        or not isinstance(factor, numbers.Real | decimal.Decimal)
        or not 0 < float(factor) < 1e9
    ):
        raise ValueError(f"factor must be a number > 0, got {factor!r}")
    factor = float(factor)
    names = inputs_of(scenario)
    if name not in names:
        raise ValueError(f"input must be one of {names}, got {name!r}")
    if name == "arrival_rate":
        return dataclasses.replace(scenario, arrivals=_arrivals(scenario.arrivals, factor))
    if name == "item_size":
        if scenario.item_size_bytes == 0:
            raise NotApplicable("item_size_bytes is 0: no item memory to scale")
        return dataclasses.replace(
            scenario, item_size_bytes=max(1, round(scenario.item_size_bytes * factor))
        )
    stage, _, what = name.rpartition(".")
    if stage:
        spec = next(s for s in scenario.stages if s.name == stage)
        service, failures = spec.service, spec.failures
    else:
        service, failures = scenario.service, scenario.failures
    if what == "failure_rate":
        changed = {"failures": _failures(failures, factor)}
    elif not stage and scenario.downstream is not None:
        # The system's service is the downstream's (and the client's time, if any).
        scale = _mean if what == "service_mean" else _spread
        downstream = dataclasses.replace(
            scenario.downstream, service=scale(scenario.downstream.service, factor)
        )
        changed = {
            "downstream": downstream,
            "service": None if service is None else scale(service, factor),
        }
    else:
        scale = _mean if what == "service_mean" else _spread
        changed = {"service": scale(service, factor)}
    if stage:
        return scenario.replace(**{f"{stage}.{key}": value for key, value in changed.items()})
    return dataclasses.replace(scenario, **changed)


def _arrivals(arrivals: ArrivalProcess, factor: float) -> ArrivalProcess:
    if isinstance(arrivals, Poisson | Deterministic):
        return dataclasses.replace(arrivals, rate=arrivals.rate * factor)
    if isinstance(arrivals, OnOff):
        return dataclasses.replace(
            arrivals, rate_on=arrivals.rate_on * factor, rate_off=arrivals.rate_off * factor
        )
    if isinstance(arrivals, MarkovModulated):
        return dataclasses.replace(arrivals, rates=tuple(r * factor for r in arrivals.rates))
    if isinstance(arrivals, TimeVarying):
        return dataclasses.replace(
            arrivals,
            rate_fn=ScaledRate(arrivals.rate_fn, factor),
            max_rate=arrivals.max_rate * factor,
        )
    kind = type(arrivals).__name__
    if kind == "Trace":
        raise NotApplicable("the arrivals are a trace, replayed as recorded")
    raise NotApplicable(f"{kind} arrivals have no rate to scale")


@dataclasses.dataclass(frozen=True)
class ScaledRate:
    """A rate function times ``factor`` (arrivals per second at t seconds): picklable for
    worker processes, vectorised as the function it scales, with its ``period_s``."""

    inner: Any
    factor: float

    def __call__(self, t: Any) -> Any:
        return self.inner(t) * self.factor

    @property
    def period_s(self) -> float | None:
        return getattr(self.inner, "period_s", None)


def _mean(service: Any, factor: float) -> Any:
    if isinstance(service, Exponential | LogNormal | Gamma):
        return dataclasses.replace(service, mean=service.mean * factor)
    if isinstance(service, Constant):
        return Constant(value=service.value * factor)
    if isinstance(service, Uniform):
        return Uniform(low=service.low * factor, high=service.high * factor)
    raise NotApplicable(f"a {type(service).__name__} service time has no mean to scale")


def _spread(service: Any, factor: float) -> Any:
    if isinstance(service, LogNormal | Gamma):
        return dataclasses.replace(service, cv=service.cv * factor)
    if isinstance(service, Exponential):
        # Gamma of cv 1 is the exponential; moving its cv keeps the mean.
        return Gamma(mean=service.mean, cv=factor)
    if isinstance(service, Uniform):
        middle, half = service.mean, (service.high - service.low) / 2 * factor
        if half > middle:
            raise NotApplicable(
                f"a uniform service time of width {service.high - service.low:g} s about "
                f"{middle:g} s cannot widen by {factor:g} without going below 0 s"
            )
        return Uniform(low=middle - half, high=middle + half)
    if isinstance(service, Constant):
        raise NotApplicable("a constant service time has no spread")
    raise NotApplicable(f"a {type(service).__name__} service time has no spread to scale")


def _failures(failures: Any, factor: float) -> Any:
    if isinstance(failures, NoFailures):
        raise NotApplicable("no failures to scale")
    if isinstance(failures, IndependentFailures | Hangs | PermanentFailures):
        key = "fraction" if isinstance(failures, PermanentFailures) else "p"
        value = getattr(failures, key)
        if value == 0:
            raise NotApplicable(f"the failure {key} is 0: no failures to scale")
        if value * factor > 1:
            raise NotApplicable(
                f"the failure {key} {value:g} × {factor:g} is above 1 (a probability)"
            )
        return dataclasses.replace(failures, **{key: value * factor})
    raise NotApplicable(f"{type(failures).__name__} has no failure rate to scale")
