"""The :class:`~pipeline.RunReport` of a kernel run, as the engine's close builds it."""

from __future__ import annotations

from pipeline.config import PipelineConfig
from pipeline.records import DeadLetter, RunReport, ShedLog
from pipeline.statistics import Statistics

__all__ = ["make_report"]


def make_report(
    *,
    config: PipelineConfig,
    offered: int,
    admitted: int,
    completed: int,
    attempts: int,
    retried: int,
    dead_letters: list[DeadLetter],
    shed: ShedLog,
    unfinished: list[int],
    drain_timed_out: bool,
    finished_s: float,
    queue_peak: int,
    producer_blocked_s: float,
) -> RunReport:
    """The :class:`~pipeline.RunReport` the engine's close would have built.

    At the close every worker has stopped and the queue, the retry timers and
    the producers' waits are empty, so those statistics are 0. Every failed
    attempt was retried or dead-lettered, and none timed out: the kernel declines
    attempt timeouts, and its failures are ``SimulatedFailure`` s.
    """
    statistics = Statistics(
        state="closed",
        queue_size=0,
        queue_peak=queue_peak,
        queue_maxsize=config.queue_maxsize,
        workers=config.concurrency,
        workers_busy=0,
        retry_waiting=0,
        tasks_waiting_put=0,
        offered=offered,
        admitted=admitted,
        completed=completed,
        retried=retried,
        dead_lettered=len(dead_letters),
        shed=len(shed),
        attempts=attempts,
        producer_blocked_s=producer_blocked_s,
        listener_errors=0,
        unfinished=len(unfinished),
        attempts_failed=retried + len(dead_letters),
        attempts_timed_out=0,
        workers_peak=config.concurrency,  # a fixed pool: the kernel declines autoscaling
        worker_seconds=config.concurrency * finished_s,  # every worker from 0 s to the close
    )
    return RunReport(
        offered=offered,
        admitted=admitted,
        completed=completed,
        dead_letters=dead_letters,
        unfinished=unfinished,
        shed=shed,
        attempts=attempts,
        drain_timed_out=drain_timed_out,
        started_s=0.0,
        finished_s=finished_s,
        statistics=statistics,
    )
