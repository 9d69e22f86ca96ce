"""``Listeners``: who hears each event, and how a failing listener is kept out of the run.

A pipeline has its user's ``on_event`` and the exporters attached beside it
(:mod:`pipeline.metrics`, :mod:`pipeline.tracing`). For each event kind the
engine keeps the one function to call (``None`` when nobody listens), so an
event nobody asked for costs one test, and the per-item paths call theirs
inline. Every listener is isolated: one that raises is counted and logged once,
never keeps the others from the event, and never loses an item; only a
``BaseException`` that is not an ``Exception`` stops the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .events import EventKind, Listener
from .fields import PipelineFields

__all__ = ["AttemptEnds", "Listeners"]

_ADMITTED = EventKind.ADMITTED
_STARTED = EventKind.STARTED
_COMPLETED = EventKind.COMPLETED


class AttemptEnds:
    """A buffer the engine writes each completed attempt into, calling no Python function.

    For an exporter that must cost next to nothing on the hot path (:mod:`pipeline.metrics`;
    ``bench/RESULTS.md``). Attached as the ``COMPLETED`` entry of a mapping (see
    :meth:`Listeners._attach`), it makes the engine extend the list ``values`` by one row
    of :attr:`WIDTH` values at the end of every completed attempt: the item's admission
    time, the attempt's start and its end (loop seconds, as ``loop.time()`` reads them) and
    the item's attempts so far (1 for a first attempt). A row is added whole (one C call
    under the GIL), so another thread may take whole rows out at any time.

    Once ``values`` holds ``limit`` rows or more, the engine calls :meth:`flush` (it looks
    every :attr:`CHECK_EVERY` completed attempts, so ``values`` holds at most ``limit +
    CHECK_EVERY`` rows), which calls ``full()`` (it must take the rows out) and empties what
    ``full()`` left should it fail: the buffer stays bounded whatever the exporter does.
    ``full()`` runs on the event loop's thread.

    When another listener hears ``COMPLETED`` too (``on_event``, a tracer, a second
    exporter), the engine calls :meth:`listener` instead, which adds the same rows.
    """

    WIDTH = 4
    """Values per completed attempt: admitted_s, started_s, ended_s, attempts."""

    CHECK_EVERY = 256
    """The engine compares ``len(values)`` with ``limit`` once this many attempts completed
    (a test of its own counter, ``_completed & 255``: cheaper than a ``len`` each time)."""

    __slots__ = ("full", "limit", "values")

    def __init__(self, values: list[Any], limit: int, full: Callable[[], None]) -> None:
        if not isinstance(values, list):
            raise TypeError(f"values must be a list, got {type(values).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1 (rows), got {limit!r}")
        self.values = values
        self.limit = limit
        self.full = full

    def is_full(self) -> bool:
        """Whether ``values`` holds ``limit`` rows or more."""
        return len(self.values) >= self.limit * self.WIDTH

    def flush(self) -> None:
        """Call ``full()``; whatever it leaves at or above ``limit`` is dropped (bounded memory)."""
        try:
            self.full()
        finally:
            if self.is_full():
                del self.values[:]

    def listener(self) -> Listener:
        """The same rows, as a plain listener (when it shares ``COMPLETED`` with others)."""
        extend = self.values.extend
        is_full = self.is_full
        flush = self.flush

        def completed(kind: EventKind, now_s: float, item: Any) -> None:
            extend((item.admitted_s, item.started_s, now_s, item.attempts))
            if is_full():
                flush()

        return completed


class Listeners(PipelineFields):
    """Event dispatch to ``on_event`` and the attached listeners (mixed into ``Pipeline``)."""

    def _emit(self, kind: EventKind, item: Any) -> None:
        if self._on_event is not None:
            listener = self._on_kind[kind]
            if listener is not None:
                listener(kind, self._now(), item)

    def _emit_at(self, kind: EventKind, now_s: float, item: Any) -> None:
        if self._on_event is not None:
            listener = self._on_kind[kind]
            if listener is not None:
                listener(kind, now_s, item)

    def _attach(self, listener: Listener | Mapping[EventKind, Listener]) -> Callable[[], None]:
        """Call ``listener`` at every event too, beside ``on_event``; returns the detach.

        For exporters (:mod:`pipeline.metrics`, :mod:`pipeline.tracing`). ``listener`` is a
        listener, called at every event, or a mapping from the event kinds it wants to one
        listener each: the engine then calls nothing for the other kinds (an exporter that
        ignores admissions costs nothing there) and each listener needs no test of the
        kind. The ``COMPLETED`` entry may be an :class:`AttemptEnds` buffer instead, which
        the engine fills without a call when nothing else hears ``COMPLETED``. Each is
        isolated: one that raises is counted and logged like ``on_event`` and never keeps
        the others from an event. With nothing attached the per-item paths are
        as before (one ``None`` test). Detaching twice is harmless.
        """
        self._attached = (*self._attached, listener)
        self._relisten()

        def detach() -> None:
            self._attached = tuple(each for each in self._attached if each is not listener)
            self._relisten()

        return detach

    def _relisten(self) -> None:
        """Rebuild, for each event kind, the one listener the engine calls for it.

        ``on_event`` first, then the attached in order; ``_on_admitted``, ``_on_started`` and
        ``_on_completed`` are called inline on the per-item paths, ``_on_kind`` (guarded)
        by :meth:`_emit`; ``_on_event`` is None when no kind has a listener at all.
        """
        wanted = [
            each if isinstance(each, Mapping) else dict.fromkeys(EventKind, each)
            for each in (self._user_listener, *self._attached)
            if each is not None
        ]
        failed = self._listener_failed
        on_kind: list[Listener | None] = []
        ends = None
        for kind in EventKind:
            listeners = tuple(each[kind] for each in wanted if each.get(kind) is not None)
            if kind is _COMPLETED and len(listeners) == 1 and isinstance(listeners[0], AttemptEnds):
                ends = listeners[0]  # alone: filled inline by the engine, no call
            listeners = tuple(
                each.listener() if isinstance(each, AttemptEnds) else each for each in listeners
            )
            on_kind.append(_combined(listeners, failed))
        self._on_admitted = on_kind[_ADMITTED]
        self._on_started = on_kind[_STARTED]
        self._on_completed = on_kind[_COMPLETED] if ends is None else ends.values
        self._ends = ends
        self._ends_values = None if ends is None else ends.values
        self._on_kind = tuple(None if each is None else self._guarded(each) for each in on_kind)
        self._on_event = next((each for each in self._on_kind if each is not None), None)

    def _guarded(self, listener: Listener) -> Listener:
        """``listener``, isolated: its failures are logged once and counted, never raised."""

        def guarded(kind: EventKind, now_s: float, item: Any) -> None:
            try:
                listener(kind, now_s, item)
            except BaseException as error:
                self._listener_failed(kind, error)

        return guarded

    def _flush_ends(self) -> None:
        """Every ``CHECK_EVERY`` completed attempts: if the buffer is full, the exporter folds it.

        In isolation: a fold that raises is counted and logged as a listener's failure.
        """
        if not self._ends.is_full():
            return
        try:
            self._ends.flush()
        except BaseException as error:
            self._listener_failed(_COMPLETED, error)

    def _listener_failed(self, kind: EventKind, error: BaseException) -> None:
        """Count a listener's failure; log the first; a non-Exception stops the run."""
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise error
        self._listener_errors += 1
        if not isinstance(error, Exception):
            self._abort(error)
        elif self._listener_errors == 1:
            self._log(
                logging.ERROR,
                "pipeline.listener_failed",
                pipeline=self.name,
                kind=kind.name,
                error=f"{type(error).__name__}",
                exc_info=error,
            )


def _combined(listeners: tuple[Listener, ...], failed: Callable[..., None]) -> Listener | None:
    """One listener calling each of ``listeners`` in isolation (a failure goes to ``failed``)."""
    if not listeners:
        return None
    if len(listeners) == 1:
        return listeners[0]

    def combined(kind: EventKind, now_s: float, item: Any) -> None:
        for each in listeners:
            try:
                each(kind, now_s, item)
            except BaseException as error:
                failed(kind, error)

    return combined
