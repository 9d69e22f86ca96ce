"""``Guard``: a running pipeline's retry budget and circuit breaker, on its event loop.

The engine (:mod:`pipeline.attempts`) makes one at the start when
``PipelineConfig.retry_budget`` or ``breaker`` is set, and calls it at four
points of an attempt: :meth:`~Guard.admit` before it (the breaker's gate),
:meth:`~Guard.starting` when it is about to start, :meth:`~Guard.ended` when it ends and
:meth:`~Guard.may_retry` when it failed and would be retried (the budget). The
decisions are the loop-free state objects' (:class:`~pipeline.overload.budget.BudgetState`,
:class:`~pipeline.overload.breaker.BreakerState`); this adds the waiting, the
timer that turns an open breaker half-open on time, and the events.

**While the breaker is open, the worker holds the item and waits** until the
breaker lets a call through (when it turns half-open, for the first
``half_open_calls`` waiting; the rest wait for the probes' verdict). The item
counts as taken (the worker is busy) but not started: no attempt is used up,
no handler is called, nothing is recorded in the breaker's window. Why wait
rather than fail fast: a service embedding the engine wants its items
delivered once the downstream is back, not dead-lettered because it was down
for a minute; and waiting keeps backpressure honest: the workers stop taking
items, the queue fills, producers block (``on_full="block"``) or shed
(``"reject"``), and ``max_wait_s`` expires items that waited too long, all as
the engine already reports them. Failing fast would turn every item that
arrives during an outage into a dead letter at full speed, which is the retry
storm's twin. Each attempt held back counts once in ``breaker_calls_refused``.

What the breaker records: every handler call, as failed when it ended in an
``Exception`` (a ``TimeoutError`` of the attempt timeout, a non-retryable error
and a ``CancelledError`` the handler raised itself included), with its
duration from its start for the slow-call rule. An attempt that made no call
(refused by the rate limit, a bad priority key or deadline) and one cut by the
close are not recorded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..events import EventKind
from .breaker import CLOSED, HALF_OPEN, OPEN, BreakerState

__all__ = ["Guard"]

_KIND_OF = {
    OPEN: EventKind.BREAKER_OPEN,
    HALF_OPEN: EventKind.BREAKER_HALF_OPEN,
    CLOSED: EventKind.BREAKER_CLOSED,
}


class Guard:
    """The overload controls of one running pipeline (see the module docstring).

    Made with the pipeline, used on the loop that runs it (whose ``time()`` is
    the clock).

    Args:
        config: the pipeline's :class:`~pipeline.PipelineConfig` (``retry_budget``,
            ``breaker``).
        emit: ``emit(kind, now_s, item)``, the engine's event call (item None here).
        log: ``log(level, event, **fields)``, the engine's structured log call: each
            change of the breaker is logged (``pipeline.breaker_open`` as a warning,
            ``pipeline.breaker_half_open`` and ``pipeline.breaker_closed`` as info).
    """

    __slots__ = ("_emit", "_log", "_permits", "_timer", "_wake", "breaker", "budget")

    @classmethod
    def of(cls, config: Any, emit: Callable[..., None], log: Callable[..., None]) -> Guard | None:
        """A guard for ``config``, or None when it sets no overload control (the fast path)."""
        if config.retry_budget is None and config.breaker is None:
            return None
        return cls(config, emit, log)

    def __init__(self, config: Any, emit: Callable[..., None], log: Callable[..., None]) -> None:
        self._emit = emit
        self._log = log
        self.budget = None if config.retry_budget is None else config.retry_budget.state()
        self.breaker: BreakerState | None = (
            None if config.breaker is None else config.breaker.state(self._changed)
        )
        self._permits: dict[Any, int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._wake = asyncio.Event()

    async def admit(self, item: Any) -> None:
        """Wait until the breaker lets ``item``'s next attempt through (at once when closed)."""
        breaker = self.breaker
        if breaker is None:
            return
        clock = asyncio.get_running_loop().time
        now = clock()
        permit = breaker.acquire(now)
        if permit is None:
            self._emit(EventKind.BREAKER_REFUSED, now, item)  # counted once, as `refused`
        while permit is None:
            await self._wake.wait()
            permit = breaker.acquire(clock(), count=False)
        self._permits[item] = permit

    def release(self, item: Any) -> None:
        """``item`` was let through but its attempt never reached the handler: give it back."""
        permit = self._permits.pop(item, None)
        if permit is not None:
            self.breaker.release(permit)
            self._wake_waiters()  # a probe's slot may be free again

    def starting(self, item: Any, now: float) -> None:
        """``item``'s next attempt starts at ``now`` (the budget counts first attempts)."""
        if item.attempts == 0 and self.budget is not None:
            self.budget.first_attempt(now)

    def ended(self, item: Any, now: float, *, failed: bool) -> None:
        """``item``'s attempt (a handler call) ended at ``now``: the breaker records it."""
        permit = self._permits.pop(item, None)
        if permit is not None:
            self.breaker.record(permit, now, failed=failed, duration_s=now - item.started_s)

    def may_retry(self, item: Any, now: float) -> bool:
        """Whether the budget allows ``item``'s retry at ``now`` (counted if so, denied if not).

        A denial is a ``RETRY_DENIED`` event; the caller dead-letters the item next.
        """
        if self.budget is None or self.budget.try_retry(now):
            return True
        self._emit(EventKind.RETRY_DENIED, now, item)
        return False

    def _changed(self, state: str, at_s: float) -> None:
        if state == OPEN:
            if self._timer is not None:  # a spell that turned half-open before its timer ran
                self._timer.cancel()
            until = self.breaker.open_until_s
            self._timer = asyncio.get_running_loop().call_at(until, self._half_open, until)
        self._emit(_KIND_OF[state], at_s, None)
        level = logging.WARNING if state == OPEN else logging.INFO
        self._log(level, f"pipeline.breaker_{state}", at_s=at_s, state=state)
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        self._wake.set()  # everyone waiting asks again; later waits use a fresh event
        self._wake = asyncio.Event()

    def _half_open(self, until: float) -> None:
        # A timer may run a little before its time (the loop's clock resolution): the spell
        # ends at `until` whatever the clock reads now.
        self._timer = None
        self.breaker.advance(max(asyncio.get_running_loop().time(), until))

    def close(self) -> None:
        """Stop the open breaker's timer (the pipeline is closing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._permits.clear()

    def statistics(self, now: float) -> dict[str, Any]:
        """The fields of ``Pipeline.statistics()`` these controls fill in, as of ``now``.

        Reads only (an exporter may call it from another thread).
        """
        budget, breaker = self.budget, self.breaker
        return {
            "retries_denied": 0 if budget is None else budget.denied,
            "breaker_state": None if breaker is None else breaker.state_at(now),
            "breaker_calls_refused": 0 if breaker is None else breaker.refused,
            "breaker_open_s": 0.0 if breaker is None else breaker.open_time_s(now),
        }
