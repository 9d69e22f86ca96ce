"""Randomized fault injection in virtual time: nothing lost, nothing counted twice, no hang.

Each example is one small run of the real :class:`~pipeline.Pipeline` on a
fresh virtual loop. Hypothesis draws a :class:`Plan`: the configuration, a
source, and for every item and attempt a fault (an ordinary exception, a
permanent one, a hang, the handler's own ``CancelledError``, an exception
whose ``str()`` raises, ``StopIteration`` from a plain function, and at most
one custom ``BaseException`` per run), plus a timeline of outside events
(``stop()``, concurrent ``drain()`` calls, cancelling ``run()`` once or twice,
a listener that raises on some event kinds, a results consumer that stops
reading or leaves). Then :func:`check` asserts:

- **conservation**: the report balances, and every offered payload is exactly
  one of completed, dead-lettered, unfinished or shed; the handler's successful
  returns, the listener's events and the results stream agree with it;
- **no hang**: the run ends in virtual time (a hang is a ``DeadlockError``; a
  busy loop that never advances time trips a real-time guard);
- with ``drain_timeout_s=None`` and no cancellation, nothing is unfinished;
- a custom ``BaseException`` from a handler propagates out of ``run()`` after
  the close, with ``pipeline.report`` set and balanced;
- whenever ``run()`` ends (returns, raises, or is cancelled), the report is
  already set and balanced, and an async source is closed.

Only waits that some outside event is bound to end are drawn (a hang forever
needs an attempt timeout, or a finite drain that intake is sure to reach, or a
cancellation): a program that waits forever by its own design is not generated.

``PIPELINE_FAULT_EXAMPLES`` overrides the number of examples (default 10,000).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import os
import random
import signal
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st

from pipeline import Backoff, EventKind, PermanentError, Pipeline, PipelineConfig, RunReport
from pipeline.items import WorkItem
from pipeline.sim.vloop import run_virtual
from tests.accounting import (
    assert_each_payload_once,
    assert_results_accounted,
    undelivered_payloads,
)

EXAMPLES = int(os.environ.get("PIPELINE_FAULT_EXAMPLES", "10000"))
REAL_TIME_GUARD_S = 20.0  # per example; a guard against busy loops, not a speed check
LONG_HANG_S = 1000.0  # a hang that ends by itself, for runs nothing else would end

TIMES = (0.0, 0.5, 1.0, 2.0, 4.5, 9.0)  # few values, so events often coincide
SERVICE_TIMES = (0.0, 0.5, 1.0, 2.5)


class Fault(enum.Enum):
    """What one attempt of the handler does."""

    OK = "ok"
    ERROR = "error"  # an ordinary, retryable exception
    PERMANENT = "permanent"  # PermanentError: dead-lettered at once
    HANG = "hang"  # far past attempt_timeout_s, or forever when something ends it
    SELF_CANCEL = "self_cancel"  # the handler raises CancelledError itself
    UNPRINTABLE = "unprintable"  # an exception whose __str__ raises
    STOP_ITERATION = "stop_iteration"


ASYNC_FAULTS = tuple(Fault)
SYNC_FAULTS = tuple(fault for fault in Fault if fault is not Fault.HANG)  # threads take no time
SOURCE_KINDS = ("list", "generator", "async_awaiting", "async_eager")
CONSUMER_MODES = ("all", "pause", "break", "aclose", "stall")


class Boom(BaseException):
    """A custom BaseException raised by a handler (not KeyboardInterrupt or SystemExit)."""


class FaultError(ValueError):
    """The ordinary failure a handler raises."""


class UnprintableError(Exception):
    """An exception whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


class ListenerFault(Exception):
    """Raised by the on_event listener on the event kinds a plan names."""


class RunawayError(Exception):
    """The example ran past the real-time guard: a busy loop that never advances time."""


# -- plans ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemPlan:
    """One payload: its faults by attempt (then OK), service time and source gap."""

    faults: tuple[Fault, ...]
    service_s: float
    gap_s: float  # an awaiting async source sleeps this long before yielding the item

    def fault(self, attempt: int) -> Fault:
        return self.faults[attempt - 1] if attempt <= len(self.faults) else Fault.OK


@dataclass(frozen=True)
class ConsumerPlan:
    """A results() consumer: reads ``take`` results, then does what ``mode`` says.

    ``all`` reads to the end; ``pause`` sleeps ``pause_s`` then reads to the end;
    ``break`` breaks out of ``async for``; ``aclose`` closes the iterator; ``stall``
    keeps it open and never reads again.
    """

    mode: str
    maxsize: int
    take: int
    pause_s: float

    @property
    def reads_to_the_end(self) -> bool:
        return self.mode in ("all", "pause")


@dataclass(frozen=True)
class Plan:
    concurrency: int
    queue_maxsize: int | None
    on_full: str
    max_attempts: int
    backoff: Backoff
    attempt_timeout_s: float | None
    drain_timeout_s: float | None
    prefetch: int
    seed: int
    handler_kind: str
    source_kind: str
    items: tuple[ItemPlan, ...]
    boom_at: tuple[int, int] | None  # (payload, attempt) that raises Boom
    listener_raises_on: frozenset[EventKind]
    consumer: ConsumerPlan | None
    stop_before_run: bool  # stop() called before run(): nothing may be read
    stop_at: float | None
    drain_at: tuple[float, ...]
    cancel_at: float | None
    second_cancel_turns: int | None  # loop turns between the first and second cancel
    helpers_first: bool  # the stop/drain/cancel tasks start before run() does

    @property
    def can_wait_forever(self) -> bool:
        """True when something is sure to end a wait that never ends by itself.

        A cancellation ends any run. Otherwise a finite drain must be reached,
        so intake must end even with every worker stuck: the producer never
        blocks (reject, unbounded queue) or stop()/drain() is called.
        """
        if self.cancel_at is not None:
            return True
        intake_ends = (
            self.on_full == "reject"
            or self.queue_maxsize is None
            or self.stop_before_run
            or self.stop_at is not None
            or bool(self.drain_at)
        )
        return self.drain_timeout_s is not None and intake_ends

    def config(self) -> PipelineConfig:
        return PipelineConfig(
            concurrency=self.concurrency,
            queue_maxsize=self.queue_maxsize,
            on_full=self.on_full,
            max_attempts=self.max_attempts,
            backoff=self.backoff,
            attempt_timeout_s=self.attempt_timeout_s,
            drain_timeout_s=self.drain_timeout_s,
            prefetch=self.prefetch,
        )


# Strategies are built once: building them inside every draw costs more than the run.
_CHOICE = {n: st.integers(0, n - 1) for n in range(2, 65)}


def _pick(draw: st.DrawFn, options: tuple | list) -> Any:
    """One of ``options``; shrinks towards the first."""
    return options[draw(_CHOICE[len(options)])] if len(options) > 1 else options[0]


def _one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in ``n`` draws (shrinks to False)."""
    return draw(_CHOICE[n]) == n - 1


@st.composite
def plans(
    draw: st.DrawFn,
    *,
    faults: tuple[Fault, ...] = ASYNC_FAULTS,
    handler_kinds: tuple[str, ...] = ("async", "sync"),
    source_kinds: tuple[str, ...] = SOURCE_KINDS,
    consumer_modes: tuple[str, ...] = CONSUMER_MODES,
    boom: bool = True,
    listener_faults: bool = True,
    cancels: bool = True,
) -> Plan:
    """Small runs with faults; the keyword arguments narrow what is drawn."""
    handler_kind = _pick(draw, handler_kinds)
    allowed = [
        f for f in faults if f is not Fault.OK and (handler_kind == "async" or f in SYNC_FAULTS)
    ]
    # Mostly successes, so runs get far enough for faults to meet each other.
    fault_options = (Fault.OK,) * max(3, len(allowed) // 2) + tuple(allowed)
    max_attempts = _pick(draw, (1, 2, 3, 4))
    items = tuple(
        ItemPlan(
            faults=tuple(
                _pick(draw, fault_options) for _ in range(_pick(draw, range(max_attempts + 1)))
            ),
            service_s=_pick(draw, SERVICE_TIMES),
            gap_s=_pick(draw, (0.0, 0.5, 1.0)),
        )
        for _ in range(_pick(draw, range(7)))
    )
    boom_at = None
    if boom and items and _one_in(draw, 6):
        boom_at = (_pick(draw, range(len(items))), _pick(draw, range(1, max_attempts + 1)))
    listener_raises_on: frozenset[EventKind] = frozenset()
    if listener_faults and _one_in(draw, 5):
        kinds = list(EventKind)
        listener_raises_on = frozenset(_pick(draw, kinds) for _ in range(_pick(draw, (1, 2, 3))))
    consumer = None
    if consumer_modes and _one_in(draw, 2):
        mode = _pick(draw, consumer_modes)
        consumer = ConsumerPlan(
            mode=mode,
            maxsize=_pick(draw, (1, 2, 3)),
            take=_pick(draw, (1, 2, 3) if mode == "break" else (0, 1, 2, 3)),
            pause_s=_pick(draw, TIMES),
        )
    cancel_at = _pick(draw, (None, *TIMES)) if cancels else None
    plan = Plan(
        concurrency=_pick(draw, (1, 2, 3, 4)),
        queue_maxsize=_pick(draw, (None, 1, 2, 3)),
        on_full=_pick(draw, ("block", "reject")),
        max_attempts=max_attempts,
        backoff=Backoff(
            kind="exponential",
            base_s=_pick(draw, (0.0, 0.25, 1.0)),
            factor=2.0,
            cap_s=4.0,
            jitter=_one_in(draw, 2),
        ),
        attempt_timeout_s=_pick(draw, (None, 0.5, 3.0)),
        drain_timeout_s=_pick(draw, (None, 0.0, 0.5, 3.0, 10.0)),
        prefetch=_pick(draw, (1, 2)) if handler_kind == "sync" else 1,
        seed=_pick(draw, range(64)),
        handler_kind=handler_kind,
        source_kind=_pick(draw, source_kinds),
        items=items,
        boom_at=boom_at,
        listener_raises_on=listener_raises_on,
        consumer=consumer,
        stop_before_run=_one_in(draw, 20),
        stop_at=_pick(draw, (None, *TIMES)),
        drain_at=tuple(_pick(draw, TIMES) for _ in range(_pick(draw, (0, 1, 2)))),
        cancel_at=cancel_at,
        second_cancel_turns=(
            _pick(draw, (None, 0, 1, 2, 3, 4, 5)) if cancel_at is not None else None
        ),
        helpers_first=_one_in(draw, 2),
    )
    if consumer is not None and consumer.mode == "stall" and not plan.can_wait_forever:
        # Nothing would ever end that wait: make the consumer come back instead.
        consumer = ConsumerPlan("pause", consumer.maxsize, consumer.take, consumer.pause_s)
        plan = replace(plan, consumer=consumer)
    return plan


# -- one run ------------------------------------------------------------------------------------


@dataclass
class Observed:
    """What a run did, seen from outside the engine."""

    offered: list[int] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    successes: Counter = field(default_factory=Counter)
    boom_raised: bool = False
    events: list[tuple[EventKind, Any]] = field(default_factory=list)
    delivered: list[Any] = field(default_factory=list)  # Result objects from results()
    cancel_requested: bool = False
    run_outcome: tuple[str, Any] | None = None  # ("returned", report) / ("raised", exc) / ...
    state_at_end: str | None = None
    report_at_end: RunReport | None = None
    source_open_at_end: bool = False
    drain_outcomes: list[tuple[str, Any]] = field(default_factory=list)
    stop_errors: list[BaseException] = field(default_factory=list)


def _make_handler(plan: Plan, seen: Observed) -> Any:
    lock = threading.Lock()

    def start(x: int) -> Fault:
        with lock:
            seen.calls[x] += 1
            attempt = seen.calls[x]
        if plan.boom_at == (x, attempt):
            seen.boom_raised = True
            raise Boom(f"payload {x} attempt {attempt}")
        return plan.items[x].fault(attempt)

    def fail(x: int, fault: Fault) -> None:
        if fault is Fault.ERROR:
            raise FaultError(f"payload {x}")
        if fault is Fault.PERMANENT:
            raise PermanentError(f"payload {x}")
        if fault is Fault.SELF_CANCEL:
            raise asyncio.CancelledError(f"the handler's own, payload {x}")
        if fault is Fault.UNPRINTABLE:
            raise UnprintableError()
        if fault is Fault.STOP_ITERATION:
            raise StopIteration(x)

    def succeed(x: int) -> int:
        with lock:
            seen.successes[x] += 1
        return x

    if plan.handler_kind == "sync":

        def handler(x: int) -> int:
            fail(x, start(x))
            return succeed(x)

        return handler

    forever = plan.attempt_timeout_s is not None or plan.can_wait_forever

    async def async_handler(x: int) -> int:
        fault = start(x)
        if fault is Fault.HANG and forever:
            await asyncio.get_running_loop().create_future()  # only a cancellation ends it
        elif fault is Fault.HANG:
            await asyncio.sleep(LONG_HANG_S)
        elif plan.items[x].service_s:
            await asyncio.sleep(plan.items[x].service_s)
        fail(x, fault)
        return succeed(x)

    return async_handler


def _make_source(plan: Plan, seen: Observed) -> Any:
    n = len(plan.items)
    if plan.source_kind == "list":
        return list(range(n))
    if plan.source_kind == "generator":

        def generator():
            for x in range(n):
                seen.offered.append(x)
                yield x

        return generator()
    if plan.source_kind == "async_eager":

        async def eager():
            for x in range(n):
                seen.offered.append(x)
                yield x

        return eager()

    async def awaiting():
        for x in range(n):
            await asyncio.sleep(plan.items[x].gap_s)
            seen.offered.append(x)
            yield x

    return awaiting()


def _source_left_open(source: Any) -> bool:
    """An async generator must be closed (or exhausted); a started sync one too."""
    if inspect.isasyncgen(source):
        return source.ag_frame is not None
    if inspect.isgenerator(source):
        return inspect.getgeneratorstate(source) == inspect.GEN_SUSPENDED
    return False


async def drive(plan: Plan) -> Observed:
    """Run ``plan`` on the running (virtual) loop and record what happened."""
    seen = Observed()

    def listener(kind: EventKind, now_s: float, item: Any) -> None:
        seen.events.append((kind, item.payload if isinstance(item, WorkItem) else item))
        if kind in plan.listener_raises_on:
            raise ListenerFault(kind.name)

    pipe = Pipeline(
        _make_handler(plan, seen),
        plan.config(),
        on_event=listener,
        rng=random.Random(plan.seed),
    )
    stream = pipe.results(plan.consumer.maxsize) if plan.consumer is not None else None
    source = _make_source(plan, seen)
    run: asyncio.Future | None = None

    def on_run_done(task: asyncio.Future) -> None:
        # What the caller of run() sees at the moment run() ends.
        seen.state_at_end = pipe.state.value
        seen.report_at_end = pipe.report
        seen.source_open_at_end = _source_left_open(source)
        if task.cancelled():
            seen.run_outcome = ("cancelled", None)
        elif task.exception() is not None:
            seen.run_outcome = ("raised", task.exception())
        else:
            seen.run_outcome = ("returned", task.result())

    async def consume() -> None:
        assert stream is not None and plan.consumer is not None
        consumer = plan.consumer
        if consumer.mode == "break":
            async for result in stream:
                seen.delivered.append(result)
                if len(seen.delivered) >= consumer.take:
                    break
            return
        for _ in range(consumer.take):
            try:
                seen.delivered.append(await anext(stream))
            except StopAsyncIteration:
                return
        if consumer.mode == "aclose":
            await stream.aclose()
        elif consumer.mode == "stall":
            await asyncio.get_running_loop().create_future()  # cancelled after the run
        else:
            if consumer.mode == "pause":
                await asyncio.sleep(consumer.pause_s)
            async for result in stream:
                seen.delivered.append(result)

    async def stopper(at: float) -> None:
        await asyncio.sleep(at)
        try:
            pipe.stop()
        except Exception as error:
            seen.stop_errors.append(error)

    async def drainer(at: float) -> None:
        await asyncio.sleep(at)
        try:
            seen.drain_outcomes.append(("returned", await pipe.drain()))
        except BaseException as error:
            seen.drain_outcomes.append(("raised", error))

    async def canceller(at: float) -> None:
        await asyncio.sleep(at)
        assert run is not None
        if run.done():
            return
        run.cancel()
        seen.cancel_requested = True
        if plan.second_cancel_turns is not None:
            for _ in range(plan.second_cancel_turns):
                await asyncio.sleep(0)
            run.cancel()

    loop = asyncio.get_running_loop()

    def start_helpers() -> list[asyncio.Task]:
        helpers = [loop.create_task(drainer(at)) for at in plan.drain_at]
        if plan.stop_at is not None:
            helpers.append(loop.create_task(stopper(plan.stop_at)))
        if plan.cancel_at is not None:
            helpers.append(loop.create_task(canceller(plan.cancel_at)))
        return helpers

    if plan.stop_before_run:
        try:
            pipe.stop()
        except Exception as error:
            seen.stop_errors.append(error)
    # Started first, a helper's sleep(0) ends after run() started its producers
    # but before they take their first step.
    helpers = start_helpers() if plan.helpers_first else []
    run = asyncio.ensure_future(pipe.run(source))
    run.add_done_callback(on_run_done)
    if not plan.helpers_first:
        helpers = start_helpers()
    consumer_task = loop.create_task(consume()) if stream is not None else None

    await asyncio.wait({run})
    # Helpers end by themselves (a drain() that never returns is a DeadlockError here).
    if helpers:
        await asyncio.wait(helpers)
    if consumer_task is not None:
        if plan.consumer is not None and plan.consumer.mode == "stall":
            consumer_task.cancel()
        await asyncio.wait({consumer_task})
        if not consumer_task.cancelled() and consumer_task.exception() is not None:
            raise AssertionError("the results consumer failed") from consumer_task.exception()
    return seen


@contextlib.contextmanager
def real_time_guard(seconds: float):
    """Raise RunawayError if the block runs longer than ``seconds`` of real time.

    Virtual time turns a hang into a DeadlockError, but a busy loop that never
    lets the clock move would hang the suite; this turns it into a failure.
    The alarm repeats so that clean-up that spins again is interrupted too.
    """
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise RunawayError(f"example still running after {seconds} s of real time")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def run_plan(plan: Plan) -> Observed:
    with real_time_guard(REAL_TIME_GUARD_S):
        return run_virtual(drive(plan))


# -- what must hold -------------------------------------------------------------------------------


def check(plan: Plan, seen: Observed) -> None:
    """Assert conservation, no duplicates and the documented ending of ``plan``'s run."""
    outcome, value = seen.run_outcome or ("missing", None)
    report = seen.report_at_end
    assert report is not None, f"run() ended ({outcome} {value!r}) without a report"
    assert seen.state_at_end == "closed", f"run() ended while the pipeline was {seen.state_at_end}"
    listener_failed = bool(plan.listener_raises_on)

    # How run() ended.
    if outcome == "returned":
        assert value is report
        assert not seen.boom_raised or (plan.handler_kind == "sync" and report.drain_timed_out), (
            "a handler raised Boom (a BaseException) and run() returned normally"
        )
    elif outcome == "cancelled":
        assert seen.cancel_requested, "run() was cancelled though nobody cancelled it"
    elif isinstance(value, Boom):
        assert seen.boom_raised
    else:
        assert listener_failed and isinstance(value, Exception), f"run() raised {value!r}"

    # Conservation, payload by payload.
    offered = seen.offered if plan.source_kind != "list" else list(range(report.offered))
    completed = assert_each_payload_once(report, offered)
    dead = {letter.payload: letter for letter in report.dead_letters}
    assert report.statistics.workers_busy == 0, report.statistics
    assert report.statistics.retry_waiting == 0, report.statistics
    if plan.on_full == "block":
        assert len(report.shed) == 0
    if plan.stop_before_run:
        assert report.offered == 0 and seen.offered == [], "stop() before run(), yet items read"
    clean_end = outcome == "returned" and not seen.cancel_requested
    if plan.drain_timeout_s is None and clean_end:
        assert report.unfinished == [], "drain_timeout_s=None, no cancel, yet items unfinished"
        assert not report.drain_timed_out

    # The handler's own view agrees: one success per completed item, none for others.
    for payload in offered:
        successes = seen.successes[payload]
        if payload in completed:
            assert successes == 1, f"payload {payload} completed after {successes} successes"
        elif payload in dead or plan.handler_kind == "async":
            # A thread may finish a call whose attempt was cancelled meanwhile.
            assert successes == 0, f"payload {payload} succeeded but was not completed"
        else:
            assert successes <= 1
    for payload, letter in dead.items():
        assert 1 <= letter.attempts <= plan.max_attempts, letter
        assert len(letter.errors) == letter.attempts, letter
        assert seen.calls[payload] == letter.attempts, (seen.calls[payload], letter)
        if letter.reason == "max_attempts":
            assert letter.attempts == plan.max_attempts, letter
    total_calls = sum(seen.calls.values())
    if plan.handler_kind == "async":
        assert report.attempts == total_calls, (report.attempts, total_calls)
    else:  # a call queued for a thread may be cancelled before it starts
        assert report.attempts >= total_calls, (report.attempts, total_calls)

    # The listener's events tell the same story (unless the listener itself failed).
    if not listener_failed:
        by_kind: dict[EventKind, Counter] = {}
        for kind, payload in seen.events:
            by_kind.setdefault(kind, Counter())[payload] += 1
        assert by_kind.get(EventKind.COMPLETED, Counter()) == completed
        assert by_kind.get(EventKind.DEAD_LETTERED, Counter()) == Counter(list(dead))
        assert by_kind.get(EventKind.UNFINISHED, Counter()) == Counter(report.unfinished)
        assert by_kind.get(EventKind.SHED, Counter()) == Counter(report.shed)
        assert sum(by_kind.get(EventKind.ADMITTED, Counter()).values()) == report.admitted

    # The results stream: only finished items, each once, delivered or reported.
    if plan.consumer is not None:
        finished = completed + Counter(list(dead))
        delivered = Counter(result.payload for result in seen.delivered)
        assert all(count == 1 for count in delivered.values()), delivered
        assert not delivered - finished, f"delivered unfinished items: {delivered - finished}"
        for result in seen.delivered:
            assert result.ok == (result.payload in completed), result
        if plan.consumer.reads_to_the_end or undelivered_payloads(report) is not None:
            assert_results_accounted(delivered.elements(), finished, report)

    # Every other way into the run sees the same ending.
    for how, result in seen.drain_outcomes:
        if how == "returned":
            assert result is report
        else:
            assert (isinstance(result, Boom) and seen.boom_raised) or (
                listener_failed and isinstance(result, Exception)
            ), f"a concurrent drain() raised {result!r}"
    if seen.stop_errors:
        assert listener_failed, f"stop() raised {seen.stop_errors!r}"
    assert not seen.source_open_at_end, "the source was left open when run() ended"


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(plan=plans())
def test_faults_never_lose_or_duplicate_an_item_and_never_hang(plan):
    seen = run_plan(plan)
    note(f"observed: {seen}")
    check(plan, seen)
