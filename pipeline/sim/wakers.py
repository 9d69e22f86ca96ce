"""The lean handles the virtual loop makes: a sleep's wake-up timer and ``call_soon``'s handle.

A timer whose callback only resolves a future (every ``asyncio.sleep``,
:func:`wake_unless_cancelled`, :func:`resolve_unless_cancelled`: :data:`WAKERS`)
is a :class:`WakeTimer`, made by filling a bare instance's slots
(:func:`new_wake_timer`) instead of running asyncio's ``TimerHandle.__init__``;
``call_soon``'s handles are :class:`LeanHandle` s, made the same way. They are
asyncio handles in every other respect (``cancel``, ``cancelled``, ``when``,
comparison, repr). :class:`~pipeline.sim.vloop.VirtualEventLoop` makes and runs
them; what they run raises into the loop's exception handler word for word as
asyncio's own ``Handle._run`` reports it (:func:`report_callback_error`).
"""

from __future__ import annotations

import asyncio
from asyncio import events, format_helpers, futures
from typing import Any, TypeVar

__all__ = [
    "WAKERS",
    "LeanHandle",
    "WakeTimer",
    "new_instance",
    "new_wake_timer",
    "report_callback_error",
    "resolve_unless_cancelled",
    "wake_unless_cancelled",
]

T = TypeVar("T")


def wake_unless_cancelled(future: asyncio.Future[Any]) -> None:
    """Set ``future``'s result to None unless it is done already (cancelled, say).

    The callback for a hand-made sleep: ``loop.call_at(when, wake_unless_cancelled, fut)``
    then ``await fut``. The virtual loop knows this callback touches nothing but
    the future, so such a timer costs less than an arbitrary one (see
    :class:`~pipeline.sim.vloop.VirtualEventLoop`). The future can be cancelled safely while the
    timer is pending.
    """
    if not future.done():
        future.set_result(None)


def resolve_unless_cancelled(future: asyncio.Future[T], value: T) -> None:
    """Set ``future``'s result to ``value`` unless it is done already (cancelled, say).

    :func:`wake_unless_cancelled` for a wait that hands over a value:
    ``loop.call_at(when, resolve_unless_cancelled, fut, value)`` then
    ``await fut`` gives ``value`` at ``when``, as cheaply as a sleep.
    """
    if not future.done():
        future.set_result(value)


# Timer callbacks that only resolve the future they are given (no other effect, no user
# code): ours, and the one asyncio.sleep schedules (if a Python release renamed it, sleeps
# would merely take the general path).
WAKERS = frozenset(
    {
        wake_unless_cancelled,
        resolve_unless_cancelled,
        getattr(futures, "_set_result_unless_cancelled", wake_unless_cancelled),
    }
)


class WakeTimer(events.TimerHandle):
    """A timer for a callback in ``WAKERS``: a sleep's wake-up, made without asyncio's overhead.

    It behaves as a :class:`asyncio.TimerHandle` (``cancel``, ``cancelled``,
    ``when``, comparison, repr), but skips what a wake-up does not need: no
    context copy (resolving a future runs no user code; the future's own
    callbacks keep their contexts) and no debug bookkeeping (debug loops make
    plain handles). Made by :func:`new_wake_timer`, not by calling the class.
    """

    __slots__ = ()

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            if self._scheduled:
                self._loop._timer_cancelled_count += 1
            self._callback = None
            self._args = None

    def _run(self) -> None:
        try:
            self._callback(*self._args)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            report_callback_error(self, exc)


class LeanHandle(events.Handle):
    """A :class:`asyncio.Handle` made without asking the loop for its debug flag (not in debug).

    Made by :meth:`~pipeline.sim.vloop.VirtualEventLoop.call_soon`, not by calling the class.
    """

    __slots__ = ()


new_instance = object.__new__
"""``object.__new__``: a bare instance whose slots the caller fills (no Python ``__init__``)."""


def new_wake_timer(when: float, callback: Any, args: tuple[Any, ...], loop: Any) -> WakeTimer:
    """A scheduled :class:`WakeTimer` due at ``when`` (seconds of loop time).

    It fills the slots of a bare instance rather than calling the class: a
    class call that runs a Python ``__init__`` costs more than the stores
    themselves, and handles are made several times per simulated item.
    """
    timer = new_instance(WakeTimer)
    timer._when = when
    timer._callback = callback
    timer._args = args
    timer._loop = loop
    timer._cancelled = False
    timer._scheduled = True
    timer._context = None
    timer._repr = None
    timer._source_traceback = None
    return timer


def report_callback_error(handle: events.Handle, exc: BaseException) -> None:
    """Report a callback's exception to its loop, word for word as ``Handle._run`` does."""
    callback = format_helpers._format_callback_source(handle._callback, handle._args)
    context = {"message": f"Exception in callback {callback}", "exception": exc, "handle": handle}
    if handle._source_traceback:
        context["source_traceback"] = handle._source_traceback
    handle._loop.call_exception_handler(context)
