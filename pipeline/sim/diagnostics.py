"""Diagnostics: check a simulated run for the classic failure modes and explain each.

:func:`diagnose` looks at one :class:`~pipeline.sim.SimulationResult` and
returns a list of :class:`Finding` -- what went wrong, the evidence from this
run (numbers with units), why it happens in plain language, and a concrete
fix computed from the run. A healthy run gives an empty list (or only
``"info"`` findings).

Codes (most severe first in the returned list):

- ``LOST_TASK`` -- an item unaccounted for; must never happen (critical).
- ``CONSUMER_LAG`` -- work arrives faster than the workers finish it: the
  backlog trends up.
- ``QUEUE_SATURATED`` -- the queue is full / producers blocked a large share
  of the time, or (``on_full="reject"``) a large share of items is shed.
- ``LEASE_EXPIRED`` -- attempts hold their worker far longer than the work
  needs (hangs, timeouts, blocking code on the event loop).
- ``DRAIN_TIMEOUT`` -- the drain hit ``drain_timeout_s``; items were handed back.
- ``DEAD_LETTERS`` -- items that used their attempt budget or failed for good.
- ``HIGH_RETRY_AMPLIFICATION`` -- retries multiply the load on the downstream.

This module holds the vocabulary (:class:`Finding`, :data:`CODES`, the
severity thresholds) and the entry points; the detectors are in
:mod:`pipeline.sim._checks`, working on facts computed once per run by
:mod:`pipeline.sim._facts`.

Example:
    >>> for finding in diagnose(simulate(scenario)):
    ...     print(finding.code, finding.evidence)
    >>> print(format_findings(result.diagnostics))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pandas as pd

    from .simulate import SimulationResult

__all__ = ["CODES", "Finding", "diagnose", "findings_frame", "format_findings"]

Severity = Literal["info", "warning", "critical"]

CODES = (
    "LOST_TASK",
    "CONSUMER_LAG",
    "QUEUE_SATURATED",
    "LEASE_EXPIRED",
    "DRAIN_TIMEOUT",
    "DEAD_LETTERS",
    "HIGH_RETRY_AMPLIFICATION",
)
"""Every finding code, in the order findings of equal severity are listed."""

_RANK = {"critical": 0, "warning": 1, "info": 2}

# Thresholds, as shares of the run unless noted.
BLOCKED_WARN, BLOCKED_CRITICAL = 0.10, 0.50
SHED_WARN, SHED_CRITICAL = 0.01, 0.10
LOAD_CRITICAL = 1.10  # utilisation demanded, above which lag is critical
LEASE_RATIO, LEASE_CRITICAL, LEASE_Z = 1.20, 2.0, 4.0
DEAD_WARN = 0.01
AMP_INFO, AMP_WARN = 1.20, 1.50


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem of a run.

    Attributes:
        code: one of :data:`CODES`, e.g. ``"CONSUMER_LAG"``.
        severity: ``"info"``, ``"warning"`` or ``"critical"``.
        title: one line saying what is wrong.
        evidence: what this run measured, with units.
        explanation: why it happens, in plain language.
        fix: what to change, with values computed from the run.
        numbers: the measured quantities behind the text (plain floats/ints).
    """

    code: str
    severity: Severity
    title: str
    evidence: str
    explanation: str
    fix: str
    numbers: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(
                f"severity must be 'info', 'warning' or 'critical', got {self.severity!r}"
            )


# -- entry points ---------------------------------------------------------------------------


def diagnose(result: SimulationResult) -> list[Finding]:
    """Check one simulated run for the classic failure modes.

    Args:
        result: a :class:`~pipeline.sim.SimulationResult` (anything with its
            ``scenario``, ``report``, ``columns``, ``series`` and ``summary``).

    Returns:
        Findings, most severe first (then in :data:`CODES` order); empty for a
        healthy run, which may also get ``"info"`` findings.

    Example:
        >>> [f.code for f in diagnose(simulate(overloaded))]
        ['CONSUMER_LAG', 'QUEUE_SATURATED']
    """
    # Imported here, not at the top: the checks build Findings from this module.
    from ._checks import CHECKS
    from ._facts import Facts

    facts = Facts(result)
    findings = [finding for check in CHECKS if (finding := check(facts)) is not None]
    return sorted(findings, key=lambda x: (_RANK[x.severity], CODES.index(x.code)))


def format_findings(findings: list[Finding]) -> str:
    """The findings as plain text, one block per finding ("No problems found." if none)."""
    if not findings:
        return "No problems found."
    blocks = []
    for f in findings:
        blocks.append(
            f"[{f.severity.upper()}] {f.code}: {f.title}\n"
            f"  evidence: {f.evidence}\n"
            f"  why:      {f.explanation}\n"
            f"  fix:      {f.fix}"
        )
    return "\n\n".join(blocks)


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    """The findings as a DataFrame, one row each (columns as :class:`Finding`'s fields)."""
    import pandas as pd

    columns = ["code", "severity", "title", "evidence", "explanation", "fix", "numbers"]
    return pd.DataFrame([{c: getattr(f, c) for c in columns} for f in findings], columns=columns)
