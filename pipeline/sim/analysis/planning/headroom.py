"""Headroom: how much more traffic (or slower service) a configuration takes before an SLO breaks.

For the chosen configuration, the arrival rate is multiplied by a factor ``f``
(``Poisson(rate=8)`` becomes ``Poisson(rate=8 f)``; another process is
re-timed, every arrival at ``t / f``) and the configuration judged on every SLO
as the plan judges a candidate. Replication *r* at every factor uses the
streams of ``(seed, r)``, as the plan's runs do (common random numbers): the
same arrivals, sped up, and the same service times. The search:

1. grows ``f`` from 1 (where the plan showed the configuration meets) through
   1.25, 1.5, 2, 3, 5, 9, 17, 33 until a factor is shown to fail (queueing
   theory's instability counts: :func:`~..diagnostics.stability.unstable_note`);
2. then halves the bracket (geometric midpoints) until ``high / low`` is within
   :data:`RELATIVE_WIDTH`, or a factor stays undecided at the replication budget.

``low`` is the largest factor shown to meet every SLO, ``high`` the smallest
shown to fail one; ``arrival_rate_factor`` is the factor still undecided when
there is one, else the geometric midpoint of ``low`` and ``high``. The same is
done for the mean service time (every service time, every stage's on a chain,
multiplied by ``f``).

**Confidence.** Each factor's verdict is a plan verdict, at a per-look level
Bonferroni-split over the replication schedule's looks *and* over the at most
:data:`MAX_POINTS` factors one search may judge: the chance that any factor's
verdict is wrong, so that ``[low, high]`` misses the true limit, is at most
``1 - confidence`` per search.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...workloads.arrivals import ArrivalProcess
from ...workloads.distributions import Distribution
from ..diagnostics.stability import unstable_note
from .candidate import Candidate, look_confidence, replication_schedule

if TYPE_CHECKING:
    from ...workloads.scenario import Scenario
    from .slo import SLO

__all__ = ["MAX_POINTS", "RELATIVE_WIDTH", "Headroom", "HeadroomFactor", "find_headroom"]

MAX_POINTS = 16
"""Most factors one headroom search judges (the Bonferroni split of its confidence)."""

RELATIVE_WIDTH = 0.02
"""The search stops narrowing once ``high / low <= 1 + RELATIVE_WIDTH``."""

_GROWTH = (1.25, 1.5, 2.0, 3.0, 5.0, 9.0, 17.0, 33.0)


@dataclass(frozen=True)
class ScaledArrivals(ArrivalProcess):
    """``inner`` sped up ``factor`` times: every arrival at ``t / factor`` (same random numbers)."""

    inner: ArrivalProcess
    factor: float

    @property
    def rate(self) -> float:
        """Mean arrivals per second: the inner rate times ``factor``."""
        return float(self.inner.rate) * self.factor

    def _by_count(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.inner.times(rng, n=n) / self.factor

    def _by_duration(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return self.inner.times(rng, duration_s=duration_s * self.factor) / self.factor


@dataclass(frozen=True)
class ScaledService(Distribution):
    """Every service time of ``inner`` multiplied by ``factor`` (same random numbers)."""

    inner: Distribution
    factor: float

    @property
    def mean(self) -> float:
        """Mean service time, seconds: the inner mean times ``factor``."""
        return float(self.inner.mean) * self.factor

    @property
    def cv(self) -> float:
        """Coefficient of variation: the inner one (scaling leaves it)."""
        return float(self.inner.cv)

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.inner.sample(rng, size) * self.factor


def scale_arrivals(scenario: Scenario, factor: float) -> Scenario:
    """``scenario`` with its arrival rate multiplied by ``factor``."""
    arrivals = scenario.arrivals
    fields = (
        {f.name for f in dataclasses.fields(arrivals)}
        if dataclasses.is_dataclass(arrivals)
        else set()
    )
    if fields == {"rate"}:  # Poisson, Deterministic: the same process, faster
        scaled: ArrivalProcess = dataclasses.replace(arrivals, rate=arrivals.rate * factor)
    else:
        scaled = ScaledArrivals(arrivals, factor)
    return scenario.replace(arrivals=scaled)


def service_refusal(scenario: Scenario) -> str | None:
    """Why the service time cannot be scaled (a recorded service trace), else None."""
    services = (
        [scenario.service] if scenario.stages is None else [s.service for s in scenario.stages]
    )
    if any(not isinstance(service, Distribution) for service in services):
        return "a recorded service trace is replayed as it was: its times are not scaled"
    return None


def scale_service(scenario: Scenario, factor: float) -> Scenario:
    """``scenario`` with every service time (every stage's) multiplied by ``factor``."""
    if scenario.stages is None:
        return scenario.replace(service=ScaledService(scenario.service, factor))
    stages = [
        dataclasses.replace(stage, service=ScaledService(stage.service, factor))
        for stage in scenario.stages
    ]
    return scenario.replace(stages=stages)


@dataclass(frozen=True)
class HeadroomFactor:
    """How far one input can grow before an SLO breaks.

    Attributes:
        factor: the estimated largest multiplier at which every SLO still holds.
        low: the largest multiplier shown to meet every SLO (at least 1).
        high: the smallest multiplier shown to fail one (None: none failed up
            to the largest tried, 33).
        breaks: the SLO that fails at ``high`` (None when nothing failed).
        note: why the search stopped short, or why it could not run, else None.
        points: every multiplier judged, ``(factor, verdict, replications)``, ascending.
    """

    factor: float | None
    low: float | None
    high: float | None
    breaks: str | None
    note: str | None
    points: tuple[tuple[float, str, int], ...]


@dataclass(frozen=True)
class Headroom:
    """The chosen configuration's headroom in traffic and in service time.

    Attributes:
        arrival_rate: the arrival rate's :class:`HeadroomFactor`.
        service_time: the mean service time's.
        confidence: the level at which ``[low, high]`` holds the true limit (each search).
        runs: simulation runs the two searches made.
    """

    arrival_rate: HeadroomFactor
    service_time: HeadroomFactor
    confidence: float
    runs: int

    def text(self) -> str:
        """In words: "You can take 23% more traffic before latency_p95_s<=0.5 breaks ..."."""
        return "\n".join(
            [
                _sentence(self.arrival_rate, "You can take", "more traffic", self.confidence),
                _sentence(self.service_time, "Service can get", "slower", self.confidence),
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``plan --json`` prints as ``headroom``."""
        a, s = self.arrival_rate, self.service_time
        return {
            "arrival_rate_factor": a.factor,
            "low": a.low,
            "high": a.high,
            "breaks": a.breaks,
            "note": a.note,
            "service_time_factor": s.factor,
            "service_time_low": s.low,
            "service_time_high": s.high,
            "service_time_breaks": s.breaks,
            "service_time_note": s.note,
            "confidence": self.confidence,
            "runs": self.runs,
            "text": self.text(),
            "points": [list(p) for p in a.points],
            "service_time_points": [list(p) for p in s.points],
        }


def _sentence(h: HeadroomFactor, start: str, what: str, confidence: float) -> str:
    if h.factor is None:
        return f"{start} ? {what}: {h.note}"
    level = f"{100 * confidence:.4g}%"
    if h.high is None:
        return (
            f"{start} at least {100 * (h.low - 1):.0f}% {what}: every SLO still met at "
            f"x{h.low:.4g}, the most tried"
        )
    line = (
        f"{start} about {100 * (h.factor - 1):.0f}% {what} before {h.breaks} breaks "
        f"(met at x{h.low:.4g}, failed at x{h.high:.4g}, {level} confidence)"
    )
    return line + (f"; {h.note}" if h.note else "")


def _search(
    pick: Candidate,
    scale: Callable[[Scenario, float], Scenario],
    judge_at: Callable[[Scenario], Candidate],
) -> HeadroomFactor:
    judged: dict[float, Candidate] = {1.0: pick}
    low, high, open_ = 1.0, None, None

    def look(factor: float) -> str:
        judged[factor] = judge_at(scale(pick.scenario, factor))
        return judged[factor].verdict

    for factor in _GROWTH:
        verdict = look(factor)
        if verdict == "meets":
            low = factor
        elif verdict in ("fails", "unstable"):
            high = factor
            break
        else:
            open_ = factor
            break
    while high is not None and open_ is None and len(judged) < MAX_POINTS:
        if high / low <= 1 + RELATIVE_WIDTH:
            break
        middle = math.sqrt(low * high)
        verdict = look(middle)
        if verdict == "meets":
            low = middle
        elif verdict in ("fails", "unstable"):
            high = middle
        else:
            open_ = middle
    note = None
    if open_ is not None:
        note = (
            f"x{open_:.4g} stayed undecided at the replication budget; "
            "more replications or longer runs would narrow the bracket"
        )
        if high is None:
            # Undecided while growing: nothing failed yet, the open factor bounds nothing.
            note = (
                f"x{open_:.4g} stayed undecided at the replication budget; "
                "nothing was shown to fail"
            )
    factor = open_ if open_ is not None else (low if high is None else math.sqrt(low * high))
    breaks = None
    if high is not None:
        failed = judged[high]
        breaks = (
            failed.note
            if failed.verdict == "unstable"
            else next(str(j.slo) for j in failed.judgements if j.verdict == "fails")
        )
    points = tuple((f, judged[f].verdict, judged[f].replications) for f in sorted(judged))
    return HeadroomFactor(factor, low, high, breaks, note, points)


def find_headroom(
    pick: Candidate,
    rounds: Any,
    *,
    slos: Sequence[SLO],
    level: float,
    replications: tuple[int, int],
) -> Headroom:
    """The headroom of ``pick`` (a configuration the plan showed to meet every SLO).

    Args:
        pick: the configuration; its scenario is the one scaled.
        rounds: the plan's round runner (``run(tasks)``, ``slos``, ``level``).
        slos: the plan's SLOs.
        level: the plan's confidence (split over looks and factors, see the module docstring).
        replications: ``(min, max)`` per factor, as for a candidate.
    """
    low, high = replications
    looks = len(replication_schedule(low, high))
    per_factor = look_confidence(level, looks * MAX_POINTS)
    runs = 0

    def judge_at(scenario: Scenario) -> Candidate:
        nonlocal runs
        candidate = Candidate(-1, dict(pick.point), scenario=scenario)
        note = unstable_note(scenario, slos)
        if note is not None:
            candidate.note, candidate.verdict = note, "unstable"
            return candidate
        saved, rounds.level = rounds.level, per_factor
        try:
            tasks = [(candidate, r) for r in range(low)]
            while tasks:
                rounds.run(tasks)
                runs += len(tasks)
                n = candidate.replications
                more = candidate.verdict == "undecided" and n < high
                tasks = [(candidate, r) for r in range(n, min(2 * n, high))] if more else []
        finally:
            rounds.level = saved
        return candidate

    arrival = _search(pick, scale_arrivals, judge_at)
    refusal = service_refusal(pick.scenario)
    if refusal is None:
        service = _search(pick, scale_service, judge_at)
    else:
        service = HeadroomFactor(None, None, None, None, refusal, ())
    return Headroom(arrival, service, level, runs)
