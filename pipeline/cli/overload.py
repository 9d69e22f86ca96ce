"""A scenario file's ``[retry_budget]`` and ``[breaker]`` tables (simulate, sweep, plan).

Each table is the keyword arguments of its control, which the scenario's
pipeline then runs with (see :mod:`pipeline.overload`)::

    arrivals = "poisson:rate=9.5"
    service = "exponential:mean=0.1"
    max_attempts = 4
    items = 100000

    [retry_budget]            # RetryBudget(...): every key optional
    ratio = 0.1
    min_retries_per_s = 1.0
    window_s = 10

    [breaker]                 # CircuitBreaker(...): every key optional
    failure_rate = 0.5
    window = 100
    min_calls = 20
    open_s = 30
    half_open_calls = 5
    slow_call_s = 2.0         # leave it out for no slow-call rule

An empty table (``[breaker]``) takes every default. Anything wrong is one line
naming the file, the table, the key, the value and what is allowed; the
command exits with status 2 before any run. There are no flags for them: a
control is several numbers that belong together, which a file keeps together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..overload import CircuitBreaker, RetryBudget

__all__ = ["OVERLOAD_TABLES", "parse_overload"]

_CONTROLS: dict[str, type] = {"retry_budget": RetryBudget, "breaker": CircuitBreaker}

OVERLOAD_TABLES: tuple[str, ...] = tuple(_CONTROLS)
"""The scenario file tables read here, each the ``PipelineConfig`` field of its name."""


def parse_overload(tables: Mapping[str, Any], path: str | None) -> dict[str, Any]:
    """The ``PipelineConfig`` fields the file's ``[retry_budget]`` and ``[breaker]`` set.

    Raises:
        ValueError: a table that is not one, an unknown key, a value that is not a
            number, or a value the control refuses; one line, naming ``path`` and the table.
    """
    fields: dict[str, Any] = {}
    for name, control in _CONTROLS.items():
        if name not in tables:
            continue
        table = tables[name]
        label = f"{path}: [{name}]"
        if not isinstance(table, dict):
            raise ValueError(
                f"{label} must be a table of {control.__name__} settings, "
                f"got {type(table).__name__} {table!r}"
            )
        allowed = [field.name for field in dataclasses.fields(control)]
        values = {}
        for key, value in table.items():
            if key.replace("-", "_") not in allowed:
                raise ValueError(f"{label}: unknown key {key!r}; allowed: {', '.join(allowed)}")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(
                    f"{label}: {key} must be a number, got {type(value).__name__} {value!r}"
                )
            values[key.replace("-", "_")] = value
        try:
            fields[name] = control(**values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{label}: {exc}") from None
    return fields
