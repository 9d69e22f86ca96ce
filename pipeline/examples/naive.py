"""A deliberately naive retrying worker pool. DO NOT COPY: it deadlocks.

This is the version everyone writes first: a bounded ``asyncio.Queue``, a
producer that ``await queue.put(item)``, and workers that put a failed item
straight back into the *same* queue::

    except Exception:
        await queue.put((item, attempt + 1))     # <- the bug

While the downstream is healthy it works. When a burst of attempts fails, the
queue fills up, every worker ends up waiting in ``put`` to re-enqueue its
failure, the producer waits in ``put`` too, and nobody is left to ``get``:
the program hangs forever. On the virtual clock (:func:`pipeline.sim.run_virtual`)
the hang becomes a :class:`pipeline.DeadlockError` whose message names each
waiting task and what it waits on.

:class:`pipeline.Pipeline` avoids it by holding a retry *outside* the queue
(it still counts against ``maxsize``) and re-admitting it through a retry lane
when its backoff is due: a worker never blocks on its own queue.

Example (notebook 03)::

    try:
        run_virtual(naive_pool(handler, range(20), concurrency=2, maxsize=4))
    except DeadlockError as error:
        print(error)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NaiveReport", "naive_pool"]


@dataclass
class NaiveReport:
    """What the naive pool managed before it finished (if it finishes).

    Attributes:
        completed: payloads whose handler succeeded.
        dead_letters: payloads that failed ``max_attempts`` times.
        attempts: handler calls made.
    """

    completed: list[Any] = field(default_factory=list)
    dead_letters: list[Any] = field(default_factory=list)
    attempts: int = 0


async def naive_pool(
    handler: Callable[[Any], Awaitable[Any]],
    items: Iterable[Any],
    *,
    concurrency: int = 2,
    maxsize: int = 4,
    max_attempts: int = 3,
) -> NaiveReport:
    """Run ``items`` through a naive pool that re-enqueues failures. Do not copy.

    Args:
        handler: ``async def handler(payload)``; raising means the attempt failed.
        items: the payloads.
        concurrency: worker tasks.
        maxsize: the bounded queue's size (shared by new items and retries).
        max_attempts: attempts per item before it is given up.

    Returns:
        A :class:`NaiveReport`, when the run finishes at all.

    Raises:
        DeadlockError: under :func:`pipeline.sim.run_virtual`, when every task
            waits on the full queue (in real time this call would hang instead).
    """
    queue: asyncio.Queue[tuple[Any, int]] = asyncio.Queue(maxsize=maxsize)
    report = NaiveReport()

    async def worker() -> None:
        while True:
            payload, attempt = await queue.get()
            report.attempts += 1
            try:
                await handler(payload)
                report.completed.append(payload)
            except Exception:
                if attempt < max_attempts:
                    await queue.put((payload, attempt + 1))  # blocks when the queue is full
                else:
                    report.dead_letters.append(payload)
            finally:
                queue.task_done()

    async def producer() -> None:
        for payload in items:
            await queue.put((payload, 1))

    loop = asyncio.get_running_loop()
    workers = [loop.create_task(worker(), name=f"naive-worker-{i}") for i in range(concurrency)]
    try:
        await loop.create_task(producer(), name="naive-producer")
        await queue.join()
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return report
