"""``Statistics``: a frozen snapshot of a pipeline's state at one instant."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Statistics"]


@dataclass(frozen=True, slots=True)
class Statistics:
    """What ``Pipeline.statistics()`` returns. Counters are since the start.

    Attributes:
        state: lifecycle state name (``"idle"``, ``"open"``, ``"draining"``, ``"closed"``).
        queue_size: items in the queue now.
        queue_peak: the largest ``queue_size`` seen.
        queue_maxsize: the bound, or None for an unbounded queue.
        workers: worker tasks.
        workers_busy: items being worked on now (a worker with ``prefetch`` > 1
            may hold several).
        retry_waiting: items waiting out a backoff, outside the queue.
        tasks_waiting_put: producers (or ``put`` callers) waiting for a slot.
        offered: items offered. admitted: items queued.
        completed: items done. retried: retries scheduled.
        dead_lettered: items dead-lettered. shed: items rejected at admission, or
            shed from the queue by CoDel (``codel_shed`` of them).
        attempts: handler calls made.
        producer_blocked_s: seconds of loop time producers spent waiting for a
            slot, summed over producers, waits still in progress included.
        listener_errors: calls of the ``on_event`` listener (or the
            ``on_expired`` hook) that raised; the engine logs the first, counts
            them all and carries on.
        expired: items whose deadline came before their next attempt could
            start (``PipelineConfig.max_wait_s``); they left the queue then.
        unfinished: items the close handed back unfinished (0 until the pipeline
            has closed; then ``len(report.unfinished)``).
        attempts_failed: attempts that ended in a failure other than a timeout
            (retried or dead-lettered).
        attempts_timed_out: attempts that ended in a ``TimeoutError`` (the
            attempt timeout, or one the handler raised). An attempt the close
            cancelled ends in neither: ``attempts`` = ``completed`` +
            ``attempts_failed`` + ``attempts_timed_out`` + the attempts running
            when it closed.
        oldest_age_s: seconds of loop time since the oldest item inside (queued,
            running or waiting to retry) was admitted; 0.0 when nothing is inside.
        first_attempt_waits_s: the waits (admission to first start, seconds) of the
            items whose first attempt is running now, in no particular order: an
            exporter that observes a wait when its first attempt ends adds these to
            show the waits of items still running.
        concurrency_limit: attempts that may be in flight now under
            ``PipelineConfig.concurrency_limit`` (between its ``min_limit`` and
            ``workers``), or None without a limit.
        codel_shed: items CoDel shed from the queue (``PipelineConfig.codel``);
            they are counted in ``shed`` too (outcome ``shed``).
    """

    state: str
    queue_size: int
    queue_peak: int
    queue_maxsize: int | None
    workers: int
    workers_busy: int
    retry_waiting: int
    tasks_waiting_put: int
    offered: int
    admitted: int
    completed: int
    retried: int
    dead_lettered: int
    shed: int
    attempts: int
    producer_blocked_s: float
    listener_errors: int = 0
    expired: int = 0
    unfinished: int = 0
    attempts_failed: int = 0
    attempts_timed_out: int = 0
    oldest_age_s: float = 0.0
    first_attempt_waits_s: tuple[float, ...] = ()
    concurrency_limit: int | None = None
    codel_shed: int = 0
