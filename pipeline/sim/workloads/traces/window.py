"""A window of a recorded trace: a few busy hours, re-timed to start at 0.

Replaying three busy hours instead of a whole day keeps a what-if study fast;
:func:`trace_window` keeps the arrivals' spacing, every service time and every
scripted failure exactly as recorded. Pair it with
:func:`~pipeline.sim.calibration.fit_daily_curve` (``start_s=``) to model the
same hours with a fitted rate.
"""

from __future__ import annotations

import numpy as np

from ...._validate import real
from ..arrivals import Trace
from .replay import ScriptedFailures, TraceWorkload
from .service import ServiceTrace

__all__ = ["trace_window"]


def trace_window(workload: TraceWorkload, start_s: float, end_s: float) -> TraceWorkload:
    """The items of ``workload`` arriving in ``[start_s, end_s)``, re-timed so ``start_s`` is 0.

    Replaying three busy hours instead of a whole day keeps a what-if study
    fast; the arrivals' spacing and every service time stay exactly as recorded.

    Raises:
        ValueError: ``end_s <= start_s`` or no arrival in the window.
    """
    start = real("start_s", start_s, "seconds", at_least=0)
    end = real("end_s", end_s, "seconds", above=start)
    times = workload.arrivals.arrival_times
    lo, hi = np.searchsorted(times, [start, end], side="left")
    if hi <= lo:
        raise ValueError(f"no arrival in [{start:g}, {end:g}) s of {workload.path or 'the trace'}")
    return TraceWorkload(
        arrivals=Trace(times[lo:hi] - start),
        service=ServiceTrace(workload.service.times_s[lo:hi]),
        failures=ScriptedFailures(workload.failures.fails[lo:hi]),
        path=workload.path,
    )
