"""Whether a scenario draws anything at random: can its replications differ at all?

Replication *r* of a scenario runs on random streams derived from
``(seed, r)``. When nothing in the scenario reads them (a replayed trace:
recorded arrival times, recorded service times, scripted failures, no
jittered backoff), every replication is the same run: their spread is 0, an
interval over them is 0 wide and means nothing, and "run more replications"
is advice that cannot be followed. One recorded day is one sample of
traffic; only another recording (or a fitted model that varies) gives
another.

:func:`fixed_workload` names what makes a scenario fixed, or returns None
when something in it is random. It is conservative: an arrival process,
distribution or failure model it does not know to be fixed counts as
random, so it never refuses a scenario whose runs can differ.
"""

from __future__ import annotations

from .arrivals import Deterministic, Trace
from .distributions import Constant
from .failures import CombinedFailures, NoFailures, ScriptedFailures
from .scenario import Scenario
from .traces.service import ServiceTrace

__all__ = ["check_replications", "fixed_workload", "replays_one_sample"]


def _fixed_failures(model: object) -> bool:
    if isinstance(model, CombinedFailures):
        return all(_fixed_failures(m) for m in model.models)
    return isinstance(model, NoFailures | ScriptedFailures)


def _fixed_stage(service: object, config: object, failures: object) -> bool:
    jitter = getattr(getattr(config, "backoff", None), "jitter", False)
    return (
        isinstance(service, ServiceTrace | Constant)
        and _fixed_failures(failures)
        and not (jitter and getattr(config, "max_attempts", 1) > 1)
    )


def fixed_workload(scenario: Scenario) -> str | None:
    """Why every replication of ``scenario`` is the same run, or None if any can differ.

    Fixed means: arrivals recorded (:class:`~pipeline.sim.Trace`) or evenly
    spaced, every stage's service times recorded (a ``ServiceTrace``) or
    constant, failures none or scripted, no jittered backoff on a stage that
    retries, and no item classes (which are drawn by share).

    Returns:
        A phrase for a message ("it replays a recorded trace ...") or None.
    """
    if not isinstance(scenario.arrivals, Trace | Deterministic) or scenario.classes:
        return None
    if scenario.stages is not None:
        stages = [(s.service, s.config, s.failures) for s in scenario.stages]
        if not _fixed_failures(scenario.failures):
            return None
    else:
        stages = [(scenario.service, scenario.config, scenario.failures)]
    if not all(_fixed_stage(*stage) for stage in stages):
        return None
    if isinstance(scenario.arrivals, Trace):
        return (
            "it replays a recorded trace (its arrival times, service times and failures are "
            "one recorded sample, and every replication replays the same one)"
        )
    return "nothing in it is random (evenly spaced arrivals, constant service times)"


def replays_one_sample(scenario: Scenario) -> bool:
    """True when every run of ``scenario`` replays one recorded sample of a random reality.

    A replayed trace (:class:`~pipeline.sim.Trace` arrivals) with nothing random
    besides: its runs agree, yet the recording was one draw, so a verdict on it
    holds for that day alone. A model with nothing random in it (evenly spaced
    arrivals, constant service) is not a sample: its one run is its exact answer.
    """
    return isinstance(scenario.arrivals, Trace) and fixed_workload(scenario) is not None


def check_replications(scenario: Scenario, count: int, what: str) -> None:
    """Refuse a replication past the first of a scenario whose replications are all the same.

    Args:
        scenario: the scenario to replicate.
        count: how many replications the caller would have (replication ``r`` makes ``r + 1``).
        what: the setting as the caller spells it, e.g. ``"--replications 3"``,
            ``"replications=3"`` or ``"replication=1"``: the message starts with it.

    Raises:
        ValueError: ``count > 1`` and :func:`fixed_workload` finds the scenario
            fixed; the one-line message says why and what to do instead.
    """
    if count <= 1:
        return
    why = fixed_workload(scenario)
    if why is not None:
        raise ValueError(
            f"{what}: every replication of this scenario is the same run, because {why}; "
            "their interval would be 0 and mean nothing. Run it once, replay other "
            "recordings (one recorded day is one sample), or fit a model whose runs vary "
            "(calibrate)"
        )
