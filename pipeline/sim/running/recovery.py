"""Goodput and recovery after faults: the summary keys ``goodput_per_s``, ``recovered``
and ``recovery_s``.

The rule (so that the engine, the kernel and any outside check agree):

- **goodput** is items completed per second; ``goodput_per_s`` is over the whole
  run, ``[0, sim_time_s]``;
- the **baseline** is the goodput before the first fault: completions in
  ``[0, at_s)`` of the earliest fault, divided by ``at_s``;
- after the last fault ends (at ``e``), goodput is measured over 10 s windows
  ``[e + 10 j, e + 10 (j + 1))``, j = 0, 1, ..., those that end by the end of
  the traffic (``duration_s``, or the last arrival with ``n_items``: the drain
  after it has no traffic to judge by);
- the run has **recovered** when some window's goodput is within 10% of the
  baseline (``|g - baseline| <= 0.1 x baseline``) and every later window's is too;
  ``recovery_s`` is ``10 j`` for the first such window (from the end of the
  last fault to that window's start), None (JSON null) when not recovered.

``recovered`` is None, with ``recovery_s``, when the rule cannot judge: no
fault (nothing to recover from), a first fault at 0 (no baseline), or no
whole window between the last fault's end and the end of the traffic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["RECOVERY_TOLERANCE", "RECOVERY_WINDOW_S", "Recovery", "first_recovered", "recovery"]

RECOVERY_WINDOW_S = 10.0
"""Length of the windows goodput is judged over after the faults, seconds."""

RECOVERY_TOLERANCE = 0.10
"""How far (a fraction of the baseline) a window's goodput may be from the baseline."""


class Recovery(NamedTuple):
    """Whether and when a run got back to its pre-fault goodput (see the module)."""

    recovered: bool | None
    recovery_s: float | None
    baseline_per_s: float | None


def first_recovered(
    baseline: float, goodputs: Sequence[float], tolerance: float = RECOVERY_TOLERANCE
) -> int | None:
    """Index of the first window from which every window is within ``tolerance`` of ``baseline``.

    None when the last window is not (then no suffix is), or there is no window.
    """
    index = None
    for position in range(len(goodputs) - 1, -1, -1):
        if abs(goodputs[position] - baseline) <= tolerance * baseline:
            index = position
        else:
            break
    return index


def recovery(
    completed_s: np.ndarray,
    *,
    first_fault_s: float,
    last_fault_end_s: float,
    traffic_end_s: float,
    window_s: float = RECOVERY_WINDOW_S,
    tolerance: float = RECOVERY_TOLERANCE,
) -> Recovery:
    """The rule of the module applied to the completion instants ``completed_s`` (seconds)."""
    if not first_fault_s > 0:
        return Recovery(None, None, None)
    completed_s = np.asarray(completed_s, dtype=np.float64)
    baseline = float(np.count_nonzero(completed_s < first_fault_s)) / first_fault_s
    windows = math.floor((traffic_end_s - last_fault_end_s) / window_s + 1e-9)
    if windows < 1:
        return Recovery(None, None, baseline)
    edges = last_fault_end_s + window_s * np.arange(windows + 1)
    counts = np.histogram(completed_s, bins=edges)[0]
    # np.histogram closes its last bin on the right; a window is [start, end).
    counts[-1] -= np.count_nonzero(completed_s == edges[-1])
    first = first_recovered(baseline, (counts / window_s).tolist(), tolerance)
    if first is None:
        return Recovery(False, None, baseline)
    return Recovery(True, first * window_s, baseline)
