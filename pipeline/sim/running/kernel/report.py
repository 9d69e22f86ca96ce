"""The reports a kernel run hands back, as the engine's and the chain's close build them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pipeline.config import PipelineConfig
from pipeline.records import DeadLetter, RunReport, ShedLog
from pipeline.statistics import Statistics

if TYPE_CHECKING:
    from pipeline.chain.report import ChainReport

__all__ = ["COUNTS", "chain_report", "make_report"]

COUNTS = ("offered", "admitted", "completed", "attempts", "retried", "queue_peak",
          "producer_blocked_s")  # fmt: skip
"""The counters of a run that :func:`make_report` reads (a dict with these keys)."""


def make_report(
    config: PipelineConfig,
    counts: dict[str, Any],
    dead_letters: list[DeadLetter],
    shed: ShedLog,
    unfinished: list[int],
    drain_timed_out: bool,
    finished_s: float,
) -> RunReport:
    """The :class:`~pipeline.RunReport` the engine's close would have built.

    At the close every worker has stopped and the queue, the retry timers and the
    producers' waits are empty, so those statistics are 0. Every failed attempt was
    retried or dead-lettered, and none timed out: the kernel declines attempt
    timeouts, and its failures are ``SimulatedFailure`` s.
    """
    c = {name: counts[name] for name in COUNTS}
    statistics = Statistics(
        state="closed", queue_size=0, queue_maxsize=config.queue_maxsize,
        workers=config.concurrency, workers_busy=0, retry_waiting=0, tasks_waiting_put=0,
        dead_lettered=len(dead_letters), shed=len(shed), unfinished=len(unfinished),
        attempts_failed=c["retried"] + len(dead_letters), **c,
        # a fixed pool (the kernel declines autoscaling), every worker from 0 s to the close
        workers_peak=config.concurrency, worker_seconds=config.concurrency * finished_s,
    )  # fmt: skip
    return RunReport(
        offered=c["offered"], admitted=c["admitted"], completed=c["completed"],
        dead_letters=dead_letters, unfinished=unfinished, shed=shed, attempts=c["attempts"],
        drain_timed_out=drain_timed_out, started_s=0.0, finished_s=finished_s,
        statistics=statistics,
    )  # fmt: skip


def chain_report(stages: list[tuple[str, RunReport, dict]], finished_s: float) -> ChainReport:
    """The :class:`~pipeline.ChainReport` the chain's close builds, for a kernel run.

    ``stages``: per stage, in order, its name, its report and its hand-off's account
    (``outputs``, ``handed_on``, ``hand_off_blocked_s``; nothing is stranded in a run
    whose drain finished); ``finished_s``: the loop time the chain closed.
    """
    from pipeline.chain.report import ChainReport, StageReport

    fields = [field.name for field in dataclasses.fields(RunReport)]
    reports = {
        name: StageReport(
            **{field: getattr(report, field) for field in fields},
            name=name,
            outputs=joint["outputs"],
            handed_on=joint["handed_on"],
            stranded=[],
            hand_off_blocked_s=joint["hand_off_blocked_s"],
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
