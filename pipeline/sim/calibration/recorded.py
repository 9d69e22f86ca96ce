"""``calibrate``: fit a simulation :class:`~pipeline.sim.Scenario` from a real run's trace.

A digital twin is only as good as its inputs. From a
:class:`~pipeline.sim.RunTrace` (what :class:`~pipeline.sim.TraceRecorder`
recorded of a real run) this fits, stage by stage:

- **the arrival process** at the source: a *backlog* (everything available
  at the origin, as in a bulk ingestion) replayed as it was; otherwise a
  Poisson process at the measured rate when the gaps between arrivals pass a
  Kolmogorov-Smirnov test for exponential gaps, else the measured arrival
  times themselves (:class:`~pipeline.sim.Trace`): :func:`~.arrivals.fit_arrivals`;
- **the service time** of each stage's attempts: a log-normal (fitted to the
  logs' mean and spread) or an exponential (fitted to the mean), whichever
  is closer in the Kolmogorov-Smirnov distance ``D``, when ``D`` is below
  the 5% critical value for a fit with estimated parameters (Lilliefors:
  ``0.886/sqrt(n)`` for the log-normal, ``1.06/sqrt(n)`` for the
  exponential); otherwise, or with ``family="empirical"``, the measured times
  themselves (:class:`~pipeline.sim.Empirical` resamples them):
  :func:`~.service.fit_service`. A stage whose
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

import numpy as np

from ..._validate import show
from ..stats.intervals import ProportionCI, proportion_ci
from ..workloads.failures import (
    FailureModel,
    IndependentFailures,
    NoFailures,
    PermanentFailures,
)
from ..workloads.scenario import Scenario
from ..workloads.stages import MAX_FAN_OUT, StageSpec
from ..workloads.traces.runtrace import RunTrace, StageTrace
from .arrivals import fit_arrivals
from .records import Calibration, StageFit
from .service import FAMILY_CHOICES, FamilyChoice, fit_service

__all__ = ["calibrate"]


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
    family: FamilyChoice = "auto",
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
    if family not in FAMILY_CHOICES:
        raise ValueError(f"family must be one of {', '.join(FAMILY_CHOICES)}, got {show(family)}")
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
