"""The kernel's event path: the engine's run on the virtual loop, replayed step by step.

:class:`~pipeline.Pipeline` on :class:`~pipeline.sim.vloop.VirtualEventLoop`
is a handful of tasks (one producer, ``concurrency`` workers, the run and its
close) that wake each other through futures and timers. This module plays the
same program without asyncio: a heap of timers ``(when, seq)`` and a FIFO of
ready steps, processed in iterations exactly as the loop's ``_run_once`` does
(due timers join the ready steps in deadline order, equal deadlines in the
order they were set; a step woken during an iteration runs in the next one).
Each task is a small state machine whose steps do, in the same order, what the
engine's coroutines do between two suspensions, and every draw from a random
stream happens at the same point of that order. So the outcome -- every event
with its time, the counters, the dead letters with their errors -- is the
engine's, ties at equal times included, at a fraction of the cost: no
futures, no tasks, no handles.

The model covers what :func:`pipeline.sim.running.kernel.run.unsupported` lets through;
its rules are the engine's own (see the README, "Ties at equal times"):

- a worker takes the retry lane before the main queue;
- a producer reserves a slot *before* it reads the next item
  (``on_full="block"``), and gives the loop a turn after every item it
  offers (``on_full="reject"``, or an unbounded queue);
- a retry waiting out its backoff counts against ``maxsize``;
- the drain timeout starts when intake stops (the source's end); what is left
  at the deadline, after the steps already woken at that instant, is unfinished.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.config import PipelineConfig
from pipeline.records import AttemptError, DeadLetter, ShedLog

from ...workloads.failures import AttemptFailures
from .kinds import (
    ADMITTED,
    COMPLETED,
    DEAD_LETTERED,
    DRAIN_TIMEOUT,
    INTAKE_CLOSED,
    PRODUCER_BLOCKED,
    PRODUCER_UNBLOCKED,
    READMITTED,
    RETRY_SCHEDULED,
    SHED,
    STARTED,
    UNFINISHED,
)

__all__ = ["EventRun", "run_events"]


# Where the producer resumes.
_TOP, _SLOT, _ARRIVED = 0, 1, 2
# What a worker waits on.
_GETTING, _SERVING, _CANCELLED = 0, 1, 2
# Where the run's task resumes.
_DRAIN, _WOKEN = 0, 1


@dataclass
class EventRun:
    """What the event path hands back: the event log and the run's account."""

    kinds: array
    times: array
    ids: array
    offered: int
    admitted: int
    completed: int
    attempts: int
    retried: int
    dead_letters: list[DeadLetter]
    shed: ShedLog
    unfinished: list[int]
    drain_timed_out: bool
    finished_s: float
    queue_peak: int
    producer_blocked_s: float
    held_peak: int | None = None
    """The most items held (admitted, not completed) in one row of the step series that
    the warm-up window reads: what ``memory_peak_bytes`` counts (:mod:`.arrays` tracks it
    as it plays; None when not tracked)."""


def run_events(
    arrival_s: list[float],
    first_attempt_s: list[float],
    retry_time: Callable[[int], float],
    failures: AttemptFailures | None,
    config: PipelineConfig,
    rng: Any,
) -> EventRun:
    """Play one simulated run through the engine's steps (see the module docstring).

    Args:
        arrival_s: arrival time of each item, seconds, non-decreasing.
        first_attempt_s: service time of each item's first attempt, seconds.
        retry_time: service time of a later attempt of an item (drawn on demand).
        failures: the bound failure model, or None when no attempt can fail.
        config: the pipeline configuration (inside the kernel's domain).
        rng: the jitter stream the engine's backoff draws from.
    """
    n = len(arrival_s)
    concurrency = config.concurrency
    maxsize = config.queue_maxsize
    reject = config.on_full == "reject"
    give_turns = reject or maxsize is None
    max_attempts = config.max_attempts
    backoff = config.backoff
    retryable = config.retry.is_retryable
    drain_timeout = config.drain_timeout_s
    check = None if failures is None else failures.check

    kinds, times, ids = array("b"), array("d"), array("q")
    log_kind, log_time, log_id = kinds.append, times.append, ids.append

    # Ready steps (step, arg), run in order; a step of None is a timer that fired and
    # wakes its task (arg is that task's step) in the next iteration, as a future would.
    ready: deque[tuple[Any, Any]] = deque()
    schedule = ready.append
    timers: list[tuple[float, int, Any, Any]] = []
    push = heapq.heappush
    seq = 0
    now = 0.0

    # The queue: main lane, retry lane, slots reserved by the producer, retries held.
    items: deque[int] = deque()
    retries: deque[int] = deque()
    reserved = held = peak = 0
    bound = math.inf if maxsize is None else maxsize
    getters: deque[tuple[Any, int]] = deque()  # steps of workers waiting, longest first

    # Counters the report and statistics() read.
    offered = admitted = completed = attempts_total = retried = 0
    unsettled = 0
    dead_letters: list[DeadLetter] = []
    shed = ShedLog(config.keep_shed)
    attempts = [0] * n
    errors: dict[int, list[tuple[int, BaseException, float]]] = {}
    running: set[int] = set()
    waiting_retry: set[int] = set()

    # The producer.
    next_item = 0
    producer_waiting = False
    blocked_since = 0.0
    blocked_s = 0.0

    # Workers.
    state = [_GETTING] * concurrency
    current = [0] * concurrency
    failure_of: list[Any] = [None] * concurrency
    in_flight = 0

    # The run's task: drain and close.
    accepting = True
    settled = False
    run_waiting = False  # waiting in settled.wait()
    run_woken = False  # ... and already woken (its step is scheduled)
    timeout_fired = False
    timeout_cancelled = False
    closed = False
    drain_timed_out = False

    def producer(resume: int) -> None:
        nonlocal next_item, reserved, producer_waiting, blocked_since, blocked_s, seq
        nonlocal offered, admitted, unsettled, peak
        while True:
            if resume != _ARRIVED:
                if resume == _SLOT:
                    # woken in queue.reserve(): look again, the queue may have refilled
                    if len(items) + len(retries) + reserved + held >= bound:
                        producer_waiting = True
                        return
                    reserved += 1
                    log_kind(PRODUCER_UNBLOCKED)
                    log_time(now)
                    log_id(-1)
                    blocked_s += now - blocked_since
                elif not reject:
                    if len(items) + len(retries) + reserved + held >= bound:
                        blocked_since = now
                        log_kind(PRODUCER_BLOCKED)
                        log_time(now)
                        log_id(-1)
                        producer_waiting = True
                        return
                    reserved += 1
                if next_item == n:  # the source is exhausted
                    if not reject:
                        reserved -= 1
                    schedule((gathered, None))
                    return
                when = arrival_s[next_item]
                if when > now:
                    seq += 1
                    push(timers, (when, seq, None, producer_arrived))
                    return
            item = next_item
            next_item += 1
            offered += 1
            if reject:
                if len(items) + len(retries) + reserved + held >= bound:
                    shed.append(item)
                    log_kind(SHED)
                    log_time(now)
                    log_id(item)
                    if give_turns:
                        schedule(producer_turn)
                        return
                    resume = _TOP
                    continue
                reserved += 1
            # admit: the slot is reserved; queue the item and wake a waiting worker
            admitted += 1
            log_kind(ADMITTED)
            log_time(now)
            log_id(item)
            unsettled += 1
            reserved -= 1
            items.append(item)
            size = len(items) + len(retries)
            if size > peak:
                peak = size
            if getters and not closed:
                schedule(getters.popleft())
            if give_turns:
                schedule(producer_turn)  # asyncio.sleep(0): one turn of the loop
                return
            resume = _TOP

    producer_arrived = (producer, _ARRIVED)
    producer_turn = (producer, _TOP)

    def worker(w: int) -> None:
        nonlocal in_flight, completed, unsettled, producer_waiting, attempts_total, seq
        status = state[w]
        if status == _SERVING:
            item = current[w]
            failure = failure_of[w]
            in_flight -= 1
            if failure is None:
                running.discard(item)
                completed += 1
                log_kind(COMPLETED)
                log_time(now)
                log_id(item)
                if check is not None:
                    errors.pop(item, None)
                unsettled -= 1
                if unsettled == 0 and not accepting:
                    set_settled()
            else:
                fail(item, failure.error)
        elif status == _CANCELLED:
            return
        if not (items or retries):
            state[w] = _GETTING
            getters.append(steps[w])
            return
        # take the next item (retry lane first) and start an attempt
        item = retries.popleft() if retries else items.popleft()
        if producer_waiting:
            producer_waiting = False
            schedule(producer_slot)
        running.add(item)
        attempt = attempts[item] = attempts[item] + 1
        attempts_total += 1
        log_kind(STARTED)
        log_time(now)
        log_id(item)
        seconds = first_attempt_s[item] if attempt == 1 else retry_time(item)
        in_flight += 1
        if check is not None:
            failure_of[w] = check(item, attempt, in_flight)
        current[w] = item
        state[w] = _SERVING
        seq += 1
        push(timers, (now + seconds, seq, None, steps[w]))

    steps = [(worker, w) for w in range(concurrency)]
    producer_slot = (producer, _SLOT)

    def fail(item: int, error: BaseException) -> None:
        nonlocal retried, held, seq, unsettled
        attempt = attempts[item]
        can_retry = retryable(error)
        if can_retry and attempt < max_attempts:
            delay = backoff.delay(attempt, rng)
            if not (isinstance(delay, int | float) and 0.0 <= delay < math.inf):
                raise ValueError(
                    f"the backoff delay must be a finite number of seconds >= 0, got {delay!r} "
                    f"(from {backoff!r} with rng {rng!r})"
                )
            running.discard(item)
            errors.setdefault(item, []).append((attempt, error, now))
            retried += 1
            held += 1
            waiting_retry.add(item)
            seq += 1
            push(timers, (now + delay, seq, readmit, item))
            log_kind(RETRY_SCHEDULED)
            log_time(now)
            log_id(item)
            return
        running.discard(item)
        history = errors.pop(item, [])
        history.append((attempt, error, now))
        dead_letters.append(
            DeadLetter(
                payload=item,
                attempts=attempt,
                errors=tuple(AttemptError.from_exception(a, e, t) for a, e, t in history),
                reason="max_attempts" if can_retry else "not_retryable",
            )
        )
        log_kind(DEAD_LETTERED)
        log_time(now)
        log_id(item)
        unsettled -= 1
        if unsettled == 0 and not accepting:
            set_settled()

    def readmit(item: int) -> None:
        nonlocal held, peak
        waiting_retry.discard(item)
        held -= 1
        retries.append(item)
        size = len(items) + len(retries)
        if size > peak:
            peak = size
        if getters and not closed:
            schedule(getters.popleft())
        log_kind(READMITTED)
        log_time(now)
        log_id(item)

    def set_settled() -> None:
        nonlocal settled, run_woken
        if settled:
            return
        settled = True
        if run_waiting and not run_woken:
            run_woken = True
            schedule((run, _WOKEN))

    def gathered(_: Any) -> None:
        # gather()'s callback on the producer's end; the run's task wakes a turn later
        schedule((run, _DRAIN))

    def run(resume: int) -> None:
        nonlocal accepting, run_waiting, run_woken, seq, timeout_cancelled, drain_timed_out
        if resume == _DRAIN:
            accepting = False
            log_kind(INTAKE_CLOSED)
            log_time(now)
            log_id(-1)
            if unsettled == 0:
                set_settled()
            else:
                if drain_timeout is not None:
                    deadline = now + drain_timeout
                    if deadline <= now:
                        schedule((timeout, None))
                    else:
                        seq += 1
                        push(timers, (deadline, seq, timeout, None))
                run_waiting = True
                return
        else:
            run_waiting = False
            if timeout_fired:
                drain_timed_out = True
                log_kind(DRAIN_TIMEOUT)
                log_time(now)
                log_id(-1)
            else:
                timeout_cancelled = True
        schedule((close, None))

    def timeout(_: Any) -> None:
        nonlocal timeout_fired, run_woken
        if timeout_cancelled:
            return
        timeout_fired = True
        if not run_woken:
            run_woken = True
            schedule((run, _WOKEN))

    def close(_: Any) -> None:
        nonlocal closed
        closed = True
        for w in range(concurrency):
            state[w] = _CANCELLED

    ready.extend(steps)
    schedule(producer_turn)

    pop = heapq.heappop
    popleft = ready.popleft
    while not closed:
        if not ready:
            while timers and timers[0][2] is timeout and timeout_cancelled:
                pop(timers)
            if not timers:  # pragma: no cover - the engine would report a deadlock
                raise RuntimeError("kernel event path: nothing ready and no timer pending")
            when = timers[0][0]
            if when > now:
                now = when
        while timers and timers[0][0] <= now:
            entry = pop(timers)
            schedule((entry[2], entry[3]))
        for _ in range(len(ready)):
            step, arg = popleft()
            if step is None:
                schedule(arg)  # a timer fired: its task runs in the next iteration
            else:
                step(arg)

    left = sorted([*running, *retries, *items, *waiting_retry])
    for item in left:
        log_kind(UNFINISHED)
        log_time(now)
        log_id(item)
    return EventRun(
        kinds=kinds,
        times=times,
        ids=ids,
        offered=offered,
        admitted=admitted,
        completed=completed,
        attempts=attempts_total,
        retried=retried,
        dead_letters=dead_letters,
        shed=shed,
        unfinished=left,
        drain_timed_out=drain_timed_out,
        finished_s=now,
        queue_peak=peak,
        producer_blocked_s=blocked_s,
    )
