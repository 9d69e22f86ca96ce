"""``Statistics``: a frozen snapshot of a pipeline's state at one instant, and how a
pipeline takes it (:class:`Observed`, mixed into ``Pipeline``)."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import PipelineFields

__all__ = ["Observed", "Statistics"]


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
        workers_starting: workers still in their cold start (an autoscaler's), counted
            in ``workers``.
        workers_peak: the largest ``workers`` so far.
        worker_seconds: seconds worked by every worker so far, summed over workers
            (busy, idle or starting: what a pool of machines is paid for).
        scale_events: the autoscaler's syncs that changed the pool's size.
        workers_desired: the count the autoscaler's metric asked for at its last sync
            (before stabilisation and bounds), or None without an autoscaler.
        first_attempt_waits_s: the waits (admission to first start, seconds) of the
            items whose first attempt is running now, in no particular order: an
            exporter that observes a wait when its first attempt ends adds these to
            show the waits of items still running.
        retries_denied: retries the retry budget refused (``PipelineConfig.retry_budget``);
            each such item was dead-lettered with reason ``"retry_budget"``.
        breaker_state: the circuit breaker's state now, ``"closed"``, ``"open"`` or
            ``"half_open"``; None without a breaker (``PipelineConfig.breaker``).
        breaker_calls_refused: attempts the open (or half-open, probes all out)
            breaker held back, each counted once however long it waited.
        breaker_open_s: seconds of loop time the breaker has spent open (not half-open).
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
    workers_starting: int = 0
    workers_peak: int = 0
    worker_seconds: float = 0.0
    scale_events: int = 0
    workers_desired: int | None = None
    first_attempt_waits_s: tuple[float, ...] = ()
    retries_denied: int = 0
    breaker_state: str | None = None
    breaker_calls_refused: int = 0
    breaker_open_s: float = 0.0
    concurrency_limit: int | None = None
    codel_shed: int = 0


class Observed(PipelineFields):
    """``Pipeline.statistics()`` and the readings it makes (mixed into ``Pipeline``)."""

    def statistics(self) -> Statistics:
        """A frozen snapshot of the pipeline's state now."""
        queue = self._queue
        now = self._now()
        blocked = self._blocked_s + self._blocked_now * now - self._blocked_since_sum
        return Statistics(
            state=self.state.value,
            queue_size=len(queue),
            queue_peak=queue.peak,
            queue_maxsize=self.config.queue_maxsize,
            workers=self._worker_target + self._queue.retiring,
            workers_busy=self._busy,
            retry_waiting=len(self._retry_timers),
            tasks_waiting_put=queue.waiting_put,
            offered=self._offered,
            admitted=self._admitted,
            completed=self._completed,
            retried=self._retried,
            dead_lettered=len(self._dead_letters),
            shed=len(self._shed),
            attempts=self._attempts,
            producer_blocked_s=blocked,
            listener_errors=self._listener_errors,
            expired=len(self._expired),
            unfinished=self._unfinished,
            attempts_failed=self._attempts_failed,
            attempts_timed_out=self._attempts_timed_out,
            oldest_age_s=self._oldest_age_s(now),
            workers_starting=len(self._starting),
            workers_peak=self._workers_peak,
            worker_seconds=self._worker_seconds(now) if self._loop is not None else 0.0,
            scale_events=self._scale_events,
            workers_desired=None if self._recommender is None else self._recommender.desired,
            first_attempt_waits_s=self._first_attempt_waits_s(),
            **({} if self._guard is None else self._guard.statistics(now)),
            **self._control_statistics(),
        )

    def _first_attempt_waits_s(self) -> tuple[float, ...]:
        """The waits of the items whose first attempt is running now (waited, not yet ended).

        ``statistics()`` may be read from another thread (an exporter's): a read that races
        a change is simply retried. Costs O(running).
        """
        for _ in range(8):
            try:
                running = list(self._running)
            except RuntimeError:  # changed size while read; read again
                continue
            return tuple(
                item.first_start_s - item.admitted_s for item in running if item.in_first_attempt
            )
        return ()

    def _oldest_age_s(self, now_s: float) -> float:
        """Seconds since the oldest item inside (queued, running, waiting to retry) was admitted.

        0.0 when nothing is inside. Read from any thread, as :meth:`_first_attempt_waits_s`.
        Costs O(running + retries): the main FIFO is in admission order, only its head counts
        (a priority queue is read whole).
        """
        queue = self._queue
        for _ in range(8):
            try:
                inside = [*queue.heads(), *self._running, *self._retry_timers]
                oldest = min((item.admitted_s for item in inside), default=None)
            except (RuntimeError, IndexError):  # changed size while read; read again
                continue
            return 0.0 if oldest is None else max(0.0, now_s - oldest)
        return 0.0
