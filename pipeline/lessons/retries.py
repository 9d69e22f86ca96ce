"""Notebook 03's exercises as their checks run them: the outage batch and a naive pool tried.

An exercise's check must compare an answer with what the learner's own choice
really does. Two of notebook 03's do not fit in a few lines of a check, so they
live here, where the worked solutions use them too:

- :func:`outage_batch` runs the notebook's outage batch (1,000 items through the
  real :class:`~pipeline.Pipeline` on the virtual clock, 50 workers, a queue of
  200, ``random.Random(7)`` for the jitter) with a backoff and ``max_attempts``
  of one's choice, and notes when each item succeeded: exercise 2 asks which
  choice rides out a 10-s outage and what that patience costs in latency.
- :func:`probe_naive` runs a naive pool coroutine, the learner's own or
  :func:`pipeline.examples.naive.naive_pool`, against the exercise's handler and
  reports what it did: finished, or deadlocked when, after how many handler
  calls, with how many tasks waiting on ``Queue.put`` (exercise 4).

Both run in virtual time, so their results do not depend on the machine's load:
a check may compare with them exactly.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._validate import show
from ..config import PipelineConfig
from ..engine import Pipeline
from ..errors import DeadlockError
from ..records import RunReport
from ..retry import Backoff
from ..sim import run_virtual

__all__ = [
    "NaiveOutcome",
    "OutageCost",
    "OutageRun",
    "outage_batch",
    "outage_cost",
    "outage_downstream",
    "probe_naive",
]

OUTAGE_S = (2.0, 12.0)
"""Exercise 2's outage: every call fails from t = 2 s to t = 12 s (virtual seconds)."""
FAILING_CALL_S = 0.05
"""A call during the outage: the 503 comes back fast (seconds)."""
GOOD_CALL_S = 0.25
"""A call outside it (seconds)."""
HANDLER_SLEEP_S = 0.1
"""Exercise 4's handler sleeps this long before it succeeds or fails (seconds)."""


@dataclass(frozen=True)
class OutageRun:
    """One outage batch: its report and when each item succeeded.

    Attributes:
        report: the pipeline's :class:`~pipeline.RunReport`.
        success_s: item ``i``'s success time, virtual seconds since the start;
            NaN for an item that never succeeded (dead-lettered).
    """

    report: RunReport
    success_s: tuple[float, ...]

    def delays_s(self, baseline: OutageRun) -> tuple[float, ...]:
        """Per item, how much later it succeeded here than in ``baseline`` (seconds).

        NaN where either run has no success for the item.

        Raises:
            ValueError: the runs are of different numbers of items.
        """
        if len(baseline.success_s) != len(self.success_s):
            raise ValueError(
                f"baseline must be a run of the same {len(self.success_s)} items, "
                f"got {len(baseline.success_s)}"
            )
        return tuple(a - b for a, b in zip(self.success_s, baseline.success_s, strict=True))

    def worst_delay_s(self, baseline: OutageRun) -> float:
        """The largest of :meth:`delays_s` over the items that succeeded in both (seconds).

        NaN when no item succeeded in both runs.
        """
        known = [d for d in self.delays_s(baseline) if not math.isnan(d)]
        return max(known) if known else math.nan


def _outage(outage: tuple[float, float] | None) -> tuple[float, float]:
    if outage is None:
        return (0.0, 0.0)
    try:
        if isinstance(outage, str | bytes):  # "12" would unpack to 1.0 and 2.0
            raise TypeError
        start, end = (float(x) for x in outage)
    except (TypeError, ValueError):
        start = end = math.nan
    if not (math.isfinite(start) and math.isfinite(end) and 0.0 <= start <= end):
        raise ValueError(
            "outage must be (start_s, end_s) with 0 <= start_s <= end_s, finite, or None for "
            f"no outage, got {show(outage)}"
        )
    return (start, end)


def _count(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {show(value)}")
    return value


def outage_downstream(
    outage: tuple[float, float] | None = OUTAGE_S, finished: dict[Any, float] | None = None
) -> Callable[[Any], Awaitable[None]]:
    """Notebook 03's downstream: it fails fast during ``outage``, and is slower otherwise.

    A call that starts during the outage raises ``ConnectionError`` (a 503) after
    0.05 s; any other call succeeds after 0.25 s.

    Args:
        outage: ``(start_s, end_s)`` in loop seconds, or None for no outage.
        finished: a dict that gets ``item -> loop time`` of each success, or None.

    Raises:
        ValueError: a bad ``outage``.
    """
    down = _outage(outage)

    async def downstream(item: Any) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        failing = down[0] <= now < down[1]
        await asyncio.sleep(FAILING_CALL_S if failing else GOOD_CALL_S)
        if failing:
            raise ConnectionError(f"503 Service Unavailable at t = {now:.2f} s")
        if finished is not None:
            finished[item] = loop.time()

    return downstream


def outage_batch(
    *,
    backoff: Backoff,
    max_attempts: int,
    outage: tuple[float, float] | None = OUTAGE_S,
    n_items: int = 1000,
    concurrency: int = 50,
    queue_maxsize: int = 200,
    seed: int = 7,
) -> OutageRun:
    """Run notebook 03's batch through its outage, with a backoff of one's choice.

    The downstream is the notebook's: during ``outage`` every call fails with
    ``ConnectionError`` after 0.05 s; otherwise it succeeds after 0.25 s. The
    items ``0 .. n_items - 1`` go through a :class:`~pipeline.Pipeline` on the
    virtual clock, as the notebook's ``run_batch`` sends them.

    Args:
        backoff: the delay before each retry.
        max_attempts: attempts per item before it is dead-lettered.
        outage: ``(start_s, end_s)`` in virtual seconds, or None for no outage
            (the baseline the latency is compared with).
        n_items: items in the batch.
        concurrency, queue_maxsize: the pipeline's workers and queue.
        seed: seeds the pipeline's ``random.Random`` (full jitter draws from it).

    Returns:
        An :class:`OutageRun`: the report and each item's success time.

    Raises:
        ValueError: a bad ``outage`` or ``n_items``, or a configuration
            :class:`~pipeline.PipelineConfig` refuses (its own message).
        TypeError: ``backoff`` is not a :class:`~pipeline.Backoff`.

    Example:
        >>> run = outage_batch(backoff=Backoff(base_s=0.5, cap_s=8.0), max_attempts=6)
        >>> base = outage_batch(backoff=Backoff(), max_attempts=1, outage=None)
        >>> len(run.report.dead_letters), run.worst_delay_s(base)
        (0, 15.75)
    """
    down = _outage(outage)
    n_items = _count("n_items", n_items, 0)
    if not isinstance(backoff, Backoff):
        raise TypeError(f"backoff must be a Backoff, got {show(backoff)}")
    config = PipelineConfig(
        concurrency=concurrency,
        queue_maxsize=queue_maxsize,
        max_attempts=max_attempts,
        backoff=backoff,
    )
    finished: dict[int, float] = {}
    pipe = Pipeline(outage_downstream(down, finished), config, rng=random.Random(seed))
    report = run_virtual(pipe.run(range(n_items)))
    return OutageRun(report, tuple(finished.get(i, math.nan) for i in range(n_items)))


@dataclass(frozen=True)
class OutageCost:
    """What riding out the outage costs one choice of backoff and ``max_attempts``.

    Each figure compares the outage batch with the same batch without the outage.

    Attributes:
        dead_letters: items dead-lettered in the outage batch.
        worst_delay_s: how much later the unluckiest item succeeded (seconds).
        mean_delay_s: the mean of the items' delays (seconds), over the items
            that succeeded in both runs, those the outage never touched included.
        delayed_items: items that succeeded more than 0.01 s later.
        batch_later_s: how much later the whole batch ended (seconds).
    """

    dead_letters: int
    worst_delay_s: float
    mean_delay_s: float
    delayed_items: int
    batch_later_s: float


def outage_cost(
    *, backoff: Backoff, max_attempts: int, outage: tuple[float, float] = OUTAGE_S
) -> OutageCost:
    """Run the outage batch and the same batch without the outage; what the choice costs.

    Args:
        backoff, max_attempts, outage: as for :func:`outage_batch` (the batch's
            other settings are the notebook's).

    Raises:
        ValueError, TypeError: as :func:`outage_batch`.

    Example:
        >>> outage_cost(backoff=Backoff(base_s=0.5, cap_s=8.0), max_attempts=6).worst_delay_s
        15.75
    """
    run = outage_batch(backoff=backoff, max_attempts=max_attempts, outage=outage)
    base = outage_batch(backoff=backoff, max_attempts=max_attempts, outage=None)
    known = [d for d in run.delays_s(base) if not math.isnan(d)]
    return OutageCost(
        dead_letters=len(run.report.dead_letters),
        worst_delay_s=max(known) if known else math.nan,
        mean_delay_s=math.fsum(known) / len(known) if known else math.nan,
        delayed_items=sum(d > 0.01 for d in known),
        batch_later_s=run.report.finished_s - base.report.finished_s,
    )


@dataclass(frozen=True)
class NaiveOutcome:
    """What a naive pool did on the virtual clock, against exercise 4's handler.

    Attributes:
        finished: the coroutine returned.
        deadlocked: the run raised :class:`~pipeline.DeadlockError`: every task
            waited and nothing could wake them.
        stopped_s: virtual seconds from the start to the return, the deadlock,
            the error or the stop.
        handler_calls: calls made to the handler, retries included.
        completed: handler calls that succeeded.
        waiting_on_put: tasks the deadlock left waiting on ``Queue.put``
            (0 without a deadlock).
        message: the deadlock's message (who waits on what), else ``""``.
        error: ``"TypeError: ..."`` when the coroutine could not be started or
            raised, a sentence when it was stopped for calling the handler
            without end; ``""`` otherwise.
    """

    finished: bool
    deadlocked: bool
    stopped_s: float
    handler_calls: int
    completed: int
    waiting_on_put: int
    message: str
    error: str


def probe_naive(
    naive: Callable[..., Any],
    *,
    n_items: int = 20,
    failure_rate: float = 1.0,
    seed: int = 1,
    max_calls: int = 10_000,
) -> NaiveOutcome:
    """Run ``naive(handler, range(n_items))`` on the virtual clock and say what it did.

    The handler is exercise 4's: it sleeps 0.1 s, then fails with
    ``ConnectionError`` with probability ``failure_rate``, drawn from
    ``random.Random(seed)`` after the sleep (1.0: every call fails). Nothing the
    pool does raises here: an error is reported in :attr:`NaiveOutcome.error`.
    A pool that calls the handler ``max_calls`` times is stopped then (it retries
    without end); one that neither returns nor waits on anything while never
    calling the handler runs on, as it would in its own cell.

    Args:
        naive: a coroutine function ``naive(handler, items)`` (its other
            arguments at their defaults).
        n_items: items ``0 .. n_items - 1``.
        failure_rate: probability that a call fails, 0 to 1.
        seed: seeds the failures' ``random.Random``.
        max_calls: handler calls after which the run is stopped.

    Raises:
        TypeError: ``naive`` is not callable.
        ValueError: a bad ``n_items``, ``failure_rate`` or ``max_calls``.

    Example:
        >>> from pipeline.examples.naive import naive_pool
        >>> seen = probe_naive(naive_pool)
        >>> seen.deadlocked, seen.stopped_s, seen.handler_calls, seen.waiting_on_put
        (True, 0.1, 2, 3)
    """
    if not callable(naive):
        raise TypeError(f"naive must be a coroutine function, got {show(naive)}")
    n_items = _count("n_items", n_items, 0)
    max_calls = _count("max_calls", max_calls, 1)
    if not (isinstance(failure_rate, int | float) and 0.0 <= failure_rate <= 1.0):
        raise ValueError(f"failure_rate must be a number from 0 to 1, got {show(failure_rate)}")
    rng = random.Random(seed)
    calls, completed, running = [0], [0], []  # running: (the loop, the main task)

    async def handler(item: Any) -> None:
        calls[0] += 1
        if calls[0] > max_calls:
            # Stop the pool (once), and answer no more calls: a worker that catches every
            # error would otherwise call again at once, forever, in no virtual time.
            if calls[0] == max_calls + 1:
                running[0][1].cancel()
            await running[0][0].create_future()
        await asyncio.sleep(HANDLER_SLEEP_S)
        if rng.random() < failure_rate:
            raise ConnectionError("503 Service Unavailable")
        completed[0] += 1

    async def main() -> None:
        task = asyncio.current_task()
        task.set_name("main")  # not Task-N, which counts every task so far: the same every run
        running.append((asyncio.get_running_loop(), task))
        await naive(handler, range(n_items))

    finished = deadlocked = False
    message = error = ""
    try:
        run_virtual(main())
        finished = True
    except DeadlockError as caught:
        deadlocked, message = True, str(caught)
    except asyncio.CancelledError:
        pass  # the handler stopped it: reported below
    except Exception as caught:  # the learner's code: any error it raises is an outcome
        error = f"{type(caught).__name__}: {caught}"
    if calls[0] > max_calls:
        finished = deadlocked = False
        message, error = "", f"stopped after {max_calls:,} handler calls: it retries without end"
    return NaiveOutcome(
        finished=finished,
        deadlocked=deadlocked,
        stopped_s=running[0][0].time() if running else 0.0,
        handler_calls=min(calls[0], max_calls),
        completed=completed[0],
        waiting_on_put=message.count("waiting on Queue.put"),
        message=message,
        error=error,
    )
