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
- ``BOTTLENECK`` -- (chains) the stage that sets the pace: its demanded
  utilisation, where the backlog waits (a stage's queue, between two stages,
  or at the source) and what to change (workers for that stage, a bound for
  an unbounded queue); see :mod:`pipeline.sim.analysis.diagnostics.bottleneck`. A chain
  also gets each stage's own findings, its name in the title.
- ``LEASE_EXPIRED`` -- attempts hold their worker far longer than the work
  needs (hangs, timeouts, blocking code on the event loop).
- ``DRAIN_TIMEOUT`` -- the drain hit ``drain_timeout_s``; items were handed back,
  and are missing from the latency statistics (``simulate`` also warns:
  :class:`~pipeline.sim.DrainTimeoutWarning`).
- ``DEAD_LETTERS`` -- items that used their attempt budget or failed for good.
- ``HIGH_RETRY_AMPLIFICATION`` -- retries multiply the load on the downstream.
- ``RUN_TOO_SHORT`` -- the mean latency's batch-means interval is wider than
  the precision asked for (10% of the mean by default); says how many items
  would do (info).

This module holds the entry points. The vocabulary (:class:`Finding`,
:data:`CODES`, the severity thresholds) is in
:mod:`pipeline.sim.analysis.diagnostics.findings`; the detectors are in
:mod:`pipeline.sim.analysis.diagnostics.checks`, working on facts computed once per run by
:mod:`pipeline.sim.analysis.diagnostics.facts`.

Example:
    >>> for finding in diagnose(simulate(scenario)):
    ...     print(finding.code, finding.evidence)
    >>> print(format_findings(diagnose(result)))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...._validate import real
from ...stats.runlength import DEFAULT_RELATIVE_PRECISION
from .bottleneck import diagnose_chain
from .checks import run_checks
from .findings import CODES, Finding

if TYPE_CHECKING:
    import pandas as pd

    from ...running.result import SimulationResult

__all__ = ["CODES", "Finding", "diagnose", "findings_frame", "format_findings"]

# -- entry points ---------------------------------------------------------------------------


def diagnose(
    result: SimulationResult, *, precision: float | None = DEFAULT_RELATIVE_PRECISION
) -> list[Finding]:
    """Check one simulated run for the classic failure modes.

    Args:
        result: a :class:`~pipeline.sim.SimulationResult` (anything with its
            ``scenario``, ``report``, ``columns``, ``series`` and ``summary``),
            or a :class:`~pipeline.sim.ChainSimulationResult`: its ``BOTTLENECK``
            and each stage's own findings.
        precision: the largest acceptable half-width of the mean latency's
            95% batch-means interval, as a share of the mean (default 10%);
            a wider one gives ``RUN_TOO_SHORT``. None skips that check (a
            short run on purpose, e.g. in the explorer).

    Returns:
        Findings, most severe first (then in :data:`CODES` order); empty for a
        healthy run, which may also get ``"info"`` findings.

    Example:
        >>> [f.code for f in diagnose(simulate(overloaded))]
        ['CONSUMER_LAG', 'QUEUE_SATURATED']
    """
    if hasattr(result, "stages") and not hasattr(result, "columns"):
        return diagnose_chain(result)
    if precision is not None:
        precision = real("precision", precision, "share of the mean, e.g. 0.1", above=0)
    return run_checks(result, precision)


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
