"""A scenario file's ``[downstream]`` table and ``[[faults]]`` tables.

The system the handler calls, and the faults injected into a run::

    arrivals = "poisson:rate=100"
    concurrency = 10000
    attempt_timeout = 1.0
    max_attempts = 4
    duration = 120

    [downstream]
    concurrency = 10                      # servers (required)
    service = "exponential:mean=0.08"     # seconds per request at full speed (required)
    maxsize = 100                         # requests that may wait, or "unbounded" (default)

    [[faults]]
    kind = "capacity_drop"                # or "load_spike"
    at = 20.0                             # seconds from the start
    for = 10.0                            # seconds it lasts
    factor = 0.2                          # the servers' speed (or the arrival rate) x factor

With a ``[downstream]``, the top-level ``service`` is client-side time before
each call and may be left out. Anything wrong is one line naming the file, the
table (and the fault's number), the key, the value and what is allowed; the
command exits with status 2 before any run.
"""

from __future__ import annotations

import os
from typing import Any

from .tables import read_tables
from .values import OPTIONS, anchor_file_key

__all__ = ["DOWNSTREAM_KEYS", "FAULT_KEYS", "FAULT_KINDS", "parse_downstream", "parse_faults"]

DOWNSTREAM_KEYS = ("concurrency", "service", "maxsize")
"""Every key a ``[downstream]`` table may hold."""

FAULT_KEYS = ("kind", "at", "for", "factor")
"""Every key a ``[[faults]]`` table may hold (all required)."""

FAULT_KINDS = ("capacity_drop", "load_spike")
"""The values of a fault's ``kind``."""


def _number(label: str, key: str, raw: Any) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"{label}: {key} must be a number, got {type(raw).__name__} {raw!r}")
    return raw


def parse_downstream(table: Any, path: str) -> Any:
    """The ``downstream`` value of scenario file ``path`` -> a :class:`~pipeline.sim.Downstream`.

    Raises:
        ValueError: not a table, an unknown or missing key, a bad value; one line
            naming the file, ``[downstream]``, the key and what is allowed.
    """
    from ..sim.workloads.downstream import Downstream  # on first use: the CLI's start-up

    label = f"{path}: [downstream]"
    if not isinstance(table, dict):
        raise ValueError(f"{label} must be a table, got {type(table).__name__} {table!r}")
    values: dict[str, Any] = {}
    for key, raw in table.items():
        name = key.replace("-", "_")
        if name not in DOWNSTREAM_KEYS:
            raise ValueError(f"{label}: unknown key {key!r}; allowed: {', '.join(DOWNSTREAM_KEYS)}")
        if name == "service":
            if not isinstance(raw, str):
                raise ValueError(
                    f"{label}: service must be a string (a distribution such as "
                    f"'exponential:mean=0.1'), got {type(raw).__name__} {raw!r}"
                )
            base = os.path.dirname(os.path.abspath(path))
            try:
                values["service"] = OPTIONS["service"][0](anchor_file_key(raw, base))
            except ValueError as exc:
                raise ValueError(f"{label}: service: {exc}") from None
        elif name == "maxsize" and isinstance(raw, str):
            if raw.strip().lower() != "unbounded":
                raise ValueError(
                    f"{label}: maxsize must be an integer >= 1 or 'unbounded', got {raw!r}"
                )
            values["queue_maxsize"] = None
        else:
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise ValueError(
                    f"{label}: {key} must be an integer, got {type(raw).__name__} {raw!r}"
                )
            values["queue_maxsize" if name == "maxsize" else name] = raw
    for required in ("concurrency", "service"):
        if required not in values:
            raise ValueError(f"{label}: missing {required!r} (required: concurrency, service)")
    try:
        return Downstream(**values)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{label}: {_file_words(str(exc))}") from None


def _file_words(message: str) -> str:
    """A constructor's message in the file's key names (``queue_maxsize`` is ``maxsize``,
    ``at_s`` is ``at``, ``for_s`` is ``for``)."""
    for field, key in (("queue_maxsize", "maxsize"), ("at_s", "at"), ("for_s", "for")):
        if message.startswith(field + " "):
            return key + message[len(field) :]
    return message


def _one_fault(table: Any, label: str, base: str) -> Any:
    from ..sim.workloads.faults import CapacityDrop, LoadSpike

    label = label.replace(": fault ", ": [[faults]] ", 1)  # "FILE: [[faults]] 2"
    if not isinstance(table, dict):
        raise ValueError(f"{label} must be a table ([[faults]]), got {type(table).__name__}")
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in FAULT_KEYS:
            raise ValueError(f"{label}: unknown key {key!r}; allowed: {', '.join(FAULT_KEYS)}")
        values[key] = raw
    missing = [key for key in FAULT_KEYS if key not in values]
    if missing:
        raise ValueError(f"{label}: missing {missing[0]!r} (required: {', '.join(FAULT_KEYS)})")
    kind = values.pop("kind")
    if kind not in FAULT_KINDS:
        raise ValueError(f"{label}: kind must be one of {', '.join(FAULT_KINDS)}, got {kind!r}")
    made = CapacityDrop if kind == "capacity_drop" else LoadSpike
    numbers = {key: _number(label, key, raw) for key, raw in values.items()}
    try:
        return made(at_s=numbers["at"], for_s=numbers["for"], factor=numbers["factor"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{label}: {_file_words(str(exc))}") from None


def parse_faults(tables: Any, path: str) -> list[Any]:
    """The ``faults`` value of scenario file ``path`` -> CapacityDrop / LoadSpike, in order.

    Raises:
        ValueError: not a list of tables, an empty list, an unknown or missing key,
            a bad value; one line naming the file, the fault's number, the key and
            what is allowed.
    """
    return read_tables(tables, path, kind="fault", one=_one_fault)
