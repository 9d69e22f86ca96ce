"""The kernel's event path on flat arrays: the same steps as :mod:`.events`, compilable with numba.

:func:`play` is :func:`.events.run_events` rewritten without objects or
Python containers: the timer heap is four arrays ordered by ``(when, seq)``
(two small local functions keep it), the ready steps, the two queue lanes and
the waiting workers are index rings over preallocated arrays, the per-item
columns are filled in as the run goes, and every random input is drawn before
the run starts, in the order the engine consumes it (the failure uniforms of
attempts in start order, the retry service times and the jitter of retries in
schedule order; see :func:`run_arrays` for how many). The order of the steps,
ties included, is exactly that of :mod:`.events`, so its event log is
the engine's.

One source, two ways to run it: plain Python (the reference, which the
equality tests also run), or compiled by numba when the optional ``[fast]``
extra is installed (:func:`compiled`; the machine code is cached on disk, and
``auto`` loads it only once a process has run :data:`MIN_ITEMS` event-path
items, so the import and the cache load are paid back; see :func:`worth_it`). Its domain is a
subset of the event path's (:func:`inside`): no failures, or one
:class:`IndependentFailures` or :class:`PermanentFailures` model, whose
attempt errors the default retry policy judges the same way every time.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any

import numpy as np

from pipeline.config import PipelineConfig
from pipeline.errors import PermanentError
from pipeline.records import AttemptError, DeadLetter, ShedLog

from ...workloads.failures import (
    IndependentFailures,
    NoFailures,
    PermanentFailures,
    SimulatedFailure,
)
from ..recorder import (
    ARRIVAL,
    DELTAS,
    SERIES,
    AttemptLog,
    ItemColumns,
    StepSeries,
    finish_series,
    readmissions,
)
from .events import EventRun
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

__all__ = [
    "MIN_ITEMS",
    "anticipate",
    "compiled",
    "inside",
    "play",
    "run_arrays",
    "series_rows",
    "step_series_merged",
    "worth_it",
]

MIN_ITEMS = 100_000
"""Event-path items a process runs before ``auto`` loads the compiled path (see :func:`worth_it`).

Importing numba and loading the cached machine code costs about 0.5 s of CPU
once per process (a few seconds more the very first time, to compile), what
:mod:`.events` spends on about 150,000 items; below that, a process that
never runs more stays on :mod:`.events`.
"""
_SEEN = [0]  # event-path items this process has run (or is about to), while not loaded

# Steps in the ready ring (code, arg). A timer that wakes a task enters the ring as
# _WAKE + the task's code and joins it again, as the task's step, one iteration later.
_PRODUCER, _WORKER, _GATHERED, _RUN, _TIMEOUT, _CLOSE, _READMIT = 0, 1, 2, 3, 4, 5, 6
_WAKE = 8
# Where the producer resumes (arg of _PRODUCER).
_TOP, _SLOT, _ARRIVED = 0, 1, 2
# Worker states.
_GETTING, _SERVING, _CANCELLED = 0, 1, 2
# Where the run's task resumes (arg of _RUN).
_DRAIN, _WOKEN = 0, 1
# Failure models play() knows.
NO_FAILURES, INDEPENDENT, PERMANENT = 0, 1, 2
# Slots of play()'s counters.
(
    C_LOGGED,
    C_OFFERED,
    C_ADMITTED,
    C_COMPLETED,
    C_ATTEMPTS,
    C_RETRIED,
    C_PEAK,
    C_FAILED,
    C_JITTER,
    C_TIMED_OUT,
    C_STUCK,
    C_HELD_PEAK,
) = range(12)


def play(
    arrival,
    first,
    retry_s,
    trace_retry,
    fail_mode,
    fail_u,
    p,
    poisoned,
    retryable,
    max_attempts,
    delays,
    jitter,
    jitter_u,
    concurrency,
    bound,
    reject,
    has_drain,
    drain_timeout,
    warmup,
    record,
    kinds,
    times,
    ids,
    attempts,
    live,
    failed_item,
    failed_at,
    admitted_s,
    start_s,
    finish_s,
    outcome,
    attempt_item,
    attempt_start,
    attempt_end,
    attempt_ending,
    counts,
    seconds,
):
    """Play one run (see the module docstring); fills the output arrays, returns nothing.

    Inputs: ``arrival``/``first`` (seconds per item), ``retry_s`` (service times of
    retries in start order; unused when ``trace_retry``, which repeats ``first``),
    ``fail_mode`` with ``fail_u``/``p`` (uniform per attempt in start order) or
    ``poisoned`` (per item), ``retryable`` (the policy's verdict on the model's
    error), ``delays[a]`` (backoff after attempt ``a``, before jitter),
    ``jitter_u`` (one per jittered retry), the configuration's numbers
    (``bound`` is ``inf`` for an unbounded queue), ``warmup`` (seconds, for
    ``C_HELD_PEAK``) and ``record`` (False: the event log and the attempt columns
    are not written, and may be one element long). Outputs: the event log
    ``kinds``/``times``/``ids``, ``attempts`` and ``live`` per item (live: admitted
    and not settled), each failed attempt's item and time in order, the
    columns of :class:`~pipeline.sim.running.recorder.ItemColumns` per item
    (``admitted_s``, ``start_s``, ``finish_s``, ``outcome``; NaN and
    ``not_offered`` filled in) and per attempt in start order (its item, start,
    end and ending code; NaN and ``cut`` filled in),
    ``counts`` (the ``C_*`` slots) and ``seconds`` (the end time, the producer's
    blocked seconds).
    """
    n = len(arrival)
    budget = len(failed_item)  # the most attempts the run can make (n, plus its retries)
    give_turns = reject or bound == math.inf
    # Without a record, every write to the event log and the attempt columns lands on
    # their one element (index & 0): the same steps, no branch, no pages to fill.
    kept = -1 if record else 0

    # The ready ring (code, arg). It holds at most one step per task (each worker, the
    # producer, the run's few) and one per retry whose backoff timer fired: at most
    # concurrency + retries + 8 entries, whatever the run's length. Twice that, as a
    # power of two (a ring index is `i & mask`): a ring sized by the items would cost
    # megabytes of fresh pages every run.
    cap = 64
    while cap < 2 * (concurrency + (budget - n)) + 64:
        cap *= 2
    mask = cap - 1
    ready_code = np.empty(cap, np.int64)
    ready_arg = np.empty(cap, np.int64)
    head = tail = 0
    # the timer heap, ordered by (when, seq): four parallel arrays and its size in pending[0]
    room = concurrency + budget + 8  # workers' timers, retries held, producer, drain
    h_when = np.empty(room)
    h_seq = np.empty(room, np.int64)
    h_code = np.empty(room, np.int64)
    h_arg = np.empty(room, np.int64)
    pending = np.zeros(1, np.int64)

    def push(when, seq, code, arg):
        i = pending[0]
        pending[0] = i + 1
        while i > 0:
            up = (i - 1) >> 1
            if h_when[up] < when or (h_when[up] == when and h_seq[up] < seq):
                break
            h_when[i], h_seq[i], h_code[i], h_arg[i] = h_when[up], h_seq[up], h_code[up], h_arg[up]
            i = up
        h_when[i], h_seq[i], h_code[i], h_arg[i] = when, seq, code, arg

    def pop():  # drop the root (the caller has read it)
        last = pending[0] - 1
        pending[0] = last
        when, seq, code, arg = h_when[last], h_seq[last], h_code[last], h_arg[last]
        i = 0
        while True:
            down = 2 * i + 1
            if down >= last:
                break
            right = down + 1
            if right < last and (
                h_when[right] < h_when[down]
                or (h_when[right] == h_when[down] and h_seq[right] < h_seq[down])
            ):
                down = right
            if when < h_when[down] or (when == h_when[down] and seq < h_seq[down]):
                break
            h_when[i], h_seq[i], h_code[i], h_arg[i] = (
                h_when[down],
                h_seq[down],
                h_code[down],
                h_arg[down],
            )
            i = down
        h_when[i], h_seq[i], h_code[i], h_arg[i] = when, seq, code, arg

    seq = 0
    now = 0.0
    logged = 0

    # The queue: main lane (item ids, in admission order), retry lane, reserved, held.
    # The main lane is a ring: an item is admitted only while queued + reserved + held
    # < bound, so it never holds more than the bound (or than all the items).
    main_cap = 1
    while main_cap <= (n if bound >= n else int(bound)):
        main_cap *= 2
    main_mask = main_cap - 1
    main = np.empty(main_cap, np.int64)
    main_head = main_tail = 0
    lane = np.empty(budget + 1, np.int64)  # retries <= attempts
    lane_head = lane_tail = 0
    reserved = held = peak = 0
    get_mask = 1  # ring of waiting workers, longest first (at most all of them)
    while get_mask < concurrency:
        get_mask = 2 * get_mask + 1
    getters = np.empty(get_mask + 1, np.int64)
    get_head = get_tail = 0

    offered = admitted = completed = attempts_total = retried = 0
    held_peak = held_before = 0  # the most items held at an instant (see C_HELD_PEAK)
    unsettled = 0
    failed = 0
    used_retry = used_u = used_jitter = 0

    next_item = 0
    producer_waiting = False
    blocked_since = 0.0
    blocked_s = 0.0

    state = np.zeros(concurrency, np.int64)
    current = np.zeros(concurrency, np.int64)
    failing = np.zeros(concurrency, np.int64)
    running = np.zeros(concurrency, np.int64)  # the number of each worker's attempt
    in_flight = 0

    accepting = True
    settled = False
    run_waiting = False
    run_woken = False
    timeout_fired = False
    timeout_cancelled = False
    closed = False
    drain_timed_out = False
    stuck = False

    for w in range(concurrency):
        ready_code[tail & mask] = _WORKER
        ready_arg[tail & mask] = w
        tail += 1
    ready_code[tail & mask] = _PRODUCER
    ready_arg[tail & mask] = _TOP
    tail += 1

    while not closed:
        if head == tail:
            while pending[0] and h_code[0] == _TIMEOUT and timeout_cancelled:
                pop()
            if not pending[0]:
                stuck = True
                break
            when = h_when[0]
            if when > now:
                # The instant `now` is over: its items held (admitted, not completed:
                # queued, running, waiting to retry or dead-lettered) are a row of the
                # step series, which counts from the warm-up's last row before it on.
                held_now = admitted - completed
                if now >= warmup:
                    if held_now > held_peak:
                        held_peak = held_now
                else:
                    held_before = held_now
                now = when
        while pending[0] and h_when[0] <= now:
            ready_code[tail & mask] = h_code[0]
            ready_arg[tail & mask] = h_arg[0]
            tail += 1
            pop()
        for _ in range(tail - head):
            code = ready_code[head & mask]
            arg = ready_arg[head & mask]
            head += 1
            if code >= _WAKE:  # a timer fired: its task runs in the next iteration
                ready_code[tail & mask] = code - _WAKE
                ready_arg[tail & mask] = arg
                tail += 1
            elif code == _PRODUCER:
                resume = arg
                while True:
                    if resume != _ARRIVED:
                        if resume == _SLOT:
                            # woken in queue.reserve(): look again, the queue may have refilled
                            size = (main_tail - main_head) + (lane_tail - lane_head)
                            if size + reserved + held >= bound:
                                producer_waiting = True
                                break
                            reserved += 1
                            kinds[logged & kept] = PRODUCER_UNBLOCKED
                            times[logged & kept] = now
                            ids[logged & kept] = -1
                            logged += 1
                            blocked_s += now - blocked_since
                        elif not reject:
                            size = (main_tail - main_head) + (lane_tail - lane_head)
                            if size + reserved + held >= bound:
                                blocked_since = now
                                kinds[logged & kept] = PRODUCER_BLOCKED
                                times[logged & kept] = now
                                ids[logged & kept] = -1
                                logged += 1
                                producer_waiting = True
                                break
                            reserved += 1
                        if next_item == n:  # the source is exhausted
                            if not reject:
                                reserved -= 1
                            ready_code[tail & mask] = _GATHERED
                            ready_arg[tail & mask] = 0
                            tail += 1
                            break
                        when = arrival[next_item]
                        if when > now:
                            seq += 1
                            push(when, seq, _WAKE + _PRODUCER, _ARRIVED)
                            break
                    item = next_item
                    next_item += 1
                    offered += 1
                    if reject:
                        size = (main_tail - main_head) + (lane_tail - lane_head)
                        if size + reserved + held >= bound:
                            kinds[logged & kept] = SHED
                            times[logged & kept] = now
                            ids[logged & kept] = item
                            logged += 1
                            outcome[item] = 2
                            if give_turns:
                                ready_code[tail & mask] = _PRODUCER
                                ready_arg[tail & mask] = _TOP
                                tail += 1
                                break
                            resume = _TOP
                            continue
                        reserved += 1
                    admitted += 1
                    kinds[logged & kept] = ADMITTED
                    times[logged & kept] = now
                    ids[logged & kept] = item
                    logged += 1
                    admitted_s[item] = now
                    unsettled += 1
                    live[item] = 1
                    reserved -= 1
                    main[main_tail & main_mask] = item
                    main_tail += 1
                    size = (main_tail - main_head) + (lane_tail - lane_head)
                    if size > peak:
                        peak = size
                    if get_tail != get_head and not closed:
                        ready_code[tail & mask] = _WORKER
                        ready_arg[tail & mask] = getters[get_head & get_mask]
                        tail += 1
                        get_head += 1
                    if give_turns:
                        ready_code[tail & mask] = _PRODUCER
                        ready_arg[tail & mask] = _TOP
                        tail += 1
                        break
                    resume = _TOP
            elif code == _WORKER:
                w = arg
                status = state[w]
                if status == _CANCELLED:
                    continue
                if status == _SERVING:
                    item = current[w]
                    in_flight -= 1
                    number = running[w]
                    attempt_end[number & kept] = now
                    if failing[w] == 0:
                        completed += 1
                        kinds[logged & kept] = COMPLETED
                        times[logged & kept] = now
                        ids[logged & kept] = item
                        logged += 1
                        attempt_ending[number & kept] = 0
                        finish_s[item] = now
                        outcome[item] = 0
                        live[item] = 0
                        unsettled -= 1
                    else:
                        attempt = attempts[item]
                        failed_item[failed] = item
                        failed_at[failed] = now
                        failed += 1
                        if retryable and attempt < max_attempts:
                            delay = delays[attempt]
                            if jitter and delay > 0.0:
                                delay = 0.0 + (delay - 0.0) * jitter_u[used_jitter]
                                used_jitter += 1
                            retried += 1
                            held += 1
                            seq += 1
                            push(now + delay, seq, _READMIT, item)
                            kinds[logged & kept] = RETRY_SCHEDULED
                            times[logged & kept] = now
                            ids[logged & kept] = item
                            logged += 1
                            attempt_ending[number & kept] = 1
                        else:
                            kinds[logged & kept] = DEAD_LETTERED
                            times[logged & kept] = now
                            ids[logged & kept] = item
                            logged += 1
                            attempt_ending[number & kept] = 2
                            finish_s[item] = now
                            outcome[item] = 1
                            live[item] = 0
                            unsettled -= 1
                    if unsettled == 0 and not accepting and not settled:
                        settled = True  # set_settled()
                        if run_waiting and not run_woken:
                            run_woken = True
                            ready_code[tail & mask] = _RUN
                            ready_arg[tail & mask] = _WOKEN
                            tail += 1
                if main_tail == main_head and lane_tail == lane_head:
                    state[w] = _GETTING
                    getters[get_tail & get_mask] = w
                    get_tail += 1
                    continue
                # take the next item (retry lane first) and start an attempt
                if lane_tail != lane_head:
                    item = lane[lane_head]
                    lane_head += 1
                else:
                    item = main[main_head & main_mask]
                    main_head += 1
                if producer_waiting:
                    producer_waiting = False
                    ready_code[tail & mask] = _PRODUCER
                    ready_arg[tail & mask] = _SLOT
                    tail += 1
                attempt = attempts[item] + 1
                attempts[item] = attempt
                attempts_total += 1
                kinds[logged & kept] = STARTED
                times[logged & kept] = now
                ids[logged & kept] = item
                logged += 1
                if attempt == 1:
                    start_s[item] = now
                attempt_item[(attempts_total - 1) & kept] = item
                attempt_start[(attempts_total - 1) & kept] = now
                running[w] = attempts_total - 1
                if attempt == 1 or trace_retry:
                    service = first[item]
                else:
                    service = retry_s[used_retry]
                    used_retry += 1
                in_flight += 1
                if fail_mode == INDEPENDENT:
                    failing[w] = 1 if fail_u[used_u] < p else 0
                    used_u += 1
                elif fail_mode == PERMANENT:
                    failing[w] = poisoned[item]
                current[w] = item
                state[w] = _SERVING
                seq += 1
                push(now + service, seq, _WAKE + _WORKER, w)
            elif code == _READMIT:
                item = arg
                held -= 1
                lane[lane_tail] = item
                lane_tail += 1
                size = (main_tail - main_head) + (lane_tail - lane_head)
                if size > peak:
                    peak = size
                if get_tail != get_head and not closed:
                    ready_code[tail & mask] = _WORKER
                    ready_arg[tail & mask] = getters[get_head & get_mask]
                    tail += 1
                    get_head += 1
                kinds[logged & kept] = READMITTED
                times[logged & kept] = now
                ids[logged & kept] = item
                logged += 1
            elif code == _GATHERED:
                # gather()'s callback on the producer's end; the run's task wakes a turn later
                ready_code[tail & mask] = _RUN
                ready_arg[tail & mask] = _DRAIN
                tail += 1
            elif code == _RUN:
                if arg == _DRAIN:
                    accepting = False
                    kinds[logged & kept] = INTAKE_CLOSED
                    times[logged & kept] = now
                    ids[logged & kept] = -1
                    logged += 1
                    if unsettled == 0:
                        if not settled:
                            settled = True
                            if run_waiting and not run_woken:  # pragma: no cover - not waiting yet
                                run_woken = True
                                ready_code[tail & mask] = _RUN
                                ready_arg[tail & mask] = _WOKEN
                                tail += 1
                    else:
                        if has_drain:
                            deadline = now + drain_timeout
                            if deadline <= now:
                                ready_code[tail & mask] = _TIMEOUT
                                ready_arg[tail & mask] = 0
                                tail += 1
                            else:
                                seq += 1
                                push(deadline, seq, _TIMEOUT, 0)
                        run_waiting = True
                        continue
                else:
                    run_waiting = False
                    if timeout_fired:
                        drain_timed_out = True
                        kinds[logged & kept] = DRAIN_TIMEOUT
                        times[logged & kept] = now
                        ids[logged & kept] = -1
                        logged += 1
                    else:
                        timeout_cancelled = True
                ready_code[tail & mask] = _CLOSE
                ready_arg[tail & mask] = 0
                tail += 1
            elif code == _TIMEOUT:
                if timeout_cancelled:
                    continue
                timeout_fired = True
                if not run_woken:
                    run_woken = True
                    ready_code[tail & mask] = _RUN
                    ready_arg[tail & mask] = _WOKEN
                    tail += 1
            else:  # _CLOSE
                closed = True
                for w in range(concurrency):
                    state[w] = _CANCELLED

    counts[C_LOGGED] = logged
    counts[C_OFFERED] = offered
    counts[C_ADMITTED] = admitted
    counts[C_COMPLETED] = completed
    counts[C_ATTEMPTS] = attempts_total
    counts[C_RETRIED] = retried
    counts[C_PEAK] = peak
    counts[C_FAILED] = failed
    counts[C_JITTER] = used_jitter
    counts[C_TIMED_OUT] = 1 if drain_timed_out else 0
    counts[C_STUCK] = 1 if stuck else 0
    # The last instant's row holds the dead letters alone (the close hands back the
    # unfinished items); the row before the warm-up's end counts when the run outlasts it.
    if now >= warmup:
        dead = admitted - completed - unsettled
        if dead > held_peak:
            held_peak = dead
        if held_before > held_peak:
            held_peak = held_before
    else:
        held_peak = 0
    counts[C_HELD_PEAK] = held_peak
    seconds[0] = now
    seconds[1] = blocked_s


def series_rows(arrival, kinds, times, deltas, arrival_code, time_s, columns):
    """The rows of :func:`~pipeline.sim.running.recorder.step_series`, by merging, not sorting.

    ``arrival`` (the source's arrivals) and ``times`` (the event log, with its
    ``kinds``) are both non-decreasing, and the state after all events at one
    instant does not depend on their order there, so one pass over the two
    gives each distinct instant's state: ``time_s[r]`` and ``columns[:, r]``
    (``deltas[kind]`` moves the columns; ``arrival_code`` is an arrival's row).
    Row 0 is the state at 0.0 s. Returns the number of rows filled.
    """
    width = columns.shape[0]
    state = np.zeros(width, np.int64)
    for c in range(width):
        columns[c, 0] = 0
    time_s[0] = 0.0
    rows = 1
    i = j = 0
    arrived, logged = len(arrival), len(times)
    while i < arrived or j < logged:
        at = arrival[i] if j == logged or (i < arrived and arrival[i] <= times[j]) else times[j]
        while i < arrived and arrival[i] == at:
            for c in range(width):
                state[c] += deltas[arrival_code, c]
            i += 1
        while j < logged and times[j] == at:
            kind = kinds[j]
            for c in range(width):
                state[c] += deltas[kind, c]
            j += 1
        time_s[rows] = at
        for c in range(width):
            columns[c, rows] = state[c]
        rows += 1
    return rows


_COMPILED: dict[str, Any] = {}


def compiled(name: str = "play") -> Any:
    """:func:`play` (or :func:`series_rows`) compiled by numba (cached on disk), or None.

    None without numba, and under ``NUMBA_DISABLE_JIT=1``, which gives numba's
    plain-Python dispatcher, slower than :mod:`.events`: the kernel then does
    not take this path.
    """
    if name not in _COMPILED:
        try:
            import numba
        except ImportError:
            _COMPILED[name] = None
        else:
            if numba.config.DISABLE_JIT:
                _COMPILED[name] = None
            else:
                function = {"play": play, "series_rows": series_rows}[name]
                _COMPILED[name] = numba.njit(cache=True, nogil=True)(function)
    return _COMPILED[name]


def step_series_merged(arrival_s: np.ndarray, run: EventRun, *, fast: bool) -> StepSeries:
    """:func:`~pipeline.sim.running.recorder.step_series` of ``run``'s log, by merging."""
    deltas = DELTAS.astype(np.int64)
    rows = len(arrival_s) + len(run.times) + 1
    time_s = np.empty(rows)
    columns = np.empty((len(SERIES), rows), np.int32)
    merge = compiled("series_rows") if fast else series_rows
    rows = merge(arrival_s, run.kinds, run.times, deltas, ARRIVAL, time_s, columns)
    # views, not copies: the rows left over are a few bytes per event
    return finish_series(
        time_s[:rows],
        {name: columns[index, :rows] for index, name in enumerate(SERIES)},
        run.finished_s,
    )


def anticipate(items: int) -> None:
    """Count ``items`` event-path items that this process is about to run, before it runs them.

    For a caller that knows it will run many short runs: a widget re-simulates
    a few thousand items on every slider move, a session of moves being the
    work :data:`MIN_ITEMS` waits for. Said at once, ``auto`` takes the compiled
    path at the first event-path run (loading it then, :func:`worth_it`)
    instead of after twenty; nothing is loaded before that run, nor ever
    without numba. Every path gives the same run (the equality tests).

    Raises:
        TypeError: ``items`` is not an integer (a float, a Decimal, a bool).
        ValueError: ``items`` is negative.
    """
    if isinstance(items, bool):
        raise TypeError(f"items must be an int >= 0, got {items!r}")
    try:
        count = operator.index(items)
    except TypeError:
        raise TypeError(f"items must be an int >= 0, got {items!r}") from None
    if count < 0:
        raise ValueError(f"items must be >= 0, got {count}")
    _SEEN[0] += count


def worth_it(n: int) -> bool:
    """Whether ``auto`` runs the next event-path run of ``n`` items compiled.

    Yes once the compiled path is loaded, and as soon as this process's
    event-path items, this run's included, reach :data:`MIN_ITEMS` (a long
    run, or the runs of a sweep or a plan); never without numba.
    """
    if "play" in _COMPILED:
        return _COMPILED["play"] is not None
    _SEEN[0] += n
    return _SEEN[0] >= MIN_ITEMS and compiled() is not None


def inside(model: Any) -> bool:
    """Whether :func:`play` knows the scenario's failure model (one model, no combination)."""
    return type(model) in (NoFailures, IndependentFailures, PermanentFailures)


def _model_error(mode: int, item: int, attempt: int) -> BaseException:
    """The exception the engine's handler raises for a failed attempt (see failures.py)."""
    if mode == PERMANENT:
        return PermanentError(f"simulated permanent failure (item {item})")
    return SimulatedFailure(f"simulated failure (item {item}, attempt {attempt})")


def run_arrays(
    workload: Any,
    model: Any,
    quiet: bool,
    config: PipelineConfig,
    *,
    fast: bool,
    warmup_s: float = 0.0,
    record: bool = True,
) -> tuple[EventRun, ItemColumns]:
    """Run one replication's workload through :func:`play`.

    Returns the :class:`EventRun` of :mod:`.events` (its log as numpy arrays)
    and the per-item columns :func:`~pipeline.sim.running.recorder.item_columns`
    would build from that log, filled in as the run goes instead of sorted out
    of it afterwards.

    Args:
        workload: the replication's :class:`~pipeline.sim.running.workload.Workload`.
        model: the scenario's failure model (inside :func:`inside`).
        quiet: no attempt can fail (the failure model is not consulted).
        config: the pipeline configuration (inside :func:`inside`).
        fast: run the compiled :func:`play` (:func:`compiled` must not be None),
            else the plain-Python source.
        warmup_s: the scenario's warm-up, seconds: the run's ``held_peak`` counts
            the rows of the step series its summary reads.
        record: False: no event log (the run's is empty) and no attempt log
            (the columns' is None), for a summary that reads neither (see
            :func:`~pipeline.sim.running.single.summary_once`); the run and its
            report are otherwise the same.

    Every random input is drawn first, in the engine's order. An attempt that
    retries needs an earlier failed attempt, so with ``u`` the failure
    uniforms in start order, the run's attempts are at most the least ``A >= n``
    with ``A = n + #{u[:A] < p}`` (capped at ``n * max_attempts``); that many
    uniforms, and ``A - n`` retry times and jitter draws, are enough.
    """
    arrival = workload.arrival_s
    first = workload.first_attempt_s
    n = len(arrival)
    failures = None if quiet else workload.failures
    max_attempts = config.max_attempts
    retry = config.retry
    fail_mode, p, fail_u = NO_FAILURES, 0.0, np.zeros(0)
    poisoned = np.zeros(0, np.int64)
    retryable = False
    budget = n
    if not quiet and type(model) is IndependentFailures:
        fail_mode, p = INDEPENDENT, float(model.p)
        retryable = retry.is_retryable(_model_error(INDEPENDENT, 0, 1))
        cap = n * max_attempts if retryable else n
        fail_u = failures.draws(n)
        while True:
            more = min(n + int(np.count_nonzero(fail_u < p)), cap)
            if more == len(fail_u):
                break
            fail_u = np.concatenate([fail_u, failures.draws(more - len(fail_u))])
        budget = len(fail_u)
    elif not quiet and type(model) is PermanentFailures:
        fail_mode = PERMANENT
        poisoned = failures.poisoned(n).astype(np.int64)
        retryable = retry.is_retryable(_model_error(PERMANENT, 0, 1))
        budget = n + int(np.count_nonzero(poisoned)) * (max_attempts - 1 if retryable else 0)
    retries = budget - n
    trace_retry = workload.traced
    retry_s = np.zeros(0) if trace_retry or retries == 0 else workload.retry_times(retries)
    backoff = config.backoff
    plain = dataclasses.replace(backoff, jitter=False)
    deepest = min(max_attempts, budget)  # no item makes more attempts than the run's budget
    delays = np.zeros(deepest + 1)
    for attempt in range(1, deepest + 1):
        delays[attempt] = plain.delay(attempt)
    rng = workload.streams.jitter
    jitter = backoff.jitter
    saved = rng.getstate()
    jitter_u = np.array([rng.random() for _ in range(retries)] if jitter else [], np.float64)

    events = 4 * n + 3 * budget + 16 if record else 1
    kinds = np.empty(events, np.int8)
    times = np.empty(events, np.float64)
    ids = np.empty(events, np.int64)
    attempts = np.zeros(n, np.int64)
    live = np.zeros(n, np.int8)
    failed_item = np.empty(budget, np.int64)
    failed_at = np.empty(budget, np.float64)
    admitted_s = np.full(n, np.nan)
    start_s = np.full(n, np.nan)
    finish_s = np.full(n, np.nan)
    outcome = np.full(n, 4, np.int8)  # not_offered unless the run says otherwise
    logged_attempts = budget if record else 1
    attempt_item = np.empty(logged_attempts, np.int64)
    attempt_start = np.empty(logged_attempts, np.float64)
    attempt_end = np.full(logged_attempts, np.nan)
    attempt_ending = np.full(logged_attempts, 3, np.int8)  # cut unless the attempt ends
    counts = np.zeros(12, np.int64)
    seconds = np.zeros(2)
    maxsize = config.queue_maxsize
    drain = config.drain_timeout_s
    runner = compiled() if fast else play
    runner(
        arrival, first, retry_s, trace_retry, fail_mode, fail_u, p, poisoned, retryable,
        max_attempts, delays, jitter, jitter_u, config.concurrency,
        math.inf if maxsize is None else float(maxsize), config.on_full == "reject",
        drain is not None, 0.0 if drain is None else float(drain), float(warmup_s), record,
        kinds, times, ids, attempts, live, failed_item, failed_at,
        admitted_s, start_s, finish_s, outcome,
        attempt_item, attempt_start, attempt_end, attempt_ending, counts, seconds,
    )  # fmt: skip
    if counts[C_STUCK]:  # pragma: no cover - the engine would report a deadlock
        raise RuntimeError("kernel event path: nothing ready and no timer pending")
    if jitter:  # leave the jitter stream where the engine leaves it
        rng.setstate(saved)
        for _ in range(int(counts[C_JITTER])):
            rng.random()
    if record:
        logged = int(counts[C_LOGGED])
        kinds, times, ids = kinds[:logged], times[:logged], ids[:logged]
    else:
        kinds, times, ids = np.empty(0, np.int8), np.empty(0), np.empty(0, np.int64)
    left = np.flatnonzero(live)
    now = float(seconds[0])

    shed = ShedLog(config.keep_shed)
    dead_letters: list[DeadLetter] = []
    if fail_mode != NO_FAILURES or config.on_full == "reject":
        count = int(counts[C_FAILED])
        failed_item, failed_at = failed_item[:count], failed_at[:count]
        if record:
            shed_ids = ids[kinds == SHED]
            dead = ids[kinds == DEAD_LETTERED].tolist()
        else:
            shed_ids = np.flatnonzero(outcome == 2)  # shed as offered: in id order
            dead = _dead_in_order(failed_item, outcome)
        for item in shed_ids.tolist():
            shed.append(item)
        if dead:
            history: dict[int, list[tuple[int, float]]] = {item: [] for item in dead}
            seen: dict[int, int] = {}
            for item, at in zip(failed_item.tolist(), failed_at.tolist(), strict=True):
                number = seen[item] = seen.get(item, 0) + 1
                if item in history:
                    history[item].append((number, at))
            reason = "max_attempts" if retryable else "not_retryable"
            for item in dead:
                dead_letters.append(
                    DeadLetter(
                        payload=item,
                        attempts=int(attempts[item]),
                        errors=tuple(
                            AttemptError.from_exception(a, _model_error(fail_mode, item, a), t)
                            for a, t in history[item]
                        ),
                        reason=reason,
                    )
                )
    if len(left):  # the unfinished items last, as the engine's close logs them
        if record:
            kinds = np.concatenate([kinds, np.full(len(left), UNFINISHED, np.int8)])
            times = np.concatenate([times, np.full(len(left), now)])
            ids = np.concatenate([ids, left])
        outcome[left] = 3
    attempt_log = None
    if record:
        total = int(counts[C_ATTEMPTS])
        attempt_end = attempt_end[:total]
        attempt_end[np.isnan(attempt_end)] = now  # cut at the drain's end
        order = np.argsort(attempt_item[:total], kind="stable")  # item order, then time
        ending = attempt_ending[:total].take(order)
        attempt_log = AttemptLog(
            start_s=attempt_start[:total].take(order),
            end_s=attempt_end.take(order),
            ending=ending,
            readmitted_s=readmissions(kinds, times, ids, ending, attempts),
        )
    columns = ItemColumns(
        arrival_s=arrival,
        admitted_s=admitted_s,
        start_s=start_s,
        finish_s=finish_s,
        attempts=attempts,
        outcome=outcome,
        attempt_log=attempt_log,
    )
    run = EventRun(
        kinds=kinds,
        times=times,
        ids=ids,
        offered=int(counts[C_OFFERED]),
        admitted=int(counts[C_ADMITTED]),
        completed=int(counts[C_COMPLETED]),
        attempts=int(counts[C_ATTEMPTS]),
        retried=int(counts[C_RETRIED]),
        dead_letters=dead_letters,
        shed=shed,
        unfinished=left.tolist(),
        drain_timed_out=bool(counts[C_TIMED_OUT]),
        finished_s=now,
        queue_peak=int(counts[C_PEAK]),
        producer_blocked_s=float(seconds[1]),
        held_peak=int(counts[C_HELD_PEAK]),
    )
    return run, columns


def _dead_in_order(failed_item: np.ndarray, outcome: np.ndarray) -> list[int]:
    """The dead-lettered items in the order the run dead-lettered them, without its log.

    An item is dead-lettered at its last failed attempt, so the order is that of
    each dead-lettered item's last entry in ``failed_item`` (every failed attempt,
    in time order).
    """
    positions = np.flatnonzero(outcome.take(failed_item) == 1)
    if not len(positions):
        return []
    last: dict[int, int] = {}
    items = failed_item.take(positions).tolist()
    for position, item in zip(positions.tolist(), items, strict=True):
        last[item] = position
    return failed_item.take(sorted(last.values())).tolist()
