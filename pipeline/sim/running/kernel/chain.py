"""The kernel's chain path: a tandem of stages, the engine's steps replayed over one timer heap.

:class:`~pipeline.Chain` on the virtual loop is one producer at the head and,
per stage, ``concurrency`` workers, all waking each other through futures and
timers. A worker that finished an item hands its outputs (its ``fan_out``
children) to the next stage's queue, one by one, waiting for a slot there
when that queue is full while it keeps its own slot (blocking after service).
This module plays that program without asyncio, as
:mod:`pipeline.sim.running.kernel.events` does for one stage: one heap of
timers ``(when, seq)`` shared by every stage, a FIFO of ready steps processed
in the loop's iterations (a step woken during an iteration runs in the next),
and per task a small state machine whose steps do, in the same order, what
the engine's coroutines do between two suspensions. Every draw from a stage's
random streams happens at the same point of that order. So the event log of
every stage is the engine's, ties at equal times included.

The rules it follows are the engine's own (README, "Ties at equal times"),
plus the hand-off's:

- a hand-off that finds the next queue full records ``PRODUCER_BLOCKED`` at
  the next stage and waits in that queue's line of slot waiters (the head's
  producer waits in the same kind of line at the head); a worker that takes an
  item wakes the first waiter, which looks again one turn later and, if the
  slot went to someone faster, queues again at the back;
- outputs handed to a ``reject`` stage that is full are shed there at once;
- a hand-off into a stage whose admission never waits (``reject``, or an
  unbounded queue) gives the loop one turn after each output, as the head's
  producer does after each item: an idle worker there takes the output first;
- an item settles at its stage when its last output is handed on (or when it
  is dead-lettered), and only then does its worker take the next item.

The end of the run is not replayed turn by turn: each stage closes when it
has settled everything after the stage before it closed, and stage *k*'s
intake closes at that moment. That is exact as long as no drain runs into its
timeout; :func:`run_chain_events` checks the deadline of each stage's drain,
as the engine computes it, and returns the reason instead of a run when a
stage is still busy at it (``engine="auto"`` then runs the engine).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from pipeline._spelling import setting_value
from pipeline.config import PipelineConfig
from pipeline.records import AttemptError, DeadLetter, ShedLog

from ...workloads.failures import AttemptFailures
from . import chain_arrays
from .kinds import (
    ADMITTED,
    COMPLETED,
    DEAD_LETTERED,
    INTAKE_CLOSED,
    PRODUCER_BLOCKED,
    PRODUCER_UNBLOCKED,
    READMITTED,
    RETRY_SCHEDULED,
    SHED,
    STARTED,
)

__all__ = ["StageInput", "StageRun", "run_chain_events"]


# Where the producer resumes.
_TOP, _SLOT, _ARRIVED = 0, 1, 2
# What a worker waits on: an item, its attempt's timer, a slot in the next stage, a turn
# of the loop after handing an output to a stage that never makes it wait.
_GETTING, _SERVING, _HANDING, _TURN = 0, 1, 2, 3


@dataclass(frozen=True)
class StageInput:
    """One stage as the chain path needs it.

    Attributes:
        name: the stage's name (for messages).
        config: its :class:`~pipeline.PipelineConfig` (inside the kernel's domain).
        fan_out: outputs per completed item (child *j* of item *i* is ``i * fan_out + j``).
        first_attempt_s: service time of each item's first attempt here, seconds.
        retry_time: service time of a later attempt of an item (drawn on demand).
        failures: the stage's bound failure model, or None when no attempt can fail.
        rng: the stage's jitter stream (what its backoff draws from).
    """

    name: str
    config: PipelineConfig
    fan_out: int
    first_attempt_s: list[float]
    retry_time: Callable[[int], float]
    failures: AttemptFailures | None
    rng: Any


@dataclass
class StageRun:
    """What one stage did: its event log and the counts its report and statistics hold."""

    kinds: array = field(default_factory=lambda: array("b"))
    times: array = field(default_factory=lambda: array("d"))
    ids: array = field(default_factory=lambda: array("q"))
    offered: int = 0
    admitted: int = 0
    completed: int = 0
    attempts: int = 0
    retried: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)
    shed: ShedLog | None = None
    queue_peak: int = 0
    producer_blocked_s: float = 0.0
    outputs: int = 0
    handed_on: int = 0
    hand_off_blocked_s: float = 0.0
    finished_s: float = 0.0


class _Stage:
    """A stage's live state during the replay: its queue, workers and counters."""

    def __init__(self, spec: StageInput, number: int, reaching: int) -> None:
        config = spec.config
        self.number = number
        self.spec = spec
        self.run = StageRun(shed=ShedLog(config.keep_shed))
        self.fan_out = spec.fan_out
        self.first = spec.first_attempt_s
        self.retry_time = spec.retry_time
        self.check = None if spec.failures is None else spec.failures.check
        self.reject = config.on_full == "reject"
        self.bound = math.inf if config.queue_maxsize is None else config.queue_maxsize
        # Admission never waits here: whoever offers an item gives the loop a turn after it.
        self.turns = self.reject or self.bound == math.inf
        # The queue: main lane, retry lane, slots reserved, retries held; who waits on it.
        self.items: deque[int] = deque()
        self.retries: deque[int] = deque()
        self.reserved = 0
        self.held = 0
        self.getters: deque[tuple[Any, Any]] = deque()
        self.waiters: deque[tuple[Any, Any]] = deque()
        self.unsettled = 0
        self.last_settle_s: float | None = None
        self.attempts = [0] * reaching
        self.errors: dict[int, list[tuple[int, BaseException, float]]] = {}
        self.in_flight = 0
        c = config.concurrency
        self.state = [_GETTING] * c
        self.current = [0] * c
        self.child = [0] * c
        self.since = [0.0] * c
        self.failure_of: list[Any] = [None] * c
        self.steps: list[tuple[Any, Any]] = []
        self.next: _Stage | None = None
        self.log_kind = self.run.kinds.append
        self.log_time = self.run.times.append
        self.log_id = self.run.ids.append

    def full(self) -> bool:
        return len(self.items) + len(self.retries) + self.reserved + self.held >= self.bound


def run_chain_events(
    arrival_s: list[float], stages: list[StageInput], drain_timeout_s: float | None
) -> tuple[list[StageRun], float] | str:
    """Play one simulated chain run through the engine's steps (see the module docstring).

    Args:
        arrival_s: arrival time of each source item, seconds, non-decreasing.
        stages: the stages, in chain order.
        drain_timeout_s: the chain's drain timeout (its first stage's), or None.

    Returns:
        (each stage's run, the loop time the chain closed), or, when a drain
        would run into its timeout, a phrase naming that (for the refusal).
    """
    path = chain_arrays.choose(stages, len(arrival_s))
    if path != "closures":
        fields, last_settle, closed = chain_arrays.play_chain(
            arrival_s, stages, compiled=path == "compiled"
        )
        runs = [StageRun(**run) for run in fields]
        return _close([spec.name for spec in stages], last_settle, runs, closed, drain_timeout_s)
    n = len(arrival_s)
    live: list[_Stage] = []
    reaching = n
    for number, spec in enumerate(stages):
        live.append(_Stage(spec, number, reaching))
        reaching *= spec.fan_out
    for upstream, downstream in pairwise(live):
        upstream.next = downstream
    head = live[0]
    head_reject = head.reject
    head_turns = head_reject or head.bound == math.inf

    ready: deque[tuple[Any, Any]] = deque()
    schedule = ready.append
    timers: list[tuple[float, int, Any, Any]] = []
    push = heapq.heappush
    seq = 0
    now = 0.0

    def log(stage: _Stage, kind: int, item: int) -> None:
        stage.log_kind(kind)
        stage.log_time(now)
        stage.log_id(item)

    def admit(stage: _Stage, item: int) -> None:
        # Pipeline._admit with its slot reserved: queue the item, wake a waiting worker.
        run = stage.run
        run.offered += 1
        run.admitted += 1
        stage.log_kind(ADMITTED)  # log(), inline: the hot path
        stage.log_time(now)
        stage.log_id(item)
        stage.unsettled += 1
        stage.reserved -= 1
        stage.items.append(item)
        size = len(stage.items) + len(stage.retries)
        if size > run.queue_peak:
            run.queue_peak = size
        if stage.getters:
            schedule(stage.getters.popleft())

    def settle(stage: _Stage) -> None:
        stage.unsettled -= 1
        stage.last_settle_s = now

    # -- the head's producer (Pipeline._produce over the source) ------------------------
    next_item = 0
    blocked_since = 0.0
    closed_s: float | None = None

    def producer(resume: int) -> None:
        nonlocal next_item, blocked_since, seq, closed_s
        run = head.run
        while True:
            if resume != _ARRIVED:
                if resume == _SLOT:
                    # woken in queue.reserve(): look again, the queue may have refilled
                    if head.full():
                        head.waiters.append(producer_slot)
                        return
                    head.reserved += 1
                    log(head, PRODUCER_UNBLOCKED, -1)
                    run.producer_blocked_s += now - blocked_since
                elif not head_reject:
                    if head.full():
                        blocked_since = now
                        log(head, PRODUCER_BLOCKED, -1)
                        head.waiters.append(producer_slot)
                        return
                    head.reserved += 1
                if next_item == n:  # the source is exhausted: intake stops at this instant
                    if not head_reject:
                        head.reserved -= 1
                    closed_s = now
                    return
                when = arrival_s[next_item]
                if when > now:
                    seq += 1
                    push(timers, (when, seq, None, producer_arrived))
                    return
            item = next_item
            next_item += 1
            if head_reject:
                if head.full():
                    run.offered += 1
                    run.shed.append(item)
                    log(head, SHED, item)
                    schedule(producer_turn)
                    return
                head.reserved += 1
            admit(head, item)
            if head_turns:
                schedule(producer_turn)  # asyncio.sleep(0): one turn of the loop
                return
            resume = _TOP

    producer_arrived = (producer, _ARRIVED)
    producer_turn = (producer, _TOP)
    producer_slot = (producer, _SLOT)

    # -- workers ----------------------------------------------------------------------
    def hand_on(stage: _Stage, w: int) -> bool:
        """HandOff.send from the current child on; False when it waits for a slot."""
        downstream = stage.next
        run = stage.run
        fan_out = stage.fan_out
        base = stage.current[w] * fan_out
        turns = downstream.turns
        for j in range(stage.child[w], fan_out):
            if downstream.reject:
                if downstream.full():
                    down = downstream.run
                    down.offered += 1
                    down.shed.append(base + j)
                    log(downstream, SHED, base + j)
                else:
                    downstream.reserved += 1
                    admit(downstream, base + j)
                run.handed_on += 1
                # asyncio.sleep(0) in HandOff.send: resume with the next child one turn later
                stage.child[w] = j + 1
                stage.state[w] = _TURN
                schedule(stage.steps[w])
                return False
            if downstream.full():
                stage.since[w] = now
                stage.child[w] = j
                stage.state[w] = _HANDING
                log(downstream, PRODUCER_BLOCKED, -1)
                downstream.waiters.append(stage.steps[w])
                return False
            downstream.reserved += 1
            admit(downstream, base + j)
            run.handed_on += 1
            if turns:
                stage.child[w] = j + 1
                stage.state[w] = _TURN
                schedule(stage.steps[w])
                return False
        return True

    def worker(where: tuple[_Stage, int]) -> None:
        nonlocal seq
        stage, w = where
        status = stage.state[w]
        run = stage.run
        if status == _SERVING:
            item = stage.current[w]
            failure = stage.failure_of[w]
            stage.in_flight -= 1
            if failure is None:
                run.completed += 1
                stage.log_kind(COMPLETED)
                stage.log_time(now)
                stage.log_id(item)
                if stage.check is not None:
                    stage.errors.pop(item, None)
                run.outputs += stage.fan_out
                if stage.next is not None:
                    stage.child[w] = 0
                    if not hand_on(stage, w):
                        return
                settle(stage)
            else:
                fail(stage, item, failure.error)
        elif status == _HANDING:
            # woken in the next stage's queue.reserve(): look again
            downstream = stage.next
            if downstream.full():
                downstream.waiters.append(stage.steps[w])
                return
            downstream.reserved += 1
            waited = now - stage.since[w]
            log(downstream, PRODUCER_UNBLOCKED, -1)
            downstream.run.producer_blocked_s += waited
            admit(downstream, stage.current[w] * stage.fan_out + stage.child[w])
            run.hand_off_blocked_s += waited
            run.handed_on += 1
            stage.child[w] += 1
            if not hand_on(stage, w):
                return
            settle(stage)
        elif status == _TURN:
            # the turn after an output is over: hand on the next child, or settle
            if not hand_on(stage, w):
                return
            settle(stage)
        if not (stage.items or stage.retries):
            stage.state[w] = _GETTING
            stage.getters.append(stage.steps[w])
            return
        # take the next item (retry lane first) and start an attempt
        item = stage.retries.popleft() if stage.retries else stage.items.popleft()
        if stage.waiters:
            schedule(stage.waiters.popleft())
        attempt = stage.attempts[item] = stage.attempts[item] + 1
        run.attempts += 1
        stage.log_kind(STARTED)
        stage.log_time(now)
        stage.log_id(item)
        seconds = stage.first[item] if attempt == 1 else stage.retry_time(item)
        stage.in_flight += 1
        if stage.check is not None:
            stage.failure_of[w] = stage.check(item, attempt, stage.in_flight)
        stage.current[w] = item
        stage.state[w] = _SERVING
        seq += 1
        push(timers, (now + seconds, seq, None, stage.steps[w]))

    def fail(stage: _Stage, item: int, error: BaseException) -> None:
        nonlocal seq
        config = stage.spec.config
        run = stage.run
        attempt = stage.attempts[item]
        can_retry = config.retry.is_retryable(error)
        if can_retry and attempt < config.max_attempts:
            delay = config.backoff.delay(attempt, stage.spec.rng)
            if not (isinstance(delay, int | float) and 0.0 <= delay < math.inf):
                raise ValueError(
                    f"the backoff delay must be a finite number of seconds >= 0, got {delay!r} "
                    f"(from {config.backoff!r} with rng {stage.spec.rng!r})"
                )
            stage.errors.setdefault(item, []).append((attempt, error, now))
            run.retried += 1
            stage.held += 1
            seq += 1
            push(timers, (now + delay, seq, readmit, (stage, item)))
            log(stage, RETRY_SCHEDULED, item)
            return
        history = stage.errors.pop(item, [])
        history.append((attempt, error, now))
        run.dead_letters.append(
            DeadLetter(
                payload=item,
                attempts=attempt,
                errors=tuple(AttemptError.from_exception(a, e, t) for a, e, t in history),
                reason="max_attempts" if can_retry else "not_retryable",
            )
        )
        log(stage, DEAD_LETTERED, item)
        settle(stage)

    def readmit(where: tuple[_Stage, int]) -> None:
        stage, item = where
        stage.held -= 1
        stage.retries.append(item)
        size = len(stage.items) + len(stage.retries)
        if size > stage.run.queue_peak:
            stage.run.queue_peak = size
        if stage.getters:
            schedule(stage.getters.popleft())
        log(stage, READMITTED, item)

    for stage in live:
        stage.steps = [(worker, (stage, w)) for w in range(len(stage.state))]
    # Chain._build starts every stage after the head first; then the head's run starts
    # its workers, then its producer.
    for stage in (*live[1:], head):
        ready.extend(stage.steps)
    schedule(producer_turn)

    pop = heapq.heappop
    popleft = ready.popleft
    while True:
        if not ready:
            if not timers:
                break
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
    if closed_s is None or any(stage.unsettled or stage.waiters for stage in live):
        raise RuntimeError("kernel chain path: the run stopped with work left (a bug)")
    return _close(
        [stage.spec.name for stage in live],
        [stage.last_settle_s for stage in live],
        [stage.run for stage in live],
        closed_s,
        drain_timeout_s,
    )


def _close(
    names: list[str],
    last_settle: list[float | None],
    runs: list[StageRun],
    closed_s: float,
    drain_timeout_s: float | None,
) -> tuple[list[StageRun], float] | str:
    """Each stage's intake-closed and close times; a phrase if a drain hits its timeout.

    The head stops taking items at ``closed_s`` and drains; stage *k* is told
    to stop when stage *k - 1* has closed, and closes once it has settled its
    last item. With a timeout, the head's drain gives up at ``closed_s +
    drain_timeout_s`` and each later stage's at its stop time plus what is
    left of that deadline (``asyncio.timeout`` over the engine's own
    arithmetic, so the floats are the engine's).
    """
    deadline = None if drain_timeout_s is None else closed_s + drain_timeout_s
    before = closed_s
    for number, (name, last, run) in enumerate(zip(names, last_settle, runs, strict=True)):
        busy = last is not None and last >= before
        if deadline is not None and busy:
            if number == 0:
                gives_up = closed_s + drain_timeout_s
            else:
                gives_up = before + max(0.0, deadline - before)
            if last >= gives_up:
                timeout = setting_value("drain_timeout_s", drain_timeout_s)
                return (
                    f"a chain whose drain reaches {timeout} "
                    f"(stage {name!r} is still busy at its deadline)"
                )
        run.kinds.append(INTAKE_CLOSED)
        run.times.append(before)
        run.ids.append(-1)
        if busy:
            before = last
        run.finished_s = before
    return runs, before
