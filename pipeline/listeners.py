"""``Listeners``: who hears each event, and how a failing listener is kept out of the run.

A pipeline has its user's ``on_event`` and the listeners added beside it with
:meth:`Listeners.add_listener` (the exporters :mod:`pipeline.metrics` and
:mod:`pipeline.tracing`, a :class:`~pipeline.Chain`'s observers), as trio's
instruments: for each event kind the engine keeps the one function to call
(``None`` when nobody listens), so an event nobody asked for costs one test,
and every listener, the user's or an exporter's, is called the same way.
Every listener is isolated: one that raises is counted and logged once, never
keeps the others from the event, and never loses an item; only a
``BaseException`` that is not an ``Exception`` stops the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .events import EventKind, Listener
from .fields import PipelineFields

__all__ = ["Listeners"]

_ADMITTED = EventKind.ADMITTED
_STARTED = EventKind.STARTED
_COMPLETED = EventKind.COMPLETED


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

    def add_listener(self, listener: Listener | Mapping[EventKind, Listener]) -> Callable[[], None]:
        """Call ``listener`` at events too, beside ``on_event``; returns the detach.

        ``listener`` is called ``listener(kind, now_s, item)`` (as ``on_event``), on the
        event loop's thread: either a listener, called at every event, or a mapping from
        the event kinds it wants to one listener each; the engine then calls nothing for
        the other kinds (an exporter that ignores admissions costs nothing there) and
        each needs no test of the kind. Listeners hear an event in the order they were
        added, after ``on_event``. Each is isolated: one that raises an ``Exception`` is
        counted in ``statistics().listener_errors`` and logged once, and never keeps the
        others from an event or loses an item. With nothing added the per-item paths
        test one ``None`` per event. Add before the run starts to hear all of it.

        Returns:
            A function that removes ``listener`` again (harmless to call twice); the
            same as :meth:`remove_listener`.

        Raises:
            TypeError: ``listener`` is neither callable nor a mapping of event kinds to
                callables.
        """
        if isinstance(listener, Mapping):
            bad = {
                kind: each
                for kind, each in listener.items()
                if not isinstance(kind, EventKind) or (each is not None and not callable(each))
            }
            if bad:
                raise TypeError(
                    "listener must map EventKind members to callables, got "
                    f"{next(iter(bad.items()))!r}"
                )
        elif not callable(listener):
            raise TypeError(
                "listener must be callable or a mapping of EventKind to callables, "
                f"got {listener!r}"
            )
        self._attached = (*self._attached, listener)
        self._relisten()
        return lambda: self.remove_listener(listener)

    def remove_listener(self, listener: Any) -> None:
        """Stop calling ``listener`` (one added by :meth:`add_listener`); harmless if absent."""
        self._attached = tuple(each for each in self._attached if each is not listener)
        self._relisten()

    def _relisten(self) -> None:
        """Rebuild, for each event kind, the one listener the engine calls for it.

        ``on_event`` first, then the added in order; ``_on_admitted``, ``_on_started`` and
        ``_on_completed`` are called inline on the per-item paths, ``_on_kind`` (guarded)
        by :meth:`_emit`; ``_on_event`` is None when no kind has a listener at all.
        """
        wanted = [
            each if isinstance(each, Mapping) else dict.fromkeys(EventKind, each)
            for each in (self._user_listener, *self._attached)
            if each is not None
        ]
        failed = self._listener_failed
        on_kind = [
            _combined(tuple(each[kind] for each in wanted if each.get(kind) is not None), failed)
            for kind in EventKind
        ]
        self._on_admitted = on_kind[_ADMITTED]
        self._on_started = on_kind[_STARTED]
        self._on_completed = on_kind[_COMPLETED]
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
