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
   a factor left undecided at the replication budget does not stop it;
2. then narrows the bracket at its ends: between ``low`` and the lowest factor
   left undecided, and between the highest one and ``high`` (the whole bracket
   when none is), the wider of the two gaps is halved (its geometric midpoint
   judged), until both are within :data:`RELATIVE_WIDTH`, :data:`MAX_POINTS`
   factors were judged, or the plan's run budget is used up. A factor left
   undecided lies near the limit, so the factors around it still move ``low``
   up and ``high`` down.

``low`` is the largest factor shown to meet every SLO, ``high`` the smallest
shown to fail one, and the factors between them left undecided are listed.
The headroom claimed (``arrival_rate_factor``, the text's "x% more") is
``low``, the factor shown to meet: never one that was not. The same is done
for the mean service time (every service time, every stage's on a chain,
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

__all__ = [
    "MAX_POINTS",
    "RELATIVE_WIDTH",
    "Headroom",
    "HeadroomFactor",
    "bracket_limit",
    "find_headroom",
]

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
    if scenario.downstream is not None:
        # The downstream's service, and the client-side time before each call if there is one.
        services = [scenario.downstream.service] + [s for s in services if s is not None]
    if any(not isinstance(service, Distribution) for service in services):
        return "a recorded service trace is replayed as it was: its times are not scaled"
    return None


def scale_service(scenario: Scenario, factor: float) -> Scenario:
    """``scenario`` with every service time (every stage's; a downstream's and the client's
    time before each call) multiplied by ``factor``."""
    if scenario.downstream is not None:
        # The system's service time is the downstream's (and the client's time, if any).
        downstream = dataclasses.replace(
            scenario.downstream, service=ScaledService(scenario.downstream.service, factor)
        )
        client = scenario.service
        return scenario.replace(
            downstream=downstream,
            service=None if client is None else ScaledService(client, factor),
        )
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
        factor: the largest multiplier shown to meet every SLO (``low``; None
            when the search could not run): the headroom claimed.
        low: the largest multiplier shown to meet every SLO (at least 1).
        high: the smallest multiplier shown to fail one (None: none failed up
            to the largest tried, 33).
        breaks: the SLO that fails at ``high`` (None when nothing failed).
        note: why the search stopped short, or why it could not run, else None.
        points: every multiplier judged, ``(factor, verdict, replications)``, ascending.
        undecided: the multipliers between ``low`` and ``high`` (above ``low``
            when nothing failed) left undecided at the replication budget, ascending.
    """

    factor: float | None
    low: float | None
    high: float | None
    breaks: str | None
    note: str | None
    points: tuple[tuple[float, str, int], ...]
    undecided: tuple[float, ...] = ()

    @property
    def percent_held(self) -> int | None:
        """The growth shown to meet every SLO, in whole percent rounded down (None: no search).

        Rounded down, so words built on it never claim more than was shown: x1.446 is 44%.
        """
        return None if self.factor is None else math.floor(100 * (self.factor - 1) + 1e-9)

    @property
    def percent_broken(self) -> int | None:
        """The growth shown to break an SLO, in whole percent rounded up (None: none broke).

        Rounded up, so no smaller growth is said to break one: x1.483 is 49%.
        """
        return None if self.high is None else math.ceil(100 * (self.high - 1) - 1e-9)


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
        """In words: "You can take 23% more traffic (every SLO shown to hold at x1.23) ..."."""
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
            "undecided": list(a.undecided),
            "breaks": a.breaks,
            "note": a.note,
            "service_time_factor": s.factor,
            "service_time_low": s.low,
            "service_time_high": s.high,
            "service_time_undecided": list(s.undecided),
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
    shown = f"{start} {h.percent_held}% {what} (every SLO shown to hold at x{h.low:.4g}"
    if h.high is None:
        line = f"{shown}); nothing was shown to fail up to x{_most_tried(h):.4g}"
    else:
        line = (
            f"{shown}); {h.breaks} is shown to break at x{h.high:.4g}: the limit lies between "
            f"x{h.low:.4g} and x{h.high:.4g} ({level} confidence)"
        )
    return line + (f"; {h.note}" if h.note else "")


def _most_tried(h: HeadroomFactor) -> float:
    return max((f for f, _, _ in h.points), default=h.low or 1.0)


def bracket_limit(
    pick: Candidate,
    scale: Callable[[Scenario, float], Scenario],
    judge_at: Callable[[Scenario], Candidate],
) -> HeadroomFactor:
    """How far ``pick`` can be scaled before an SLO breaks (steps 1 and 2 of the module
    docstring): ``judge_at(scale(pick.scenario, f))`` judges factor ``f``; a judged
    candidate left ``unexamined`` (the run budget used up) ends the search."""
    bracket = _Bracket(pick, scale, judge_at)
    bracket.grow()
    bracket.narrow()
    return bracket.result()


class _Bracket:
    """The factors judged so far, and the bracket ``[low, high]`` they give."""

    def __init__(
        self,
        pick: Candidate,
        scale: Callable[[Scenario, float], Scenario],
        judge_at: Callable[[Scenario], Candidate],
    ) -> None:
        self.pick, self.scale, self.judge_at = pick, scale, judge_at
        self.judged: dict[float, Candidate] = {1.0: pick}
        self.low: float = 1.0  # the largest factor shown to meet every SLO
        self.high: float | None = None  # the smallest shown to fail one
        self.spent = False  # the plan's run budget ran out before a factor could be judged

    def look(self, factor: float) -> str:
        """Judge ``factor``, move the bracket's ends by its verdict, return the verdict."""
        self.judged[factor] = self.judge_at(self.scale(self.pick.scenario, factor))
        verdict = self.judged[factor].verdict
        if verdict == "meets":
            self.low = factor
        elif verdict in ("fails", "unstable"):
            self.high = factor
        elif verdict == "unexamined":
            self.spent = True
        return verdict

    def grow(self) -> None:
        """Step 1: larger factors until one is shown to fail (or the budget runs out)."""
        for factor in _GROWTH:
            if len(self.judged) >= MAX_POINTS:
                break
            if self.look(factor) in ("fails", "unstable", "unexamined"):
                break
            # Meets, or undecided: near the limit, or past it by too little to show; a
            # larger factor may still be shown to fail, which bounds the limit.

    def narrow(self) -> None:
        """Step 2: halve the wider gap at the bracket's ends until both are narrow enough."""
        while self.high is not None and not self.spent and len(self.judged) < MAX_POINTS:
            low, high = self.low, self.high
            open_ = sorted(
                f for f, c in self.judged.items() if low < f < high and c.verdict == "undecided"
            )
            # Only a factor at the bracket's ends can move low up or high down.
            gaps = [(low, open_[0]), (open_[-1], high)] if open_ else [(low, high)]
            a, b = max(gaps, key=lambda gap: gap[1] / gap[0])
            if b / a <= 1 + RELATIVE_WIDTH:
                break
            self.look(math.sqrt(a * b))

    def result(self) -> HeadroomFactor:
        """The bracket as a :class:`HeadroomFactor`, with what stayed undecided and why."""
        judged, low, high = self.judged, self.low, self.high
        undecided = tuple(
            sorted(
                f
                for f, c in judged.items()
                if c.verdict == "undecided" and f > low and (high is None or f < high)
            )
        )
        notes = []
        if undecided:
            factors = ", ".join(f"x{f:.4g}" for f in undecided)
            notes.append(
                f"{factors} stayed undecided at the replication budget; more replications or "
                "longer runs would narrow the bracket"
            )
        if self.spent:
            notes.append("the plan's run budget was used up before the search ended")
        note = "; ".join(notes) or None
        breaks = None
        if high is not None:
            failed = judged[high]
            breaks = (
                failed.note
                if failed.verdict == "unstable"
                else next(str(j.slo) for j in failed.judgements if j.verdict == "fails")
            )
        points = tuple(
            (f, judged[f].verdict, judged[f].replications)
            for f in sorted(judged)
            if judged[f].verdict != "unexamined"
        )
        return HeadroomFactor(low, low, high, breaks, note, points, undecided)


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
        rounds: the plan's round runner (``run(tasks)``, ``slos``, ``level``), whose run
            budget the searches share with the plan.
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
                made = rounds.run(tasks)
                if not made:
                    break  # the plan's run budget is used up: left unexamined or open
                runs += made
                n = candidate.replications
                more = candidate.verdict == "undecided" and n < high
                tasks = [(candidate, r) for r in range(n, min(2 * n, high))] if more else []
        finally:
            rounds.level = saved
        return candidate

    arrival = bracket_limit(pick, scale_arrivals, judge_at)
    refusal = service_refusal(pick.scenario)
    if refusal is None:
        service = bracket_limit(pick, scale_service, judge_at)
    else:
        service = HeadroomFactor(None, None, None, None, refusal, ())
    return Headroom(arrival, service, level, runs)
