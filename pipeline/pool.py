"""The worker pool: the workers a running pipeline has, ``resize`` and the autoscaler.

The pool starts with ``concurrency`` workers. :meth:`WorkerPool.resize` changes its size
while the run goes on: new workers take items at once; removed ones leave idle ones
first, then ones still cold-starting (an autoscaler's), then busy ones as each comes for
its next item, so a busy worker always finishes what it holds. The queue keeps the count
of workers due to leave (:attr:`~pipeline.queue.WorkQueue.retiring`): a worker checks it
before each item, and :meth:`~pipeline.queue.WorkQueue.get` before each wait.

With ``PipelineConfig(autoscale=Autoscaler(...))`` a task of the pipeline's own syncs at
``sync_s``, ``2 x sync_s``, ... of loop time from the start until the drain begins, and
resizes the pool as :class:`~pipeline.autoscale.Recommender` decides; workers it adds
count from that sync and take items after ``cold_start_s``.
"""

from __future__ import annotations

import asyncio
import math
from functools import partial

from ._validate import MAX_CONCURRENCY, integer, show
from .autoscale import Recommender
from .errors import PipelineClosed
from .events import EventKind
from .fields import PipelineFields
from .state import State

__all__: list[str] = []


class WorkerPool(PipelineFields):
    """The pool of worker tasks (mixed into ``Pipeline``)."""

    def _start_pool(self) -> None:
        """Start ``concurrency`` workers, and the autoscaler's syncs if there is one."""
        self._add_workers(self.config.concurrency, 0.0)
        # A busy worker a shrink asked to leave leaves on its own, later: an event says when.
        self._queue.on_leave = partial(self._emit, EventKind.WORKER_LEFT, None)
        scaler = self.config.autoscale
        if scaler is not None:
            self._recommender = Recommender(scaler)
            syncs = self._loop.create_task(self._autoscale(), name=f"{self.name}-autoscaler")
            self._own_tasks.add(syncs)
            self._pool_tasks.append(syncs)

    def _add_workers(self, count: int, cold_start_s: float) -> None:
        loop = self._loop
        now = loop.time()
        for _ in range(count):
            self._workers_made += 1
            work = self._worker_loop() if cold_start_s == 0 else self._cold_start(cold_start_s)
            worker = loop.create_task(work, name=f"{self.name}-worker-{self._workers_made}")
            self._workers[worker] = now
            self._worker_starts_s += now
            self._own_tasks.add(worker)
            if cold_start_s:
                self._starting[worker] = None
            # A pool resized often must not keep its retired workers.
            worker.add_done_callback(self._worker_done)

    async def _cold_start(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        del self._starting[asyncio.current_task()]
        await self._worker_loop()

    def _worker_done(self, worker: asyncio.Task[None]) -> None:
        started_s = self._workers.pop(worker)
        self._worker_starts_s -= started_s
        self._worker_s += self._loop.time() - started_s
        self._own_tasks.discard(worker)
        self._starting.pop(worker, None)

    def _worker_seconds(self, now_s: float) -> float:
        """Seconds worked by every worker so far, the ones alive now included."""
        return self._worker_s + len(self._workers) * now_s - self._worker_starts_s

    def resize(self, workers: int) -> None:
        """Grow or shrink the running pipeline's pool to ``workers`` workers.

        Growing starts new workers at once (or keeps ones still due to leave). Shrinking
        retires idle workers at once and busy ones as each finishes its current item (a
        worker with ``prefetch`` calls in flight lets them all finish): nothing is lost,
        cancelled or run twice. ``statistics().workers`` is the new count plus the busy
        workers still due to leave. The queue, retries and deadlines are unchanged. An
        autoscaler's next sync starts from the new count.

        Args:
            workers: the new pool size, an integer from 1 to 1,000,000.

        Raises:
            TypeError, ValueError: ``workers`` is not such an integer.
            PipelineClosed: the pipeline is not running: before its start (set
                ``concurrency`` instead), while draining or after its close.
        """
        count = integer("workers", workers, "workers, 1 to 1,000,000", at_least=1)
        if count > MAX_CONCURRENCY:
            raise ValueError(f"workers must be at most 1,000,000, got {show(count)}")
        if self.state is not State.OPEN:
            hint = ": set PipelineConfig(concurrency=...)" if self.state is State.IDLE else ""
            raise PipelineClosed(
                f"resize({count}) needs a running pipeline; {self!r} is {self.state.value}{hint}"
            )
        self._resize(count, 0.0)

    def _resize(self, count: int, cold_start_s: float) -> None:
        queue = self._queue
        current = self._worker_target
        if count > current:
            # Workers still due to leave stay instead, before any new one starts.
            kept = min(queue.retiring, count - current)
            queue.retiring -= kept
            self._add_workers(count - current - kept, cold_start_s)
        elif count < current:
            surplus = current - count
            surplus -= queue.retire_waiting(surplus)  # idle workers first
            while surplus and self._starting:
                # then those still starting (the latest first): they hold nothing
                worker, _ = self._starting.popitem()
                worker.cancel()
                surplus -= 1
            queue.retiring += surplus  # then busy ones, each after its item
        self._worker_target = count
        self._workers_peak = max(self._workers_peak, count + queue.retiring)

    async def _autoscale(self) -> None:
        """Sync at every ``sync_s`` from the start until the drain begins."""
        loop = self._loop
        scaler = self._recommender.scaler
        syncs = 0
        while True:
            # The next sync after now: a loop that was blocked skips the syncs it missed.
            syncs = max(syncs + 1, math.floor((loop.time() - self._started_s) / scaler.sync_s))
            at = self._started_s + syncs * scaler.sync_s
            wake = loop.create_future()
            timer = loop.call_at(at, wake.set_result, None)
            try:
                await wake
            finally:
                timer.cancel()
            if self.state is not State.OPEN:
                return
            current = self._worker_target
            now = loop.time()
            # The windows are judged on seconds since the start: on a loop clock far from
            # zero, "window_s before this sync" can round onto either side of an older sync.
            since_s = syncs * scaler.sync_s
            depth = len(self._queue)
            size = self._recommender.decide(since_s, current, depth, self._oldest_age_s(now))
            if size != current:
                self._scale_events += 1
                self._resize(size, scaler.cold_start_s)
                self._emit(EventKind.SCALED, None)
            self._emit(EventKind.SYNCED, None)
