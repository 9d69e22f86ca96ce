"""``ControlSeries``: what the overload controls did, as exact step functions of virtual time.

A run with a retry budget, a circuit breaker, an adaptive concurrency limit or
CoDel (:class:`~pipeline.PipelineConfig`'s ``retry_budget``, ``breaker``,
``concurrency_limit``, ``codel``) reports each decision as an event (``RETRY_DENIED``,
``BREAKER_REFUSED``, ``BREAKER_OPEN``/``HALF_OPEN``/``CLOSED``, ``LIMIT_CHANGED``,
``QUEUE_SHED``). :func:`control_series` turns those events into the same
quantities ``Pipeline.statistics()`` shows, at every moment of the run:

- ``retries_denied``: retries the budget denied so far (with ``retry_budget``);
- ``breaker_state`` (``"closed"``, ``"open"``, ``"half_open"``) and
  ``breaker_calls_refused``, attempts held back so far (with ``breaker``);
- ``concurrency_limit``: the limit now (with ``concurrency_limit``);
- ``codel_shed``: items CoDel shed so far (with ``codel``).

A column is there only when its control is on; without any control there is
no :class:`ControlSeries` at all (``result.controls`` is None), so a run without
controls keeps its tables and files unchanged. Each column is
right-continuous, as :class:`~pipeline.sim.running.recorder.StepSeries`' are:
the value at ``t`` is the one after every event at or before ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import PipelineConfig
from ...events import EventKind
from ...overload.breaker import STATES
from .recorder import Recorder

__all__ = ["COLUMNS", "ControlSeries", "control_series"]

K = EventKind

COLUMNS = (
    "retries_denied",
    "breaker_state",
    "breaker_calls_refused",
    "concurrency_limit",
    "codel_shed",
)
"""Every column a :class:`ControlSeries` may have, each named as its ``statistics()`` field."""

_COUNTED_BY = {
    "retries_denied": K.RETRY_DENIED,
    "breaker_calls_refused": K.BREAKER_REFUSED,
    "codel_shed": K.QUEUE_SHED,
}
# Codes of breaker_state: indexes into STATES ("closed" is 0, where every breaker starts).
_STATE_OF = {K.BREAKER_CLOSED: 0, K.BREAKER_OPEN: 1, K.BREAKER_HALF_OPEN: 2}


@dataclass(frozen=True)
class ControlSeries:
    """The controls' statistics as step functions: ``values[name][i]`` holds on
    ``[time_s[i], time_s[i + 1])``, the last row until ``end_s``.

    ``breaker_state`` is stored as codes into :data:`STATES` (``state_names()``
    spells them out); the other columns are integers.
    """

    time_s: np.ndarray
    values: dict[str, np.ndarray]
    end_s: float

    STATES = STATES

    @property
    def names(self) -> tuple[str, ...]:
        """The columns this run has, in :data:`COLUMNS` order."""
        return tuple(name for name in COLUMNS if name in self.values)

    def at(self, name: str, times_s: Any) -> np.ndarray:
        """Column ``name``'s value at each of ``times_s`` (virtual seconds; at or after 0)."""
        rows = np.searchsorted(self.time_s, np.asarray(times_s, dtype=np.float64), side="right")
        return self.values[name][np.maximum(rows - 1, 0)]

    def state_names(self, codes: np.ndarray) -> np.ndarray:
        """``breaker_state`` codes as their names (``"closed"``, ``"open"``, ``"half_open"``)."""
        return np.asarray(STATES, dtype=object)[codes]


def control_series(
    config: PipelineConfig, recorder: Recorder, end_s: float
) -> ControlSeries | None:
    """The controls' step functions from a run's event log; None when ``config`` has none.

    Args:
        config: the run's pipeline configuration (which controls are on).
        recorder: the run's event log.
        end_s: when the run ended, virtual seconds.
    """
    wanted = []
    if config.retry_budget is not None:
        wanted.append("retries_denied")
    if config.breaker is not None:
        wanted += ["breaker_state", "breaker_calls_refused"]
    if config.concurrency_limit is not None:
        wanted.append("concurrency_limit")
    if config.codel is not None:
        wanted.append("codel_shed")
    if not wanted:
        return None
    kinds, times, ids = recorder.arrays()
    relevant = np.isin(kinds, [*_COUNTED_BY.values(), *_STATE_OF, K.LIMIT_CHANGED])
    kinds, times, ids = kinds[relevant], times[relevant], ids[relevant]
    order = np.argsort(times, kind="stable")  # the log is in time order; kept so if not
    kinds, times, ids = kinds.take(order), times.take(order), ids.take(order)
    # Several events at one instant: keep the state after the last of them.
    last = np.flatnonzero(np.append(times[1:] != times[:-1], True)) if len(times) else order
    time_s = np.concatenate([[0.0], times.take(last)])
    values: dict[str, np.ndarray] = {}
    for name in wanted:
        start = 0
        if name == "breaker_state":
            codes = np.zeros(len(kinds), np.int64)
            for kind, code in _STATE_OF.items():
                codes[kinds == kind] = code
            column = _held(start, np.isin(kinds, list(_STATE_OF)), codes)
        elif name == "concurrency_limit":
            start = config.concurrency_limit.initial(config.concurrency)
            column = _held(start, kinds == K.LIMIT_CHANGED, ids)
        else:
            column = np.cumsum(kinds == _COUNTED_BY[name], dtype=np.int64)
        values[name] = np.concatenate([[start], column.take(last)]).astype(np.int64)
    if len(time_s) > 1 and time_s[1] == 0.0:  # events at 0.0 replace the initial row
        time_s = time_s[1:]
        values = {name: column[1:] for name, column in values.items()}
    return ControlSeries(time_s=time_s, values=values, end_s=float(end_s))


def _held(start: int, marks: np.ndarray, values: np.ndarray) -> np.ndarray:
    """At each event, the value of the last marked event at or before it (``start`` before)."""
    index = np.where(marks, np.arange(len(marks)), -1)
    latest = np.maximum.accumulate(index) if len(index) else index
    return np.where(latest >= 0, values[np.maximum(latest, 0)], start)
