"""The virtual loop's fast paths change how much work a run costs, never what it computes.

The loop wakes sleepers straight from the timer heap, makes lean handles for
sleeps and ``call_soon``, and skips asyncio's general scheduling path for a
sleep's wake-up. The reference here is the loop as it was before those paths
existed (``_ReferenceLoop``, its scheduling and ``_run_once`` kept verbatim):
every simulation must give bit-for-bit the same numbers on both, and any mix
of timers, sleeps, cancellations and callbacks must run in the same order.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import inspect
import logging
import random
from asyncio import events, futures

import numpy as np
import pytest

from pipeline import PipelineConfig, RateLimit
from pipeline.errors import DeadlockError
from pipeline.retry import Backoff
from pipeline.sim import (
    Constant,
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    LogNormal,
    OnOff,
    Overload,
    Poisson,
    Scenario,
    ScriptedFailures,
    Trace,
    simulate,
    vloop,
)
from pipeline.sim.running.recorder import StepSeries
from pipeline.sim.vloop import VirtualEventLoop, run_virtual, wake_unless_cancelled
from pipeline.sim.workloads.arrivals import Deterministic
from pipeline.sim.workloads.failures import Hangs
from pipeline.sim.workloads.traces.service import ServiceTrace

YEAR_S = 365 * 86400.0


class _ReferenceLoop(VirtualEventLoop):
    """The virtual loop before its fast paths: every timer a TimerHandle, run one turn later."""

    call_soon = asyncio.SelectorEventLoop.call_soon

    def call_at(self, when, callback, *args, context=None):
        if when is None:
            raise TypeError("when cannot be None")
        return self._schedule(when, callback, args, context, "call_at")

    def call_later(self, delay, callback, *args, context=None):
        if delay is None:
            raise TypeError("delay must not be None")
        return self._schedule(self._now + delay, callback, args, context, "call_later")

    def _schedule(self, when, callback, args, context, caller):
        when = float(when)
        if when != when:
            raise ValueError(f"{caller}() got a NaN deadline; it would never fire")
        self._check_closed()
        if self._debug:
            self._check_thread()
            self._check_callback(callback, caller)
        timer = events.TimerHandle(when, callback, args, self, context)
        if timer._source_traceback:
            del timer._source_traceback[-2:]
        self._timer_seq += 1
        heapq.heappush(self._scheduled, (when, self._timer_seq, timer))
        timer._scheduled = True
        return timer

    def _run_once(self) -> None:
        scheduled = self._scheduled
        sched_count = len(scheduled)
        if (
            sched_count > vloop._MIN_SCHEDULED_TIMER_HANDLES
            and self._timer_cancelled_count / sched_count
            > vloop._MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            self._purge_cancelled_timers()
            scheduled = self._scheduled
        else:
            while scheduled and scheduled[0][2]._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(scheduled)[2]._scheduled = False

        ready = self._ready
        jobs = self._jobs
        now = self._now
        if ready or self._stopping or (scheduled and scheduled[0][0] <= now):
            if self._io_watched:
                self._process_events(self._selector.select(0))
        elif jobs and jobs[0][0].done():
            self._deliver_oldest_job()
        elif jobs or self._held:
            self._process_events(self._selector.select(None))
        elif self._io_watched:
            self._process_events(self._selector.select(0 if scheduled else None))
            if not ready and scheduled:
                self._now = max(now, scheduled[0][0])
        elif scheduled:
            when = scheduled[0][0]
            if when > now:
                self._now = when
        else:
            raise self._deadlock_error()

        now = self._now
        while scheduled and scheduled[0][0] <= now:
            handle = heapq.heappop(scheduled)[2]
            handle._scheduled = False
            ready.append(handle)

        ntodo = len(ready)
        if self._debug:
            self._run_ready_debug(ntodo)
            return
        popleft = ready.popleft
        for _ in range(ntodo):
            handle = popleft()
            if not handle._cancelled:
                handle._run()


def _on_reference_loop(monkeypatch) -> None:
    monkeypatch.setattr(
        vloop, "new_virtual_loop", lambda start_s=0.0: _ReferenceLoop(start_s=start_s)
    )


def _count_iterations(monkeypatch, loop_class: type) -> list[int]:
    counter = [0]
    run_once = loop_class._run_once

    def counting(self):
        counter[0] += 1
        run_once(self)

    monkeypatch.setattr(loop_class, "_run_once", counting)
    return counter


# -- simulations: bit-for-bit the same numbers -----------------------------------------


def _scenarios() -> dict[str, Scenario]:
    rng = np.random.default_rng(10)
    # Times rounded to 0.1 s: many arrivals, service ends and retries fall due together.
    arrivals = np.round(np.cumsum(rng.exponential(0.3, 400)), 1)
    services = np.round(rng.exponential(1.0, 400), 1)
    fails = tuple(int(x) for x in rng.integers(0, 3, 400))
    return {
        "mm4": Scenario(
            arrivals=Poisson(rate=3.2),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=4, queue_maxsize=100),
            n_items=1500,
            seed=1,
        ),
        "equal_times": Scenario(
            arrivals=Deterministic(rate=4.0),
            service=Constant(1.0),
            config=PipelineConfig(concurrency=4, queue_maxsize=5),
            n_items=400,
            seed=2,
        ),
        "equal_times_retries": Scenario(
            arrivals=Deterministic(rate=5.0),
            service=Constant(1.0),
            config=PipelineConfig(
                concurrency=4,
                queue_maxsize=3,
                max_attempts=4,
                backoff=Backoff(kind="constant", base_s=1.0),
            ),
            failures=IndependentFailures(0.3),
            n_items=400,
            seed=3,
        ),
        "reject": Scenario(
            arrivals=Poisson(rate=5.0),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=4, queue_maxsize=3, on_full="reject"),
            n_items=800,
            seed=4,
        ),
        "unbounded_jitter": Scenario(
            arrivals=Poisson(rate=3.0),
            service=LogNormal(mean=1.0, cv=2.0),
            config=PipelineConfig(
                concurrency=4,
                queue_maxsize=None,
                max_attempts=4,
                backoff=Backoff(base_s=0.5, jitter=True),
            ),
            failures=IndependentFailures(0.3),
            n_items=800,
            seed=5,
        ),
        "attempt_timeout_hangs": Scenario(
            arrivals=Poisson(rate=2.0),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=4, queue_maxsize=20, attempt_timeout_s=2.5),
            failures=Hangs(p=0.1, hang_s=10.0),
            n_items=600,
            seed=6,
        ),
        "drain_timeout": Scenario(
            arrivals=Poisson(rate=8.0),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=2, queue_maxsize=None, drain_timeout_s=5.0),
            n_items=300,
            seed=7,
        ),
        "rate_limit": Scenario(
            arrivals=Poisson(rate=3.0),
            service=Exponential(mean=0.5),
            config=PipelineConfig(
                concurrency=4, queue_maxsize=50, rate_limit=RateLimit(requests_per_minute=150)
            ),
            n_items=400,
            seed=8,
        ),
        "bursts_overload": Scenario(
            arrivals=OnOff(rate_on=10.0, rate_off=0.5, mean_on_s=20, mean_off_s=40),
            service=Exponential(mean=1.0),
            config=PipelineConfig(concurrency=6, queue_maxsize=30),
            failures=Overload(limit=4, refuse_s=0.2),
            n_items=600,
            seed=9,
        ),
        "trace_equal_times": Scenario(
            arrivals=Trace(arrivals),
            service=ServiceTrace(tuple(services.tolist())),
            config=PipelineConfig(
                concurrency=3,
                queue_maxsize=None,
                max_attempts=3,
                backoff=Backoff(kind="constant", base_s=0.5),
            ),
            failures=ScriptedFailures(fails),
            n_items=400,
        ),
    }


SCENARIOS = _scenarios()


def _simulate_engine(scenario: Scenario):
    # The engine itself, not a faster path that computes the same numbers another way.
    if "engine" in inspect.signature(simulate).parameters:
        return simulate(scenario, engine="asyncio")
    return simulate(scenario)


def _assert_same_run(new, old) -> None:
    assert {k: v for k, v in new.summary.items() if k not in ("wall_time_s", "engine")} == {
        k: v for k, v in old.summary.items() if k not in ("wall_time_s", "engine")
    }
    for name in ("arrival_s", "admitted_s", "start_s", "finish_s", "attempts", "outcome"):
        np.testing.assert_array_equal(getattr(new.columns, name), getattr(old.columns, name))
    np.testing.assert_array_equal(new.series.time_s, old.series.time_s)
    for name in StepSeries.COLUMNS:
        np.testing.assert_array_equal(getattr(new.series, name), getattr(old.series, name))
    assert new.series.end_s == old.series.end_s
    assert new.report.unfinished == old.report.unfinished
    assert [(d.payload, d.attempts, d.errors) for d in new.dead_letters] == [
        (d.payload, d.attempts, d.errors) for d in old.dead_letters
    ]


# Scenarios whose drain times out (on purpose, or with the 30 s default): simulate() warns.
DRAIN_TIMES_OUT = {"drain_timeout", "trace_equal_times"}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_simulations_are_bit_identical_to_the_reference_loop(name, monkeypatch):
    scenario = SCENARIOS[name]

    def expect_drain_warning():
        if name in DRAIN_TIMES_OUT:
            return pytest.warns(DrainTimeoutWarning, match="drain timed out")
        return contextlib.nullcontext()

    with expect_drain_warning():
        new = _simulate_engine(scenario)
    with monkeypatch.context() as patch:
        _on_reference_loop(patch)
        with expect_drain_warning():
            old = _simulate_engine(scenario)
    _assert_same_run(new, old)
    assert new.summary["items_offered"] == scenario.n_items


def test_sleepers_wake_in_the_iteration_their_timer_fires(monkeypatch):
    # M/M/4: two sleeps per item (arrival, service). Each used to take two loop turns.
    scenario = SCENARIOS["mm4"].replace(n_items=400)
    fast = _count_iterations(monkeypatch, VirtualEventLoop)
    _simulate_engine(scenario)
    with monkeypatch.context() as patch:
        _on_reference_loop(patch)
        slow = _count_iterations(patch, _ReferenceLoop)
        _simulate_engine(scenario)
    assert slow[0] > 4 * 400
    assert fast[0] < slow[0] - 1.9 * 400


# -- any mix of timers runs in the same order --------------------------------------------


async def _mixed_workload(seed: int) -> list[tuple[float, str]]:
    """Sleeps of every kind, plain timers, call_soon chains, timeouts and cancellations.

    Deadlines come from a coarse grid, so many timers of different kinds are due at once.
    """
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    log: list[tuple[float, str]] = []
    grid = [0.0, 0.5, 1.0, 1.5, 2.0]
    event = asyncio.Event()

    def note(label: str) -> None:
        log.append((loop.time(), label))

    def timer(label: str) -> None:
        note(label)
        if rng.random() < 0.5:
            loop.call_soon(note, label + ">soon")
        if rng.random() < 0.2:
            event.set()
        if rng.random() < 0.2:
            loop.call_later(0, note, label + ">later0")

    async def hand_made_sleep(seconds: float) -> None:
        wake = loop.create_future()
        loop.call_at(loop.time() + seconds, wake_unless_cancelled, wake)
        await wake

    async def worker(w: int) -> None:
        for step in range(12):
            label = f"w{w}.{step}"
            choice = rng.random()
            try:
                if choice < 0.3:
                    await asyncio.sleep(rng.choice(grid))
                elif choice < 0.55:
                    await hand_made_sleep(rng.choice(grid))
                elif choice < 0.65:
                    await asyncio.wait_for(asyncio.sleep(rng.choice(grid)), rng.choice(grid[1:]))
                elif choice < 0.75:
                    async with asyncio.timeout(rng.choice(grid[1:])):
                        await hand_made_sleep(rng.choice(grid))
                elif choice < 0.85:
                    loop.call_at(loop.time() + rng.choice(grid), timer, label + ".t")
                    await asyncio.sleep(0)
                elif choice < 0.92:
                    await asyncio.wait_for(event.wait(), rng.choice(grid[1:]))
                    event.clear()
                else:
                    loop.call_later(rng.choice(grid), timer, label + ".t")
                    await hand_made_sleep(0.0)
            except TimeoutError:
                note(label + " timeout")
            except asyncio.CancelledError:
                note(label + " cancelled")
                return
            note(label)

    tasks = [asyncio.create_task(worker(w), name=f"w{w}") for w in range(6)]

    async def canceller() -> None:
        for _ in range(3):
            await asyncio.sleep(rng.choice(grid[1:]))
            victim = rng.choice(tasks)
            victim.cancel()
            note(f"cancel {victim.get_name()}")

    await asyncio.gather(canceller(), *tasks, return_exceptions=True)
    note("end")
    return log


@pytest.mark.parametrize("seed", range(40))
def test_any_mix_of_timers_runs_in_the_reference_order(seed):
    new = run_virtual(_mixed_workload(seed))
    with asyncio.Runner(loop_factory=_ReferenceLoop) as runner:
        old = runner.run(_mixed_workload(seed))
    assert new == old
    assert len(new) > 40


# -- the lean timers behave as TimerHandles ------------------------------------------------


def test_a_sleep_timer_is_a_timer_handle():
    async def main():
        loop = asyncio.get_running_loop()
        wake = loop.create_future()
        handle = loop.call_at(2.5, wake_unless_cancelled, wake)
        later = loop.call_later(1.0, futures._set_result_unless_cancelled, loop.create_future(), 1)
        seen = (isinstance(handle, asyncio.TimerHandle), handle.when(), later.when())
        assert "when=2.5" in repr(handle) and not handle.cancelled()
        later.cancel()
        assert later.cancelled() and loop._timer_cancelled_count == 1
        await wake  # the cancelled timer is dropped from the heap on the way
        handle.cancel()  # after it fired: harmless, not counted as a cancelled pending timer
        return seen, loop.time(), loop._timer_cancelled_count, len(loop._scheduled)

    assert run_virtual(main()) == ((True, 2.5, 1.0), 2.5, 0, 0)


def test_cancelling_a_sleeping_task_stops_its_sleep_at_once():
    async def main():
        loop = asyncio.get_running_loop()
        log = []

        async def sleeper(kind):
            try:
                if kind == "asyncio":
                    await asyncio.sleep(100)
                else:
                    wake = loop.create_future()
                    loop.call_at(100.0, wake_unless_cancelled, wake)
                    await wake
            except asyncio.CancelledError:
                log.append((kind, loop.time()))
                raise

        tasks = [asyncio.create_task(sleeper(k)) for k in ("asyncio", "hand-made")]
        await asyncio.sleep(1)
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        return log, loop.time(), len(loop._scheduled)

    log, end, pending = run_virtual(main())
    assert log == [("asyncio", 1.0), ("hand-made", 1.0)]
    # asyncio.sleep cancels its timer; the hand-made sleep's timer stays until due (harmless).
    assert end == 1.0 and pending == 1


def test_a_cancelled_hand_made_sleep_lets_its_timer_fire_harmlessly(caplog):
    async def main():
        loop = asyncio.get_running_loop()
        wake = loop.create_future()
        loop.call_at(5.0, wake_unless_cancelled, wake)
        wake.cancel()
        await asyncio.sleep(10)
        return wake.cancelled(), loop.time()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        assert run_virtual(main()) == (True, 10.0)
    assert not caplog.records


@pytest.mark.parametrize("fast", [True, False])
def test_a_failing_wake_up_goes_to_the_exception_handler(fast):
    # A future resolved behind the sleep's back: asyncio's callback then raises
    # InvalidStateError, and the loop reports it as it does for any callback.
    async def main():
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        future = loop.create_future()
        loop.call_at(1.0, futures._set_result_unless_cancelled, future, "late")
        if not fast:  # a plain timer in the same batch takes the general path
            loop.call_at(1.0, lambda: None)
        future.set_result("early")
        await asyncio.sleep(2)
        return [type(c["exception"]).__name__ for c in errors], future.result()

    assert run_virtual(main()) == (["InvalidStateError"], "early")


def test_a_failing_call_soon_callback_is_reported_as_on_a_plain_loop():
    # call_soon's handles run inline in _run_once, not through Handle._run: the
    # report (message, exception, handle) and what runs after must not change.
    async def main():
        loop = asyncio.get_running_loop()
        reports, ran = [], []
        loop.set_exception_handler(lambda _loop, context: reports.append(context))

        def fail(tag):
            ran.append(tag)
            raise KeyError(tag)

        handle = loop.call_soon(fail, "a")
        loop.call_soon(ran.append, "b")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        (report,) = reports
        assert report["handle"] is handle
        return report["message"], repr(report["exception"]), ran

    on_plain_loop = asyncio.run(main())
    assert run_virtual(main()) == on_plain_loop
    assert on_plain_loop[0].startswith("Exception in callback ")


def test_hand_made_sleeps_complete_at_their_exact_deadline_at_any_magnitude():
    async def main(seconds):
        loop = asyncio.get_running_loop()
        start = loop.time()
        wake = loop.create_future()
        handle = loop.call_at(start + seconds, wake_unless_cancelled, wake)
        await wake
        return start, handle.when(), loop.time()

    for seconds in (YEAR_S, 100 * YEAR_S):
        start, deadline, end = run_virtual(main(seconds))
        assert end == deadline == start + seconds
    start, deadline, end = run_virtual(main(1e-3), start_s=2.0**40)
    assert end == deadline == 2.0**40 + 1e-3


def test_a_sleep_whose_timer_was_cancelled_is_a_deadlock_naming_the_task():
    async def stuck(loop):
        wake = loop.create_future()
        handle = loop.call_at(loop.time() + 3.0, wake_unless_cancelled, wake)
        handle.cancel()
        await wake

    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.create_task(stuck(loop), name="sleeper")

    with pytest.raises(DeadlockError) as caught:
        run_virtual(main())
    message = str(caught.value)
    assert "Task 'sleeper' (" in message
    assert "stuck) waiting on Future at test_vloop_fast_paths.py:" in message
    assert "at virtual time 0.0 s" in message


def test_debug_mode_makes_plain_handles_with_tracebacks():
    async def main():
        loop = asyncio.get_running_loop()
        wake = loop.create_future()
        handle = loop.call_at(1.0, wake_unless_cancelled, wake)
        soon = loop.call_soon(lambda: None)
        await wake
        return type(handle), bool(handle._source_traceback), type(soon), loop.time()

    loop = VirtualEventLoop()
    loop.set_debug(True)
    try:
        kind, traced, soon_kind, end = loop.run_until_complete(main())
    finally:
        loop.close()
    assert (kind, traced, soon_kind, end) == (events.TimerHandle, True, events.Handle, 1.0)


def test_a_future_is_made_without_python_code_and_debug_mode_still_shows():
    # asyncio's C future asks its loop get_debug() as it is made (every sleep, every
    # wait for an item); the loop answers without running any Python.
    import sys

    async def main():
        loop = asyncio.get_running_loop()
        called = []

        def profile(frame, event, arg):
            if event == "call":  # a Python function starts
                called.append(frame.f_code.co_name)

        sys.setprofile(profile)
        try:
            future = loop.create_future()
            asyncio.Future(loop=loop)
        finally:
            sys.setprofile(None)
        return [name for name in called if name != "create_future"], future

    called, future = run_virtual(main())
    assert called == [] and future._source_traceback is None
    loop = VirtualEventLoop()
    try:
        assert loop.get_debug() is False
        loop.set_debug(True)
        assert loop.get_debug() is True
        assert loop.create_future()._source_traceback  # asyncio's debug mode, as ever
        loop.set_debug(False)
        assert loop.get_debug() is False and loop.create_future()._source_traceback is None
    finally:
        loop.close()


def test_threads_still_freeze_time_around_sleeps():
    async def main():
        loop = asyncio.get_running_loop()
        wake = loop.create_future()
        loop.call_at(0.5, wake_unless_cancelled, wake)
        value = await asyncio.to_thread(lambda: 42)
        at_thread = loop.time()
        await wake
        return value, at_thread, loop.time()

    assert run_virtual(main()) == (42, 0.0, 0.5)
