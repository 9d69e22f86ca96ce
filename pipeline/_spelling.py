"""How a message names a setting: as Python spells it, or as the command line does.

A warning or a diagnostic that tells its reader what to change must speak the
reader's interface: a Python caller sets ``drain_timeout_s=None``, a command
line user gives ``--drain-timeout none``. Messages name settings through
:func:`setting_name` and :func:`setting_value`; Python's spelling is the
default, and :mod:`pipeline.cli` installs its own (:func:`speaking`) for the
duration of a command. The choice is a context variable, so a thread or task
of a notebook running at the same time keeps Python's. Standard library only:
the command line reads it before it knows which extras a command needs.

Example:
    >>> setting_value("drain_timeout_s", None)
    'drain_timeout_s=None'
    >>> with speaking(lambda field, value=MISSING: "--drain-timeout none"):
    ...     setting_value("drain_timeout_s", None)
    '--drain-timeout none'
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "MISSING",
    "Placeholder",
    "python_spelling",
    "setting_name",
    "setting_value",
    "speaking",
]

MISSING: Any = object()
"""The ``value`` of a spelling asked only for the setting's name."""


class Placeholder(str):
    """A value the reader chooses (``R``), shown bare in any spelling: ``replications=R``."""

    def __repr__(self) -> str:
        return str(self)


Spelling = Callable[..., str]
"""``spelling(field, value=MISSING) -> str``: the setting ``field`` (a Scenario or
PipelineConfig field's name), with ``value`` when one is given."""


def python_spelling(field: str, value: Any = MISSING) -> str:
    """``drain_timeout_s``, or ``drain_timeout_s=None``: the keyword as Python takes it."""
    return field if value is MISSING else f"{field}={value!r}"


_SPELLING: contextvars.ContextVar[Spelling] = contextvars.ContextVar(
    "pipeline_setting_spelling", default=python_spelling
)


def setting_name(field: str) -> str:
    """The setting ``field`` as the reader spells it (``drain_timeout_s``, ``--drain-timeout``)."""
    return _SPELLING.get()(field)


def setting_value(field: str, value: Any) -> str:
    """The setting ``field`` set to ``value`` as the reader would write it."""
    return _SPELLING.get()(field, value)


@contextlib.contextmanager
def speaking(spelling: Spelling) -> Iterator[None]:
    """Name settings with ``spelling`` in the messages made inside the ``with`` block."""
    token = _SPELLING.set(spelling)
    try:
        yield
    finally:
        _SPELLING.reset(token)
