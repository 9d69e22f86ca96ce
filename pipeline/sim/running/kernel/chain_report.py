"""The :class:`~pipeline.ChainReport` of a kernel chain run, as the chain's close builds it."""

from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.chain.report import ChainReport, StageReport
from pipeline.records import RunReport

__all__ = ["chain_report"]


def chain_report(stages: list[tuple[str, RunReport, Any]], finished_s: float) -> ChainReport:
    """The :class:`~pipeline.ChainReport` the engine's close builds, for a kernel run.

    Args:
        stages: per stage, in order: its name, its :class:`~pipeline.RunReport`
            and its hand-off account (``outputs``, ``handed_on``,
            ``hand_off_blocked_s``; nothing is stranded in a run whose drain
            finished).
        finished_s: the loop time the chain closed.
    """
    reports = {
        name: StageReport(
            **{field.name: getattr(report, field.name) for field in dataclasses.fields(RunReport)},
            name=name,
            outputs=joint.outputs,
            handed_on=joint.handed_on,
            stranded=[],
            hand_off_blocked_s=joint.hand_off_blocked_s,
            batches=0,
        )
        for name, report, joint in stages
    }
    head, tail = reports[stages[0][0]], reports[stages[-1][0]]
    return ChainReport(
        stages=reports,
        offered=head.offered,
        completed=tail.completed,
        drain_timed_out=False,
        started_s=head.started_s,
        finished_s=finished_s,
    )
