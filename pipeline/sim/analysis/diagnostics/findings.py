"""The vocabulary of diagnostics: finding codes, severities, thresholds and :class:`Finding`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CODES", "RANK", "Finding", "Severity"]

Severity = Literal["info", "warning", "critical"]

CODES = (
    "LOST_TASK",
    "CONSUMER_LAG",
    "QUEUE_SATURATED",
    "BOTTLENECK",
    "LEASE_EXPIRED",
    "DRAIN_TIMEOUT",
    "DEAD_LETTERS",
    "HIGH_RETRY_AMPLIFICATION",
    "RUN_TOO_SHORT",
)
"""Every finding code, in the order findings of equal severity are listed."""

RANK = {"critical": 0, "warning": 1, "info": 2}

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
        if self.severity not in RANK:
            raise ValueError(
                f"severity must be 'info', 'warning' or 'critical', got {self.severity!r}"
            )
