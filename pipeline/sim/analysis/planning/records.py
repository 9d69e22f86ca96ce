"""The parts of a plan's answer as frozen records.

:class:`PlanStatus` (a ``str`` enum, so ``plan.status == "chosen"`` and the
JSON hold), :class:`Binding` with its :class:`CheaperStep` per searched field,
:class:`OpenQuestion` for an undecided verdict and :class:`ScenarioVerdict` for
each scenario of a set. Their ``to_dict()`` is what ``plan --json`` prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .judgement import Judgement
from .slo import SLO

__all__ = [
    "CONFIG_FIELDS",
    "Binding",
    "CheaperStep",
    "OpenQuestion",
    "PlanStatus",
    "ScenarioStep",
    "ScenarioVerdict",
    "configuration",
    "json_value",
    "judgement_dict",
    "point_text",
    "ranked_values",
    "value_rank",
    "value_text",
]

# Config fields a chosen configuration always reports (the ones a deployment sets).
CONFIG_FIELDS = ("concurrency", "queue_maxsize", "on_full", "max_attempts")


def configuration(point: Mapping[str, Any], scenario: Any) -> dict[str, Any]:
    """A configuration as a deployment sets it: the searched ``point``, then the
    :data:`CONFIG_FIELDS` of ``scenario`` (a chain's for every stage, ``"write.concurrency"``)."""
    out = dict(point)
    if scenario.stages is not None:
        # A chain has no config of its own: each stage's, named "stage.field".
        for stage in scenario.stages:
            for name in CONFIG_FIELDS:
                out.setdefault(f"{stage.name}.{name}", getattr(stage.config, name))
        return out
    for name in CONFIG_FIELDS:
        out.setdefault(name, getattr(scenario.config, name))
    return out


def json_value(value: Any) -> Any:
    """A JSON-safe value: NaN/inf -> None, objects (a distribution, a failure model) -> repr."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):
        return json_value(value.item())
    return repr(value)


def value_rank(value: Any, position: int) -> tuple[int, float]:
    """Sort key of one searched value: numbers ascending, then others as listed, None last.

    None is an unbounded queue (or no timeout): the most expensive choice.
    """
    if value is None:
        return (2, 0.0)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    return (1, float(position))


def ranked_values(values: Sequence[Any]) -> list[Any]:
    """``values`` in cost order (see :func:`value_rank`)."""
    order = sorted(range(len(values)), key=lambda i: value_rank(values[i], i))
    return [values[i] for i in order]


def value_text(name: str, value: Any) -> str:
    """A searched field's value in a plan's text: None is an unbounded queue, or no
    autoscaler (a fixed pool)."""
    if value is None:
        return "none" if name == "autoscale" else "unbounded"
    return str(value)


def point_text(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={value_text(name, value)}" for name, value in point.items())


class PlanStatus(StrEnum):
    """How a plan ended (see the module docstring). A ``str``: equal to its value."""

    CHOSEN = "chosen"
    UNDECIDED = "undecided"
    INFEASIBLE = "infeasible"


@dataclass(frozen=True)
class CheaperStep:
    """The chosen configuration made one step cheaper in one searched field, and its fate.

    Attributes:
        change: the field and its cheaper value, e.g. ``{"concurrency": 5}``.
        verdict: ``"meets"``, ``"fails"``, ``"undecided"`` or ``"unstable"``.
        failed: the SLOs that rejected it (empty unless it fails on an SLO).
        note: why it was rejected without runs (queueing theory), else None.
    """

    change: dict[str, Any]
    verdict: str
    failed: tuple[SLO, ...]
    note: str | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``plan --json`` prints: ``change``, ``verdict``, ``failed``, ``note``."""
        return {
            "change": dict(self.change),
            "verdict": self.verdict,
            "failed": [str(slo) for slo in self.failed],
            "note": self.note,
        }


@dataclass(frozen=True)
class Binding:
    """Which constraint binds at the chosen configuration, and what one step cheaper does.

    Attributes:
        slo: the SLO whose bound is closest to its limit at the chosen point.
        bound: its one-sided bound there, in the metric's unit.
        limit: its limit, in the same unit.
        slack: the gap from bound to limit, relative to the limit (absolute if the
            limit is 0); 0 means the bound sits on the limit.
        cheaper: one :class:`CheaperStep` per searched field that has a cheaper value,
            in cost order.
    """

    slo: SLO
    bound: float
    limit: float
    slack: float
    cheaper: tuple[CheaperStep, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``plan --json`` prints as ``binding``."""
        return {
            "slo": str(self.slo),
            "bound": self.bound,
            "limit": self.limit,
            "slack": self.slack,
            "cheaper": [step.to_dict() for step in self.cheaper],
        }


@dataclass(frozen=True)
class OpenQuestion:
    """An SLO still undecided at a configuration cheaper than any known to meet.

    Attributes:
        candidate: the configuration's searched fields and values.
        slo: the undecided SLO.
        replications: replications run at that configuration.
        mean: the metric's mean over them, in the metric's unit.
        low, high: the interval (at the plan's per-look level) that still holds the limit.
        note: why the interval is not a t interval (see :class:`~.judgement.Judgement`), or None.
        advice: how much longer or how many more runs would decide it.
    """

    candidate: dict[str, Any]
    slo: SLO
    replications: int
    mean: float
    low: float
    high: float
    note: str | None
    advice: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``plan --json`` prints, one per entry of ``undecided``."""
        return {
            "candidate": dict(self.candidate),
            "slo": str(self.slo),
            "replications": self.replications,
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "note": self.note,
            "advice": self.advice,
        }


@dataclass(frozen=True)
class ScenarioVerdict:
    """One scenario of a set, judged at the chosen configuration.

    Attributes:
        verdict: ``"meets"``, ``"fails"`` or ``"undecided"``.
        judgements: one per SLO, in the order given.
        cheaper: with status ``"chosen"``, one :class:`ScenarioStep` per searched
            field with a cheaper value: that configuration judged in this scenario.
    """

    verdict: str
    judgements: tuple[Judgement, ...]
    cheaper: tuple[ScenarioStep, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``verdict``, ``judgements`` (``slo``, ``verdict``, ``mean``, ``bound``,
        ``low``, ``high``, ``replications``, ``note``) and ``cheaper``."""
        return {
            "verdict": self.verdict,
            "judgements": [judgement_dict(j) for j in self.judgements],
            "cheaper": [step.to_dict() for step in self.cheaper],
        }


@dataclass(frozen=True)
class ScenarioStep:
    """The configuration one step cheaper in one field, judged in one scenario of a set.

    Attributes:
        change: the field and its cheaper value, ``{"concurrency": 10}``.
        verdict: its verdict in this scenario (``"unstable"`` when queueing theory
            rejected it without runs, then ``judgements`` is empty).
        judgements: one per SLO, in the order given (empty without runs).
        note: why it was rejected without runs, else None.
    """

    change: Mapping[str, Any]
    verdict: str
    judgements: tuple[Judgement, ...]
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``change``, ``verdict``, ``judgements`` and ``note``."""
        return {
            "change": dict(self.change),
            "verdict": self.verdict,
            "judgements": [judgement_dict(j) for j in self.judgements],
            "note": self.note,
        }


def judgement_dict(j: Judgement) -> dict[str, Any]:
    """One judgement as ``plan --json`` prints it (``slo``, ``verdict``, ``mean``, ``bound``,
    ``low``, ``high``, ``replications``, ``note``)."""
    return {
        "slo": str(j.slo),
        "verdict": j.verdict,
        "mean": j.mean,
        "bound": j.bound,
        "low": j.low,
        "high": j.high,
        "replications": j.replications,
        "note": j.note,
    }
