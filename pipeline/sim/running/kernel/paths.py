"""Which path the kernel's replay and FCFS recursion run on, as a context the caller enters.

Both paths give the same run, item by item, at different speeds. ``auto`` picks one per
run (:func:`~.driver.take_compiled`); :func:`kernel_path` sets one for its block only (a
:class:`~contextvars.ContextVar`: threads and tasks see their own).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

__all__ = ["PATHS", "KernelPath", "current", "kernel_path"]

PATHS = ("auto", "plain", "compiled")
"""``auto``, ``plain`` (:mod:`.replay` as plain Python) and ``compiled`` (the same source
compiled by numba; without numba a run raises a RuntimeError)."""


@dataclass(frozen=True)
class KernelPath:
    """The replay in force, and the sizes the array replay starts from.

    Attributes:
        path: one of :data:`PATHS`.
        block: random values drawn per refill of a stream (None: 4096, and for a
            failure part's stream what the run is expected to need).
        log, heap, ready: the first capacity, entries, of the event log, the timer heap
            and the ready ring (None: what the run is expected to need).
        budget: the first capacity of a retry budget's rings of times (None: 64).
    """

    path: str = "auto"
    block: int | None = None
    log: int | None = None
    heap: int | None = None
    ready: int | None = None
    budget: int | None = None


_DEFAULT = KernelPath()
_CURRENT: ContextVar[KernelPath | None] = ContextVar("kernel_path", default=None)


def current() -> KernelPath:
    """The :class:`KernelPath` in force here (the default outside every :func:`kernel_path`)."""
    return _CURRENT.get() or _DEFAULT


@contextmanager
def kernel_path(path: str | None = None, **sizes: int | None) -> Iterator[KernelPath]:
    """Run the kernel on ``path`` (None: the one in force) with ``sizes`` inside the block.

    ``sizes`` are :class:`KernelPath`'s ``block``, ``log``, ``heap``, ``ready`` and ``budget``;
    tiny ones make the array replay stop, refill and grow many times in a run.

    Raises:
        ValueError: ``path`` is not one of :data:`PATHS`, a size is not an int >= 1
            or None, or is not a size at all.
    """
    if path is not None and path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(map(repr, PATHS))}, got {path!r}")
    for name, value in sizes.items():
        if name not in ("block", "log", "heap", "ready", "budget"):
            raise ValueError(f"{name!r} is not a size (block, log, heap, ready, budget)")
        if value is not None and (
            isinstance(value, bool) or not hasattr(value, "__index__") or operator.index(value) < 1
        ):
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    token = _CURRENT.set(replace(current(), path=path or current().path, **sizes))
    try:
        yield current()
    finally:
        _CURRENT.reset(token)
