"""The worker pool: the workers a running pipeline has, and :meth:`WorkerPool.resize`.

The pool starts with ``concurrency`` workers. ``resize`` changes its size while the run
goes on: new workers start at once; removed ones leave as they next come for an item
(idle ones at once), so a busy worker always finishes what it holds. The queue keeps the
count of workers due to leave (:attr:`~pipeline.queue.WorkQueue.retiring`): a worker
checks it before each item, and a worker waiting for one is woken to leave.
"""

from __future__ import annotations

from ._validate import integer, show
from .config import MAX_CONCURRENCY
from .errors import PipelineClosed
from .fields import PipelineFields
from .state import State

__all__: list[str] = []


class WorkerPool(PipelineFields):
    """The pool of worker tasks (mixed into ``Pipeline``)."""

    def _add_workers(self, count: int) -> None:
        for _ in range(count):
            self._workers_made += 1
            worker = self._loop.create_task(
                self._work(), name=f"{self.name}-worker-{self._workers_made}"
            )
            self._workers.add(worker)
            self._own_tasks.add(worker)
            # A pool resized often must not keep its retired workers.
            worker.add_done_callback(self._workers.discard)
            worker.add_done_callback(self._own_tasks.discard)

    def resize(self, workers: int) -> None:
        """Grow or shrink the running pipeline's pool to ``workers`` workers.

        Growing starts new workers at once (or keeps ones still due to leave). Shrinking
        retires idle workers at once and busy ones as each finishes its current item (a
        worker with ``prefetch`` calls in flight lets them all finish): nothing is lost,
        cancelled or run twice. ``statistics().workers`` is the new count plus the busy
        workers still due to leave. The queue, retries and deadlines are unchanged.

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
        current = self._worker_target
        if count > current:
            # Workers still due to leave stay instead, before any new one starts.
            self._add_workers(count - current - self._queue.keep(count - current))
        elif count < current:
            self._queue.retire(current - count)
        self._worker_target = count
